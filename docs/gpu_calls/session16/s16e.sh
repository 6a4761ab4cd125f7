#!/usr/bin/env bash
# session 16, call E: the reduction as a programmatic dependent, bracketed (plain, PDL, plain) in the H = 16 cells and
# bf16 H = 128 at 1 / 8
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site PYTHONUNBUFFERED=1 GIT_COMMIT=$C
timeout 300 python3 benchmarks/probes/reduce_sweep.py --pdl --shapes 4x2x512x4 --formats bf16,fp8 --h16 1,8,32,64,128 \
  --h128 1,8 --out $OUT/pdl2.json 2>&1 | tee $OUT/pdl2.log | grep -v "^  "
