#!/usr/bin/env bash
# session 18, call G: the fp8 ping-pong variants' GPU tests on the shipped tree (run 5's selection stopped before them)
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/np:$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 45 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider -k "fp8-PP1" 2>&1 \
  | tee $OUT/tests_fp8_pp.log | grep -E "FAIL|ERROR|PASS|passed|failed|assert" | tail -8
