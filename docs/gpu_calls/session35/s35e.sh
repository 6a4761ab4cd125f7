#!/usr/bin/env bash
# session 35, call E (main with mla_decode(..., plan=MLADecodePlan()); carry [".whl"]): (1) the plan's GPU tests
# (pinned two / three buffers at 132 / 7 / 1 SMs, zero-length requests, two calls a plan; the tuned path captured with
# the plan made in the captured step, replayed after the lengths change) and the fp8 tokens-on-M tests around it, in
# xdist workers; (2) benchmarks/probes/plan_probe.py: the public call without and with a plan, beside FlashMLA.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 200 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_hopper_tok_gpu.py tests/gpu/test_mla_decode_gpu.py \
  -k "plan or v2_matches or (tuned_per_bucket and fp8-H16) or (zero_length and fp8-H16) or (every_hopper_space and fp8-H16)" \
  > /tmp/tests_plan.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_plan.log | tail -12 | cut -c1-300
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 280 python3 \
  benchmarks/probes/plan_probe.py --out $OUT/plan_probe.json > /tmp/plan_probe.log 2>&1
echo "plan_probe rc=$? at ${SECONDS}s"; grep -v '^{' /tmp/plan_probe.log | cut -c1-400
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
