#!/usr/bin/env bash
# session 19, call C: the ping-pong kernels' prologue marks (timeline probe, first segment: segment found, copies
# issued, fp8 rope rows requested, query landed, fp8 query converted) at H = 128, fp8 and bf16; the fp8 heads-on-M
# kernels' GPU tests with the query copied by TMA
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
timeout 60 python3 benchmarks/probes/timeline.py --cells fp8:128:8,bf16:128:8,fp8:128:64 \
  --out $OUT/timeline.json 2>&1 | tee $OUT/timeline.log | grep -v "^$"
timeout 150 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider --durations=5 \
  -k "(heads_on_m and fp8-PP1 and WG1_FIRST1) or (heads_on_m and fp8-WOVL1 and PSMEM1 and XCH1 and LSUM0) or hopper_fp8 or (tuned_per_bucket and fp8) or (more_requests and fp8) or (zero_length and fp8)" 2>&1 \
  | tee $OUT/tests_fp8.log | grep -E "FAIL|ERROR|passed|failed|assert|s call" | tail -12
