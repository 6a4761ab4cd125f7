#!/usr/bin/env bash
# prepared in session 36 (the tree: main + docs/gpu_calls/session36/gather_plan.patch, applied with `git apply`, or
# branch gather-plan; carry [".whl"]): (1) the row gather reading a step's plan: its GPU tests (unproven:
# GRAPHTUNE_GPU_NEW=1) and gather_route.py with the plan column at fp8 page size 1 (the 3.0 TB/s from batch 64:
# 2.75 at 64 on the H200 in session 36 call D); (2) s36f.sh's probes: a bf16 cache's partials in fp32 / fp16 / bf16,
# T8 at batch 1 against the first fp8 heads-on-M kernel.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_hopper_tok_gpu.py -k "plan" > /tmp/tests_gather_plan.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_gather_plan.log | tail -12 | cut -c1-300
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 100 python3 \
  benchmarks/probes/gather_route.py --formats fp8 --page-sizes 1 --batches 32,64,128 --plan \
  --out $OUT/gather_plan.json > /tmp/gather_plan.log 2>&1
echo "gather rc=$? at ${SECONDS}s"; tail -7 /tmp/gather_plan.log | cut -c1-300
probe partials_h128 110 partials_probe.py --heads 128 --batches 32,64
probe first_b1 45 plan_probe.py --heads 128 --batches 1
probe t8_b1 45 plan_probe.py --heads 128 --batches 1 --third-min-batch 1
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
