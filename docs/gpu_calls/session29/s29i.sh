#!/usr/bin/env bash
# session 29 (main): T8 given a bf16 query makes its pair in a pre-pass on every launch (query8); its GPU tests first
# (the pair byte for byte, T8's variants against the reference, the fp8 class tuned then captured and replayed, the
# e4m3 query's), then the fp8 public table as main ships it, uniform and ragged (seed 39179), FlashMLA beside
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
GRAPHTUNE_GPU_NEW=1 timeout 220 python3 -m pytest -q tests/gpu/test_mla_decode_gpu.py \
  -k "query_pair or T8 or hopper_fp8_capture or (tuned_per_bucket and fp8) or e4m3" > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests.log; grep -E "^FAILED|Error|assert|rel err|differs" $OUT/tests.log | head -8 | cut -c1-300
if ! grep -q " passed" $OUT/tests.log || grep -q "failed" $OUT/tests.log; then echo "tests did not pass: stopping"; exit 0; fi
timeout 320 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-variant-filter NONE --vs-formats fp8 \
  --vs-e4m3 --vs-ragged --ragged-seed 39179 --out $OUT/table_fp8.json > $OUT/table_fp8.log 2>&1
echo "fp8 rc=$?"; grep -E "^\| |^Ragged|accuracy|Error" $OUT/table_fp8.log | cut -c1-300
