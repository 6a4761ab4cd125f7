#!/usr/bin/env bash
# session 56, call D (carry [".whl"]; an H100 or an H200, say which): call B's one-off fp8_ds_mla LSE error (3.0e-3 at
# a 63-token request, bound 2e-3) was a precision outlier or a race? Call C found up to 2.09e-3 over 17 seeds, the same
# bit for bit with SPLIT_PDL 0 and 2, but could not rerun call B's inputs (make_inputs drew the cache from torch's
# global generator: fixed since). (1) ds_lse.py in four processes at once on the GPU (as pytest's four workers share
# it), each eight fresh seeds, SPLIT_PDL 0 / 1 / 2, four launches each compared bit for bit; (2) the fp8_ds_mla tests of
# the tokens-on-M file in four workers (the spread case's LSE bound now 8e-3); (3) on an H200 only, the targets' cells.
# LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-560}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
for w in 1 2 3 4; do
  probe ds_lse_d$w 120 ds_lse.py --random 8 --repeat 4 --ways 0,1,2 > /tmp/ds_lse_d${w}_summary.txt 2>&1 &
done
wait
for w in 1 2 3 4; do grep -E "rc=|largest|differed|rror" /tmp/ds_lse_d${w}_summary.txt | cut -c1-250; done
gpu_tests tests_d 100 tests/gpu/test_mla_hopper_tok_gpu.py "ds"
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
tar -czf $OUT/logs56d.tgz -C /tmp $(cd /tmp && ls ds_lse_d*.log tests_d.log fp8_h16.log gather_page1.log bf16.log fp8_h128.log 2>/dev/null)
