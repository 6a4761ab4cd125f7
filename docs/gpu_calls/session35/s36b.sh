#!/usr/bin/env bash
# prepared in session 35 for the next session (the tree: main + docs/gpu_calls/session35/plan_pp.patch, checked out;
# carry [".whl"]): the plan read by the bf16 kernels (the ping-pong kernel, H a multiple of 64; the tokens-on-M kernel,
# H < 64). (1) Their GPU tests (unproven: GRAPHTUNE_GPU_NEW=1) and the plan's other tests (the plan kernel moved to
# kernel_hopper.py); (2) plan_probe.py at bf16 H = 128 (batch 1 / 8 / 32 / 64) and H = 16, tuned with and without a
# plan, FlashMLA beside, and at fp8 H = 16 again.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_decode_gpu.py tests/gpu/test_mla_hopper_tok_gpu.py \
  -k "plan or (tuned_per_bucket and bf16-H128) or (zero_length and bf16-H128)" > /tmp/tests_plan_pp.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_plan_pp.log | tail -12 | cut -c1-300
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 150 python3 \
  benchmarks/probes/plan_probe.py --format bf16 --heads 128 --batches 1,8,32,64 --out $OUT/plan_bf16_h128.json \
  > /tmp/plan_bf16_h128.log 2>&1
echo "plan bf16 H128 rc=$? at ${SECONDS}s"; grep -v '^{' /tmp/plan_bf16_h128.log | cut -c1-300
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 120 python3 \
  benchmarks/probes/plan_probe.py --format bf16 --heads 16 --out $OUT/plan_bf16_h16.json > /tmp/plan_bf16_h16.log 2>&1
echo "plan bf16 H16 rc=$? at ${SECONDS}s"; grep -v '^{' /tmp/plan_bf16_h16.log | cut -c1-300
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 100 python3 \
  benchmarks/probes/plan_probe.py --out $OUT/plan_fp8_h16.json > /tmp/plan_fp8_h16.log 2>&1
echo "plan fp8 H16 rc=$? at ${SECONDS}s"; grep -v '^{' /tmp/plan_fp8_h16.log | cut -c1-300
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
