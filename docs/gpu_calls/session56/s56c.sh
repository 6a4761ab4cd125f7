#!/usr/bin/env bash
# session 56, call C (carry [".whl"]; an H100 or an H200, say which): (1) call B's one failure, the fp8_ds_mla test's
# LSE 3.0e-3 against its 2e-3 bound (seed 1720180888, PT_EARLY, spread scales, 132 SMs), run again with the split
# launched plainly (SPLIT_PDL 0) and behind the kernel ahead (2), beside 16 fresh seeds each (ds_lse.py); (2) on an
# H200 only, the targets' cells (the public call tuned with a plan beside FlashMLA). LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-560}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
probe ds_lse_c 120 ds_lse.py --seeds 1720180888 --random 16 --ways 0,2 | grep -E "rc=|largest|rror|1720180888" | cut -c1-250
GRAPHTUNE_TEST_SEED=1720180888 gpu_tests tests_c 60 tests/gpu/test_mla_hopper_tok_gpu.py "test_tok_ds_matches_reference and pt_early1"
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
PP="/tmp/np:$PWD/src:/tmp/site"
bench() {  # NAME CAP ARGS...: the public table beside FlashMLA into $OUT/NAME.json
  local n=$1 cap=$2; shift 2
  PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout $cap python3 benchmarks/bench_mla_decode.py --vs-flashmla \
    --configs none --vs-variant-filter NONE --vs-plan "$@" --out $OUT/$n.json > /tmp/$n.log 2>&1
  echo "$n rc=$? at ${SECONDS}s"; grep -E "^\| H=|^\| heads|accuracy" /tmp/$n.log | cut -c1-400
}
case "$name" in
  *H200*)
    bench fp8_h16 120 --vs-formats fp8 --vs-batches-h128 "" --vs-ragged --ragged-seed 39179
    probe gather_page1 60 gather_route.py --formats fp8 --page-sizes 1 --batches 32,64,128 --plan | tail -8
    left=$(( LIMIT - 10 - SECONDS ))
    [ $left -ge 60 ] && bench bf16 $(( left < 150 ? left : 150 )) --vs-formats bf16 --vs-ragged --ragged-seed 39179
    left=$(( LIMIT - 10 - SECONDS ))
    [ $left -ge 60 ] && bench fp8_h128 $left --vs-formats fp8 --vs-batches-h16 "" --vs-e4m3 ;;
  *) echo "on $name: no targets table (an H200's)" ;;
esac
tar -czf $OUT/logs56c.tgz -C /tmp $(cd /tmp && ls ds_lse_c.log tests_c.log fp8_h16.log gather_page1.log bf16.log fp8_h128.log 2>/dev/null)
