#!/usr/bin/env bash
# prepared in session 36 (the tree: main + docs/gpu_calls/session36/first_plan.patch, applied with `git apply`, or
# branch first-plan; carry [".whl"]): the first fp8 heads-on-M kernel (fp8 H = 128 at batch 1-7: 1.22x FlashMLA at
# batch 1 on the H200 in session 36 call D) reading a step's plan. (1) Its GPU tests (unproven: GRAPHTUNE_GPU_NEW=1)
# and the plan tests around it; (2) plan_probe.py at fp8 H = 128, batch 1 / 4, as the tuned path runs it (the first
# kernel) and with T8 there (--third-min-batch 1), each with and without a plan, FlashMLA beside.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_decode_gpu.py -k "first_fp8 or (every_hopper_space and fp8-H128-cfg) or t8_with_a_plan" \
  > /tmp/tests_first_plan.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_first_plan.log | tail -12 | cut -c1-300
for way in first t8; do
  extra=$([ $way = t8 ] && echo "--third-min-batch 1")
  probe plan_fp8_h128_b1_$way 80 plan_probe.py --heads 128 --batches 1,4 $extra
done
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
