#!/usr/bin/env bash
# session 16, call B: QK8 (fp8 ping-pong kernel with fp8 scores) checked, then timed beside the shipped fp8 kernels,
# the bf16 ping-pong kernel and FlashMLA at H = 128
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 170 env GRAPHTUNE_GPU_NEW=1 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider -x \
  -k "heads_on_m_variants and fp8 and (QK8 or WG1_FIRST1)" 2>&1 | tee $OUT/tests.log | grep -E "PASS|FAIL|ERROR|passed|failed|Error|assert" | tail -20
F="'WG1_FIRST': 1}|'PSMEM': 0, 'XCH': 1}"
if grep -q "3 passed" $OUT/tests.log; then F="$F|'QK8': 1"; fi
echo "filter: $F"
timeout 260 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8,bf16 --vs-batches-h16 "" \
  --vs-batches-h128 1,8,32,64 --vs-variant-filter "$F" --out $OUT/h128.json 2>&1 | tee $OUT/h128.log | grep -v "^  mla_decode" | tail -40
