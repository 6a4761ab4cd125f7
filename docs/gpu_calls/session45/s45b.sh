#!/usr/bin/env bash
# session 45, call B (carry [".whl"]; an H100 or an H200, say which): p_precision="e4m3" on the public path (P8's
# schedules tuned per bucket as mla_decode_hopper_t8_p8). (1) its GPU tests and P8's (tests/gpu/test_mla_decode_gpu.py:
# the tuned path's accuracy at H = 128 / 16, warm-up + capture + replay, the pinned schedules); (2) the public fp8 table
# at H = 128 beside FlashMLA, uniform and ragged (seed 39179), with the e4m3 columns (the e4m3 query, the query given
# in e4m3, the e4m3 query and P) and a step's plan. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-540}
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 170 python3 -m pytest -q -n 3 \
  tests/gpu/test_mla_decode_gpu.py -k "p_precision or flashmlas_accuracy_class" > /tmp/tests_p8.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|rel err|lse err" /tmp/tests_p8.log | tail -12 | cut -c1-300
left=$(( LIMIT - 10 - SECONDS ))
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout $left python3 \
  benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-plan \
  --vs-e4m3 --vs-batches-h16 "" --vs-ragged --ragged-seed 39179 --out $OUT/fp8_p8.json > /tmp/fp8_p8.log 2>&1
echo "fp8 rc=$? at ${SECONDS}s"; grep -E "^\| H=|^\| heads|accuracy" /tmp/fp8_p8.log | cut -c1-700
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_p8.log fp8_p8.log 2>/dev/null)
