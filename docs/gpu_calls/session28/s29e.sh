#!/usr/bin/env bash
# session 28 (branch split-cost): XSEG, the second fp8 tokens-on-M kernel's tiles one stream across a program's
# segments (the next segment's first tiles copied under this one's last tiles and its end): its GPU tests, then fp8
# H = 16 beside FlashMLA on uniform and ragged batches, XSEG pinned with 2 and 3 buffers beside the same configs
# without it and the tuned path
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 150 python3 -m pytest -q tests/gpu/test_mla_decode_gpu.py -k "xseg" > $OUT/tests_xseg.log 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests_xseg.log; grep -E "Error|assert|rel err|differs" $OUT/tests_xseg.log | head -8 | cut -c1-300
if ! grep -q " passed" $OUT/tests_xseg.log || grep -q "failed" $OUT/tests_xseg.log; then echo "tests did not pass: stopping"; exit 0; fi
timeout 240 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-batches-h128 "" \
  --vs-variant-filter "'LOOK': 0, 'RK64': 1, 'PT_EARLY': 1" --vs-ragged --out $OUT/table_xseg.json > $OUT/table_xseg.log 2>&1
echo "table rc=$?"; grep -E "^\| |^Ragged|accuracy|Error|H16/" $OUT/table_xseg.log | cut -c1-400
