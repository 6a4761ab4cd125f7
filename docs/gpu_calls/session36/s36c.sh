#!/usr/bin/env bash
# session 36, call C (main + T8 reading the plan, uncommitted or at its commit; carry [".whl"]): (1) the GPU tests of
# every kernel that reads a plan and of T8 (8 xdist workers); (2) plan_probe.py at fp8 H = 128 (T8 from batch 16:
# batch 16 / 32 / 64 tuned with and without a plan, FlashMLA beside); (3) plan_probe.py at bf16 H = 128 batch 1 / 8
# again (call B's ragged batch-1 cell, +5.0% with the plan made before the graph and -1.4% with it made in every call).
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 200 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_decode_gpu.py tests/gpu/test_mla_hopper_tok_gpu.py -k "plan or t8 or T8" > /tmp/tests_t8_plan.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_t8_plan.log | tail -14 | cut -c1-300
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 170 python3 \
  benchmarks/probes/plan_probe.py --heads 128 --batches 16,32,64 --out $OUT/plan_fp8_h128.json > /tmp/plan_fp8_h128.log 2>&1
echo "plan fp8 H128 rc=$? at ${SECONDS}s"; grep -v '^{' /tmp/plan_fp8_h128.log | cut -c1-300
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 90 python3 \
  benchmarks/probes/plan_probe.py --format bf16 --heads 128 --batches 1,8 --out $OUT/plan_bf16_h128.json \
  > /tmp/plan_bf16_h128.log 2>&1
echo "plan bf16 H128 rc=$? at ${SECONDS}s"; grep -v '^{' /tmp/plan_bf16_h128.log | cut -c1-300
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
