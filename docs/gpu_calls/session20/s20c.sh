#!/usr/bin/env bash
# session 20, call C: MERGE (the second fp8 tokens-on-M kernel merging a request's partials itself): its GPU tests
# (GRAPHTUNE_GPU_NEW=1), then fp8 H = 16 at batch 1-128 beside FlashMLA: the space's RK64 / PT_EARLY configs with and
# without MERGE, pinned, and the tuned path (the timer's copies now counted by touched bytes) with its picks
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
GRAPHTUNE_GPU_NEW=1 timeout 240 python3 -m pytest tests/gpu/test_mla_hopper_tok_gpu.py tests/gpu/test_mla_decode_gpu.py \
  -q -rA -p no:cacheprovider -k "merge1" 2>&1 | tee $OUT/tests_merge.log | grep -E "FAIL|ERROR|passed|failed|assert" | tail -12
timeout 240 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 \
  --vs-variant-filter "'LOOK': 0, 'RK64': 1, 'PT_EARLY': 1" \
  --vs-batches-h16 1,8,32,64,128 --vs-batches-h128 "" --out $OUT/vs_merge.json 2>&1 | tee $OUT/vs_merge.log \
  | grep -E "^\| H=|rel err|MERGE|Error|^  mla|^      " | cut -c1-250 | head -60
