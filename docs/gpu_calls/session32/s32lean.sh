#!/usr/bin/env bash
# session 32, one call when little device time is left (branch s31 checked out): main's and the stack's fp8 tables,
# uniform and ragged (seed 39179), without the e4m3 columns (150 s each, each in its own process and Triton cache,
# FlashMLA timed in each); then the stack's GPU tests (s31a.sh without its probe) with, beside them, the inspector's
# and the isolation worker's GPU tests.
C=${1:-unknown}
BASE=${2:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for m in main s31; do
  if [ $m = main ]; then src=$PWD/.carry/base_src; commit=$BASE; else src=$PWD/src; commit=$C; fi
  GIT_COMMIT=$commit PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$m timeout 150 python3 \
    benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE \
    --vs-ragged --ragged-seed 39179 --out $OUT/table_fp8_$m.json > $OUT/table_fp8_$m.log 2>&1
  echo "$m rc=$?"; grep -E "^\| H|^\| [0-9]|accuracy|Error" $OUT/table_fp8_$m.log | cut -c1-160
done
{ PYTHONPATH=/tmp/np:$PWD/src TRITON_CACHE_DIR=/tmp/tc_ri timeout 250 python3 -m pytest -q -rs \
    tests/gpu/test_resources_gpu.py tests/gpu/test_isolate_gpu.py > $OUT/resources_isolate.log 2>&1; } &
PROBE=0 bash .carry/s31a.sh $C
wait
echo "resources+isolate: $(tail -1 $OUT/resources_isolate.log)"; grep -E "^FAILED|^SKIPPED|assert" $OUT/resources_isolate.log | head -8 | cut -c1-300
