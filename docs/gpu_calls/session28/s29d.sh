#!/usr/bin/env bash
# session 28 (branch split-cost): T8's query pair made once per call (Q8PRE = 1, query8.py, pinned) on uniform and
# ragged batches at fp8 H = 128, beside FlashMLA, the tuned path and the e4m3 columns: its GPU tests first (the
# pre-pass byte for byte against its definition, the pinned variant against the reference), then the table
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
GRAPHTUNE_GPU_NEW=1 timeout 140 python3 -m pytest -q tests/gpu/test_mla_decode_gpu.py -k "query_pair or Q8PRE1" > $OUT/tests_q8pre.log 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests_q8pre.log; grep -E "Error|assert|rel err|differs" $OUT/tests_q8pre.log | head -8 | cut -c1-300
if ! grep -q " passed" $OUT/tests_q8pre.log || grep -q "failed" $OUT/tests_q8pre.log; then echo "tests did not pass: stopping"; exit 0; fi
timeout 200 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-batches-h16 "" \
  --vs-variant-filter "'T8': 1" --vs-e4m3 --vs-ragged --out $OUT/table_t8.json > $OUT/table_t8.log 2>&1
echo "table rc=$?"; grep -E "^\| |^Ragged|accuracy|Error|H128/" $OUT/table_t8.log | cut -c1-400
# the request-aligned split wherever it fits within N tiles of the even split's largest part (fewer segments a
# program on ragged batches), fp8 H = 16 and 128, uniform and ragged, the tuned path only
for slack in 8 2; do
  TRITON_CACHE_DIR=/tmp/tc_slack$slack timeout 120 python3 benchmarks/probes/split_cost.py --align-slack $slack --configs none \
    --vs-formats fp8 --vs-variant-filter NONE --vs-ragged --out $OUT/table_slack$slack.json > $OUT/table_slack$slack.log 2>&1
  echo "slack $slack rc=$?"; grep -E "^split|^\| H|Error" $OUT/table_slack$slack.log | cut -c1-200
done
