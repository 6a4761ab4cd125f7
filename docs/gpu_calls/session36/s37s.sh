#!/usr/bin/env bash
# prepared in session 36 (the tree: main + docs/gpu_calls/session36/stack.patch, applied with `git apply`, or branch
# s37-stack = gather-plan + first-plan; carry [".whl"]): s37b.sh and s37e.sh in one call. (1) The GPU tests of the
# row gather and the first fp8 heads-on-M kernel reading a plan (unproven: GRAPHTUNE_GPU_NEW=1) and the plan tests
# around them; (2) gather_route.py with the plan column (fp8, page size 1); (3) plan_probe.py at fp8 H = 128 batch 1 /
# 4 on the first kernel and on T8, with and without a plan; (4) a bf16 cache's partials in fp32 / fp16 / bf16.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 170 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_hopper_tok_gpu.py tests/gpu/test_mla_decode_gpu.py \
  -k "(plan and not bf16_kernels) or first_fp8 or (every_hopper_space and fp8-H128-cfg)" > /tmp/tests_stack.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_stack.log | tail -12 | cut -c1-300
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 80 python3 \
  benchmarks/probes/gather_route.py --formats fp8 --page-sizes 1 --batches 32,64,128 --plan \
  --out $OUT/gather_plan.json > /tmp/gather_plan.log 2>&1
echo "gather rc=$? at ${SECONDS}s"; tail -7 /tmp/gather_plan.log | cut -c1-300
probe plan_fp8_h128_b1_first 60 plan_probe.py --heads 128 --batches 1,4
probe plan_fp8_h128_b1_t8 60 plan_probe.py --heads 128 --batches 1,4 --third-min-batch 1
probe partials_h128 100 partials_probe.py --heads 128 --batches 32,64
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
