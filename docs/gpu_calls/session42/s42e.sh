#!/usr/bin/env bash
# session 42 call E (main; carry [".whl"]; an H100 or an H200, say which): (1) SM1 in T8 (its softmax off the path to
# the hand-off): its GPU tests (GRAPHTUNE_GPU_NEW=1, -k SM11: T8's and the bf16 kernel's), then plan_probe.py beside
# T8 as shipped with a plan, fp8 H = 128, batch 1 / 8 / 32 / 64; (2) the bf16 table beside FlashMLA with a step's plan,
# uniform and ragged, the ping-pong kernel's space now with SM1 and RA. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-450}
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 170 \
  python3 -m pytest -q -n 4 tests/gpu/test_mla_decode_gpu.py -k "SM11" > /tmp/tests_t8sm1.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_t8sm1.log | tail -8 | cut -c1-300
if grep -q " passed" /tmp/tests_t8sm1.log && ! grep -q "failed" /tmp/tests_t8sm1.log; then
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 60 ] && probe plan_t8_sm1 $(( left < 110 ? left : 110 )) plan_probe.py --format fp8 --heads 128 \
    --batches 1,8,32,64 --b2 BLOCK_N=64,T8=1 --b3 SM1=1
fi
left=$(( LIMIT - 5 - SECONDS ))
if [ $left -ge 60 ]; then
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout $left python3 \
    benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats bf16 --vs-variant-filter NONE --vs-plan \
    --vs-ragged --ragged-seed 39179 --out $OUT/bf16_main.json > /tmp/bf16_main.log 2>&1
  echo "bf16 rc=$? at ${SECONDS}s"; grep -E "^\| H=|accuracy" /tmp/bf16_main.log | cut -c1-400
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_t8sm1.log plan_t8_sm1.log bf16_main.log 2>/dev/null)
