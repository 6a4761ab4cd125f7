#!/usr/bin/env bash
# session 44, call C (not run in session 44: no machine; the next session's first): P8 with the next tiles'
# copies issued once a buffer's bytes are read (EI: its V^T lives in buffers of its own, so the copy need not wait for
# the P.V to retire), WG0's transposition under its score MMAs (TE), and with TE the transpositions' own proxy fences
# left to the hand-offs' (NF). (1) p8_check.py at batch 8 for the new configs, P8's GPU tests with them; (2) if
# p8_check is clean, plan_probe.py at fp8 H = 128 with query_precision="e4m3": P8 against P8 + EI + TE + NF ("tuned,
# plan" is T8 with the e4m3 query as shipped); then, time left, P8 + EI alone and Nsight Compute's source view of
# P8 + EI + TE + NF at batch 64. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-540}
source docs/gpu_calls/lib.sh
gpu_prelude
probe p8_check_ei 90 p8_check.py --batch 8 --sms 132,7,1 --lengths uniform,mixed \
  --configs T8=1/P8=1/EI=1/TE=1/NF=1,T8=1/P8=1/EI=1,T8=1/P8=1/EI=1/WL1=1
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 80 \
  python3 -m pytest -q -n 3 tests/gpu/test_mla_decode_gpu.py -k "flashmlas_accuracy_class" > /tmp/tests_ei.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error:|rel err|lse err" /tmp/tests_ei.log | tail -8 | cut -c1-300
if ! grep -qE " [1-9][0-9]* bad blocks" /tmp/p8_check_ei.log && grep -q "wrote" /tmp/p8_check_ei.log; then
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 50 ] && probe plan_all $(( left < 120 ? left : 120 )) plan_probe.py --format fp8 --heads 128 \
    --query-precision e4m3 --batches 1,8,32,64 --b2 BLOCK_N=64,T8=1,P8=1 --b3 EI=1,TE=1,NF=1 --tol 4e-2
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 50 ] && probe plan_ei $(( left < 120 ? left : 120 )) plan_probe.py --format fp8 --heads 128 \
    --query-precision e4m3 --batches 8,32,64 --b2 BLOCK_N=64,T8=1,P8=1 --b3 EI=1 --tol 4e-2
  left=$(( LIMIT - 10 - SECONDS ))
  if [ $left -ge 40 ]; then
    # where P8 + EI + TE + NF waits at batch 64 (as call B read P8)
    PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main timeout $left ncu --profile-from-start off \
      --nvtx --kernel-name regex:hopper_pp --section SourceCounters --section WarpStateStats --section SpeedOfLight \
      --import-source yes -o /tmp/ncu_all -f python3 benchmarks/probes/ncu_mla.py --heads 128 --batch 64 \
      --kv-format fp8 --no-flashmla --query-precision e4m3 --plan \
      --config '{"BLOCK_N":64,"T8":1,"P8":1,"EI":1,"TE":1,"NF":1}' > /tmp/ncu_all.log 2>&1
    ncu --import /tmp/ncu_all.ncu-rep --page details --csv > $OUT/ncu_all_details.csv 2>/dev/null
    ncu --import /tmp/ncu_all.ncu-rep --page source --print-source sass --csv > $OUT/ncu_all_sass.csv 2>/dev/null
    python3 benchmarks/probes/ncu_stalls.py $OUT/ncu_all_sass.csv --top 8 | cut -c1-220
    gzip $OUT/*.csv
  fi
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls p8_check_ei.log tests_ei.log plan_all.log plan_ei.log 2>/dev/null)
