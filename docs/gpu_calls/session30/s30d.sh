#!/usr/bin/env bash
# session 30 (branch s30; session 29 s29o.sh as it was, not run then): the bf16 table, uniform and ragged (seed 39179), three ways,
# each in its own process and Triton cache: main as shipped (.carry/base_src, main at the commit given second), this branch (the fused split),
# this branch with each request's start priced at 4 tiles in the bf16 kernels (BF16_SEG_COST)
set -o pipefail
C=${1:-unknown}
BASE=${2:-unknown}    # main's commit whose src .carry/base_src holds (git archive BASE src | tar -x -C .carry/base_src --strip-components=1)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for m in main seg0 seg4; do
  if [ $m = main ]; then
    GIT_COMMIT=$BASE PYTHONPATH=/tmp/np:$PWD/.carry/base_src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_b$m timeout 120 python3 \
      benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats bf16 --vs-variant-filter NONE --vs-ragged \
      --ragged-seed 39179 --out $OUT/table_bf16_$m.json > $OUT/table_bf16_$m.log 2>&1
  else
    PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_b$m timeout 120 python3 benchmarks/probes/seg_cost.py \
      --bf16 ${m#seg} --configs none --vs-formats bf16 --vs-variant-filter NONE --vs-ragged --ragged-seed 39179 \
      --out $OUT/table_bf16_$m.json > $OUT/table_bf16_$m.log 2>&1
  fi
  echo "$m rc=$?"; grep -E "^\| H|accuracy|Error" $OUT/table_bf16_$m.log | cut -c1-120
done
