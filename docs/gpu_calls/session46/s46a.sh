#!/usr/bin/env bash
# session 46, call A (session 45's call G, with the p_precision tests; carry [".whl"]):
# NB3, P8 with three tile buffers (each buffer's next copy the tile three on), and EL, WG1's read of WG0's tile before
# the previous pair's P.V retire. (1) p8_check at batch 8 for NB3 and EL on the all-in schedule, NB3 on EI alone and
# with WL1, both together, and P8's GPU tests with them (GRAPHTUNE_GPU_NEW=1: both are in tests/gpu/_unproven.py);
# (2) if p8_check is clean, plan_probe at fp8 H = 128 with query_precision="e4m3": P8 + EI + TE + NF (b2) against it
# with NB3, with EL and with both (b3), then, time left, Nsight Compute's source view of the NB3 schedule at batch 64.
# LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-540}
source docs/gpu_calls/lib.sh
gpu_prelude
ALL=T8=1/P8=1/EI=1/TE=1/NF=1
probe p8_check_nb3 100 p8_check.py --batch 8 --sms 132,7,1 --lengths uniform,mixed \
  --configs $ALL/NB3=1,T8=1/P8=1/EI=1/NB3=1,T8=1/P8=1/EI=1/NB3=1/WL1=1,$ALL/EL=1,$ALL/NB3=1/EL=1
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 \
  python3 -m pytest -q -n 3 tests/gpu/test_mla_decode_gpu.py -k "flashmlas_accuracy_class or p_precision or e4m3" > /tmp/tests_nb3.log 2>&1
echo "tests rc=$? at ${SECONDS}s"
grep -E "passed|failed|FAILED|Error:|rel err|lse err" /tmp/tests_nb3.log | tail -8 | cut -c1-300
if ! grep -qE " [1-9][0-9]* bad blocks" /tmp/p8_check_nb3.log && grep -q "wrote" /tmp/p8_check_nb3.log; then
  for b3 in NB3=1 EL=1 NB3=1,EL=1; do
    left=$(( LIMIT - 10 - SECONDS ))
    [ $left -ge 50 ] && probe plan_${b3//[=,]/_} $(( left < 110 ? left : 110 )) plan_probe.py --format fp8 --heads 128 \
      --query-precision e4m3 --batches 1,8,32,64 --b2 BLOCK_N=64,T8=1,P8=1,EI=1,TE=1,NF=1 --b3 $b3 --tol 4e-2
  done
  left=$(( LIMIT - 10 - SECONDS ))
  if [ $left -ge 40 ]; then
    ncu_view nb3 fp8 '{"BLOCK_N":64,"T8":1,"P8":1,"EI":1,"TE":1,"NF":1,"NB3":1}' $left --query-precision e4m3 --plan
    gzip $OUT/*.csv
  fi
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls p8_check_nb3.log tests_nb3.log plan_*.log 2>/dev/null)
