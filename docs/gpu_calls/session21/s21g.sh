#!/usr/bin/env bash
# session 21, call G: the fp8 ping-pong kernel with its widening left out (NOWIDEN = 1, a diagnostic: wrong results)
# against the shipped config, timelines at H = 128 batch 8 / 64: what the widening costs the pair of tiles
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for o in "" "NOWIDEN=1"; do
  timeout 100 python3 benchmarks/probes/timeline.py --cells fp8:128:8,fp8:128:64 ${o:+--overlay $o} \
    --out $OUT/timeline${o:+_nowiden}.json 2>&1 | tee $OUT/timeline${o:+_nowiden}.log | grep -v "^$" | cut -c1-1200
done
