#!/usr/bin/env bash
# session 53, call I (carry [".whl"]; an H100 or an H200, say which): after the tuner's fix (a plan's rows shared by the
# timer's rotating input sets, filled again in each of its graphs): the GPU tests of the plan's slots and of the
# streamed reduction, then reduce_tail.py tuned per way (base / early = as shipped / stream) beside FlashMLA, fp8 H = 16
# batch 32 / 64 / 128 and page size 1 at 64 / 128, uniform and ragged lengths, with the tuned picks printed.
set -o pipefail
LIMIT=${LIMIT:-330}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
gpu_tests tests_i ${TESTS_CAP:-150} tests/gpu/test_mla_decode_gpu.py "streamed or plan_slots"
probe tuned_i $(( LIMIT - 10 - SECONDS )) reduce_tail.py --rounds ${ROUNDS:-4} --ragged \
  --cells "fp8:16:64:32,64,128 fp8:16:1:64,128" | grep -E "^\||rc=|rror|not timed" | cut -c1-250
sed -n '/the tuned picks/,$p' /tmp/tuned_i.log | grep -v "^wrote" | cut -c1-200 | head -60
tar -czf $OUT/logs53i.tgz -C /tmp $(cd /tmp && ls tests_i.log tuned_i.log 2>/dev/null)
