#!/usr/bin/env bash
# session 19, call G: what code run once costs (benchmarks/probes/cold_code.py: first pass against second of an
# unrolled FFMA block), then the full table of the landed tree in one run
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
timeout 40 python3 benchmarks/probes/cold_code.py --sizes 256,1024,4096,8192 --out $OUT/cold_code.json 2>&1 | tee $OUT/cold_code.log
timeout 150 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none \
  --vs-variant-filter "'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1}" \
  --vs-batches-h16 1,8,32,64,128 --vs-batches-h128 1,8,32,64 --out $OUT/vs_flashmla.json 2>&1 \
  | tee $OUT/vs_flashmla.log | grep -E "^\| H=|rel err" | head -30
