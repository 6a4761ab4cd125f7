#!/usr/bin/env bash
# session 18, call A: timelines of the second fp8 tokens-on-M kernel and the ping-pong kernels from in-kernel clock
# stamps (benchmarks/probes/timeline.py), with split / decode times at four request lengths; the first vs the
# second fp8 tokens-on-M kernel at batch 1-8 (TOK_FP8_V2_MIN_BATCH)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
timeout 240 python3 benchmarks/probes/timeline.py --cells fp8:16:8,fp8:16:32,fp8:16:128,bf16:128:8,bf16:128:64,fp8:128:64 \
  --lengths 1024,2048,4096 --out $OUT/timeline.json 2>&1 | tee $OUT/timeline.log
exit 0   # (run 2: the timeline again after its fix; run 1 went on to the table below)
timeout 150 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 \
  --vs-variant-filter "'V2': 1, 'NUM_BUF': 2, 'PREFETCH': 1, 'FAST_MAX': 1}" \
  --vs-batches-h16 1,2,4,8 --vs-batches-h128 "" --out $OUT/v2_small.json 2>&1 \
  | tee $OUT/v2_small.log | grep -E "^\| H=|rel err|^\|" | head -30
