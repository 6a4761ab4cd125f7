#!/usr/bin/env bash
# session 54, call A (prepared in session 53; carry [".whl"]; best on an H200, where issue 14's targets were measured:
# say which card ran it). What session 53's changes give on the targets: (1) the GPU tests of the plan's slots and of
# the streamed reduction (their shared helper's first GPU run); (2) the public call beside FlashMLA, fp8 H = 16 at batch
# 1 / 8 / 32 / 64 / 128 with a step's plan, uniform and ragged (the targets table's fp8 rows; session 48 call C's
# command); (3) the row gather at page size 1 with a plan (the 3.0 TB/s target at batch 64); (4) reduce_tail.py, the
# reduction's ways tuned per way, with the tuned picks.
set -o pipefail
LIMIT=${LIMIT:-540}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
gpu_tests tests_a ${TESTS_CAP:-120} tests/gpu/test_mla_decode_gpu.py "streamed or plan_slots"
GIT_COMMIT=$GIT_COMMIT PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main timeout ${VS_CAP:-200} \
  python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-variant-filter NONE --vs-plan \
  --vs-formats fp8 --vs-batches-h128 "" --vs-ragged --ragged-seed 39179 --out $OUT/vs_fp8.json > /tmp/vs_fp8.log 2>&1
echo "vs_fp8 rc=$? at ${SECONDS}s"; grep -E "^\| H=|^\| heads" /tmp/vs_fp8.log | cut -c1-300
probe gather_a $(( (LIMIT - 10 - SECONDS) / 2 )) gather_route.py --formats fp8 --page-sizes 1 --batches 32,64,128 --plan \
  | tail -8
probe stream_a $(( LIMIT - 10 - SECONDS )) reduce_tail.py --rounds ${ROUNDS:-4} --ragged \
  --cells "fp8:16:64:32,64,128 fp8:16:1:64" | grep -E "^\||rc=|rror|not timed" | cut -c1-250
tar -czf $OUT/logs54a.tgz -C /tmp $(cd /tmp && ls tests_a.log vs_fp8.log gather_a.log stream_a.log 2>/dev/null)
