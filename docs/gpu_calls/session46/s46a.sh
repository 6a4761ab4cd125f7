#!/usr/bin/env bash
# session 46, call A (session 45's call G with TR; carry [".whl"]): NB3, P8 with three tile buffers (each buffer's
# next copy the tile three on), EL, WG1's read of WG0's tile before the previous pair's P.V retire, and TR (session
# 46), V transposed by transposing loads (LDSM.16.MT88.4, one PRMT a register, STSM) with P.V's k in the score
# accumulator's token order, P's hand-off by STSM. (1) p8_check at batch 8 for each on the all-in schedule and TR on
# P8 alone, and P8's GPU tests with them (GRAPHTUNE_GPU_NEW=1: all three are in tests/gpu/_unproven.py) and the
# p_precision tests; (2) if p8_check is clean, plan_probe at fp8 H = 128 with query_precision="e4m3": P8 + EI + TE +
# NF (b2) against it with TR, with NB3 and with EL (b3), as time allows. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-560}
source docs/gpu_calls/lib.sh
gpu_prelude
ALL=T8=1/P8=1/EI=1/TE=1/NF=1
probe p8_check_s46 130 p8_check.py --batch 8 --sms 132,7,1 --lengths uniform,mixed \
  --configs $ALL/TR=1,T8=1/P8=1/TR=1,$ALL/NB3=1,$ALL/EL=1,$ALL/NB3=1/TR=1
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 140 \
  python3 -m pytest -q -n 3 tests/gpu/test_mla_decode_gpu.py -k "flashmlas_accuracy_class or p_precision" \
  > /tmp/tests_s46.log 2>&1
echo "tests rc=$? at ${SECONDS}s"
grep -E "passed|failed|FAILED|Error:|rel err|lse err" /tmp/tests_s46.log | tail -12 | cut -c1-300
if grep -q "wrote" /tmp/p8_check_s46.log; then
  for b3 in TR=1 NB3=1 EL=1; do
    left=$(( LIMIT - 10 - SECONDS ))
    [ $left -ge 50 ] && probe plan_${b3//[=,]/_} $(( left < 110 ? left : 110 )) plan_probe.py --format fp8 --heads 128 \
      --query-precision e4m3 --batches 1,8,32,64 --b2 BLOCK_N=64,T8=1,P8=1,EI=1,TE=1,NF=1 --b3 $b3 --tol 4e-2
  done
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls p8_check_s46.log tests_s46.log plan_*.log 2>/dev/null)
