#!/usr/bin/env bash
# session 42 call F (main; carry [".whl"]; an H100 or an H200, say which): BOX again, on the shipped SM1 + RA (with
# them the pair waits on its next tile's data, session 42 call D's timeline: scores retired 985 ns after the pair's
# top against 808): each 64-column box on its own mbarrier, each box's score MMAs issued once it landed. Its GPU tests
# (GRAPHTUNE_GPU_NEW=1, -k BOX1), then plan_probe.py beside the shipped config with a plan, bf16 H = 128, batch 1 / 8 /
# 32 / 64, then its timeline at batch 64. LIMIT=SECONDS.
set -o pipefail
LIMIT=${LIMIT:-330}
source docs/gpu_calls/lib.sh
gpu_prelude
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 120 \
  python3 -m pytest -q -n 4 tests/gpu/test_mla_decode_gpu.py -k "BOX1" > /tmp/tests_box.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_box.log | tail -8 | cut -c1-300
if grep -q " passed" /tmp/tests_box.log && ! grep -q "failed" /tmp/tests_box.log; then
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 60 ] && probe plan_box $(( left < 110 ? left : 110 )) plan_probe.py --format bf16 --heads 128 \
    --batches 1,8,32,64 --b2 BLOCK_N=64,PP=1,RELOAD=1,WG1_FIRST=1,SM1=1,RA=1 --b3 BOX=1
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 40 ] && probe timeline_box $(( left < 60 ? left : 60 )) timeline.py --cells bf16:128:64 --plan \
    --overlay SM1=1,RA=1,BOX=1
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_box.log plan_box.log timeline_box.log 2>/dev/null)
