#!/usr/bin/env bash
# session 24, call H: the widening's registers laid out for no shared-memory bank conflicts (WB 1,
# kernel_hopper.widen_layout) in T8 and in the fp8 ping-pong kernel: GPU tests, the variants beside FlashMLA, and
# Nsight Compute's shared-store count for T8 with it
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
GRAPHTUNE_GPU_NEW=1 timeout 120 python3 -m pytest -q -x tests/gpu/test_mla_decode_gpu.py -k "WB1" > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests.log; grep -E "Error|assert|mismatch" $OUT/tests.log | head -8 | cut -c1-300
timeout 150 python3 benchmarks/bench_mla_decode.py --hopper-variants --hopper-kinds "heads-on-M fp8" --hopper-no-portable \
  --hopper-variant-filter "'T8': 1}|WB|'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1}|'PP': 1, 'RELOAD': 1}" --out $OUT/wb_variants.json > $OUT/wb_variants.log 2>&1
echo "variants rc=$?"; grep -E "^check|Error|error" $OUT/wb_variants.log | cut -c1-300
grep -E "^heads=" $OUT/wb_variants.log | sed 's/ tbs=.*//'
timeout 90 ncu --profile-from-start off --nvtx --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis \
  -o /tmp/t8wb python3 benchmarks/probes/ncu_mla.py --heads 128 --batch 64 --kv-format fp8 --config '{"PP": 0, "T8": 1, "WB": 1}' --no-flashmla 2>&1 | grep -v "^==PROF==" | tail -2
ncu --import /tmp/t8wb.ncu-rep --page details --csv > $OUT/t8wb_b64.csv 2>&1
python3 - <<'PY'
import csv, os
for r in csv.DictReader(open(os.environ["OUT"] + "/t8wb_b64.csv")):
    if "reduce" in r["Kernel Name"]: continue
    if r["Metric Name"] in ("Duration", "Elapsed Cycles", "Memory Throughput", "Compute (SM) Throughput") or r["Rule Name"] in ("SharedMemoryConflicts", "HighPipeUtilization"):
        print(r["Metric Name"], r["Metric Value"], r["Metric Unit"], "|", r["Rule Name"], r["Rule Description"][:300])
PY
