#!/usr/bin/env bash
# session 19, call B: the fp8 heads-on-M kernels (ping-pong and widened-score) with the query copied by TMA and
# converted in shared memory: their GPU tests, the fp8 ping-pong timeline, fp8 H = 128 against the tree before
# (34721ae, .carry/old/src), FlashMLA in the same run
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C
NEW=/tmp/np:$PWD/src:/tmp/site
OLD=/tmp/np:$PWD/.carry/old/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
PYTHONPATH=$NEW timeout 150 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider --durations=5 \
  -k "fp8-PP1,RELOAD1,WG1_FIRST1 or fp8-WOVL1,PSMEM1,XCH1 or hopper_fp8 or (tuned_per_bucket and fp8) or (many and fp8) or (zero_length and fp8)" 2>&1 \
  | tee $OUT/tests_fp8.log | grep -E "FAIL|ERROR|passed|failed|assert|s call" | tail -12
PYTHONPATH=$NEW timeout 40 python3 benchmarks/probes/timeline.py --cells fp8:128:8,fp8:128:64 \
  --out $OUT/timeline.json 2>&1 | tee $OUT/timeline.log | grep -v "^$"
for t in new old; do
  P=$NEW; [ $t = old ] && P=$OLD
  PYTHONPATH=$P timeout 80 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 \
    --vs-variant-filter "'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1}" \
    --vs-batches-h16 "" --vs-batches-h128 1,2,8,32,64 --out $OUT/vs_$t.json 2>&1 \
    | tee $OUT/vs_$t.log | grep -E "^\| H=|rel err" | sed "s/^/$t /"
done
