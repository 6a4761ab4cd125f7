#!/usr/bin/env bash
# prepared in session 36 (main; carry [".whl"]): a bf16 plan's split with each request's start priced at 4 tiles
# (plan.BF16_PLAN_SEG_COST, 0 as shipped: the bf16 kernels split without a price, whose pass would cost every call; a plan
# makes the pass once a step). (1) The bf16 plan GPU tests with the price (unproven: GRAPHTUNE_GPU_NEW=1);
# (2) plan_probe.py at bf16 H = 128 and H = 16, uniform and ragged, with the price 0 and 4 (each its own process).
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 120 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_decode_gpu.py -k "bf16_kernels_with_a_plan" > /tmp/tests_bf16_price.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_bf16_price.log | tail -12 | cut -c1-300
for heads in 128 16; do
  for price in 0 4; do
    probe plan_bf16_h${heads}_price$price 90 plan_probe.py --format bf16 --heads $heads --batches 8,32,64 \
      --plan-bf16-seg-cost $price
  done
done
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
