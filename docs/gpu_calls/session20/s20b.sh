#!/usr/bin/env bash
# session 20, call B: the tuner's per-candidate timings beside the decode taken apart (benchmarks/probes/pick_check.py):
# split alone, + the reduction as a plain launch, the same over the tuner's copies, the decode as shipped; fp8 H = 16
# at batch 8 / 32 / 64 / 128, bf16 and fp8 H = 128 at 32 / 8
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
timeout 400 python3 benchmarks/probes/pick_check.py --cells fp8:16:8,fp8:16:32,fp8:16:64,fp8:16:128,bf16:128:32,fp8:128:8 \
  --out $OUT/pick_check.json 2>&1 | tee $OUT/pick_check.log | grep -v "^$"
