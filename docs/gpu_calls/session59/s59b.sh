#!/usr/bin/env bash
# session 59, call B (carry [".whl"]; an H100 or an H200, say which): call A's WG2 tests and pinned timings
# (s59a.sh), then -- where those tests passed -- the tuned space with WG2's rows (wg2_space.patch, applied to the
# device's copy of the tree only) through the public path's tuned GPU tests and the fp8 H = 16 standing beside
# FlashMLA, tuned per bucket with a plan. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-420}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
gpu_tests wg2_tests 200 tests/gpu/test_mla_hopper_tok_gpu.py "two_warpgroups or wg2"
failed=$(grep -c " FAILED" /tmp/wg2_tests.log); passed=$(grep -c " PASSED" /tmp/wg2_tests.log)
V='"V2": 1, "PREFETCH": 1, "FAST_MAX": 1, "CHAIN": 1, "RK64": 1'
W='"V2": 1, "WG2": 1, "FAST_MAX": 1'
if [ "$failed" = 0 ] && [ "$passed" -gt 0 ]; then
  probe wg2_fp8 130 split_pdl.py --ways plan-first --ragged --rounds 3 --cells "fp8:16:64:32,64,128" --configs \
    "[{$V, \"NUM_BUF\": 2, \"COPY_FIRST\": 1}, {$V, \"NUM_BUF\": 3}, {$W, \"NUM_BUF\": 3, \"RK64\": 1}, {$W, \"NUM_BUF\": 4, \"RK64\": 1}, {$W, \"NUM_BUF\": 5, \"RK64\": 1}]" \
    | grep -E "rc=|^\| (uniform|ragged)|rror|not timed" | cut -c1-260
  patch -p1 -s < docs/gpu_calls/session59/wg2_space.patch && echo "space patched"
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 60 ] && GIT_COMMIT="$GIT_COMMIT+wg2_space.patch" vs_plan fp8_h16_wg2 $(( left < 90 ? left : 90 )) \
    --vs-formats fp8 --vs-batches-h128 "" --vs-batches-h16 32,64,128
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 45 ] && gpu_tests tuned_tests $left tests/gpu/test_mla_hopper_tok_gpu.py \
    "(test_public_path_picks_the_tok_kernel_by_batch_tunes_and_replays and not fp8_ds_mla) or (tuned-plan-first and not bf16) or (test_tuned_decode_with_a_plan_made_in_the_captured_step and ps64)"
fi
tar -czf $OUT/logs59b.tgz -C /tmp $(cd /tmp && ls wg2_tests.log wg2_fp8.log fp8_h16_wg2.log tuned_tests.log 2>/dev/null)
