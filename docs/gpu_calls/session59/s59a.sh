#!/usr/bin/env bash
# session 59, call A (carry [".whl"]; an H100 or an H200, say which): WG2 (kernel_hopper_tok2.py: two consumer
# warpgroups and a producer warp on one pool of three to five buffers, one program an SM) -- its GPU tests (gated in
# tests/gpu/_unproven.py; a hand-off that never arrives would hang, hence the timeout), then pinned with a plan,
# plan-first, each cell checked against the fp32 reference before it is timed (split_pdl.py), beside the space's two-
# and three-buffer one-warpgroup configs, fp8 H = 16, uniform and ragged. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-400}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
gpu_tests wg2_tests 240 tests/gpu/test_mla_hopper_tok_gpu.py "two_warpgroups or wg2"
V='"V2": 1, "PREFETCH": 1, "FAST_MAX": 1, "CHAIN": 1, "RK64": 1'
W='"V2": 1, "WG2": 1, "FAST_MAX": 1'
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 60 ] && probe wg2_fp8 $(( left < 220 ? left : 220 )) split_pdl.py --ways plan-first --ragged --rounds 3 \
  --cells "fp8:16:64:32,64,128" --configs \
  "[{$V, \"NUM_BUF\": 2, \"COPY_FIRST\": 1}, {$V, \"NUM_BUF\": 3}, {$W, \"NUM_BUF\": 3, \"RK64\": 1}, {$W, \"NUM_BUF\": 4, \"RK64\": 1}, {$W, \"NUM_BUF\": 5, \"RK64\": 1}, {$W, \"NUM_BUF\": 5, \"RK64\": 0}]" \
  | grep -E "rc=|^\| (uniform|ragged)|rror|not timed" | cut -c1-260
tar -czf $OUT/logs59a.tgz -C /tmp $(cd /tmp && ls wg2_tests.log wg2_fp8.log 2>/dev/null)
