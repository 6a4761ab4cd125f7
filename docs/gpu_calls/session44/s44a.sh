#!/usr/bin/env bash
# session 44, call A (58b8cbc: session 43's P8 with its transposition as int32 loads, eight PRMT per 4 x 4 bytes
# (inline asm) and int32 stores; WG1's own P from the tile it handed off as a shared operand; P(r) times beta as int32
# through two f16x2 widenings, multiplies and roundings; 6,736 SASS instructions against 9,640).
# (1) p8_check.py at batch 8 (uniform and mixed, 132 / 7 / 1 SMs); (2) P8's GPU tests; (3) if both are clean,
# plan_probe.py at fp8 H = 128 with query_precision="e4m3", P8 beside T8. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-540}
source docs/gpu_calls/lib.sh
gpu_prelude
probe p8_check8 150 p8_check.py --batch 8 --sms 132,7,1 --lengths uniform,mixed
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 \
  python3 -m pytest -q -n 3 tests/gpu/test_mla_decode_gpu.py -k "flashmlas_accuracy_class" > /tmp/tests_p8.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error:|rel err|lse err" /tmp/tests_p8.log | tail -8 | cut -c1-300
if grep -q " passed" /tmp/tests_p8.log && ! grep -q "failed" /tmp/tests_p8.log; then
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 60 ] && probe plan_p8 $(( left < 200 ? left : 200 )) plan_probe.py --format fp8 --heads 128 \
    --query-precision e4m3 --batches 1,8,32,64 --b2 BLOCK_N=64,T8=1 --b3 P8=1 --tol 4e-2
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls p8_check8.log tests_p8.log plan_p8.log 2>/dev/null)
