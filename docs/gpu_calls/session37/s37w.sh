#!/usr/bin/env bash
# session 37, fifth call (main + the working tree's fp16 partials for a bf16 cache, scaled per half-row; carry
# [".whl"]): (1) every bf16 GPU test of the Hopper path (the new extreme-magnitude test included) and the compiled
# step; (2) partials_probe.py: fp32 / fp16 unscaled / fp16 scaled (shipped) at H = 128 and 16.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 230 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_decode_gpu.py tests/gpu/test_mla_hopper_tok_gpu.py tests/gpu/test_compile_gpu.py \
  -k "bf16 or partials or hopper_matches_reference" > /tmp/tests_s37w.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_s37w.log | tail -16 | cut -c1-300
probe partials_h128 110 partials_probe.py --heads 128 --batches 8,32,64
probe partials_h16 110 partials_probe.py --heads 16 --batches 8,32,128
tar -czf $OUT/logs.tgz -C /tmp tests_s37w.log partials_h128.log partials_h16.log
