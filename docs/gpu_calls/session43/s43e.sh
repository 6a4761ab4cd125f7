#!/usr/bin/env bash
# session 43, call E (main; carry [".whl"]; an H100 or an H200, say which): P8, T8 with P in e4m3 and P.V as fp8
# wgmmas on a transposed V (FlashMLA's fp8 accuracy class, with the e4m3 query). (1) its GPU tests (H 128 / 64, WL1 0 /
# 1, query_precision="e4m3" and a query given in e4m3; 132 / 7 / 1 SMs); (2) plan_probe.py at fp8 H = 128 with
# query_precision="e4m3": T8 as shipped (tuned, b2) beside P8 (b3) and P8 with WL1 (a second run), batch 1 / 8 / 32 /
# 64, uniform and ragged, FlashMLA in the same process. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-480}
source docs/gpu_calls/lib.sh
gpu_prelude
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 \
  python3 -m pytest -q -n 3 tests/gpu/test_mla_decode_gpu.py -k "flashmlas_accuracy_class" > /tmp/tests_p8.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert|rel err|lse err" /tmp/tests_p8.log | tail -12 | cut -c1-300
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 60 ] && probe plan_p8 $(( left < 200 ? left : 200 )) plan_probe.py --format fp8 --heads 128 \
  --query-precision e4m3 --batches 1,8,32,64 --b2 BLOCK_N=64,T8=1 --b3 P8=1 --tol 4e-2
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 60 ] && probe plan_p8_wl1 $(( left < 150 ? left : 150 )) plan_probe.py --format fp8 --heads 128 \
  --query-precision e4m3 --batches 8,32,64 --b2 BLOCK_N=64,T8=1,WL1=1 --b3 P8=1 --tol 4e-2
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_p8.log plan_p8.log plan_p8_wl1.log 2>/dev/null)
