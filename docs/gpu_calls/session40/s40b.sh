#!/usr/bin/env bash
# session 40, call B (main after RELOAD 2 / RF / SWAP were removed; carry [".whl"]; meant for an H200, where the
# issue's targets were set): (1) the fp8 (with the e4m3 columns) and bf16 tables beside FlashMLA with a step's plan,
# uniform and ragged (session 37's s38b.sh tables, not run since); (2) the row gather at page size 1 (fp8 H = 16,
# batch 32 / 64 / 128, with and without a plan: the >= 3.0 TB/s target from batch 64); (3) the row gather's pinned
# configs at page size 1, batch 64 / 128 (two / three / five buffers, RK64 / PT_EARLY), no plan: whether its space
# (the V2 space with GATHER on) misses a faster config. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-570}
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
for fmt in fp8 bf16; do
  extra=$([ $fmt = fp8 ] && echo --vs-e4m3)
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 190 python3 \
    benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats $fmt --vs-variant-filter NONE --vs-plan \
    $extra --vs-ragged --ragged-seed 39179 --out $OUT/${fmt}_main.json > /tmp/${fmt}_main.log 2>&1
  echo "$fmt rc=$? at ${SECONDS}s"; grep -E "^\| H=|accuracy" /tmp/${fmt}_main.log | cut -c1-400
done
left=$(( LIMIT - SECONDS )); [ $left -ge 60 ] && probe gather_page1 $(( left < 90 ? left : 90 )) gather_route.py \
  --formats fp8 --page-sizes 1 --batches 32,64,128 --plan
left=$(( LIMIT - 5 - SECONDS ))
if [ $left -ge 45 ]; then
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout $left python3 \
    benchmarks/bench_mla_decode.py --hopper-variants --hopper-heads 16 --hopper-kinds "tokens-on-M fp8" \
    --hopper-batches 64,128 --hopper-no-portable --hopper-page-size 1 --hopper-overlay GATHER=1 \
    --hopper-variant-filter "'PREFETCH': 1, 'FAST_MAX': 1}|'LOOK': 0, 'RK64': 1, 'PT_EARLY': 1}" \
    --out $OUT/gather_variants.json > /tmp/gather_variants.log 2>&1
  echo "gather_variants rc=$? at ${SECONDS}s"; grep -E "^heads|^check" /tmp/gather_variants.log | cut -c1-400
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls fp8_main.log bf16_main.log gather_page1.log gather_variants.log 2>/dev/null)
