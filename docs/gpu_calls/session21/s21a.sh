#!/usr/bin/env bash
# session 21, call A: the SM clock and power while graphtune's decode and FlashMLA's run (benchmarks/probes/clocks.py);
# the ping-pong kernels' timelines at bf16 H = 128 batch 32 / 64 with every program's segment-end marks kept
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,power.limit,power.max_limit,clocks.applications.graphics --format=csv
timeout 240 python3 benchmarks/probes/clocks.py --cells bf16:128:64,fp8:128:64,bf16:128:32,fp8:16:128,bf16:16:128 \
  --seconds 1.5 --out $OUT/clocks.json 2>&1 | tee $OUT/clocks.log | grep -v "^$"
timeout 60 python3 benchmarks/probes/timeline.py --cells bf16:128:32,bf16:128:64 --out $OUT/timeline.json 2>&1 \
  | tee $OUT/timeline.log | grep -v "^$"
