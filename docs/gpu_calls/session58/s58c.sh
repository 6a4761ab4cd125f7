#!/usr/bin/env bash
# session 58, call C (carry [".whl"]; an H100 or an H200, say which): COPY_FIRST (the second fp8 tokens-on-M kernel's
# first copies of a segment issued before its query's loads, so that ptxas cannot hold them behind the query's maxima:
# docs/mla_decode.md "Issue 14, session 58"), pinned with a plan, plan-first, each cell checked against the fp32
# reference before it is timed (split_pdl.py), two and three buffers, uniform and ragged; then batch 32's landing
# profiles with it. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-400}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
V='"V2": 1, "PREFETCH": 1, "FAST_MAX": 1, "CHAIN": 1, "RK64": 1'
probe copyfirst_fp8 170 split_pdl.py --ways plan-first --ragged --rounds 3 --cells "fp8:16:64:32,64,128" --configs \
  "[{$V, \"NUM_BUF\": 2}, {$V, \"NUM_BUF\": 2, \"COPY_FIRST\": 1}, {$V, \"NUM_BUF\": 3}, {$V, \"NUM_BUF\": 3, \"COPY_FIRST\": 1}]" \
  | grep -E "rc=|^\| (uniform|ragged)|rror|not timed" | cut -c1-260
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 60 ] && probe profile_c $(( left < 150 ? left : 150 )) timeline.py --plan --cells \
  "fp8:16:32:RK64=1,fp8:16:32:RK64=1/COPY_FIRST=1,fp8:16:32:NUM_BUF=3/RK64=1,fp8:16:32:NUM_BUF=3/RK64=1/COPY_FIRST=1" \
  | grep -E "rc=|^fp8|plain|per program|landed|median|rror" | cut -c1-330
tar -czf $OUT/logs58c.tgz -C /tmp $(cd /tmp && ls copyfirst_fp8.log profile_c.log 2>/dev/null)
