#!/usr/bin/env bash
# session 17, call D: full-sector output stores. GPU tests of the changed kernels, then the decode as shipped on the
# new tree, the tree before (.carry/old), and the new tree again, each cell with FlashMLA
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C
NEW=/tmp/np:$PWD/src:/tmp/site
OLD=/tmp/np:$PWD/.carry/old/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
PYTHONPATH=$NEW timeout 200 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider -x \
  -k "(space_config and (second or H16)) or (heads_on_m and PP1) or (zero_length and H16)" 2>&1 | tee $OUT/tests.log \
  | grep -E "FAIL|ERROR|passed|failed|Error|assert" | tail -12
i=0
for tree in new old new; do
  i=$((i+1)); P=$NEW; [ $tree = old ] && P=$OLD
  PYTHONPATH=$P timeout 90 python3 benchmarks/probes/reduce_sweep.py --shapes 4x2x512x4 --formats fp8 \
    --h16 8,32,64,128 --h128 64 --out $OUT/sweep_fp8_$i$tree.json 2>&1 | grep -E "H=" | sed "s/^/$tree /" \
    | tee -a $OUT/ab.log | cut -c1-120
  PYTHONPATH=$P timeout 90 python3 benchmarks/probes/reduce_sweep.py --shapes 4x2x512x4 --formats bf16 \
    --h16 128 --h128 8,32,64 --out $OUT/sweep_bf16_$i$tree.json 2>&1 | grep -E "H=" | sed "s/^/$tree /" \
    | tee -a $OUT/ab.log | cut -c1-120
done
