#!/usr/bin/env bash
# session 30 (branch s30 at its commit: main + the fused split + fp16 partials (partials-main) + the per-step plan of
# the work split (split-plan)), call A: the plan's GPU tests (every split kernel given a plan: bit for bit its own
# split's output, against the reference; GRAPHTUNE_GPU_NEW=1, the PLAN gate), then benchmarks/probes/split_plan.py on
# the fp8 cells, uniform and ragged (seed 39179): each cell's tuned pick with the split computed in the kernel (the
# fused split), with a plan made before the graph, with the plan made in the graph; the plan kernel alone
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site timeout 200 python3 -m pytest -q tests/gpu/test_mla_decode_gpu.py \
  -k "given_a_plan" > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -2 $OUT/tests.log; grep -E "^FAILED|Error|assert|rel err|differs" $OUT/tests.log | head -8 | cut -c1-300
if ! grep -q " passed" $OUT/tests.log || grep -q "failed" $OUT/tests.log; then echo "tests did not pass: probe skipped"; exit 1; fi
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site timeout 330 python3 benchmarks/probes/split_plan.py \
  --cells fp8:16:8,fp8:16:32,fp8:16:64,fp8:16:128,fp8:128:8,fp8:128:32,fp8:128:64 --ragged-seed 39179 \
  --out $OUT/split_plan_fp8.json > $OUT/split_plan_fp8.log 2>&1
echo "probe rc=$?"; grep -E "^\| |Error" $OUT/split_plan_fp8.log | cut -c1-200
