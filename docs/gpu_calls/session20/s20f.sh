#!/usr/bin/env bash
# session 20, call F: code run once, under load: the cold-code probe's blocks timed again while a 4 GB copy runs on
# another stream (session 20 run 5: the fp8 query's conversion took as long with half its work); first try: --sizes
# 256,1024,8192, cut at 120 s compiling the 8,192-statement blocks (65,536 FFMAs)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
timeout 120 python3 benchmarks/probes/cold_code.py --sizes 256,1024 --load-mb 4096 --out $OUT/cold_code.json 2>&1 \
  | tee $OUT/cold_code.log
