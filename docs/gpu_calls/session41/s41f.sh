#!/usr/bin/env bash
# session 41, call F (main + BOX; carry [".whl"]): call E's source view put the bf16 ping-pong kernel's largest stall
# (10.9% of all samples) on WG0's wait for its next tile's left half (four 64-column boxes on one mbarrier); FlashMLA's
# bf16 kernel waits box by box (nine mbarriers a tile, its stalls spread over them). BOX: one mbarrier a box, each
# box's score MMAs issued once it landed. (1) its GPU tests; (2) its timeline at batch 64; (3) plan_probe.py at bf16
# H = 128, batch 1 / 8 / 32 / 64, uniform and ragged: the shipped config pinned (b2) and BOX (b3), with and without a
# plan, FlashMLA in the same run. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-400}
source docs/gpu_calls/lib.sh
gpu_prelude
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 120 \
  python3 -m pytest -q -n 4 tests/gpu/test_mla_decode_gpu.py -k "BOX" > /tmp/tests_s41f.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_s41f.log | tail -8 | cut -c1-300
if grep -q " passed" /tmp/tests_s41f.log && ! grep -q "failed" /tmp/tests_s41f.log; then
  probe timeline_box 80 timeline.py --cells bf16:128:64 --plan --overlay BOX=1
  left=$(( LIMIT - 5 - SECONDS ))
  [ $left -ge 60 ] && probe plan_box $left plan_probe.py --format bf16 --heads 128 --batches 1,8,32,64 \
    --b2 BLOCK_N=64,PP=1,RELOAD=1,WG1_FIRST=1 --b3 BOX=1
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_s41f.log timeline_box.log plan_box.log 2>/dev/null)
