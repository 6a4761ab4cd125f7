#!/usr/bin/env bash
# prepared in session 39 for the next session (main; carry [".whl"]): (1) s39d.sh (SWAP 1 / 2's GPU tests and the
# pinned bf16 variants twice against RELOAD 1); (2) Nsight Compute's source view of T8 (fp8 H = 128 batch 64) and of
# the bf16 ping-pong kernel with SWAP 2 (where the pair waits once WG0's P.V of WG1's tile runs first); the CSVs under
# $OUT, read with `python benchmarks/probes/ncu_stalls.py FILE`.
set -o pipefail
LIMIT=${LIMIT:-570}
LIMIT=$(( LIMIT - 120 )) bash docs/gpu_calls/session39/s39d.sh
source docs/gpu_calls/lib.sh
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main
for cell in "t8 fp8 {\"PP\": 0, \"T8\": 1}" "swap2 bf16 {\"PP\": 1, \"RELOAD\": 1, \"WG1_FIRST\": 1, \"SWAP\": 2, \"RF\": 1}"; do
  set -- $cell; name=$1; fmt=$2; shift 2; cfg="$*"
  left=$(( LIMIT - 10 - SECONDS )); [ $left -lt 40 ] && break
  timeout $(( left < 60 ? left : 60 )) ncu --profile-from-start off --nvtx --kernel-name regex:hopper_pp \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --import-source yes -o /tmp/ncu_$name -f python3 benchmarks/probes/ncu_mla.py --heads 128 --batch 64 \
    --kv-format $fmt --no-flashmla --config "$cfg" > /tmp/ncu_$name.log 2>&1
  echo "ncu $name rc=$? at ${SECONDS}s"
  ncu --import /tmp/ncu_$name.ncu-rep --page details --csv > $OUT/ncu_${name}_details.csv 2>/dev/null
  ncu --import /tmp/ncu_$name.ncu-rep --page source --print-source sass --csv > $OUT/ncu_${name}_sass.csv 2>/dev/null
  python3 benchmarks/probes/ncu_stalls.py $OUT/ncu_${name}_sass.csv --top 6 | cut -c1-200
done
