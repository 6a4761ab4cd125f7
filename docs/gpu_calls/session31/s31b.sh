#!/usr/bin/env bash
# session 31 (branch s31 at its commit), call B: the fp8 table, uniform and ragged (seed 39179), with the e4m3
# columns: main as shipped (its src carried in .carry/base_src, main at the commit given second) and this branch
# (fp32 partials), each in its own process and Triton cache, FlashMLA timed in each. Run after s31a.sh passed. The
# ways to run are the third argument (default "main s31"): session 29's fp8 table with the e4m3 columns had a 320 s
# step limit, so two may not fit one 600 s call: pass "main", then "s31", in two calls if the first ran past 250 s.
set -o pipefail
C=${1:-unknown}
BASE=${2:-unknown}
WAYS=${3:-main s31}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for m in $WAYS; do
  if [ $m = main ]; then src=$PWD/.carry/base_src; commit=$BASE; else src=$PWD/src; commit=$C; fi
  GIT_COMMIT=$commit PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$m timeout 290 python3 \
    benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-e4m3 \
    --vs-ragged --ragged-seed 39179 --out $OUT/table_fp8_$m.json > $OUT/table_fp8_$m.log 2>&1
  echo "$m rc=$?"; grep -E "^\| H|^\| [0-9]|accuracy|Error" $OUT/table_fp8_$m.log | cut -c1-160
done
