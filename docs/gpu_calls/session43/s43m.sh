#!/usr/bin/env bash
# session 43, call M (main with p8.patch applied and its fix: WG1 reads its own P back from the tile it handed off;
# the SASS of call L's build stored the P tile's rows h % 16 < 8 from registers written later in the pair).
# (1) p8_check.py at batch 8 (uniform and mixed, 132 / 7 / 1 SMs); (2) P8's GPU tests; (3) if both are clean,
# plan_probe.py at fp8 H = 128 with query_precision="e4m3", P8 beside T8 (WL1 0, then 1). LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-420}
source docs/gpu_calls/lib.sh
gpu_prelude
probe p8_check8 120 p8_check.py --batch 8 --sms 132,7,1 --lengths uniform,mixed
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 120 \
  python3 -m pytest -q -n 3 tests/gpu/test_mla_decode_gpu.py -k "flashmlas_accuracy_class" > /tmp/tests_p8e.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error:|rel err|lse err" /tmp/tests_p8e.log | tail -8 | cut -c1-300
if grep -q " passed" /tmp/tests_p8e.log && ! grep -q "failed" /tmp/tests_p8e.log && ! grep -q "P8=1.*[1-9][0-9]* bad" /tmp/p8_check8.log; then
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 60 ] && probe plan_p8e $(( left < 160 ? left : 160 )) plan_probe.py --format fp8 --heads 128 \
    --query-precision e4m3 --batches 1,8,32,64 --b2 BLOCK_N=64,T8=1 --b3 P8=1 --tol 4e-2
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 60 ] && probe plan_p8e_wl1 $(( left < 120 ? left : 120 )) plan_probe.py --format fp8 --heads 128 \
    --query-precision e4m3 --batches 8,32,64 --b2 BLOCK_N=64,T8=1,WL1=1 --b3 P8=1 --tol 4e-2
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls p8_check8.log tests_p8e.log plan_p8e.log plan_p8e_wl1.log 2>/dev/null)
