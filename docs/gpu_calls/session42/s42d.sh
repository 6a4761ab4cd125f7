#!/usr/bin/env bash
# session 42 call D (main; carry [".whl"]; an H100 or an H200, say which): SM1 (the bf16 ping-pong kernel's softmax off
# the path to the hand-off: masks in a request's last tile only, the scale in the exponent, the row sums after it) and
# RA (each tile's rope copy after the hand-off): their GPU tests (GRAPHTUNE_GPU_NEW=1), then plan_probe.py beside the
# shipped config with a plan, bf16 H = 128, batch 1 / 8 / 32 / 64 (SM1, SM1 + RA, RA), then the in-kernel timeline of
# SM1 + RA at batch 64. LIMIT=SECONDS.
set -o pipefail
LIMIT=${LIMIT:-480}
source docs/gpu_calls/lib.sh
gpu_prelude
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 \
  python3 -m pytest -q -n 4 tests/gpu/test_mla_decode_gpu.py -k "SM11 or RA1" > /tmp/tests_sm1.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_sm1.log | tail -8 | cut -c1-300
if grep -q " passed" /tmp/tests_sm1.log && ! grep -q "failed" /tmp/tests_sm1.log; then
  for v in SM1=1 SM1=1,RA=1 RA=1; do
    left=$(( LIMIT - 10 - SECONDS )); [ $left -ge 60 ] || break
    probe plan_${v//[=,]/_} $(( left < 110 ? left : 110 )) plan_probe.py --format bf16 --heads 128 \
      --batches 1,8,32,64 --b2 BLOCK_N=64,PP=1,RELOAD=1,WG1_FIRST=1 --b3 $v
  done
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 40 ] && probe timeline_sm1_ra $(( left < 60 ? left : 60 )) timeline.py --cells bf16:128:64 --plan \
    --overlay SM1=1,RA=1
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_sm1.log plan_*.log timeline_sm1_ra.log 2>/dev/null)
