#!/usr/bin/env bash
# session 42 call G (main; carry [".whl"]): Nsight Compute beside FlashMLA, bf16 H = 128, batch 64 with a plan, the
# ping-pong kernel as now tuned (SM1 + RA): stall reasons per SASS line (benchmarks/probes/ncu_stalls.py), speed of
# light and the tensor pipe (benchmarks/probes/ncu_kernels.py) of both kernels. LIMIT=SECONDS.
set -o pipefail
LIMIT=${LIMIT:-160}
source docs/gpu_calls/lib.sh
gpu_prelude
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main timeout $(( LIMIT - 20 )) ncu \
  --profile-from-start off --nvtx --kernel-name regex:"splitkv_mla_kernel|hopper_pp" --section SourceCounters \
  --section WarpStateStats --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
  --import-source yes -o /tmp/ncu_bf16 -f python3 benchmarks/probes/ncu_mla.py --heads 128 --batch 64 \
  --kv-format bf16 --plan > /tmp/ncu_bf16.log 2>&1
echo "ncu rc=$? at ${SECONDS}s"
ncu --import /tmp/ncu_bf16.ncu-rep --page raw --csv 2>/dev/null | gzip > $OUT/ncu_bf16_raw.csv.gz
ncu --import /tmp/ncu_bf16.ncu-rep --page details --csv > $OUT/ncu_bf16_details.csv 2>/dev/null
python3 benchmarks/probes/ncu_kernels.py $OUT/ncu_bf16_raw.csv.gz --out $OUT/ncu_kernels.json 2>&1 | cut -c1-250
for who in flashmla:splitkv_mla_kernel graphtune:hopper_pp; do
  name=${who%%:*}
  ncu --import /tmp/ncu_bf16.ncu-rep --kernel-name regex:"${who#*:}" --page source --print-source sass --csv \
    2>/dev/null | gzip > $OUT/ncu_src_bf16_$name.csv.gz
  echo "== bf16 $name"; python3 benchmarks/probes/ncu_stalls.py $OUT/ncu_src_bf16_$name.csv.gz --top 8 2>&1 | cut -c1-180
done
tar -czf $OUT/logs.tgz -C /tmp ncu_bf16.log
