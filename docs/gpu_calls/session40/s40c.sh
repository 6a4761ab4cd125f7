#!/usr/bin/env bash
# session 40, call B (this tree: the V2 kernel's copies no longer wait for the query's loads (_after_the_copies) and
# the row gather's first page ids from the plan (PLAN_COLS 200); main's src at f5e7bf4 carried in .carry/src_main;
# carry [".whl", ".carry"]): (1) the GPU tests of the second tokens-on-M kernel (every loader, plan, fp8_ds_mla) and
# of the e4m3 query through it; (2) the fp8 table beside FlashMLA with a plan, uniform and ragged, main then this
# tree (separate processes and Triton caches); (3) the row gather at page size 1 with and without a plan, main then
# this tree; (4) the bf16 table with a plan (this tree; its bf16 kernels are main's). LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-570}
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_new timeout 170 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_hopper_tok_gpu.py "tests/gpu/test_mla_decode_gpu.py::test_query_given_in_e4m3_matches_its_reference" \
  "tests/gpu/test_mla_decode_gpu.py::test_query_precision_e4m3_matches_the_e4m3_query_reference" > /tmp/tests_s40c.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_s40c.log | tail -12 | cut -c1-300
table() {   # table WAY SRC FORMAT CAP
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=/tmp/np:$2:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$1 timeout $4 python3 \
    benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats $3 --vs-variant-filter NONE --vs-plan \
    --vs-ragged --ragged-seed 39179 --out $OUT/${3}_$1.json > /tmp/${3}_$1.log 2>&1
  echo "${3}_$1 rc=$? at ${SECONDS}s"; grep -E "^\| H=|accuracy" /tmp/${3}_$1.log | cut -c1-300
}
gather() {  # gather WAY SRC CAP
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=/tmp/np:$2:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$1 timeout $3 python3 \
    benchmarks/probes/gather_route.py --formats fp8 --page-sizes 1 --batches 32,64,128 --plan \
    --out $OUT/gather_$1.json > /tmp/gather_$1.log 2>&1
  echo "gather_$1 rc=$? at ${SECONDS}s"; grep -v '^{' /tmp/gather_$1.log | grep -v "^$" | tail -8 | cut -c1-300
}
table main $PWD/.carry/src_main fp8 150
table new $PWD/src fp8 150
left=$(( LIMIT - SECONDS )); [ $left -ge 100 ] && gather main $PWD/.carry/src_main 60
left=$(( LIMIT - SECONDS )); [ $left -ge 60 ] && gather new $PWD/src 60
left=$(( LIMIT - 5 - SECONDS )); [ $left -ge 80 ] && table new $PWD/src bf16 $left
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_s40c.log fp8_*.log bf16_*.log gather_*.log 2>/dev/null)
