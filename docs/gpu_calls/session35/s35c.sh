#!/usr/bin/env bash
# session 35, call C (main; carry [".whl"]; on an H200: the page-size-1 target is stated for it): (1) the row gather at
# page size 1 (fp8, H = 16, batch 64 / 128; target 3.0 TB/s) with fp16 partials; (2) timelines with fixed-cost lines
# of the heads-on-M cells that miss (bf16 H = 128 batch 32 / 64, fp8 H = 128 batch 64: T8): where their time goes now.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 170 python3 benchmarks/probes/gather_route.py \
  --formats fp8 --page-sizes 1 --batches 64,128 --out $OUT/gather.json > /tmp/gather.log 2>&1
echo "gather rc=$? at ${SECONDS}s"; tail -8 /tmp/gather.log | cut -c1-300
PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 200 python3 benchmarks/probes/timeline.py \
  --cells bf16:128:32,bf16:128:64,fp8:128:64 --lengths 1024,2048,4096 --out $OUT/timeline_h128.json \
  > /tmp/timeline_h128.log 2>&1
echo "timeline rc=$? at ${SECONDS}s"; grep -v "^$" /tmp/timeline_h128.log | cut -c1-1200
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
