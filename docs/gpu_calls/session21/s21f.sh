#!/usr/bin/env bash
# session 21, call F: the rest of the ping-pong kernels' GPU tests with whole-sector outputs by default (the fp8 INDEP
# variants, requests of no tokens at H = 128)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 380 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider --durations=10 \
  -k "heads_on_m_variants and fp8 and INDEP1 or zero_length and H128" 2>&1 | tee $OUT/tests_pp2.log \
  | grep -E "FAIL|ERROR|passed|failed|assert|s call" | tail -16
