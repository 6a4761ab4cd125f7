#!/usr/bin/env bash
# session 14, call B: Nsight Compute (source-level stall samples) of bf16 H16 B128 (tuned + FlashMLA), the bf16 and
# fp8 ping-pong kernels at H128 B64; then the fp8 H128 table with the ping-pong kernel as second kernel from B64
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; ncu --version | tail -1
NCU="ncu --profile-from-start off --nvtx --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy"
P=benchmarks/probes/ncu_mla.py
timeout 150 $NCU -o /tmp/h16bf16 python3 $P --heads 16 --batch 128 --kv-format bf16 2>&1 | grep -v "^==PROF==" | tail -5
timeout 100 $NCU -o /tmp/h128bf16pp python3 $P --heads 128 --batch 64 --kv-format bf16 --config '{"PP":1,"RELOAD":1,"WG1_FIRST":1}' --no-flashmla 2>&1 | grep -v "^==PROF==" | tail -5
timeout 100 $NCU -o /tmp/h128fp8pp python3 $P --heads 128 --batch 64 --kv-format fp8 --config '{"PP":1,"RELOAD":1,"WG1_FIRST":1}' --no-flashmla 2>&1 | grep -v "^==PROF==" | tail -5
for f in h16bf16 h128bf16pp h128fp8pp; do
  ncu --import /tmp/$f.ncu-rep --page details --csv > $OUT/$f.csv 2>&1
  (ncu --import /tmp/$f.ncu-rep --page source --csv --print-source sass 2>/dev/null || ncu --import /tmp/$f.ncu-rep --page source --csv) | gzip -c > $OUT/$f.src.csv.gz
  ls -la $OUT/$f.csv $OUT/$f.src.csv.gz
done
timeout 150 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-batches-h16 "" \
  --vs-batches-h128 64,128 --vs-variant-filter "'PP': 1, 'RELOAD': 1, 'WG1_FIRST'|'PSMEM': 0, 'XCH': 1}" --out $OUT/fp8_h128_second.json 2>&1 | tee /tmp/b.log | grep -v "^  mla_decode" | tail -14
