#!/usr/bin/env bash
# session 43, call D (main after BOX, BOXP and NX were removed: the shipped kernels are session 42's; carry [".whl"];
# an H100 or an H200, say which): the standing in one process per format, beside FlashMLA with a step's plan, uniform
# and ragged: (1) fp8 (with the e4m3 columns) and bf16 tables (session 40's s40b.sh tables); (2) the row gather at
# page size 1 (fp8 H = 16, batch 32 / 64 / 128, with and without a plan). LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-540}
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
for fmt in fp8 bf16; do
  extra=$([ $fmt = fp8 ] && echo --vs-e4m3)
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 210 python3 \
    benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats $fmt --vs-variant-filter NONE --vs-plan \
    $extra --vs-ragged --ragged-seed 39179 --out $OUT/${fmt}_main.json > /tmp/${fmt}_main.log 2>&1
  echo "$fmt rc=$? at ${SECONDS}s"; grep -E "^\| H=|accuracy" /tmp/${fmt}_main.log | cut -c1-400
done
left=$(( LIMIT - SECONDS )); [ $left -ge 60 ] && probe gather_page1 $(( left < 100 ? left : 100 )) gather_route.py \
  --formats fp8 --page-sizes 1 --batches 32,64,128 --plan
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls fp8_main.log bf16_main.log gather_page1.log 2>/dev/null)
