#!/usr/bin/env bash
# session 52, call A (carry [".whl"]; an H100 or an H200, say which): the reduction's last round trips, then session
# 51's question. (1) The GPU test of SEG_PLAN (a plan's slots equal the split kernels' own for every kernel family that
# reads a plan, at 132 / 7 / 1 SMs; the decode with reduction.SEG_FROM_PLAN and ONE_STEP on, pinned and tuned +
# captured, against the fp32 reference); (2) reduce_tail.py: the public call tuned per bucket with a plan, the
# reduction as shipped / reading the plan's slots before its wait / a request's slots in one step / both, checked and
# timed beside FlashMLA in one process (fp8 H = 16 batch 32 / 64 / 128 and page size 1 at 64 / 128, bf16 H = 16 at
# 128, bf16 H = 128 and fp8 H = 128 at 32 / 64); (3) session 51's s51b question with what is left: the fp8 H = 16
# decode beside FlashMLA from main (six configs in the tuned space) and from a copy with the space before session 51
# (space_narrow.patch), with a plan and without.
set -o pipefail
LIMIT=${LIMIT:-560}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
PP="/tmp/np:$PWD/src:/tmp/site"
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout ${TESTS_CAP:-170} python3 -m pytest -q \
  -v -n 4 tests/gpu/test_mla_decode_gpu.py -k "plan_slots" > /tmp/tests_a.log 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c " PASSED" /tmp/tests_a.log) passed, $(grep -c " FAILED" /tmp/tests_a.log) failed"
grep -E "passed|failed|FAILED|Error|rel err|split kernel's" /tmp/tests_a.log | grep -v " PASSED" | tail -12 | cut -c1-300
probe reduce_tail ${TAIL_CAP:-230} reduce_tail.py --rounds ${ROUNDS:-2} | grep -E "^\||rc=|rror|not timed" | cut -c1-250
rm -rf /tmp/narrow && mkdir -p /tmp/narrow && cp -r src /tmp/narrow/ \
  && patch -s -d /tmp/narrow -p1 < docs/gpu_calls/session51/space_narrow.patch \
  && echo "narrow: $(grep -c '"RK64": 1}' /tmp/narrow/src/graphtune/kernels/mla_decode/interface_hopper.py) RK64-alone rows (0 expected)"
for t in main narrow; do
  src=$PWD/src; c=$GIT_COMMIT; [ $t = narrow ] && src=/tmp/narrow/src && c=$GIT_COMMIT+narrow
  left=$(( (LIMIT - 10 - SECONDS) / 2 )); [ $t = narrow ] && left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 40 ] && GIT_COMMIT=$c PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$t timeout $left python3 \
    benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-batches-h16 32,64,128 \
    --vs-batches-h128 "" --vs-plan --vs-variant-filter NONE --out $OUT/space_$t.json > /tmp/space_$t.log 2>&1
  echo "space $t rc=$? at ${SECONDS}s"; grep -E "^\| H=" /tmp/space_$t.log | cut -c1-300
done
tar -czf $OUT/logs52a.tgz -C /tmp $(cd /tmp && ls tests_a.log reduce_tail.log space_*.log 2>/dev/null)
