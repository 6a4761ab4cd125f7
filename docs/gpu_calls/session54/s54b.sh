#!/usr/bin/env bash
# session 54, call B (carry [".whl"]). (1) fp8_ds_mla streamed (reduction.STREAM on for the DS rows of the second
# tokens-on-M kernel, session 54): the new streamed DS test (pinned two / three buffers, H = 32, the row gather; the
# tuned path captured with lengths changed in place) and every DS test of test_mla_hopper_tok_gpu.py; (2)
# stream_pad.py: three-buffer fp8 configs counting, with the reduction's programs padded in shared memory so that
# they cannot sit beside a running split program (plain / stream / stream+pad, two and three buffers, uniform and
# ragged); (3) reduce_tail.py on fp8_ds_mla cells (base / early / stream, the public call tuned per way).
set -o pipefail
LIMIT=${LIMIT:-540}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
gpu_tests tests_b ${TESTS_CAP:-180} tests/gpu/test_mla_hopper_tok_gpu.py "tok_ds or ds_mla or streamed"
probe pad_b ${PAD_CAP:-200} stream_pad.py --ragged --rounds ${ROUNDS:-3} | grep -E "^\||rc=|rror|not timed" | cut -c1-250
probe ds_stream_b $(( LIMIT - 10 - SECONDS )) reduce_tail.py --rounds ${ROUNDS:-3} --ragged \
  --cells "fp8_ds_mla:16:64:32,64,128 fp8_ds_mla:16:1:64" | grep -E "^\||rc=|rror|not timed" | cut -c1-250
tar -czf $OUT/logs54b.tgz -C /tmp $(cd /tmp && ls tests_b.log pad_b.log ds_stream_b.log 2>/dev/null)
