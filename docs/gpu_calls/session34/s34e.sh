#!/usr/bin/env bash
# session 34, call E (main; carry [".carry", ".whl"]: .carry/src_main = main's src, .carry/src_p16 = branch p16 at
# dd70185: fp16 partials for fp8 caches with the reduction's whole rows at two warps): the fp8 tables of main and
# p16 (uniform and ragged, seed 39179, FlashMLA in each run), then p16's reduce_sweep cells of call D.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for way in main p16; do
  src=$PWD/.carry/src_$way
  GIT_COMMIT=$(cat $src/COMMIT) PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$way timeout 110 \
    python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE \
    --vs-ragged --ragged-seed 39179 --out $OUT/fp8_$way.json > /tmp/fp8_$way.log 2>&1
  echo "fp8_$way rc=$? at ${SECONDS}s"
done
python3 benchmarks/compare_mla_tables.py $OUT/fp8_main.json $OUT/fp8_p16.json --labels main,p16 \
  --out $OUT/compare_fp8_main_p16.json 2>&1 | tail -22
grep -h "accuracy" /tmp/fp8_*.log | cut -c1-200
src=$PWD/.carry/src_p16
GIT_COMMIT=$(cat $src/COMMIT) PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_p16 timeout $(( 420 - SECONDS )) \
  python3 benchmarks/probes/reduce_sweep.py --formats fp8 --h16 32,64 --h128 8,32 --shapes 16x1x512x2 \
  --out $OUT/reduce_sweep_p16.json > /tmp/rs_p16.log 2>&1
echo "rs rc=$? at ${SECONDS}s"; grep -v "^\s*$" /tmp/rs_p16.log | tail -10 | cut -c1-200
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
