#!/usr/bin/env bash
# session 48, call A (written in session 47, whose device time went on starts that got no machine; carry [".whl"]):
# (1) session 47's call D (s47d.sh: the GPU tests of the e4m3-query paths with VS in P8's tuned space, the public fp8
# H = 128 table beside FlashMLA with the e4m3 columns and a plan, the A/B over T8's space, PL and P8's), then, time
# left, (2) Nsight Compute's view of P8 + EI + VS at batch 64 (where its time goes once the transposition's stores meet
# no bank conflict) and (3) session 46's s46f.sh (P8 at batch 1-4 with SPLIT_MAX 32 / 16). LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-560}
LIMIT=$(( LIMIT - 150 )) AB_CAP=${AB_CAP:-80} bash docs/gpu_calls/session47/s47d.sh
source docs/gpu_calls/lib.sh
left=$(( ${LIMIT} - 10 - SECONDS ))
[ $left -ge 40 ] && ncu_view p8_ei_vs fp8 '{"BLOCK_N":64,"T8":1,"P8":1,"EI":1,"VS":1}' $(( left < 100 ? left : 100 )) \
  --query-precision e4m3 --plan
left=$(( ${LIMIT} - 10 - SECONDS ))
[ $left -ge 60 ] && timeout $left bash docs/gpu_calls/session46/s46f.sh
tar -czf $OUT/logs48a.tgz -C /tmp $(cd /tmp && ls ncu_p8_ei_vs.log p8_split*.log p8ei_split*.log 2>/dev/null)
