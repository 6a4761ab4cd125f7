#!/usr/bin/env bash
# session 14, call A: gated GPU tests (ring 2/SM, EARLY_S, >128 requests split fix, V2 fp8 H16 space), then timings
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
python3 -c "import torch,triton,numpy;print(torch.__version__,triton.__version__,numpy.__version__,torch.cuda.get_device_name())"
timeout 300 env GRAPHTUNE_GPU_NEW=1 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider \
  -k "ring or more_requests or (space_config and fp8-H16)" 2>&1 | tee $OUT/tests.log | grep -E "PASS|FAIL|ERROR|passed|failed|Error" | tail -40
timeout 200 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats bf16 --vs-batches-h128 "" \
  --vs-batches-h16 8,32,64,128 --vs-variant-filter "'PIPE': 2}|'RING': 1" --out $OUT/bf16_h16.json 2>&1 | tee $OUT/bf16_h16.log | tail -25
timeout 150 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-batches-h16 "" \
  --vs-batches-h128 32,64 --vs-variant-filter "'PP': 1|'PSMEM': 0, 'XCH': 1}" --out $OUT/fp8_h128.json 2>&1 | tee $OUT/fp8_h128.log | tail -20
