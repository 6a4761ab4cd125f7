#!/usr/bin/env bash
# session 30 (branch s30, as s30a.sh), call B: benchmarks/probes/split_plan.py on the bf16 cells, uniform and ragged
# (seed 39179), and the fp8 cells s30a.sh's step limit left out (none if it finished)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site timeout 400 python3 benchmarks/probes/split_plan.py \
  --cells bf16:16:8,bf16:16:32,bf16:16:64,bf16:16:128,bf16:128:8,bf16:128:32,bf16:128:64 --ragged-seed 39179 \
  --out $OUT/split_plan_bf16.json > $OUT/split_plan_bf16.log 2>&1
echo "probe rc=$?"; grep -E "^\| |Error" $OUT/split_plan_bf16.log | cut -c1-200
