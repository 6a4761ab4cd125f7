#!/usr/bin/env bash
# session 35, call D (main with PLAN written; carry [".whl"]): (1) PLAN's GPU tests (unproven: GRAPHTUNE_GPU_NEW=1) and
# the fp8 H < 64 space test fixed after call B, in xdist workers; (2) benchmarks/probes/plan_probe.py: the second fp8
# tokens-on-M kernel with and without its split read from a plan, two and three buffers, uniform and ragged batches,
# FlashMLA in the same run.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_hopper_tok_gpu.py tests/gpu/test_mla_decode_gpu.py -k "plan or (every_hopper_space and fp8-H16)" \
  > /tmp/tests_plan.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_plan.log | tail -12 | cut -c1-300
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 240 python3 \
  benchmarks/probes/plan_probe.py --out $OUT/plan_probe.json > /tmp/plan_probe.log 2>&1
echo "plan_probe rc=$? at ${SECONDS}s"; grep -v '^{' /tmp/plan_probe.log | cut -c1-300
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
