#!/usr/bin/env bash
# session 19, call E: the tree with the fp8 query conversions as loops (ab1b062): fp8 GPU tests, the full table
# against FlashMLA (page size 64, the public call as shipped), fp8 H = 128 against the tree of call A (34721ae)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C
NEW=/tmp/np:$PWD/src:/tmp/site
OLD=/tmp/np:$PWD/.carry/old/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
PYTHONPATH=$NEW timeout 80 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none \
  --vs-variant-filter "'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1}" \
  --vs-batches-h16 1,8,32,64,128 --vs-batches-h128 1,8,32,64 --out $OUT/vs_flashmla.json 2>&1 \
  | tee $OUT/vs_flashmla.log | grep -E "^\| H=|rel err" | head -30
PYTHONPATH=$OLD timeout 60 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 \
  --vs-variant-filter "'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1}" \
  --vs-batches-h16 "" --vs-batches-h128 1,8,32,64 --out $OUT/vs_old.json 2>&1 \
  | tee $OUT/vs_old.log | grep -E "^\| H=|rel err" | sed "s/^/old /"
PYTHONPATH=$NEW timeout 170 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider --durations=5 \
  -k "(heads_on_m and fp8-PP1) or (heads_on_m and fp8-WOVL1 and PSMEM1 and XCH1 and LSUM0) or hopper_fp8 or (tuned_per_bucket and fp8) or (more_requests and fp8) or (zero_length and fp8)" 2>&1 \
  | tee $OUT/tests_fp8.log | grep -E "FAIL|ERROR|passed|failed|assert|s call" | tail -12
