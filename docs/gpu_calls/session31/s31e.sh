#!/usr/bin/env bash
# session 31 (branch e4m3-hi at its commit: query_precision="e4m3" with the pre-pass making the hi halves alone and
# T8 copying 4 query boxes + the rope box instead of 8 + 1): its GPU tests (the pre-pass's hi bytes against the
# reference; T8 with the pair's lo columns poisoned with e4m3 NaN, finite and within 2e-3 of the e4m3 query's
# reference; the e4m3 precision's public-call and capture tests), then the fp8 H = 128 table with the e4m3 column,
# main as shipped (.carry/base_src, main at the commit given second) and this branch, each in its own process and
# Triton cache. Lands if the tests pass and the e4m3 column is not slower beyond FlashMLA's drift
# (benchmarks/compare_mla_tables.py main.json hi.json --labels main,hi).
set -o pipefail
C=${1:-unknown}
BASE=${2:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site timeout 200 python3 -m pytest -q tests/gpu/test_mla_decode_gpu.py \
  -k "query_pair_is_its or never_reads_the_lo or query_precision_e4m3_matches or query_precision_e4m3_tuned" \
  > $OUT/tests.log 2>&1
echo "tests: $(tail -1 $OUT/tests.log)"; grep -E "^FAILED|Error|rel err" $OUT/tests.log | head -4 | cut -c1-300
if ! tail -1 $OUT/tests.log | grep -q " passed" || tail -1 $OUT/tests.log | grep -qE "failed|error"; then
  echo "tests did not pass: not timed"; exit 1
fi
for m in main hi; do
  src=$PWD/src; [ $m = main ] && src=$PWD/.carry/base_src
  GIT_COMMIT=$([ $m = main ] && echo $BASE || echo $C) PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$m \
    timeout 150 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 \
    --vs-variant-filter NONE --vs-e4m3 --vs-batches-h16 "" --vs-batches-h128 8,32,64 \
    --out $OUT/table_e4m3_$m.json > $OUT/table_e4m3_$m.log 2>&1
  echo "$m rc=$?"; grep -E "^\| H|^\| 128|accuracy|Error" $OUT/table_e4m3_$m.log | cut -c1-160
done
