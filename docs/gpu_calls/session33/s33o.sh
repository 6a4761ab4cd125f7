#!/usr/bin/env bash
# session 33, call O, not run (the device time ran out; branch split-uniform checked out; carry [".carry", ".whl"], .carry/src_main = main's
# src): call N found the fused split faster in the tokens-on-M and first heads-on-M kernels and 1.5-3.9% slower in the
# fp8 ping-pong kernels at H = 128, batch 8 / 32, and the bf16 start price 4 faster on ragged batches but slower on
# uniform ones (the priced pass's sums). The candidate: the fused pass except in the ping-pong kernels (FUSED = 0),
# the even split by division on uniform batches (no second pass), BF16_SEG_COST 4. fp8 and bf16 tables, uniform and
# ragged (seed 39179), main and the candidate each in its own process and Triton cache (the candidate reads the picks main tuned, as in call N), FlashMLA in each;
# (the split's GPU tests left out: the device time left; each table checks every cell against the reference).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
C=${GIT_COMMIT:-unknown}
table() {  # way src commit format
  local way=$1 src=$2 commit=$3 fmt=$4
  GIT_COMMIT=$commit PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$way \
    timeout 75 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats $fmt \
    --vs-variant-filter NONE --vs-ragged --ragged-seed 39179 --out $OUT/${fmt}_$way.json > /tmp/${fmt}_$way.log 2>&1
  echo "${fmt}_$way rc=$?"; grep -E "Error|error" /tmp/${fmt}_$way.log | head -3 | cut -c1-200
}
M=$PWD/.carry/src_main; MC=$(cat $M/COMMIT)
table main $M $MC fp8
table cand $PWD/src $C fp8
table main $M $MC bf16
table cand $PWD/src $C bf16
for f in fp8 bf16; do
  python3 benchmarks/compare_mla_tables.py $OUT/${f}_main.json $OUT/${f}_cand.json --labels main,cand \
    --out $OUT/compare_$f.json 2>&1 | tail -22
done
grep -h "accuracy" /tmp/*_cand.log | cut -c1-200
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
