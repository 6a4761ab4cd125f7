#!/usr/bin/env bash
# session 57, call D (written for the next session; carry [".whl"]; an H100 or an H200, say which): where batch 32's
# time goes (docs/mla_decode.md, "Issue 14, session 57"): benchmarks/probes/timeline.py's landing profiles of the fp8
# H = 16 split kernel with a plan, two buffers (two programs an SM) and three (one, the tuner's pick at batch 32 now),
# beside the stream kernel (the same split and copies, no math) with the same buffers, at batch 32 and 128; then, on
# an H200, the targets table's cells (lib.sh's targets_h200) with the time left. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-540}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
probe profile_d 200 timeline.py --plan --cells \
  "fp8:16:32,fp8:16:32:NUM_BUF=3/RK64=1/PT_EARLY=1,fp8:16:32:STREAM=1,fp8:16:32:STREAM=1/NUM_BUF=3,fp8:16:128,fp8:16:128:STREAM=1" \
  | grep -E "rc=|^fp8|plain|landed|requested|computing|rror" | cut -c1-400
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*) targets_h200 "$LIMIT" ;;
esac
tar -czf $OUT/logs57d.tgz -C /tmp $(cd /tmp && ls profile_d.log fp8_h16.log gather_page1.log bf16.log fp8_h128.log 2>/dev/null)
