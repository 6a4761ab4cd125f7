#!/usr/bin/env bash
# session 48, call C (carry [".whl"]; run on the H200 call B left warm): the standing of the other cells on an H200,
# the public call tuned per bucket with a step's plan beside FlashMLA, uniform and ragged (seed 39179): bf16 H = 16 and
# 128, fp8 H = 16, then the row gather at page size 1 (fp8 H = 16, batch 32 / 64 / 128). LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-560}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
PP="/tmp/np:$PWD/src:/tmp/site"
PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout $(( LIMIT * 45 / 100 )) python3 benchmarks/bench_mla_decode.py \
  --vs-flashmla --configs none --vs-formats bf16 --vs-variant-filter NONE --vs-plan --vs-ragged --ragged-seed 39179 \
  --out $OUT/bf16.json > /tmp/bf16.log 2>&1
echo "bf16 rc=$? at ${SECONDS}s"; grep -E "^\| H=|^\| heads|accuracy" /tmp/bf16.log | cut -c1-600
left=$(( LIMIT - 70 - SECONDS ))
PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout $left python3 benchmarks/bench_mla_decode.py \
  --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-plan --vs-batches-h128 "" --vs-ragged \
  --ragged-seed 39179 --out $OUT/fp8_h16.json > /tmp/fp8_h16.log 2>&1
echo "fp8 H16 rc=$? at ${SECONDS}s"; grep -E "^\| H=|^\| heads|accuracy" /tmp/fp8_h16.log | cut -c1-600
left=$(( LIMIT - 5 - SECONDS ))
[ $left -ge 30 ] && probe gather_page1 $left gather_route.py --formats fp8 --page-sizes 1 --batches 32,64,128 --plan \
  | tail -12
tar -czf $OUT/logs48c.tgz -C /tmp $(cd /tmp && ls bf16.log fp8_h16.log gather_page1.log 2>/dev/null)
