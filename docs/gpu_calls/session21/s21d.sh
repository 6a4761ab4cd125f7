#!/usr/bin/env bash
# session 21, call D: the ping-pong kernels' GPU tests with whole-sector stores by default (call C's timed out after
# 10 passed); the fp8 H = 16 batch-8 pick taken apart per candidate (the tuner picked two buffers again in call C)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 260 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider --durations=8 \
  -k "heads_on_m_variants and PP1 or zero_length" 2>&1 | tee $OUT/tests_pp.log \
  | grep -E "FAIL|ERROR|passed|failed|assert|s call" | tail -14
timeout 150 python3 benchmarks/probes/pick_check.py --cells fp8:16:8 --out $OUT/pick_check.json 2>&1 \
  | tee $OUT/pick_check.log | grep -v "^$" | tail -30
