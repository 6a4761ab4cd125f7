#!/usr/bin/env bash
# prepared in session 34 for the next session's first call (main; carry [".carry", ".whl"] with .carry/src_p16h =
# main + docs/gpu_calls/session34/p16h.patch, its src and COMMIT: `git apply` the patch on a detached main,
# `git archive HEAD src | tar -x -C .carry/src_p16h --strip-components=1`, the commit in .carry/src_p16h/COMMIT, then
# back to main). (1) The MLA GPU tests that run the landed fp16 partials (H = 16, fp8) and the tuned path; (2) the fp8
# tables of main and p16h: fp16 partials on every H, the heads-on-M kernels' 16-bit partials stored in whole 32-byte
# sectors (in session 34's call E fp16 partials made H = 128 1-17% slower, stored two columns a thread).
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main timeout 170 python3 -m pytest -q \
  tests/gpu/test_mla_decode_gpu.py tests/gpu/test_mla_hopper_tok_gpu.py \
  -k "hopper_fp8_matches_reference or more_requests or zero_length or v2_matches_reference or tuned_per_bucket" \
  > /tmp/tests_main.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; tail -4 /tmp/tests_main.log | cut -c1-300
vs_table main "$PWD/src" "${GIT_COMMIT:-unknown}" fp8 120
vs_table p16h "$PWD/.carry/src_p16h" "$(cat .carry/src_p16h/COMMIT)" fp8 120
python3 benchmarks/compare_mla_tables.py $OUT/fp8_main.json $OUT/fp8_p16h.json --labels main,p16h \
  --out $OUT/compare_fp8_main_p16h.json 2>&1 | tail -22
vs_table main "$PWD/src" "${GIT_COMMIT:-unknown}" bf16 120
grep -h "accuracy" /tmp/fp8_*.log | cut -c1-200
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
