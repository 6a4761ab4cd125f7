#!/usr/bin/env bash
# session 40, call E (main; carry [".whl", ".carry"], 162733f's src, the reverted V2 query order and planned gather
# pages, in .carry/src_new): in-kernel timelines (benchmarks/probes/timeline.py) of the second fp8 tokens-on-M
# kernel at H = 16, batch 1 and 32, with a plan, main then 162733f: where a program's start goes (the split, the
# query ready, the first tile's wait), to see why batch 1 did not move when the first copies stopped waiting for the
# query's loads (call B).
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
for way in main new; do
  src=$PWD/src; [ $way = new ] && src=$PWD/.carry/src_new
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$way timeout 120 \
    python3 benchmarks/probes/timeline.py --cells fp8:16:1,fp8:16:32 --plan --out $OUT/timeline_$way.json \
    > /tmp/timeline_$way.log 2>&1
  echo "timeline_$way rc=$? at ${SECONDS}s"; grep -v '^{' /tmp/timeline_$way.log | grep -v "^$" | tail -30 | cut -c1-250
done
tar -czf $OUT/logs.tgz -C /tmp timeline_main.log timeline_new.log
