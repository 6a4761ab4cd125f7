#!/usr/bin/env bash
# prepared in session 37 for the next session's first call (main; carry [".whl"]; meant for an H200, the issue's
# figures): (1) the ops' opcheck (fixed in session 37, not rerun) and the bf16 partials tests; (2) partials_probe.py
# with the scaled partials merged by half rows (shipped) and by whole rows (reduction.SCALED_HALF_ROWS off), H = 128;
# (3) the fp8 and bf16 tables beside FlashMLA with the plan, main as landed in session 37.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 python3 -m pytest -q -n 8 \
  tests/gpu/test_compile_gpu.py tests/gpu/test_mla_decode_gpu.py -k "opcheck or partials or compiled_and_captured" \
  > /tmp/tests_s38a.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_s38a.log | tail -12 | cut -c1-300
probe partials_rows_h128 120 partials_probe.py --heads 128 --batches 8,32,64
for fmt in fp8 bf16; do
  extra=$([ $fmt = fp8 ] && echo --vs-e4m3)
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 170 python3 \
    benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats $fmt --vs-variant-filter NONE --vs-plan \
    $extra --vs-ragged --ragged-seed 39179 --out $OUT/${fmt}_main.json > /tmp/${fmt}_main.log 2>&1
  echo "$fmt rc=$? at ${SECONDS}s"; grep -E "^\| H=|accuracy" /tmp/${fmt}_main.log | cut -c1-400
done
tar -czf $OUT/logs.tgz -C /tmp tests_s38a.log partials_rows_h128.log fp8_main.log bf16_main.log
