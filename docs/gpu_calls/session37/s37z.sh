#!/usr/bin/env bash
# session 37, third call (main with the gather plan, T8 from batch 1, the bf16 plan's price 4 and the plan under
# torch.compile landed; carry [".whl"]): (1) the GPU tests those touch (the tuned path at fp8 H = 128 from batch 1,
# T8's variants, the e4m3 query, zero-length requests, the bf16 plan tests, the compiled and captured step with a
# plan); (2) the fp8 table beside FlashMLA with the plan and e4m3 columns; (3) the bf16 table with the plan.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 200 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_decode_gpu.py tests/gpu/test_mla_hopper_tok_gpu.py tests/gpu/test_compile_gpu.py \
  -k "(tuned_per_bucket and fp8-H128) or (every_hopper_space and fp8-H128) or t8 or e4m3 or (zero_length and fp8-H128) or bf16_kernels_with_a_plan or compiled_and_captured" \
  > /tmp/tests_s37z.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_s37z.log | tail -14 | cut -c1-300
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 170 python3 \
  benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-plan \
  --vs-e4m3 --vs-ragged --ragged-seed 39179 --out $OUT/fp8_plan_e4m3.json > /tmp/fp8_plan_e4m3.log 2>&1
echo "fp8 rc=$? at ${SECONDS}s"; grep -E "^\| H=|accuracy" /tmp/fp8_plan_e4m3.log | cut -c1-400
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 130 python3 \
  benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats bf16 --vs-variant-filter NONE --vs-plan \
  --vs-ragged --ragged-seed 39179 --out $OUT/bf16_plan.json > /tmp/bf16_plan.log 2>&1
echo "bf16 rc=$? at ${SECONDS}s"; grep -E "^\| H=|accuracy" /tmp/bf16_plan.log | cut -c1-400
tar -czf $OUT/logs.tgz -C /tmp tests_s37z.log fp8_plan_e4m3.log bf16_plan.log
