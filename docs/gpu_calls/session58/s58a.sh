#!/usr/bin/env bash
# session 58, call A (written in session 58, when no device was lent; for the next session's first call; carry
# [".whl"]; an H100 or an H200, say which): PT_PRE (a segment's first refill from page ids loaded with its first
# tiles', docs/mla_decode.md "Issue 14, session 58"). Its GPU tests (gated in tests/gpu/_unproven.py: gpu_tests runs
# them), then the second fp8 tokens-on-M kernel pinned to the tuned space's schedules with and without it, a step's
# plan, plan-first (the shipped way), uniform and ragged, FlashMLA beside; the same on the row gather (page size 1) and
# on the bf16 tokens-on-M kernel (its PT_PRE: the second tile copied with the first). LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-560}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
gpu_tests ptpre_tok 170 tests/gpu/test_mla_hopper_tok_gpu.py "first_refill or ptpre or PT_PRE"
gpu_tests ptpre_plan 100 tests/gpu/test_mla_decode_gpu.py "first_refill_from_ids"
V='"V2": 1, "PREFETCH": 1, "FAST_MAX": 1, "CHAIN": 1'
probe ptpre_fp8 150 split_pdl.py --ways plan-first --ragged --rounds 3 --cells "fp8:16:64:32,64,128" --configs \
  "[{$V, \"NUM_BUF\": 2, \"RK64\": 1}, {$V, \"NUM_BUF\": 2, \"RK64\": 1, \"PT_PRE\": 1}, {$V, \"NUM_BUF\": 3, \"RK64\": 1}, {$V, \"NUM_BUF\": 3, \"RK64\": 1, \"PT_PRE\": 1}]" \
  | grep -E "rc=|^\| (uniform|ragged)|rror|not timed" | cut -c1-260
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 60 ] && probe ptpre_bf16 $(( left < 100 ? left : 100 )) split_pdl.py --ways plan-first --ragged --rounds 3 \
  --cells "bf16:16:64:32,64,128" --configs '[{"NUM_BUF": 2, "PIPE": 2}, {"NUM_BUF": 2, "PIPE": 2, "PT_PRE": 1}]' \
  | grep -E "rc=|^\| (uniform|ragged)|rror|not timed" | cut -c1-260
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 50 ] && probe ptpre_gather $(( left < 80 ? left : 80 )) split_pdl.py --ways plan-first --rounds 3 \
  --cells "fp8:16:1:64,128" --configs \
  "[{$V, \"NUM_BUF\": 2, \"GATHER\": 1}, {$V, \"NUM_BUF\": 2, \"GATHER\": 1, \"PT_PRE\": 1}]" \
  | grep -E "rc=|^\| (uniform|ragged)|rror|not timed" | cut -c1-260
tar -czf $OUT/logs58a.tgz -C /tmp $(cd /tmp && ls ptpre_*.log 2>/dev/null)
