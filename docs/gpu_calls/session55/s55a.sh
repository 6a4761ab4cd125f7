#!/usr/bin/env bash
# session 55, call A (was session 54 call B, not run then) (carry [".whl"]). (1) The GPU tests of what session 54 wrote: fp8_ds_mla streamed (STREAM_DS: the new
# streamed DS test and the DS plan test of test_mla_hopper_tok_gpu.py) and the bf16 ping-pong kernel streamed
# (reduction.STREAM_PP, off until this run: its STREAM_CASES in test_mla_decode_gpu.py, with the fp8 ones); (2)
# reduce_tail.py --stream-gated on bf16 H = 128 (the ping-pong kernel) and fp8_ds_mla cells: base / early / stream, the
# public call tuned per way, uniform and ragged; (3) stream_pad.py with what time is left: three-buffer fp8 configs
# counting, the reduction's programs padded in shared memory so that they cannot sit beside a running split program.
set -o pipefail
LIMIT=${LIMIT:-540}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
gpu_tests tests_a ${TESTS_CAP:-110} tests/gpu/test_mla_hopper_tok_gpu.py "${TESTS_K:-streamed or ds_mla_with_a_plan}"
gpu_tests tests_a2 ${TESTS2_CAP:-100} tests/gpu/test_mla_decode_gpu.py "streamed"
probe tail_a ${TAIL_CAP:-170} reduce_tail.py --rounds ${ROUNDS:-3} --ragged --stream-gated \
  --cells "bf16:128:64:32,64 fp8_ds_mla:16:64:64,128" | grep -E "^\||rc=|rror|not timed" | cut -c1-250
[ $(( LIMIT - 10 - SECONDS )) -gt 60 ] && probe pad_a $(( LIMIT - 10 - SECONDS )) stream_pad.py --ragged --rounds ${ROUNDS:-3} \
  | grep -E "^\||rc=|rror|not timed" | cut -c1-250
tar -czf $OUT/logs55a.tgz -C /tmp $(cd /tmp && ls tests_a.log tests_a2.log tail_a.log pad_a.log 2>/dev/null)
