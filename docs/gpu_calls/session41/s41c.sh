#!/usr/bin/env bash
# session 41, call C (main + QWAIT; carry [".whl"]): call B's timeline of the bf16 ping-pong kernel at H = 128 batch
# 64 (H100) had the query, issued first, land 7.6 us after the split, with the first tiles' copies in flight beside
# it, and the first pair's scores retire 4 us after that: ~12 us before the first pair of a 32-pair program.
# (1) QWAIT's GPU test (pinned: the first tiles' copies once the query landed); (2) its timeline at batch 64 (the
# prologue's marks against call B's); (3) benchmarks/probes/plan_probe.py at bf16 H = 128, batch 1 / 8 / 32 / 64,
# uniform and ragged: the tuned call, the shipped config pinned (b2) and QWAIT (b3), each with and without a plan,
# FlashMLA in the same run. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-420}
source docs/gpu_calls/lib.sh
gpu_prelude
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 120 \
  python3 -m pytest -q -n 4 tests/gpu/test_mla_decode_gpu.py -k "QWAIT" > /tmp/tests_s41c.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_s41c.log | tail -8 | cut -c1-300
if grep -q " passed" /tmp/tests_s41c.log && ! grep -q "failed" /tmp/tests_s41c.log; then
  probe timeline_qwait 90 timeline.py --cells bf16:128:64,bf16:128:8 --plan --overlay QWAIT=1
  probe timeline_base 90 timeline.py --cells bf16:128:8 --plan
  left=$(( LIMIT - 5 - SECONDS ))
  [ $left -ge 60 ] && probe plan_qwait $left plan_probe.py --format bf16 --heads 128 --batches 1,8,32,64 \
    --b2 BLOCK_N=64,PP=1,RELOAD=1,WG1_FIRST=1 --b3 QWAIT=1
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_s41c.log timeline_qwait.log timeline_base.log plan_qwait.log 2>/dev/null)
