#!/usr/bin/env bash
# session 46, call C (carry [".whl"]; an H100 or an H200, say which): P8 with V transposed by transposing loads (TR,
# now P8's only transposition; NB3 and EL removed) on the public path. (1) its GPU tests (the tuned path's accuracy,
# warm-up + capture + replay, the pinned schedules); (2) the public fp8 table at H = 128 beside FlashMLA, uniform and
# ragged (seed 39179), with the e4m3 columns and a step's plan; (3) the per-bucket A/B over T8's space with the e4m3
# query beside P8's (issue 14's V1/V3 decision). LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-560}
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 python3 -m pytest -q -n 3 \
  tests/gpu/test_mla_decode_gpu.py -k "p_precision or flashmlas_accuracy_class" > /tmp/tests_p8.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|rel err|lse err" /tmp/tests_p8.log | tail -12 | cut -c1-300
left=$(( LIMIT - 70 - SECONDS ))
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout $left python3 \
  benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-plan \
  --vs-e4m3 --vs-batches-h16 "" --vs-ragged --ragged-seed 39179 --out $OUT/fp8_p8.json > /tmp/fp8_p8.log 2>&1
echo "fp8 rc=$? at ${SECONDS}s"; grep -E "^\| H=|^\| heads|accuracy" /tmp/fp8_p8.log | cut -c1-700
left=$(( LIMIT - 5 - SECONDS ))
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=/tmp/np:$PWD/src COLUMNS=200 TRITON_CACHE_DIR=/tmp/tc_main timeout $left \
  python3 -m graphtune ab mla_decode_hopper_h128_p8 --sizes 1,8,32,64 --out $OUT/ab-h128-p8 > /tmp/ab_h128_p8.log 2>&1
echo "ab rc=$? at ${SECONDS}s"; tail -14 /tmp/ab_h128_p8.log | cut -c1-250
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_p8.log fp8_p8.log ab_h128_p8.log 2>/dev/null)
