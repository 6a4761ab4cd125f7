#!/usr/bin/env bash
# session 58, call D (carry [".whl"]; an H100 or an H200, say which): COPY_FIRST's GPU tests (gated in
# tests/gpu/_unproven.py: gpu_tests runs them) with the tuned space's two-buffer rows holding it, the public path's
# tuned fp8 tests beside them, then the standing of fp8 H = 16 tuned per bucket with a plan beside FlashMLA (uniform and
# ragged). LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-480}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
gpu_tests cf_tok 170 tests/gpu/test_mla_hopper_tok_gpu.py "copies_before or copy_first or public_path_picks or (kernel_ahead and tuned)"
gpu_tests cf_plan 110 tests/gpu/test_mla_decode_gpu.py "copies_before or plan_slots or streamed_reduction"
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 60 ] && vs_plan fp8_h16 $(( left < 170 ? left : 170 )) --vs-formats fp8 --vs-batches-h128 "" --vs-ragged \
  --ragged-seed 39179
tar -czf $OUT/logs58d.tgz -C /tmp $(cd /tmp && ls cf_tok.log cf_plan.log fp8_h16.log 2>/dev/null)
