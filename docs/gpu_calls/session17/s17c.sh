#!/usr/bin/env bash
# session 17, call C: the decode with fp16 partials against fp32 (bracketed), all 18 FlashMLA cells, FlashMLA beside
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
timeout 500 python3 benchmarks/probes/reduce_sweep.py --partials --shapes 4x2x512x4 --out $OUT/partials.json 2>&1 \
  | tee $OUT/partials.log | grep -v "^  " | tail -45
