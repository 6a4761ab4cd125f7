#!/usr/bin/env bash
# session 47, call D (carry [".whl"]; an H100 or an H200, say which): VS in every config of P8's tuned space
# (p_precision="e4m3"). (1) the GPU tests of the public paths with the e4m3 query (its accuracy, warm-up + capture +
# replay, p_precision's, the pinned P8 and PL cases); (2) the public fp8 table at H = 128 beside FlashMLA, uniform and
# ragged (seed 39179), with the e4m3 columns, FlashMLA's own terms and a step's plan; (3) the per-bucket A/B over T8's
# space with the e4m3 query, PL and P8's space (issue 14's V1/V3 decision). LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-560}
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout ${TESTS_CAP:-170} python3 -m pytest -q -n 3 \
  tests/gpu/test_mla_decode_gpu.py -k "${TESTS_K:-p_precision or e4m3 or flashmlas_accuracy_class}" > /tmp/tests_d.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|rel err|lse err" /tmp/tests_d.log | tail -12 | cut -c1-300
left=$(( LIMIT - ${AB_CAP:-80} - SECONDS ))
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout $left python3 \
  benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-plan \
  --vs-e4m3 --vs-batches-h16 "" --vs-ragged --ragged-seed 39179 --out $OUT/fp8_h128.json > /tmp/fp8_h128.log 2>&1
echo "fp8 rc=$? at ${SECONDS}s"; grep -E "^\| H=|^\| heads|accuracy" /tmp/fp8_h128.log | cut -c1-900
left=$(( LIMIT - 5 - SECONDS ))
[ $left -ge 30 ] && GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=/tmp/np:$PWD/src COLUMNS=200 TRITON_CACHE_DIR=/tmp/tc_main timeout $left \
  python3 -m graphtune ab mla_decode_hopper_h128_p8 --sizes 1,8,32,64 --out $OUT/ab-h128-p8 > /tmp/ab_h128_p8.log 2>&1
echo "ab rc=$? at ${SECONDS}s"; tail -16 /tmp/ab_h128_p8.log | cut -c1-250
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_d.log fp8_h128.log ab_h128_p8.log 2>/dev/null)
