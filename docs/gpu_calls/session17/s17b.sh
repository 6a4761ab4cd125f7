#!/usr/bin/env bash
# session 17, call B: ping-pong RELOAD=2 (bf16) checked, then timed beside RELOAD=1, the tuned path and FlashMLA
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
timeout 200 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider \
  -k "RELOAD2 or (space_config and bf16-H128)" 2>&1 | tee $OUT/tests.log | grep -E "PASS|FAIL|ERROR|passed|failed|Error|assert" | tail -30
timeout 300 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats bf16 --vs-batches-h16 "" \
  --vs-batches-h128 1,8,32,64 --vs-variant-filter "'PP': 1" \
  --out $OUT/bf16_h128.json 2>&1 | tee $OUT/bf16_h128.log | tail -30
