#!/usr/bin/env bash
# session 37, second call (main + stack.patch + compile_plan.patch as s37x.sh; carry [".whl"]): (1) the fp8 table
# beside FlashMLA with the plan and e4m3 columns (T8 from batch 8; the first fp8 heads-on-M kernel reading the plan at
# batch 1); (2) a bf16 plan's split with each request's start priced, 0 against 4 (plan.BF16_PLAN_SEG_COST), H = 128
# and 16; (3) a bf16 cache's partials in fp32 / fp16 / bf16 (partials_probe.py).
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
git apply docs/gpu_calls/session36/stack.patch && git apply docs/gpu_calls/session37/compile_plan.patch \
  && echo "applied stack.patch + compile_plan.patch"
PP="/tmp/np:$PWD/src:/tmp/site"
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 180 python3 \
  benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-plan \
  --vs-e4m3 --vs-ragged --ragged-seed 39179 --out $OUT/fp8_plan_e4m3.json > /tmp/fp8_plan_e4m3.log 2>&1
echo "fp8 rc=$? at ${SECONDS}s"; grep -E "^\| H=|accuracy" /tmp/fp8_plan_e4m3.log | cut -c1-400
for heads in 128 16; do
  for price in 0 4; do
    probe plan_bf16_h${heads}_price$price 60 plan_probe.py --format bf16 --heads $heads --batches 8,32,64 \
      --plan-bf16-seg-cost $price
  done
done
probe partials_h128 90 partials_probe.py --heads 128 --batches 32,64
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
