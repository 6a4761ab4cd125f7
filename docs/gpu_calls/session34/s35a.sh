#!/usr/bin/env bash
# prepared in session 34 for the next session's first call (main; carry [".carry", ".whl"] with .carry/src_p16h =
# main + docs/gpu_calls/session34/p16h.patch, its src and COMMIT: `git apply` the patch on a detached main,
# `git archive HEAD src | tar -x -C .carry/src_p16h --strip-components=1`, the commit in .carry/src_p16h/COMMIT, then
# back to main). (1) The MLA GPU tests that run the landed fp16 partials (H = 16, fp8) and the heads-on-M variants;
# (2) the fp8 tables of main and p16h: fp16 partials on every H, the heads-on-M kernels' 16-bit partials stored in
# whole 32-byte sectors (in session 34's call E fp16 partials made H = 128 1-17% slower, stored two columns a thread).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main timeout 200 python3 -m pytest -q \
  tests/gpu/test_mla_decode_gpu.py tests/gpu/test_mla_hopper_tok_gpu.py \
  -k "hopper_fp8_matches_reference or more_requests or zero_length or v2_matches_reference or tuned_per_bucket" \
  > /tmp/tests_main.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; tail -4 /tmp/tests_main.log | cut -c1-300
for way in main p16h; do
  src=$PWD/src; [ $way = p16h ] && src=$PWD/.carry/src_p16h
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown); [ $way = p16h ] && commit=$(cat $src/COMMIT)
  GIT_COMMIT=$commit PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$way timeout 120 \
    python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE \
    --vs-ragged --ragged-seed 39179 --out $OUT/fp8_$way.json > /tmp/fp8_$way.log 2>&1
  echo "fp8_$way rc=$? at ${SECONDS}s"
done
python3 benchmarks/compare_mla_tables.py $OUT/fp8_main.json $OUT/fp8_p16h.json --labels main,p16h \
  --out $OUT/compare_fp8_main_p16h.json 2>&1 | tail -22
grep -h "accuracy" /tmp/fp8_*.log | cut -c1-200
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
