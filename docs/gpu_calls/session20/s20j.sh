#!/usr/bin/env bash
# session 20, call J: fp8 H = 128 through the public call with INDEP in the ping-pong kernel's per-bucket space
# (batch 8 / 32 / 64; 1 runs the widened-score kernel), FlashMLA in the same run, the tuner's picks printed
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
timeout 150 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 \
  --vs-variant-filter "'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1}" --vs-batches-h16 "" --vs-batches-h128 8,32,64 \
  --out $OUT/vs_fp8_h128.json 2>&1 | tee $OUT/vs_fp8_h128.log | grep -E "^\| H=|rel err|^  mla|^      " | cut -c1-200 | head -30
