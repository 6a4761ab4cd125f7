#!/usr/bin/env bash
# session 18, call B: the second fp8 tokens-on-M kernel with the query loaded before the first tiles' copies and
# serving from batch 1: its GPU tests, its timeline, and the ping-pong kernels' segment ends (timeline); the decode as shipped against the tree before (commit
# fc9d6d8, .carry/old/src), new / old / new, FlashMLA beside
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C
NEW=/tmp/np:$PWD/src:/tmp/site
OLD=/tmp/np:$PWD/.carry/old/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
PYTHONPATH=$NEW timeout 200 python3 -m pytest tests/gpu/test_mla_hopper_tok_gpu.py -q -rA -p no:cacheprovider -x 2>&1 \
  | tee $OUT/tests.log | grep -E "FAIL|ERROR|passed|failed|assert" | tail -8
PYTHONPATH=$NEW timeout 100 python3 benchmarks/probes/timeline.py --cells fp8:16:8,fp8:16:32,fp8:16:128,bf16:128:8,fp8:128:8 \
  --out $OUT/timeline.json 2>&1 | tee $OUT/timeline.log | grep -v "^$"
for t in new old new2; do
  P=$NEW; [ $t = old ] && P=$OLD
  PYTHONPATH=$P timeout 120 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 \
    --vs-batches-h16 1,8,32,64,128 --vs-batches-h128 "" --out $OUT/vs_$t.json 2>&1 \
    | tee $OUT/vs_$t.log | grep -E "^\| H=|rel err" | sed "s/^/$t /"
done
