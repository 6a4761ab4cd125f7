#!/usr/bin/env bash
# session 24, call G: Nsight Compute of T8 (fp8, H = 128, batch 64, as shipped) and FlashMLA on the same inputs: where
# each one's cycles go (pipes, shared memory, warp stalls), to test docs/mla_decode.md's "bound by shared-memory bytes"
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; ncu --version | tail -1
NCU="ncu --profile-from-start off --nvtx --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy"
timeout 240 $NCU -o /tmp/t8_b64 python3 benchmarks/probes/ncu_mla.py --heads 128 --batch 64 --kv-format fp8 \
  --config '{"PP": 0, "T8": 1}' 2>&1 | grep -v "^==PROF==" | tail -4
ncu --import /tmp/t8_b64.ncu-rep --page details --csv > $OUT/t8_b64.csv 2>&1
ls -la $OUT/t8_b64.csv
python3 - <<'PY'
import csv, os, collections
rows = list(csv.DictReader(open(os.environ["OUT"] + "/t8_b64.csv")))
keep = ("Duration", "Compute (SM) Throughput", "Memory Throughput", "Shared", "Bank", "Tensor", "Issue Slots Busy",
        "Executed Ipc Active", "Stall", "Warp Cycles Per Issued", "L1/TEX Hit", "L2 Hit", "DRAM Throughput",
        "Registers Per Thread", "Pipe")
for r in rows:
    name = r.get("Metric Name", "")
    if any(k in name for k in keep):
        print(r.get("Kernel Name", "")[:34], "|", r.get("Section Name", "")[:24], "|", name, "|", r.get("Metric Value", ""), r.get("Metric Unit", ""))
PY
