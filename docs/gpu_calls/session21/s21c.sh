#!/usr/bin/env bash
# session 21, call C: the ping-pong kernels with whole-sector output stores by default (OUT32 = 1): their GPU tests
# (variants, requests of no tokens, tuned per bucket then captured), then the 18-cell table beside FlashMLA
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 200 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider \
  -k "heads_on_m_variants and PP1 or zero_length or tuned_per_bucket or hopper_capture or hopper_fp8_capture" 2>&1 \
  | tee $OUT/tests_pp.log | grep -E "FAIL|ERROR|passed|failed|assert" | tail -8
timeout 200 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none \
  --vs-variant-filter "'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1}" --vs-batches-h16 1,8,32,64,128 --vs-batches-h128 1,8,32,64 \
  --out $OUT/vs_flashmla.json 2>&1 | tee $OUT/vs_flashmla.log | sed -n '/^| H=/,$p' | head -40
