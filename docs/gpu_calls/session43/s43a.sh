#!/usr/bin/env bash
# prepared in session 42 for the next session's first call (main; carry [".whl"]; an H100 or an H200, say which): BOX
# on SM1 + RA shortened the bf16 ping-pong kernel's pair (3.62 us against ~3.71 at one clock) but was 2-7% slower with
# a plan, its prologue apparently longer (session 42 call F; the comparison crossed calls of different clocks). BOXP
# keeps BOX's per-box waits in the tile loop but loads a segment's first two tiles as halves, one mbarrier each. (1)
# BOXP's GPU tests; (2) in ONE process (timeline.py's per-cell keys) the shipped SM1 + RA, with BOX, with BOX + BOXP at
# batch 8 and 64: plain and stamped times, the pair's period, the prologue; (3) plan_probe.py, the shipped config
# beside BOX + BOXP with a plan at batch 1 / 8 / 32 / 64. LIMIT=SECONDS bounds it (420 recommended).
set -o pipefail
LIMIT=${LIMIT:-420}
source docs/gpu_calls/lib.sh
gpu_prelude
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 120 \
  python3 -m pytest -q -n 4 tests/gpu/test_mla_decode_gpu.py -k "BOXP1" > /tmp/tests_boxp.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_boxp.log | tail -8 | cut -c1-300
if grep -q " passed" /tmp/tests_boxp.log && ! grep -q "failed" /tmp/tests_boxp.log; then
  base=SM1=1/RA=1
  cells=""
  for b in 64 8; do
    cells="$cells,bf16:128:$b:$base,bf16:128:$b:$base/BOX=1,bf16:128:$b:$base/BOX=1/BOXP=1"
  done
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 60 ] && probe timeline_boxp $(( left < 180 ? left : 180 )) timeline.py --cells "${cells#,}" --plan
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 60 ] && probe plan_boxp $left plan_probe.py --format bf16 --heads 128 --batches 1,8,32,64 \
    --b2 BLOCK_N=64,PP=1,RELOAD=1,WG1_FIRST=1,SM1=1,RA=1 --b3 BOX=1,BOXP=1
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_boxp.log timeline_boxp.log plan_boxp.log 2>/dev/null)
