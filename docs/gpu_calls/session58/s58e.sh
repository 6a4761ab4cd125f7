#!/usr/bin/env bash
# session 58, call E (carry [".whl"]; an H100 or an H200, say which): COPY_FIRST's GPU tests alone (gated in
# tests/gpu/_unproven.py: gpu_tests runs them), for the little device time left after call C; s58d.sh is the whole call.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
gpu_tests cf_tok 90 tests/gpu/test_mla_hopper_tok_gpu.py "copies_before or copy_first or public_path_picks"
gpu_tests cf_plan 50 tests/gpu/test_mla_decode_gpu.py "copies_before"
tar -czf $OUT/logs58e.tgz -C /tmp $(cd /tmp && ls cf_tok.log cf_plan.log 2>/dev/null)
