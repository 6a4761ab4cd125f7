#!/usr/bin/env bash
# session 29 (main): the bf16 public table as main ships it, uniform and ragged (seed 39179), FlashMLA beside; then the
# per-bucket A/B of the fp8 H = 128 class at batch 8 and 16 (the second kernel's batches: whether T8 with its pair
# made by the pre-pass wins there now, which would move T8_MIN_BATCH)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site COLUMNS=200
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 300 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-variant-filter NONE --vs-formats bf16 \
  --vs-ragged --ragged-seed 39179 --out $OUT/table_bf16.json > $OUT/table_bf16.log 2>&1
echo "bf16 rc=$?"; grep -E "^\| |^Ragged|accuracy|Error" $OUT/table_bf16.log | cut -c1-300
timeout 240 python3 -m graphtune ab mla_decode_hopper_h128 --sizes 8,16 --out $OUT/ab-h128 > $OUT/ab_h128.log 2>&1
echo "ab rc=$?"; tail -12 $OUT/ab_h128.log
