#!/usr/bin/env bash
# session 41, call D (main + LAZY; carry [".whl"]): the bf16 ping-pong kernel's rescales of O (128 multiplies a
# thread each, two a pair in each warpgroup; FlashMLA's bf16 kernel, read with cuobjdump from its wheel, does three a
# pair where ours does four) skipped when no row's reference max moved, the max moved only by more than 2^8 (LAZY).
# (1) its GPU test; (2) its timeline at batch 64; (3) plan_probe.py at bf16 H = 128, batch 1 / 8 / 32 / 64,
# uniform and ragged: the tuned call, the shipped config pinned (b2) and LAZY (b3), with and without a plan,
# FlashMLA in the same run. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-400}
source docs/gpu_calls/lib.sh
gpu_prelude
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 120 \
  python3 -m pytest -q -n 4 tests/gpu/test_mla_decode_gpu.py -k "LAZY" > /tmp/tests_s41d.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_s41d.log | tail -8 | cut -c1-300
if grep -q " passed" /tmp/tests_s41d.log && ! grep -q "failed" /tmp/tests_s41d.log; then
  probe timeline_lazy 80 timeline.py --cells bf16:128:64 --plan --overlay LAZY=1
  left=$(( LIMIT - 5 - SECONDS ))
  [ $left -ge 60 ] && probe plan_lazy $left plan_probe.py --format bf16 --heads 128 --batches 1,8,32,64 \
    --b2 BLOCK_N=64,PP=1,RELOAD=1,WG1_FIRST=1 --b3 LAZY=1
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_s41d.log timeline_lazy.log plan_lazy.log 2>/dev/null)
