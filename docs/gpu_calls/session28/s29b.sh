#!/usr/bin/env bash
# session 26's s27a.sh as session 28 left it for session 29's second call (branch split-cost, partials16 and main merged): the public table
# (bench_mla_decode.py --vs-flashmla through benchmarks/probes/split_cost.py) three ways in one call, each in its own
# process and Triton cache: as main ships it (fp32 partials), with an fp8 cache's partials in fp16, and with the
# split computed in arithmetic for the uniform 4096-token requests (fp32 partials); then T8 two ways (below).
# Session 28: the shipped and fp16-partials tables also time ragged batches (--vs-ragged: lengths uniform in
# 1..8191, the same seed for both, FlashMLA beside); the arithmetic split is right for uniform lengths only
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
# the partials in the cache's units (session 28: the reduction applies the fp8 scale, so fp16 partials hold any
# scale) checked first: fp16 and fp32 partials at scale 2000 on each fp8 Hopper kernel of the tuned routes
timeout 100 python3 -m pytest -q -x tests/gpu/test_mla_decode_gpu.py -k "partials_in_cache_units" > $OUT/tests_partials.log 2>&1
echo "partials tests rc=$?"; tail -2 $OUT/tests_partials.log; grep -E "Error|assert|rel err" $OUT/tests_partials.log | head -5 | cut -c1-300
SEED=$(date +%s); SEED=$((SEED % 100000))
for mode in "shipped --partials fp32 --vs-ragged --ragged-seed $SEED" "partials16 --partials fp16 --vs-ragged --ragged-seed $SEED" "uniform --partials fp32 --uniform"; do
  set -- $mode; name=$1; shift
  TRITON_CACHE_DIR=/tmp/tc_$name timeout 130 python3 benchmarks/probes/split_cost.py "$@" --configs none \
    --vs-variant-filter NONE --out $OUT/table_$name.json > $OUT/table_$name.log 2>&1
  echo "$name rc=$?"; grep -E "^split|^partials|^\| |^Ragged|accuracy|Error" $OUT/table_$name.log | cut -c1-300
done
# T8 (fp8 H = 128) pinned beside the tuned path without the query's conversion (wrong scores: what converting it in
# every program costs at most; the hi-half-only step of session 26's form is s29a.sh's e4m3 columns now)
for mode in "noq8conv --no-q8conv"; do
  set -- $mode; name=$1; shift
  TRITON_CACHE_DIR=/tmp/tc_$name timeout 90 python3 benchmarks/probes/split_cost.py "$@" --configs none \
    --vs-formats fp8 --vs-batches-h16 "" --vs-variant-filter "'T8': 1" --out $OUT/table_$name.json > $OUT/table_$name.log 2>&1
  echo "$name rc=$?"; grep -E "^T8|^\| |accuracy|Error" $OUT/table_$name.log | cut -c1-300
done
