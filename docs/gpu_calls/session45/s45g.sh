#!/usr/bin/env bash
# session 45, call G (not run in session 45: its device time was spent; the next session's first; carry [".whl"]):
# NB3, P8 with three tile buffers (each buffer's next copy the tile three on). (1) p8_check at batch 8 for NB3 on the
# all-in schedule, on EI alone and with WL1, and P8's GPU tests with them (GRAPHTUNE_GPU_NEW=1: NB3 is in
# tests/gpu/_unproven.py); (2) if p8_check is clean, plan_probe at fp8 H = 128 with query_precision="e4m3": P8 + EI + TE
# + NF (b2) against it with NB3 (b3), then, time left, Nsight Compute's source view of the NB3 schedule at batch 64.
# LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-540}
source docs/gpu_calls/lib.sh
gpu_prelude
probe p8_check_nb3 90 p8_check.py --batch 8 --sms 132,7,1 --lengths uniform,mixed \
  --configs T8=1/P8=1/EI=1/TE=1/NF=1/NB3=1,T8=1/P8=1/EI=1/NB3=1,T8=1/P8=1/EI=1/NB3=1/WL1=1
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 100 \
  python3 -m pytest -q -n 3 tests/gpu/test_mla_decode_gpu.py -k "flashmlas_accuracy_class" > /tmp/tests_nb3.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error:|rel err|lse err" /tmp/tests_nb3.log | tail -8 | cut -c1-300
if ! grep -qE " [1-9][0-9]* bad blocks" /tmp/p8_check_nb3.log && grep -q "wrote" /tmp/p8_check_nb3.log; then
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 50 ] && probe plan_nb3 $(( left < 130 ? left : 130 )) plan_probe.py --format fp8 --heads 128 \
    --query-precision e4m3 --batches 1,8,32,64 --b2 BLOCK_N=64,T8=1,P8=1,EI=1,TE=1,NF=1 --b3 NB3=1 --tol 4e-2
  left=$(( LIMIT - 10 - SECONDS ))
  if [ $left -ge 40 ]; then
    PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main timeout $left ncu --profile-from-start off \
      --nvtx --kernel-name regex:hopper_pp --section SourceCounters --section WarpStateStats --section SpeedOfLight \
      --import-source yes -o /tmp/ncu_nb3 -f python3 benchmarks/probes/ncu_mla.py --heads 128 --batch 64 \
      --kv-format fp8 --no-flashmla --query-precision e4m3 --plan \
      --config '{"BLOCK_N":64,"T8":1,"P8":1,"EI":1,"TE":1,"NF":1,"NB3":1}' > /tmp/ncu_nb3.log 2>&1
    ncu --import /tmp/ncu_nb3.ncu-rep --page details --csv > $OUT/ncu_nb3_details.csv 2>/dev/null
    ncu --import /tmp/ncu_nb3.ncu-rep --page source --print-source sass --csv > $OUT/ncu_nb3_sass.csv 2>/dev/null
    python3 benchmarks/probes/ncu_stalls.py $OUT/ncu_nb3_sass.csv --top 8 | cut -c1-220
    gzip $OUT/*.csv
  fi
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls p8_check_nb3.log tests_nb3.log plan_nb3.log 2>/dev/null)
