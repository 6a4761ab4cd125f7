#!/usr/bin/env bash
# session 32, call B (branch s31 checked out): the stack's fp8 table (s31b.sh s31), then the bf16 tables of main
# and the stack (the first half of s31c.sh), each in its own process and Triton cache, FlashMLA timed in each.
C=${1:-unknown}
BASE=${2:-unknown}
bash .carry/s31b.sh $C $BASE s31
export PYTHONUNBUFFERED=1
for m in main s31; do
  if [ $m = main ]; then src=$PWD/.carry/base_src; commit=$BASE; else src=$PWD/src; commit=$C; fi
  GIT_COMMIT=$commit PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_bf16_$m timeout 130 python3 \
    benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats bf16 --vs-variant-filter NONE \
    --vs-ragged --ragged-seed 39179 --out $OUT/table_bf16_$m.json > $OUT/table_bf16_$m.log 2>&1
  echo "bf16 $m rc=$?"; grep -E "^\| H|^\| [0-9]|accuracy|Error" $OUT/table_bf16_$m.log | cut -c1-160
done
