#!/usr/bin/env bash
# session 47, call A (written in session 46, not run there: its device time was spent; carry [".whl"]): VS, P8's V^T
# rows in an order whose transposition stores (STSM) meet no bank conflict, O's columns swapped back in the epilogue.
# (1) p8_check at batch 8 (132 / 7 / 1 SMs, uniform and mixed lengths) and P8's GPU tests with it
# (GRAPHTUNE_GPU_NEW=1: VS is in tests/gpu/_unproven.py); (2) if p8_check is clean, plan_probe at fp8 H = 128 with
# the e4m3 query: P8 + EI + TE + NF against it with VS, and P8 + EI against it with VS; (3) session 46's s46f.sh
# probe (P8 at batch 1-4 with SPLIT_MAX 32 / 16), time left. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-540}
source docs/gpu_calls/lib.sh
gpu_prelude
probe p8_check_vs 100 p8_check.py --batch 8 --sms 132,7,1 --lengths uniform,mixed \
  --configs T8=1/P8=1/EI=1/TE=1/NF=1/VS=1,T8=1/P8=1/VS=1,T8=1/P8=1/EI=1/WL1=1/VS=1
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 120 \
  python3 -m pytest -q -n 3 tests/gpu/test_mla_decode_gpu.py -k "flashmlas_accuracy_class" > /tmp/tests_vs.log 2>&1
echo "tests rc=$? at ${SECONDS}s"
grep -E "passed|failed|FAILED|Error:|rel err|lse err" /tmp/tests_vs.log | tail -8 | cut -c1-300
if ! grep -qE " [1-9][0-9]* bad blocks" /tmp/p8_check_vs.log && grep -q "wrote" /tmp/p8_check_vs.log; then
  probe plan_vs_all 100 plan_probe.py --format fp8 --heads 128 --query-precision e4m3 --batches 1,8,32,64 \
    --b2 BLOCK_N=64,T8=1,P8=1,EI=1,TE=1,NF=1 --b3 VS=1 --tol 4e-2
  probe plan_vs_ei 100 plan_probe.py --format fp8 --heads 128 --query-precision e4m3 --batches 1,8,32,64 \
    --b2 BLOCK_N=64,T8=1,P8=1,EI=1 --b3 VS=1 --tol 4e-2
fi
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 60 ] && timeout $left bash docs/gpu_calls/session46/s46f.sh
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls p8_check_vs.log tests_vs.log plan_vs_*.log p8_split*.log p8ei_split*.log 2>/dev/null)
