#!/usr/bin/env bash
# session 39, call A (main at the commit named in the session's notes; carry [".whl"]): session 38's two prepared calls
# in one start: s38d.sh's probes (T8 at fp8 H = 128 batch 1 / 2 with and without SPLIT_MAX 32, with the plan; the
# two-wave V2 grid at fp8 H = 16 batch 32 / 64), then s39a.sh's Nsight Compute source view of the bf16 ping-pong
# kernel and T8 at H = 128 batch 64, pinned (per SASS line stall reasons, warp states, speed of light, memory
# workload; the CSVs under $OUT).
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
probe plan_t8_h128 40 plan_probe.py --heads 128 --batches 1,2
probe plan_t8_split32_h128 40 plan_probe.py --heads 128 --batches 1,2 --t8-split-max 32
probe plan_waves_h16 70 plan_probe.py --batches 32,64 --b3 PROGRAMS_PER_SM=4
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main
for cell in "pp bf16 {\"PP\": 1, \"RELOAD\": 1}" "t8 fp8 {\"PP\": 0, \"T8\": 1}"; do
  set -- $cell; name=$1; fmt=$2; shift 2; cfg="$*"
  left=$(( 570 - SECONDS )); [ $left -lt 60 ] && break
  timeout $(( left / 2 + 20 )) ncu --profile-from-start off --nvtx --kernel-name regex:hopper_pp --section SourceCounters \
    --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis --import-source yes -o /tmp/ncu_$name -f python3 \
    benchmarks/probes/ncu_mla.py --heads 128 --batch 64 --kv-format $fmt --no-flashmla --config "$cfg" \
    > /tmp/ncu_$name.log 2>&1
  echo "ncu $name rc=$? at ${SECONDS}s"; tail -3 /tmp/ncu_$name.log | cut -c1-200
  ncu --import /tmp/ncu_$name.ncu-rep --page details --csv > $OUT/ncu_${name}_details.csv 2>/dev/null
  ncu --import /tmp/ncu_$name.ncu-rep --page source --print-source sass --csv > $OUT/ncu_${name}_sass.csv 2>/dev/null
  echo "sass csv: $(wc -l < $OUT/ncu_${name}_sass.csv) lines"
done
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls plan_*.log ncu_*.log 2>/dev/null)
