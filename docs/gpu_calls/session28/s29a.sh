#!/usr/bin/env bash
# prepared in session 27 for its next first call (run in session 29, unchanged: the device was paused in session 28): query_precision="e4m3" (T8 with
# Q_LO = 0, the query's e4m3 hi half alone) on the GPU: its gated tests first (against reference.e4m3_query's
# reference, warm-up + capture + replay, the query given in e4m3), then the fp8 public table beside FlashMLA with the
# e4m3 columns (--vs-e4m3: from the bf16 query, and from the query given in e4m3 as FlashMLA gets it)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
GRAPHTUNE_GPU_NEW=1 timeout 230 python3 -m pytest -q tests/gpu/test_mla_decode_gpu.py -k "e4m3" > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests.log; grep -E "Error|assert|rel err|differs" $OUT/tests.log | head -8 | cut -c1-300
if ! grep -q " passed" $OUT/tests.log || grep -q "failed" $OUT/tests.log; then echo "tests did not pass: stopping"; exit 0; fi
timeout 320 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-variant-filter NONE --vs-formats fp8 \
  --vs-e4m3 --vs-ragged --out $OUT/table_e4m3.json > $OUT/table_e4m3.log 2>&1
echo "table rc=$?"; grep -E "^\| |^Ragged|accuracy|Error" $OUT/table_e4m3.log | cut -c1-300
