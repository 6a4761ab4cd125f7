#!/usr/bin/env bash
# session 20, call D: the tuner with the reduction launched as the decode launches it (pick_check at fp8 H = 16, batch 8
# and 32), the full 18-cell table against FlashMLA (the public call as shipped), bf16 H = 128 timelines at 32 / 64
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
timeout 120 python3 benchmarks/probes/pick_check.py --cells fp8:16:8,fp8:16:32 --out $OUT/pick_check.json 2>&1 \
  | tee $OUT/pick_check.log | grep -v "^$"
timeout 200 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none \
  --vs-variant-filter "'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1}" \
  --vs-batches-h16 1,8,32,64,128 --vs-batches-h128 1,8,32,64 --out $OUT/vs_flashmla.json 2>&1 \
  | tee $OUT/vs_flashmla.log | grep -E "^\| H=|rel err" | head -30
timeout 60 python3 benchmarks/probes/timeline.py --cells bf16:128:32,bf16:128:64 --out $OUT/timeline.json 2>&1 \
  | tee $OUT/timeline.log | grep -v "^$"
