#!/usr/bin/env bash
# session 34, call A (session 33's call O, which never ran; fp16 partials for fp8 caches (branch p16, .carry/src_p16);
# the page-size-1 row gather and the split's GPU tests).
# Tree: main + docs/gpu_calls/session33/split_uniform.patch (the even split by division on uniform batches, no second
# pass over seq_lens; BF16_SEG_COST 4); carry [".carry", ".whl"], .carry/src_main = main's src (+ COMMIT).
# fp8 and bf16 tables, uniform and ragged (seed 39179), main and the candidate each in its own process and Triton
# cache, FlashMLA in each; then the candidate's page-size-1 row gather (fp8, fp8_ds_mla, batch 64/128) and the
# split's GPU tests.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
C=${GIT_COMMIT:-unknown}
table() {  # way src commit format
  local way=$1 src=$2 commit=$3 fmt=$4
  GIT_COMMIT=$commit PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$way \
    timeout 140 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats $fmt \
    --vs-variant-filter NONE --vs-ragged --ragged-seed 39179 --out $OUT/${fmt}_$way.json > /tmp/${fmt}_$way.log 2>&1
  echo "${fmt}_$way rc=$? at ${SECONDS}s"; grep -E "Error|error" /tmp/${fmt}_$way.log | head -3 | cut -c1-200
}
M=$PWD/.carry/src_main; MC=$(cat $M/COMMIT)
table main $M $MC fp8
table cand $PWD/src $C fp8
P=$PWD/.carry/src_p16; PC=$(cat $P/COMMIT)
table p16 $P $PC fp8
table main $M $MC bf16
table cand $PWD/src $C bf16
for f in fp8 bf16; do
  python3 benchmarks/compare_mla_tables.py $OUT/${f}_main.json $OUT/${f}_cand.json --labels main,cand \
    --out $OUT/compare_$f.json 2>&1 | tail -22
done
python3 benchmarks/compare_mla_tables.py $OUT/fp8_cand.json $OUT/fp8_p16.json --labels cand,p16 \
  --out $OUT/compare_fp8_p16.json 2>&1 | tail -22
grep -h "accuracy" /tmp/*_cand.log | cut -c1-200
GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_cand timeout $(( 560 - SECONDS < 120 ? 560 - SECONDS : 120 )) python3 benchmarks/probes/gather_route.py \
  --formats fp8,fp8_ds_mla --page-sizes 1 --batches 64,128 --out $OUT/gather_cand.json > /tmp/gather_cand.log 2>&1; echo "gather rc=$?"
tail -8 /tmp/gather_cand.log
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_cand timeout $(( 575 - SECONDS )) python3 -m pytest -q -x tests/gpu/test_mla_decode_gpu.py \
  -k "more_requests or zero_length or split_max" > /tmp/tests_cand.log 2>&1; echo "tests rc=$?"; tail -3 /tmp/tests_cand.log
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
