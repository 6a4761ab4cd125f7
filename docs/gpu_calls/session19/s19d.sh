#!/usr/bin/env bash
# session 19, call D: the fp8 query's in-place conversion as loops that stay loops (617 instructions, was 1,526
# unrolled): the prologue marks of the fp8 ping-pong kernel (H = 128, batch 8 / 64), and the fp8 H = 128 decode
# against the tree of call A (34721ae, .carry/old/src) with FlashMLA in the same run
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C
NEW=/tmp/np:$PWD/src:/tmp/site
OLD=/tmp/np:$PWD/.carry/old/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
PYTHONPATH=$NEW timeout 50 python3 benchmarks/probes/timeline.py --cells fp8:128:8,fp8:128:64 \
  --out $OUT/timeline.json 2>&1 | tee $OUT/timeline.log | grep -v "^$"
for t in new old; do
  P=$NEW; [ $t = old ] && P=$OLD
  PYTHONPATH=$P timeout 70 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 \
    --vs-variant-filter "'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1}" \
    --vs-batches-h16 "" --vs-batches-h128 1,8,64 --out $OUT/vs_$t.json 2>&1 \
    | tee $OUT/vs_$t.log | grep -E "^\| H=|rel err" | sed "s/^/$t /"
done
PYTHONPATH=$NEW timeout 60 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider \
  -k "(heads_on_m and fp8-PP1 and WG1_FIRST1) or hopper_fp8_matches" 2>&1 \
  | tee $OUT/tests_fp8.log | grep -E "FAIL|ERROR|passed|failed|assert" | tail -6
