#!/usr/bin/env bash
# session 19, call A: the MLA split kernels tuned with their reduction timed in (graphtune.autotune(followed_by=)):
# GPU tests (fp8 ping-pong at 132 / 7 / 1 SMs, tuned per bucket then captured, capture + replay), the full table
# against FlashMLA (page size 64, the public call as shipped), the row gather at page size 1 (fp8, batch 64 / 128)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
timeout 170 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider --durations=8 \
  -k "fp8-PP1 or tuned_per_bucket or capture_replay" 2>&1 | tee $OUT/tests.log \
  | grep -E "FAIL|ERROR|passed|failed|assert|s call" | tail -16
timeout 300 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none \
  --vs-variant-filter "'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1}" \
  --vs-batches-h16 1,8,32,64,128 --vs-batches-h128 1,8,32,64 --out $OUT/vs_flashmla.json 2>&1 \
  | tee $OUT/vs_flashmla.log | grep -E "^\| H=|rel err|pick" | head -40
timeout 50 python3 benchmarks/probes/gather_route.py --formats fp8 --page-sizes 1 --batches 64,128 \
  --out $OUT/gather_route.json 2>&1 | tee $OUT/gather_route.log | tail -5
