#!/usr/bin/env bash
# session 58, call B (written in session 58 for the next session, after call A; carry [".whl"]; an H100 or an H200, say
# which): where batch 32's time goes with PT_PRE (benchmarks/probes/timeline.py's landing profiles, now with each
# window's median tile work, wait and copy latency: docs/mla_decode.md "Issue 14, session 58"): the fp8 H = 16 split
# kernel with a plan, two buffers (two programs an SM) and three (one), each without and with PT_PRE, beside the
# stream kernel (the same split and copies, no math) with the same buffers; then, on an H200, the targets table's
# cells (lib.sh's targets_h200) with the time left. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-560}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
probe profile_b 220 timeline.py --plan --cells \
  "fp8:16:32:RK64=1,fp8:16:32:RK64=1/PT_PRE=1,fp8:16:32:NUM_BUF=3/RK64=1,fp8:16:32:NUM_BUF=3/RK64=1/PT_PRE=1,fp8:16:32:STREAM=1,fp8:16:32:STREAM=1/NUM_BUF=3" \
  | grep -E "rc=|^fp8|plain|landed|requested|computing|median|rror" | cut -c1-400
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*) targets_h200 "$LIMIT" ;;
esac
tar -czf $OUT/logs58b.tgz -C /tmp $(cd /tmp && ls profile_b.log fp8_h16.log gather_page1.log bf16.log fp8_h128.log 2>/dev/null)
