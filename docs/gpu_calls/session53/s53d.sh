#!/usr/bin/env bash
# session 53, call D (carry [".whl"]; an H100 or an H200, say which): the reduction streamed behind the split
# (reduction.STREAM). (1) Its GPU test (pinned at 132 / 7 / 1 SMs, H = 16 / 32, two / three buffers, the row gather,
# three calls a plan with the counters back at zero after each, then tuned + captured with lengths changed in place);
# (2) reduce_tail.py, the public call tuned per way (base / early = as shipped / stream) beside FlashMLA, fp8 H = 16
# batch 32 / 64 / 128 and page size 1 at 64 / 128; (3) the same pinned to two buffers with RK64 (the H200's lead at
# batch 32, session 51) and to three buffers with RK64 and PT_EARLY (the H100's pick at 64 / 128), so that only the
# reduction differs between the ways. RAGGED=--ragged adds ragged lengths (1..8191) to (2).
set -o pipefail
LIMIT=${LIMIT:-480}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
gpu_tests tests_d ${TESTS_CAP:-200} tests/gpu/test_mla_decode_gpu.py streamed
left=$(( (LIMIT - 15 - SECONDS) / 2 ))
probe stream_tuned $left reduce_tail.py --rounds ${ROUNDS:-4} --cells "fp8:16:64:32,64,128 fp8:16:1:64,128" $RAGGED \
  | grep -E "^\||rc=|rror|not timed" | cut -c1-250
for c in nb2 nb3; do
  cfg='{"V2": 1, "NUM_BUF": 2, "PREFETCH": 1, "FAST_MAX": 1, "CHAIN": 1, "RK64": 1}'
  [ $c = nb3 ] && cfg='{"V2": 1, "NUM_BUF": 3, "PREFETCH": 1, "FAST_MAX": 1, "CHAIN": 1, "RK64": 1, "PT_EARLY": 1}'
  left=$(( LIMIT - 10 - SECONDS )); [ $c = nb2 ] && left=$(( left / 2 ))
  [ $left -ge 30 ] && probe stream_$c $left reduce_tail.py --rounds ${ROUNDS:-4} --cells "fp8:16:64:32,64,128" \
    --config "$cfg" | grep -E "^\||rc=|rror|not timed" | cut -c1-250
done
tar -czf $OUT/logs53d.tgz -C /tmp $(cd /tmp && ls tests_d.log stream_*.log 2>/dev/null)
