#!/usr/bin/env bash
# session 20, call K: timelines of the second fp8 tokens-on-M kernel at H = 16, batch 64 / 128 (the cells of the 0.8x
# target: 0.83 / 0.82 in run 4), with the split kernel and the decode at 1-4 K tokens for each cell's fixed cost
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
timeout 100 python3 benchmarks/probes/timeline.py --cells fp8:16:64,fp8:16:128 --lengths 1024,2048,4096 \
  --out $OUT/timeline.json 2>&1 | tee $OUT/timeline.log | grep -v "^$"
