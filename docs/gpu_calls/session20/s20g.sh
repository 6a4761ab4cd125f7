#!/usr/bin/env bash
# session 20, call G: the GPU tests that tune on the device (the timer's rotation counted by touched bytes, the L2
# flushed where memory allows too few sets; the Hopper kernels' follow-up launched as the decode launches it)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
timeout 340 python3 -m pytest tests/gpu/test_timing_gpu.py tests/gpu/test_capture_gpu.py tests/gpu/test_gluon_gpu.py \
  tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider --durations=5 -k "not test_mla_decode_gpu or tuned or capture" 2>&1 \
  | tee $OUT/tests.log | grep -E "FAIL|ERROR|passed|failed|assert|s call" | tail -14
