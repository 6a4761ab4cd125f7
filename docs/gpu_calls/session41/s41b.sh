#!/usr/bin/env bash
# session 41, call B (main; carry [".whl"]): where the heads-on-M kernels and FlashMLA spend an H = 128 batch-64 decode,
# side by side. (1) benchmarks/probes/timeline.py at fp8 / bf16 H = 128 batch 64 with a plan: the pair's steps and
# whether the same SMs are slow again (sm_persistence, first read on the one-program-an-SM ping-pong grids);
# (2) Nsight Compute's kernel-level sections (speed of light, memory and compute workload, warp states, occupancy,
# instruction mix; the raw page keeps every metric they collect, the pipes' utilisation among them) for graphtune's
# launches (T8 hi/lo, T8 with the e4m3 query, the bf16 ping-pong kernel; each with a plan) and FlashMLA's on the same
# inputs. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-300}
source docs/gpu_calls/lib.sh
gpu_prelude
probe timeline_h128 120 timeline.py --cells fp8:128:64,bf16:128:64 --plan
ncu_kernels() {   # NAME CAP ARGS...: ncu_mla.py ARGS under the kernel-level sections; details and raw CSVs into $OUT
  local name=$1 cap=$2; shift 2
  PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main timeout "$cap" ncu --profile-from-start off \
    --nvtx --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section WarpStateStats --section Occupancy --section InstructionStats --section LaunchStats \
    -o "/tmp/ncu_$name" -f python3 benchmarks/probes/ncu_mla.py --heads 128 --batch 64 --plan "$@" \
    > "/tmp/ncu_$name.log" 2>&1
  echo "ncu $name rc=$? at ${SECONDS}s"; grep -E "^NVIDIA|^ncu_mla" "/tmp/ncu_$name.log" | cut -c1-300
  ncu --import "/tmp/ncu_$name.ncu-rep" --page details --csv > "$OUT/ncu_${name}_details.csv" 2>/dev/null
  ncu --import "/tmp/ncu_$name.ncu-rep" --page raw --csv --print-units base > "$OUT/ncu_${name}_raw.csv" 2>/dev/null
}
for spec in "fp8 --kv-format fp8" "fp8_e4m3 --kv-format fp8 --query-precision e4m3 --no-flashmla" \
            "bf16 --kv-format bf16"; do
  set -- $spec; name=$1; shift
  left=$(( LIMIT - 5 - SECONDS )); [ $left -ge 40 ] && ncu_kernels "$name" $(( left < 100 ? left : 100 )) "$@"
done
python3 benchmarks/probes/ncu_kernels.py $OUT/ncu_*_raw.csv --out $OUT/ncu_kernels.json 2>&1 | cut -c1-250
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls timeline_h128.log ncu_*.log 2>/dev/null)
