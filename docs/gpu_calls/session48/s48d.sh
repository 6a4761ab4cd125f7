#!/usr/bin/env bash
# session 48, call D (carry [".whl"]; on the H200 of calls B-C, warm): MIN_TILES 2 against SPLIT_MAX 32 at batch 1-2
# with a plan (P8 + EI + VS, T8 with the e4m3 query, T8), each against the same config without either (plan_probe's
# b2 / b3), then the public fp8 H = 128 table at batch 1 and 8 with the spaces back without MIN_TILES (call B's had it).
set -o pipefail
LIMIT=${LIMIT:-400}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
PP="/tmp/np:$PWD/src:/tmp/site"
for knob in SPLIT_MAX=32 MIN_TILES=2; do
  tag=${knob%%=*}
  probe d_p8_$tag 70 plan_probe.py --format fp8 --heads 128 --query-precision e4m3 --batches 1,2 \
    --b2 BLOCK_N=64,T8=1,P8=1,EI=1,VS=1 --b3 $knob --tol 4e-2 | grep -E "^\| (uniform|ragged)|rc=|rror"
  probe d_t8_$tag 70 plan_probe.py --format fp8 --heads 128 --batches 1,2 \
    --b2 BLOCK_N=64,T8=1 --b3 $knob | grep -E "^\| (uniform|ragged)|rc=|rror"
done
left=$(( LIMIT - 5 - SECONDS ))
[ $left -ge 40 ] && PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout $left python3 benchmarks/bench_mla_decode.py \
  --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-plan --vs-e4m3 --vs-batches-h16 "" \
  --vs-batches-h128 1,8 --vs-ragged --ragged-seed 39179 --out $OUT/fp8_h128_b1.json > /tmp/fp8_h128_b1.log 2>&1
echo "fp8 rc=$? at ${SECONDS}s"; grep -E "^\| H=|^\| heads" /tmp/fp8_h128_b1.log | cut -c1-900
tar -czf $OUT/logs48d.tgz -C /tmp $(cd /tmp && ls d_*.log fp8_h128_b1.log 2>/dev/null)
