#!/usr/bin/env bash
# session 31 (branch s31 at its commit), call C: the bf16 table, uniform and ragged (seed 39179), main as shipped
# (.carry/base_src, main at the commit given second), this branch, and this branch with the bf16 kernels' start price
# at 4 tiles (benchmarks/probes/seg_cost.py --bf16 4: session 29's BF16_SEG_COST lever for ragged bf16 batches, shipped
# at 0); then this branch's fp8 table with fp16 partials (benchmarks/probes/seg_cost.py --partials fp16: an fp8 cache's partial outputs in fp16, in the cache's
# units), each in its own process and Triton cache, FlashMLA timed in each.
set -o pipefail
C=${1:-unknown}
BASE=${2:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for m in main s31; do
  if [ $m = main ]; then src=$PWD/.carry/base_src; commit=$BASE; else src=$PWD/src; commit=$C; fi
  GIT_COMMIT=$commit PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_bf16_$m timeout 130 python3 \
    benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats bf16 --vs-variant-filter NONE \
    --vs-ragged --ragged-seed 39179 --out $OUT/table_bf16_$m.json > $OUT/table_bf16_$m.log 2>&1
  echo "bf16 $m rc=$?"; grep -E "^\| H|^\| [0-9]|accuracy|Error" $OUT/table_bf16_$m.log | cut -c1-160
done
GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_bf16_seg4 timeout 130 python3 \
  benchmarks/probes/seg_cost.py --bf16 4 --configs none --vs-formats bf16 --vs-variant-filter NONE --vs-ragged \
  --ragged-seed 39179 --out $OUT/table_bf16_seg4.json > $OUT/table_bf16_seg4.log 2>&1
echo "bf16 seg4 rc=$?"; grep -E "^\| H|^\| [0-9]|accuracy|Error" $OUT/table_bf16_seg4.log | cut -c1-160
GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_fp16 timeout 150 python3 \
  benchmarks/probes/seg_cost.py --partials fp16 --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-ragged \
  --ragged-seed 39179 --out $OUT/table_fp8_fp16.json > $OUT/table_fp8_fp16.log 2>&1
echo "fp8 fp16 partials rc=$?"; grep -E "^\| H|^\| [0-9]|accuracy|Error" $OUT/table_fp8_fp16.log | cut -c1-160
