#!/usr/bin/env bash
# session 39, call B (main + RELOAD 2, uncommitted or at the session's commit; carry [".whl"]): (1) RELOAD 2's GPU
# tests (the bf16 ping-pong kernel with WG0's next score MMAs queued behind its P.V, FlashMLA's order; with and
# without WG1_FIRST; with RF, WG1's own scores from the right half first); (2) pinned at bf16 H = 128 beside FlashMLA:
# RELOAD 1 (shipped, WG1_FIRST 0 and 1) against RELOAD 2 (WG1_FIRST 0 and 1, RF 1); (3) s38d's two-wave V2 grid at fp8
# H = 16; (4) Nsight Compute's source view of the bf16 ping-pong kernel (RELOAD 1 and 2) at H = 128 batch 64; (5)
# s38d's T8 SPLIT_MAX 32 probes, as time allows.
set -o pipefail
LIMIT=${LIMIT:-570}     # seconds this call may take (the device time left may be less than a whole call)
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_decode_gpu.py -k "RELOAD2" > /tmp/tests_s39c.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_s39c.log | tail -12 | cut -c1-300
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 200 python3 \
  benchmarks/bench_mla_decode.py --hopper-variants --hopper-heads 128 --hopper-kinds "heads-on-M" --hopper-no-portable \
  --hopper-variant-filter "'RELOAD': 1}|'WG1_FIRST': 1}|'RELOAD': 2" --out $OUT/reload2_variants.json \
  > /tmp/reload2_variants.log 2>&1
echo "reload2_variants rc=$? at ${SECONDS}s"; grep -E "^check|batch=" /tmp/reload2_variants.log | cut -c1-330
left=$(( LIMIT - 30 - SECONDS )); [ $left -gt 50 ] && probe plan_waves_h16 $(( left < 70 ? left : 70 )) plan_probe.py \
  --batches 32,64 --b3 PROGRAMS_PER_SM=4
export PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main
for cell in "pp1 {\"PP\": 1, \"RELOAD\": 1}" "pp2 {\"PP\": 1, \"RELOAD\": 2}"; do
  set -- $cell; name=$1; shift 1; cfg="$*"
  left=$(( LIMIT - 30 - SECONDS )); [ $left -lt 70 ] && break
  timeout $(( left < 110 ? left : 110 )) ncu --profile-from-start off --nvtx --kernel-name regex:hopper_pp \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --import-source yes -o /tmp/ncu_$name -f python3 benchmarks/probes/ncu_mla.py --heads 128 --batch 64 \
    --kv-format bf16 --no-flashmla --config "$cfg" > /tmp/ncu_$name.log 2>&1
  echo "ncu $name rc=$? at ${SECONDS}s"; tail -2 /tmp/ncu_$name.log | cut -c1-200
  ncu --import /tmp/ncu_$name.ncu-rep --page details --csv > $OUT/ncu_${name}_details.csv 2>/dev/null
  ncu --import /tmp/ncu_$name.ncu-rep --page source --print-source sass --csv > $OUT/ncu_${name}_sass.csv 2>/dev/null
  echo "sass csv: $(wc -l < $OUT/ncu_${name}_sass.csv) lines"
done
left=$(( LIMIT - SECONDS )); [ $left -gt 40 ] && probe plan_t8_split32_h128 $left plan_probe.py --heads 128 \
  --batches 1,2 --t8-split-max 32
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_s39c.log reload2_variants.log plan_*.log ncu_*.log 2>/dev/null)
