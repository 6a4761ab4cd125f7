#!/usr/bin/env bash
# session 43, call B (main; carry [".whl"]; an H100 or an H200, say which): NX, the bf16 ping-pong kernel's next
# segment's first copies issued at the exchange (before the stores; its request and page ids loaded under the
# exchange). (1) NX's GPU tests (variants, zero-length requests, with a plan); (2) plan_probe.py, the shipped config
# beside NX with a plan at batch 1 / 8 / 32 / 64, uniform and ragged; (3) in ONE process (timeline.py's per-cell
# keys) the shipped config and NX at batch 64: the segment's end and the prologue. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-420}
source docs/gpu_calls/lib.sh
gpu_prelude
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 \
  python3 -m pytest -q -n 4 tests/gpu/test_mla_decode_gpu.py -k "NX" > /tmp/tests_nx.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_nx.log | tail -8 | cut -c1-300
if grep -q " passed" /tmp/tests_nx.log && ! grep -q "failed" /tmp/tests_nx.log; then
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 60 ] && probe plan_nx $(( left < 200 ? left : 200 )) plan_probe.py --format bf16 --heads 128 \
    --batches 1,8,32,64 --b2 BLOCK_N=64,PP=1,RELOAD=1,WG1_FIRST=1,SM1=1,RA=1 --b3 NX=1
  base=SM1=1/RA=1
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 60 ] && probe timeline_nx $left timeline.py --cells "bf16:128:64:$base,bf16:128:64:$base/NX=1" --plan
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_nx.log plan_nx.log timeline_nx.log 2>/dev/null)
