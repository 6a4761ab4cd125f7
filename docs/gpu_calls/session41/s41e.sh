#!/usr/bin/env bash
# session 41, call E (main; carry [".whl"]): Nsight Compute's source view (stall reasons per SASS line) of FlashMLA's
# bf16 and fp8 decode kernels at H = 128, batch 64 beside ours (the bf16 ping-pong kernel and T8 with a plan), for
# reading where FlashMLA's pair waits against ours on this CPU machine (benchmarks/probes/ncu_stalls.py).
set -o pipefail
LIMIT=${LIMIT:-300}
source docs/gpu_calls/lib.sh
gpu_prelude
for fmt in bf16 fp8; do
  left=$(( LIMIT - 10 - SECONDS )); [ $left -lt 40 ] && break
  PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main timeout $(( left < 120 ? left : 120 )) ncu \
    --profile-from-start off --nvtx --kernel-name regex:"splitkv_mla_kernel|hopper_pp" --section SourceCounters \
    --section WarpStateStats --import-source yes -o /tmp/ncu_src_$fmt -f python3 benchmarks/probes/ncu_mla.py \
    --heads 128 --batch 64 --kv-format $fmt --plan > /tmp/ncu_src_$fmt.log 2>&1
  echo "ncu $fmt rc=$? at ${SECONDS}s"
  for who in flashmla:splitkv_mla_kernel graphtune:hopper_pp; do
    name=${who%%:*}
    ncu --import /tmp/ncu_src_$fmt.ncu-rep --kernel-name regex:"${who#*:}" --page source --print-source sass --csv \
      2>/dev/null | gzip > $OUT/ncu_src_${fmt}_$name.csv.gz
    echo "== $fmt $name"; python3 benchmarks/probes/ncu_stalls.py $OUT/ncu_src_${fmt}_$name.csv.gz --top 8 2>&1 | cut -c1-180
  done
done
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls ncu_src_*.log 2>/dev/null)
