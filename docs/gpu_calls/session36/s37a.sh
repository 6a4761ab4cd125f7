#!/usr/bin/env bash
# prepared in session 36 for the next session's first call (main; carry [".whl"]; meant for an H200, the issue's
# figures): (1) the GPU tests that T8_MIN_BATCH 16 -> 8 touches (the tuned path at fp8 H = 128 from batch 8, T8's
# variants, the e4m3 query, the plan) in 8 workers; (2) the fp8 table with the plan and e4m3 columns (T8 now serves
# batch 8), then bf16 with the plan; (3) the fp8 table again with the buckets tuned with a plan (--vs-plan-first).
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 200 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_decode_gpu.py tests/gpu/test_mla_hopper_tok_gpu.py \
  -k "(tuned_per_bucket and fp8-H128) or (every_hopper_space and fp8-H128) or t8 or e4m3 or plan or (zero_length and fp8-H128)" \
  > /tmp/tests_t8_from_8.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_t8_from_8.log | tail -14 | cut -c1-300
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 170 python3 \
  benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-plan \
  --vs-e4m3 --vs-ragged --ragged-seed 39179 --out $OUT/fp8_plan_e4m3.json > /tmp/fp8_plan_e4m3.log 2>&1
echo "fp8 rc=$? at ${SECONDS}s"; grep -E "^\| H=|accuracy" /tmp/fp8_plan_e4m3.log | cut -c1-400
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 120 python3 \
  benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats bf16 --vs-variant-filter NONE --vs-plan \
  --vs-ragged --ragged-seed 39179 --out $OUT/bf16_plan.json > /tmp/bf16_plan.log 2>&1
echo "bf16 rc=$? at ${SECONDS}s"; grep -E "^\| H=|accuracy" /tmp/bf16_plan.log | cut -c1-400
# the buckets tuned with a plan (a warm-up that passes one), fp8, in a fresh process
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 120 python3 \
  benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-plan \
  --vs-plan-first --vs-ragged --ragged-seed 39179 --out $OUT/fp8_plan_first.json > /tmp/fp8_plan_first.log 2>&1
echo "fp8 plan-first rc=$? at ${SECONDS}s"; grep -E "^\| H=|accuracy" /tmp/fp8_plan_first.log | cut -c1-400
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
