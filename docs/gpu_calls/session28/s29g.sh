#!/usr/bin/env bash
# session 28 (branch split-cost): the split on ragged batches, three more ways (fp8, H = 16 and 128, uniform and
# ragged, the tuned path beside FlashMLA; each table's accuracy rows check the split's coverage): each request's start
# priced at 2 and at 8 tiles, and the request-aligned split within 8 tiles
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
SEED=$(date +%s); SEED=$((SEED % 100000))   # (one set of ragged lengths for every table)
for mode in "seg2 --seg-cost 2" "seg8 --seg-cost 8" "slack8 --align-slack 8" "shipped"; do
  set -- $mode; name=$1; shift
  TRITON_CACHE_DIR=/tmp/tc_$name timeout 140 python3 benchmarks/probes/split_cost.py "$@" --configs none --vs-formats fp8 \
    --vs-variant-filter NONE --vs-ragged --ragged-seed $SEED --out $OUT/table_$name.json > $OUT/table_$name.log 2>&1
  echo "$name rc=$?"; grep -E "^split|^\| H|accuracy|Error" $OUT/table_$name.log | cut -c1-200
done
