#!/usr/bin/env bash
# session 35, call F (main; carry [".whl"]): the plan with fp8_ds_mla (its DS kernel reads it) and where it is not
# read (page size 1, bf16), GPU tests only.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 \
  python3 -m pytest -q -n 3 tests/gpu/test_mla_hopper_tok_gpu.py -k "ds_mla_with_a_plan" > /tmp/tests_ds_plan.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_ds_plan.log | tail -12 | cut -c1-300
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
