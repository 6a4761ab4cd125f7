#!/usr/bin/env bash
# session 59, call E -- not run (no device time left; the next session's): WG2 with the producer staging each segment's
# query (wg2_qstage.patch; three or four buffers) -- its GPU tests, then pinned with a plan, plan-first, each cell checked against the
# fp32 reference before it is timed (split_pdl.py), beside the space's two- and three-buffer one-warpgroup configs,
# fp8 H = 16, uniform and ragged (call A's table without the staging, for the same columns). LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-280}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
# (the staging is not in the tree: applied to the device's copy only, from the patch)
patch -p1 -s < docs/gpu_calls/session59/wg2_qstage.patch && echo "query staging patched" || exit 1
export GIT_COMMIT="$GIT_COMMIT+wg2_qstage.patch"
gpu_tests wg2e_tests 150 tests/gpu/test_mla_hopper_tok_gpu.py "two_warpgroups or wg2"
failed=$(grep -c " FAILED" /tmp/wg2e_tests.log); passed=$(grep -c " PASSED" /tmp/wg2e_tests.log)
V='"V2": 1, "PREFETCH": 1, "FAST_MAX": 1, "CHAIN": 1, "RK64": 1'
W='"V2": 1, "WG2": 1, "FAST_MAX": 1'
left=$(( LIMIT - 10 - SECONDS ))
if [ "$failed" = 0 ] && [ "$passed" -gt 0 ] && [ $left -ge 60 ]; then
  probe wg2e_fp8 $left split_pdl.py --ways plan-first --ragged --rounds 3 --cells "fp8:16:64:32,64,128" --configs \
    "[{$V, \"NUM_BUF\": 2, \"COPY_FIRST\": 1}, {$V, \"NUM_BUF\": 3}, {$W, \"NUM_BUF\": 3, \"RK64\": 1}, {$W, \"NUM_BUF\": 4, \"RK64\": 1}]" \
    | grep -E "rc=|^\| (uniform|ragged)|rror|not timed" | cut -c1-260
fi
tar -czf $OUT/logs59e.tgz -C /tmp $(cd /tmp && ls wg2e_tests.log wg2e_fp8.log 2>/dev/null)
