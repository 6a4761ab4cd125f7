#!/usr/bin/env bash
# session 17, call A: the head-split fp8 kernel (HS) checked and timed beside the ping-pong fp8 kernel, the tuned path
# and FlashMLA (fp8, H = 128); the row-gather route test restructured last session
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
python3 -c "import torch,triton,numpy;print(torch.__version__,triton.__version__,numpy.__version__,torch.cuda.get_device_name())"
timeout 240 env GRAPHTUNE_GPU_NEW=1 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider -x \
  -k "HS" 2>&1 | tee $OUT/tests.log | grep -E "PASS|FAIL|ERROR|passed|failed|Error|assert" | tail -30
timeout 200 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-batches-h16 "" \
  --vs-batches-h128 1,8,32,64 --vs-variant-filter "'HS': 1|'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1" \
  --out $OUT/fp8_h128.json 2>&1 | tee $OUT/fp8_h128.log | tail -30
timeout 100 python3 -m pytest tests/gpu/test_mla_hopper_tok_gpu.py -q -rA -p no:cacheprovider -k "pages_below" 2>&1 \
  | tee $OUT/gather_test.log | grep -E "PASS|FAIL|ERROR|passed|failed" | tail -8
