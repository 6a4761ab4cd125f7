#!/usr/bin/env bash
# session 48, call F (carry [".whl"]; an H100 or an H200, say which): where the fixed costs per call go in the cells
# still short of their targets, for the next session's levers: in-kernel timelines (benchmarks/probes/timeline.py,
# one process, a step's plan) of fp8 H = 16 at batch 32 / 64 / 128 (the 0.8x target missed at 32) and the bf16
# ping-pong kernel's shipped config (SM1 + RA) at H = 128 batch 32 / 64 (1.04 / 1.13x on the H200), with the split
# kernel and the decode timed at 1,024-8,192-token requests (each cell's fixed cost from a line through them).
set -o pipefail
LIMIT=${LIMIT:-400}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
probe timeline_fixed $(( LIMIT - 10 )) timeline.py --plan --lengths 1024,2048,4096,8192 \
  --cells fp8:16:32,fp8:16:64,fp8:16:128,bf16:128:32:SM1=1/RA=1,bf16:128:64:SM1=1/RA=1 | tail -60
gzip -f $OUT/timeline_fixed.json
