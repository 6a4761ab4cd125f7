#!/usr/bin/env bash
# session 48, call B (carry [".whl"]; an H100 or an H200, say which): MIN_TILES (T8's and P8's split with at least a
# pair of tiles a program, in T8's, P8's and PL's configs since this commit). (1) its GPU tests (pinned T8 / T8 with
# the e4m3 query / P8 + EI + VS / P8 given an e4m3 query, batch 1-4, own split and a plan's, 132 and 7 SMs) with the
# tuned paths' (warm-up, capture, replay; the plan's), (2) batch 1 / 2 / 4 with a plan, each mode pinned without and
# with MIN_TILES 2 (plan_probe's b2 / b3), (3) the public fp8 H = 128 table beside FlashMLA as shipped (the e4m3
# columns, a step's plan, ragged seed 39179). LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-560}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
PP="/tmp/np:$PWD/src:/tmp/site"
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout ${TESTS_CAP:-180} python3 -m pytest -q \
  -n 3 tests/gpu/test_mla_decode_gpu.py \
  -k "pair_of_tiles or t8_with_a_plan or p_precision or query_precision_e4m3_tuned or hopper_fp8_capture_replay" \
  > /tmp/tests_b.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|rel err|lse err" /tmp/tests_b.log | tail -12 | cut -c1-300
probe mt_p8 100 plan_probe.py --format fp8 --heads 128 --query-precision e4m3 --batches 1,2,4 \
  --b2 BLOCK_N=64,T8=1,P8=1,EI=1,VS=1 --b3 MIN_TILES=2 --tol 4e-2 | grep -E "^\| (uniform|ragged)|rc=|rror"
probe mt_t8e 100 plan_probe.py --format fp8 --heads 128 --query-precision e4m3 --batches 1,2,4 \
  --b2 BLOCK_N=64,T8=1 --b3 MIN_TILES=2 | grep -E "^\| (uniform|ragged)|rc=|rror"
probe mt_t8 100 plan_probe.py --format fp8 --heads 128 --batches 1,2,4 \
  --b2 BLOCK_N=64,T8=1 --b3 MIN_TILES=2 | grep -E "^\| (uniform|ragged)|rc=|rror"
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 60 ] && PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout $left python3 \
  benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-plan \
  --vs-e4m3 --vs-batches-h16 "" --vs-ragged --ragged-seed 39179 --out $OUT/fp8_h128.json > /tmp/fp8_h128.log 2>&1
echo "fp8 rc=$? at ${SECONDS}s"; grep -E "^\| H=|^\| heads|accuracy" /tmp/fp8_h128.log | cut -c1-900
tar -czf $OUT/logs48b.tgz -C /tmp $(cd /tmp && ls tests_b.log mt_*.log fp8_h128.log 2>/dev/null)
