#!/usr/bin/env bash
# session 46, call E (carry [".whl"]): the public fp8 H = 128 table beside FlashMLA again, with a column in FlashMLA's
# own terms (the query given in e4m3, as the benchmark casts FlashMLA's outside its timed call; P in e4m3; a step's
# plan, as FlashMLA's metadata is made outside its timed call). LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-300}
source docs/gpu_calls/lib.sh
gpu_prelude
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main timeout $LIMIT \
  python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE \
  --vs-plan --vs-e4m3 --vs-batches-h16 "" --vs-ragged --ragged-seed 39179 --out $OUT/fp8_p8q.json > /tmp/fp8_p8q.log 2>&1
echo "fp8 rc=$? at ${SECONDS}s"; grep -E "^\| H=|^\| heads|accuracy" /tmp/fp8_p8q.log | cut -c1-900
cp /tmp/fp8_p8q.log $OUT/
