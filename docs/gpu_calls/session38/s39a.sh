#!/usr/bin/env bash
# prepared in session 38 for the next session (main; carry [".whl"]): Nsight Compute's source view of the ping-pong
# pair, pinned, H = 128, batch 64: the bf16 ping-pong kernel (WG1_FIRST 0) and T8. Per SASS line the warp stall
# reasons (SourceCounters: which wgmma / wait the 4.0 us pair waits in: the tensor pipe's order between the warpgroups,
# WG0's RELOAD 1 wait, the copies), plus the warp-state totals. The CSVs come back under $OUT.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main
for cell in "pp bf16 {\"PP\": 1, \"RELOAD\": 1}" "t8 fp8 {\"PP\": 0, \"T8\": 1}"; do
  set -- $cell; name=$1; fmt=$2; shift 2; cfg="$*"
  left=$(( 540 - SECONDS )); [ $left -lt 60 ] && break
  timeout $(( left / 2 )) ncu --profile-from-start off --nvtx --kernel-name regex:hopper_pp --section SourceCounters \
    --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis --import-source yes -o /tmp/ncu_$name -f python3 \
    benchmarks/probes/ncu_mla.py --heads 128 --batch 64 --kv-format $fmt --no-flashmla --config "$cfg" \
    > /tmp/ncu_$name.log 2>&1
  echo "ncu $name rc=$? at ${SECONDS}s"; tail -3 /tmp/ncu_$name.log | cut -c1-200
  ncu --import /tmp/ncu_$name.ncu-rep --page details --csv > $OUT/ncu_${name}_details.csv 2>/dev/null
  ncu --import /tmp/ncu_$name.ncu-rep --page source --print-source sass --csv > $OUT/ncu_${name}_sass.csv 2>/dev/null
  echo "sass csv: $(wc -l < $OUT/ncu_${name}_sass.csv) lines"
done
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls ncu_*.log 2>/dev/null)
