#!/usr/bin/env bash
# session 33, call A (branch s31 checked out, prep.sh's .carry): the fp8 table, uniform and ragged (seed 39179), no
# e4m3 columns, for each way in its own process and Triton cache with FlashMLA timed in each: main; s30 (main at
# 49a0c27 + the fused split + partials in the cache's units + the plan, which the table does not use); lazy-price (s30
# + the priced pass only on ragged batches); s31 (lazy-price + e4m3-hi + main's later changes). Session 32's call A
# timed main and s31 alone: s31 3-6% faster at small uniform batches, 1-3% slower at ragged batches from 8. Each
# table took about a minute there (H100). Then benchmarks/probes/split_plan.py on the fp8 cells with s31's src (what
# the per-step plan saves a step of 8 layers; its GPU tests passed in session 32).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for way in main s30 lazy-price s31; do
  src=$PWD/.carry/src_$way
  GIT_COMMIT=$(cat $src/COMMIT) PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$way timeout 150 python3 \
    benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE \
    --vs-ragged --ragged-seed 39179 --out $OUT/table_fp8_$way.json > $OUT/table_fp8_$way.log 2>&1
  echo "$way rc=$?"
done
python3 benchmarks/compare_mla_tables.py $OUT/table_fp8_main.json $OUT/table_fp8_s30.json $OUT/table_fp8_lazy-price.json \
  $OUT/table_fp8_s31.json --labels main,s30,lazy,s31 --out $OUT/compare_fp8.json 2>&1 | tail -30
src=$PWD/.carry/src_s31
GIT_COMMIT=$(cat $src/COMMIT) PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_s31 timeout 290 python3 \
  benchmarks/probes/split_plan.py --cells fp8:16:32,fp8:16:64,fp8:128:32,fp8:128:64,fp8:16:8,fp8:16:128,fp8:128:8 \
  --ragged-seed 39179 --out $OUT/split_plan_fp8.json > $OUT/split_plan_fp8.log 2>&1
echo "probe rc=$?"; grep -E "^\| |Error" $OUT/split_plan_fp8.log | cut -c1-200
