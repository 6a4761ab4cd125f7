#!/usr/bin/env bash
# session 20, call H: the row gather at page size 1 (fp8, batch 64 / 128) on the tree whose tuner times the reduction as
# the decode launches it (session 19 run 1: 2.68 / 3.18 TB/s)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
timeout 80 python3 benchmarks/probes/gather_route.py --formats fp8 --page-sizes 1 --batches 64,128 \
  --out $OUT/gather_route.json 2>&1 | tee $OUT/gather_route.log | tail -8
