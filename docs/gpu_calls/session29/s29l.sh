#!/usr/bin/env bash
# session 29 (branch partials-main: main with the partials in the cache's units, from split-cost): the fp8 Hopper
# kernels' partials without the per-tensor scale (the reduction applies it) checked first at scale 2000 with fp16 and
# fp32 partials; then the fp8 public table, uniform and ragged (seed 39179), with fp32 partials (main's dtype) and
# with fp16 ones, each in its own process and Triton cache, FlashMLA beside
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 150 python3 -m pytest -q tests/gpu/test_mla_decode_gpu.py -k "partials_in_cache_units" > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -2 $OUT/tests.log; grep -E "^FAILED|Error|assert|rel err" $OUT/tests.log | head -6 | cut -c1-300
if ! grep -q " passed" $OUT/tests.log || grep -q "failed" $OUT/tests.log; then echo "tests did not pass: stopping"; exit 0; fi
for p in fp32 fp16; do
  TRITON_CACHE_DIR=/tmp/tc_$p timeout 190 python3 benchmarks/probes/seg_cost.py --partials $p --configs none --vs-formats fp8 \
    --vs-variant-filter NONE --vs-ragged --ragged-seed 39179 --out $OUT/table_fp8_$p.json > $OUT/table_fp8_$p.log 2>&1
  echo "$p rc=$?"; grep -E "^partials|^\| H|accuracy|Error" $OUT/table_fp8_$p.log | cut -c1-200
done
