#!/usr/bin/env bash
# session 29 (branch partials-main: main with the fp8 partials in the cache's units): s29l.sh (the cache-units test at
# scale 2000, then the fp8 table with fp32 and with fp16 partials, uniform and ragged, seed 39179), then s29k.sh (the
# bf16 table with each request's start priced at N = 0 / 2 / 4 tiles, BF16_SEG_COST); each table in its own process
# and Triton cache, FlashMLA beside
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 120 python3 -m pytest -q tests/gpu/test_mla_decode_gpu.py -k "partials_in_cache_units" > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -2 $OUT/tests.log; grep -E "^FAILED|Error|assert|rel err" $OUT/tests.log | head -6 | cut -c1-300
if ! grep -q " passed" $OUT/tests.log || grep -q "failed" $OUT/tests.log; then echo "tests did not pass: fp16 tables skipped"; P="fp32"; else P="fp32 fp16"; fi
for p in $P; do
  TRITON_CACHE_DIR=/tmp/tc_$p timeout 150 python3 benchmarks/probes/seg_cost.py --partials $p --configs none --vs-formats fp8 \
    --vs-variant-filter NONE --vs-ragged --ragged-seed 39179 --out $OUT/table_fp8_$p.json > $OUT/table_fp8_$p.log 2>&1
  echo "$p rc=$?"; grep -E "^partials|^\| H|accuracy|Error" $OUT/table_fp8_$p.log | cut -c1-160
done
for n in 0 2 4; do
  TRITON_CACHE_DIR=/tmp/tc_seg$n timeout 90 python3 benchmarks/probes/seg_cost.py --bf16 $n --configs none --vs-formats bf16 \
    --vs-variant-filter NONE --vs-ragged --ragged-seed 39179 --out $OUT/table_bf16_seg$n.json > $OUT/table_bf16_seg$n.log 2>&1
  echo "seg $n rc=$?"; grep -E "^split: BF16|^\| H|Error" $OUT/table_bf16_seg$n.log | cut -c1-160
done
