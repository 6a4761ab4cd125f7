#!/usr/bin/env bash
# session 37, first call (main + docs/gpu_calls/session36/stack.patch + docs/gpu_calls/session37/compile_plan.patch;
# carry [".whl"]): (1) every GPU test that T8 from batch 8 (main), the row gather and the first fp8 heads-on-M kernel
# reading a plan (stack.patch, unproven: GRAPHTUNE_GPU_NEW=1) and a plan under torch.compile (compile_plan.patch)
# touch, in 8 workers; (2) gather_route.py with the plan column (fp8, page size 1); (3) plan_probe.py at fp8 H = 128
# batch 1 / 4 on the first kernel and on T8, with and without a plan.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
python3 -c "import torch, torch._opaque_base; print('torch', torch.__version__, 'has torch._opaque_base')" 2>&1 | tail -1
git apply docs/gpu_calls/session36/stack.patch && git apply docs/gpu_calls/session37/compile_plan.patch \
  && echo "applied stack.patch + compile_plan.patch"
PP="/tmp/np:$PWD/src:/tmp/site"
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 270 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_decode_gpu.py tests/gpu/test_mla_hopper_tok_gpu.py tests/gpu/test_compile_gpu.py \
  -k "(tuned_per_bucket and fp8-H128) or (every_hopper_space and fp8-H128) or t8 or e4m3 or plan or (zero_length and fp8-H128) or first_fp8" \
  > /tmp/tests_s37x.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_s37x.log | tail -16 | cut -c1-300
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 80 python3 \
  benchmarks/probes/gather_route.py --formats fp8 --page-sizes 1 --batches 32,64,128 --plan \
  --out $OUT/gather_plan.json > /tmp/gather_plan.log 2>&1
echo "gather rc=$? at ${SECONDS}s"; tail -7 /tmp/gather_plan.log | cut -c1-300
probe plan_fp8_h128_b1_first 60 plan_probe.py --heads 128 --batches 1,4
probe plan_fp8_h128_b1_t8 60 plan_probe.py --heads 128 --batches 1,4 --third-min-batch 1
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
