#!/usr/bin/env bash
# session 20, call I: INDEP (WG1's softmax from its own running max in the ping-pong kernels): its GPU tests
# (GRAPHTUNE_GPU_NEW=1), then checked and timed against the shipped configs at H = 128 batch 1-64, bf16 and fp8,
# beside FlashMLA
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
GRAPHTUNE_GPU_NEW=1 timeout 120 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider \
  -k "INDEP1" 2>&1 | tee $OUT/tests_indep.log | grep -E "FAIL|ERROR|passed|failed|assert" | tail -8
timeout 170 python3 benchmarks/bench_mla_decode.py --hopper-variants --hopper-heads 128 \
  --hopper-kinds "heads-on-M,heads-on-M fp8" --hopper-variant-filter "WG1_FIRST': 1" --hopper-no-portable \
  --out $OUT/pp_indep.json 2>&1 | tee $OUT/pp_indep.log | grep -E "^check|^heads|Error" | cut -c1-330
