#!/usr/bin/env bash
# prepared in session 36 (main; carry [".whl"]; optional, after s37a-c): where the time goes with a plan: timelines of
# the pinned split kernels without and with a step's plan (benchmarks/probes/timeline.py --plan) at fp8 H = 16 batch
# 32 (0.87x FlashMLA with a plan on the H200, target 0.8: the SMs' spread and the start), fp8 H = 128 batch 64 (T8:
# -1.3% with a plan against -10% at 16) and bf16 H = 128 batch 32.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
for way in plain plan; do
  extra=$([ $way = plan ] && echo --plan)
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 150 python3 \
    benchmarks/probes/timeline.py --cells fp8:16:32,fp8:128:64,bf16:128:32 $extra --out $OUT/timeline_$way.json \
    > /tmp/timeline_$way.log 2>&1
  echo "timeline $way rc=$? at ${SECONDS}s"; grep -v '^{' /tmp/timeline_$way.log | grep -v "^$" | cut -c1-400
done
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
