#!/usr/bin/env bash
# session 30 (branch s30, as s30a.sh), call B: benchmarks/probes/split_plan.py on the bf16 cells, uniform and ragged
# (seed 39179), then on fp8 H = 16 at page size 1 (the row gather; uniform: the 3.0 TB/s target at batch >= 64)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site timeout 330 python3 benchmarks/probes/split_plan.py \
  --cells bf16:16:8,bf16:16:32,bf16:16:64,bf16:16:128,bf16:128:8,bf16:128:32,bf16:128:64 --ragged-seed 39179 \
  --out $OUT/split_plan_bf16.json > $OUT/split_plan_bf16.log 2>&1
echo "probe rc=$?"; grep -E "^\| |Error" $OUT/split_plan_bf16.log | cut -c1-200
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site timeout 150 python3 benchmarks/probes/split_plan.py --page-size 1 --kinds uniform \
  --cells fp8:16:64,fp8:16:128 --out $OUT/split_plan_ps1.json > $OUT/split_plan_ps1.log 2>&1
echo "probe ps1 rc=$?"; grep -E "^\| |TB/s|Error" $OUT/split_plan_ps1.log | cut -c1-200
