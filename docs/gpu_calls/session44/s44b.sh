#!/usr/bin/env bash
# session 44, call B (58b8cbc, the warm machine of call A): Nsight Compute's source view of T8 with the
# e4m3 query and of P8 at fp8 H = 128, batch 64, with a plan (benchmarks/probes/ncu_mla.py), stall reasons per SASS line
# summarised by benchmarks/probes/ncu_stalls.py.
source docs/gpu_calls/lib.sh; gpu_prelude >/dev/null
for v in t8:'{"BLOCK_N":64,"T8":1}' p8:'{"BLOCK_N":64,"T8":1,"P8":1}'; do
  n=${v%%:*}; c=${v#*:}
  PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main timeout 200 ncu --profile-from-start off --nvtx \
    --kernel-name regex:hopper_pp --section SourceCounters --section WarpStateStats --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --import-source yes -o /tmp/ncu_$n -f python3 benchmarks/probes/ncu_mla.py \
    --heads 128 --batch 64 --kv-format fp8 --no-flashmla --query-precision e4m3 --plan --config "$c" > /tmp/ncu_$n.log 2>&1
  echo "$n rc=$? ${SECONDS}s"; tail -3 /tmp/ncu_$n.log | cut -c1-200
  ncu --import /tmp/ncu_$n.ncu-rep --page details --csv > $OUT/ncu_${n}_details.csv 2>/dev/null
  ncu --import /tmp/ncu_$n.ncu-rep --page source --print-source sass --csv > $OUT/ncu_${n}_sass.csv 2>/dev/null
  python3 benchmarks/probes/ncu_stalls.py $OUT/ncu_${n}_sass.csv --top 8 | cut -c1-220
done
gzip $OUT/*.csv
