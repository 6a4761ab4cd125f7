#!/usr/bin/env bash
# session 42 call C (main; carry [".whl"]; an H100 or an H200, say which): NB, the bf16 ping-pong kernel's P hand-offs on
# named barriers (bar.arrive / bar.sync of both warpgroups' 256 threads, as FlashMLA's exchange) instead of mbarriers:
# its GPU tests (GRAPHTUNE_GPU_NEW=1, -k NB1), then plan_probe.py beside the shipped config with a plan, bf16 H = 128,
# batch 1 / 8 / 32 / 64, then the in-kernel timeline of both at batch 64 (the pair's hand-off waits). LIMIT=SECONDS.
set -o pipefail
LIMIT=${LIMIT:-420}
source docs/gpu_calls/lib.sh
gpu_prelude
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 \
  python3 -m pytest -q -n 4 tests/gpu/test_mla_decode_gpu.py -k "NB1" > /tmp/tests_nb.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_nb.log | tail -8 | cut -c1-300
if grep -q " passed" /tmp/tests_nb.log && ! grep -q "failed" /tmp/tests_nb.log; then
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 60 ] && probe plan_nb $(( left < 150 ? left : 150 )) plan_probe.py --format bf16 --heads 128 \
    --batches 1,8,32,64 --b2 BLOCK_N=64,PP=1,RELOAD=1,WG1_FIRST=1 --b3 NB=1
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 40 ] && probe timeline_nb $(( left < 60 ? left : 60 )) timeline.py --cells bf16:128:64 --plan --overlay NB=1
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 40 ] && probe timeline_base $(( left < 60 ? left : 60 )) timeline.py --cells bf16:128:64 --plan
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_nb.log plan_nb.log timeline_nb.log timeline_base.log 2>/dev/null)
