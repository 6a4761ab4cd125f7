#!/usr/bin/env bash
# session 54, call B (carry [".whl"]): fp8_ds_mla streamed (reduction.STREAM on for the DS rows of the second
# tokens-on-M kernel, session 54). (1) The GPU tests: the new streamed DS test (pinned two / three buffers, H = 32, the
# row gather; the tuned path captured with lengths changed in place), every DS test of test_mla_hopper_tok_gpu.py and
# the fp8 streamed / plan-slot tests (unchanged code, a regression check); (2) reduce_tail.py on fp8_ds_mla cells
# (base / early / stream, the public call tuned per way, uniform and ragged): what streaming gives that format.
set -o pipefail
LIMIT=${LIMIT:-480}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
gpu_tests tests_b ${TESTS_CAP:-200} tests/gpu/test_mla_hopper_tok_gpu.py "tok_ds or ds_mla or streamed"
gpu_tests tests_b2 ${TESTS2_CAP:-100} tests/gpu/test_mla_decode_gpu.py "streamed or plan_slots"
probe ds_stream_b $(( LIMIT - 10 - SECONDS )) reduce_tail.py --rounds ${ROUNDS:-4} --ragged \
  --cells "fp8_ds_mla:16:64:32,64,128 fp8_ds_mla:16:1:64" | grep -E "^\||rc=|rror|not timed" | cut -c1-250
tar -czf $OUT/logs54b.tgz -C /tmp $(cd /tmp && ls tests_b.log tests_b2.log ds_stream_b.log 2>/dev/null)
