#!/usr/bin/env bash
# session 29 (main): the bf16 kernels' split with each request's start priced at N tiles (BF16_SEG_COST, shipped 0)
# on the bf16 public table, uniform and ragged (seed 39179, as s29j.sh), N = 0 / 2 / 4 each in its own process and
# Triton cache
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site COLUMNS=200
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for n in 0 2 4; do
  TRITON_CACHE_DIR=/tmp/tc_seg$n timeout 110 python3 benchmarks/probes/seg_cost.py --bf16 $n --configs none --vs-formats bf16 \
    --vs-variant-filter NONE --vs-ragged --ragged-seed 39179 --out $OUT/table_bf16_seg$n.json > $OUT/table_bf16_seg$n.log 2>&1
  echo "seg $n rc=$?"; grep -E "^split|^\| H|accuracy|Error" $OUT/table_bf16_seg$n.log | cut -c1-200
done
