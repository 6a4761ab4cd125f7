#!/usr/bin/env bash
# prepared in session 37 for the next session's first call (main; carry [".whl"]; meant for an H200, the issue's
# figures): (1) the ops' opcheck (fixed in session 37, not rerun) and the bf16 partials tests; (2) partials_probe.py
# with the scaled partials merged by half rows (shipped) and by whole rows (reduction.SCALED_HALF_ROWS off), H = 128;
# (3) plan_probe.py at fp8 H = 16 with its b3 columns a two-wave grid (--b3 PROGRAMS_PER_SM=4). s38b.sh: the tables.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 python3 -m pytest -q -n 8 \
  tests/gpu/test_compile_gpu.py tests/gpu/test_mla_decode_gpu.py -k "opcheck or partials or compiled_and_captured" \
  > /tmp/tests_s38a.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_s38a.log | tail -12 | cut -c1-300
probe partials_rows_h128 120 partials_probe.py --heads 128 --batches 8,32,64
# a grid of two waves at fp8 H = 16 (the two-buffer config at 4 programs an SM, 2 resident): does the hardware's
# block scheduler even out the SMs' end (10 us first to last at batch 32, H100 call D)?
probe plan_waves_h16 150 plan_probe.py --batches 8,32,64,128 --b3 PROGRAMS_PER_SM=4
tar -czf $OUT/logs.tgz -C /tmp tests_s38a.log partials_rows_h128.log plan_waves_h16.log
