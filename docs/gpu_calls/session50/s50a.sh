#!/usr/bin/env bash
# session 50, call A (carry [".whl"]; an H100 or an H200, say which): the tile pools (session 49's call C, never run,
# plus their public-table rows). (1) POOL's GPU tests (the second fp8 tokens-on-M kernel and the bf16 tokens-on-M
# kernel, 132 / 7 / 1 SMs, three calls of a plan, counters back at zero); (2) the fp8 split kernel pinned static /
# POOL 1 / POOL 2 with a plan, one process (timeline.py: plain and stamped times, where the programs' exits spread),
# batch 32 / 64 / 128; (3) the decode beside FlashMLA in one run, fp8 and bf16, H = 16, batch 32 / 64 / 128: the
# public call (with a plan and without), the shipped configs pinned static and with pools, each given a plan
# (bench_mla_decode.py, variants with PLAN=1); (4) with what is left, the load path's ceiling with and without pools
# (pool_stream.py: page size 64 and 1, each checked first).
set -o pipefail
LIMIT=${LIMIT:-480}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
PP="/tmp/np:$PWD/src:/tmp/site"
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout ${TESTS_CAP:-150} python3 -m pytest -q \
  -v -n 4 tests/gpu/test_mla_hopper_tok_gpu.py -k "tile_pools" > /tmp/tests_a.log 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c " PASSED" /tmp/tests_a.log) passed, $(grep -c " FAILED" /tmp/tests_a.log) failed"
grep -E "passed|failed|FAILED|Error|rel err|counters" /tmp/tests_a.log | grep -v " PASSED" | tail -12 | cut -c1-300
CELLS=${CELLS:-fp8:16:32,fp8:16:32:POOL=1,fp8:16:32:POOL=2,fp8:16:64,fp8:16:64:POOL=1,fp8:16:64:POOL=2,fp8:16:128,fp8:16:128:POOL=1,fp8:16:128:POOL=2}
probe pool_timeline ${TIMELINE_CAP:-140} timeline.py --plan --cells $CELLS \
  | grep -E "^fp8|exits|per program|rc=|rror" | cut -c1-260
gzip -f $OUT/pool_timeline.json 2>/dev/null
PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout ${VS_CAP:-170} python3 benchmarks/bench_mla_decode.py --vs-flashmla \
  --configs none --vs-formats ${VS_FORMATS:-fp8,bf16} --vs-batches-h16 32,64,128 --vs-batches-h128 "" --vs-plan \
  --vs-variant-filter "'PLAN'" \
  --out $OUT/pool_vs.json > /tmp/pool_vs.log 2>&1
echo "vs rc=$? at ${SECONDS}s"; grep -E "^\||rror" /tmp/pool_vs.log | cut -c1-250 | tail -40
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 40 ] && probe pool_stream $left pool_stream.py --batches 32,128 --page-sizes 64,1 | grep -E "^\||rc=|rror" | cut -c1-250
tar -czf $OUT/logs50a.tgz -C /tmp $(cd /tmp && ls tests_a.log pool_*.log 2>/dev/null)
