#!/usr/bin/env bash
# session 33, call N (the fused split checked out; carry [".carry", ".whl"], .carry/src_main = main's src before it,
# with its commit in COMMIT): fp8 and bf16 tables, uniform and ragged (seed 39179), each way in its own process and
# Triton cache with FlashMLA timed in each: main, the fused split (each chunk of _split_start's even pass one scan and
# one reduction of several operands: barriers before the first copy 45 -> 16 in the fp8 heads-on-M kernels, 22 -> 16
# in the bf16 ones, compiled for sm_90a), and the fused split with the bf16 kernels' start price at 4 tiles (call M:
# ragged bf16 3-12% faster at price 4, uniform 0.4-7.3% slower from the priced pass's sums); then the split's GPU
# tests on the fused split and the resource inspector's GPU tests (the 1 KB reserve counted once).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
C=${GIT_COMMIT:-unknown}
table() {  # way src commit format out [probe args]
  local way=$1 src=$2 commit=$3 fmt=$4 out=$5; shift 5
  local script=benchmarks/bench_mla_decode.py
  [ $# -gt 0 ] && script=benchmarks/probes/seg_cost.py
  GIT_COMMIT=$commit PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_${way}_$fmt timeout 110 python3 \
    $script "$@" $([ $# -gt 0 ] || echo --vs-flashmla) --configs none --vs-formats $fmt --vs-variant-filter NONE \
    --vs-ragged --ragged-seed 39179 --out $OUT/$out.json > /tmp/$out.log 2>&1
  echo "$out rc=$?"; grep -E "Error|error" /tmp/$out.log | head -3 | cut -c1-200
}
M=$PWD/.carry/src_main; MC=$(cat $M/COMMIT)
table main $M $MC fp8 fp8_main
table fused $PWD/src $C fp8 fp8_fused
table main $M $MC bf16 bf16_main
table fused $PWD/src $C bf16 bf16_fused
table seg4 $PWD/src $C bf16 bf16_fused_seg4 --bf16 4
python3 benchmarks/compare_mla_tables.py $OUT/fp8_main.json $OUT/fp8_fused.json --labels main,fused \
  --out $OUT/compare_fp8.json 2>&1 | tail -22
python3 benchmarks/compare_mla_tables.py $OUT/bf16_main.json $OUT/bf16_fused.json $OUT/bf16_fused_seg4.json \
  --labels main,fused,seg4 --out $OUT/compare_bf16.json 2>&1 | tail -22
grep -h "accuracy" /tmp/*_fused*.log | cut -c1-200
PYTHONPATH=/tmp/np:$PWD/src TRITON_CACHE_DIR=/tmp/tc_tests timeout 150 python3 -m pytest -q -rs -x \
  tests/gpu/test_mla_decode_gpu.py -k "more_requests or zero_length or hopper_fp8_matches or hopper_matches_reference" \
  tests/gpu/test_resources_gpu.py > /tmp/tests.log 2>&1
echo "tests: $(tail -1 /tmp/tests.log)"; grep -E "^FAILED|^E " /tmp/tests.log | head -8 | cut -c1-300
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
