#!/usr/bin/env bash
# session 34, call B (branch vt = main + split_uniform.patch + VT; carry [".carry", ".whl"]: .carry/src_main = main's
# src, .carry/src_p16 = branch p16's src, each with COMMIT). In order of what decides most, each step capped so that
# the call ends inside its 600 s:
# 1. VT's GPU test (gated: GRAPHTUNE_GPU_NEW=1): H 64 / 128, lengths 1 .. 4096, NaN past seq_len, 132 / 7 / 1 SMs;
# 2. VT and T8 pinned beside FlashMLA, H = 128, fp8, batch 1 / 8 / 32 / 64 (each checked against the reference first);
# 3. the fp8 and bf16 tables, main against the candidate (split-uniform), uniform and ragged (seed 39179), and p16's
#    fp8 table (fp16 partials for fp8 caches), each in its own process and Triton cache, FlashMLA in each;
# 4. the page-size-1 row gather (fp8, fp8_ds_mla, batch 64 / 128) and the split's GPU tests, if time is left.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
C=${GIT_COMMIT:-unknown}
left() { echo $(( $1 - SECONDS )); }
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_cand timeout 150 python3 -m pytest -q -x \
  tests/gpu/test_mla_decode_gpu.py -k "heads_on_m_variants and VT1" > /tmp/vt_tests.log 2>&1
echo "vt tests rc=$? at ${SECONDS}s"; tail -4 /tmp/vt_tests.log | cut -c1-300
GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_cand timeout 150 python3 benchmarks/bench_mla_decode.py \
  --hopper-variants --hopper-heads 128 --hopper-kinds "heads-on-M fp8" --hopper-variant-filter "'T8': 1}|'VT': 1" \
  --hopper-no-portable --out $OUT/vt_variants.json > /tmp/vt_bench.log 2>&1
echo "vt bench rc=$? at ${SECONDS}s"; grep -E "^check|batch=" /tmp/vt_bench.log | cut -c1-260
table() {  # way src commit format cap
  local way=$1 src=$2 commit=$3 fmt=$4 cap=$5
  [ "$cap" -lt 30 ] && { echo "${fmt}_$way skipped (time)"; return; }
  GIT_COMMIT=$commit PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$way \
    timeout $cap python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats $fmt \
    --vs-variant-filter NONE --vs-ragged --ragged-seed 39179 --out $OUT/${fmt}_$way.json > /tmp/${fmt}_$way.log 2>&1
  echo "${fmt}_$way rc=$? at ${SECONDS}s"; grep -E "Error|error" /tmp/${fmt}_$way.log | head -3 | cut -c1-200
}
M=$PWD/.carry/src_main; MC=$(cat $M/COMMIT); P=$PWD/.carry/src_p16; PC=$(cat $P/COMMIT)
table main $M $MC fp8 $(( $(left 560) < 90 ? $(left 560) : 90 ))
table cand $PWD/src $C fp8 $(( $(left 560) < 120 ? $(left 560) : 120 ))
table p16 $P $PC fp8 $(( $(left 560) < 120 ? $(left 560) : 120 ))
table main $M $MC bf16 $(( $(left 560) < 90 ? $(left 560) : 90 ))
table cand $PWD/src $C bf16 $(( $(left 560) < 90 ? $(left 560) : 90 ))
for pair in "main cand fp8" "cand p16 fp8" "main cand bf16"; do
  set -- $pair
  [ -f $OUT/${3}_$1.json ] && [ -f $OUT/${3}_$2.json ] && python3 benchmarks/compare_mla_tables.py $OUT/${3}_$1.json \
    $OUT/${3}_$2.json --labels $1,$2 --out $OUT/compare_${3}_$1_$2.json 2>&1 | tail -22
done
grep -h "accuracy" /tmp/*_cand.log /tmp/*_p16.log 2>/dev/null | cut -c1-200
if [ $(left 560) -gt 60 ]; then
  GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_cand timeout $(left 560) python3 benchmarks/probes/gather_route.py \
    --formats fp8,fp8_ds_mla --page-sizes 1 --batches 64,128 --out $OUT/gather_cand.json > /tmp/gather_cand.log 2>&1
  echo "gather rc=$? at ${SECONDS}s"; tail -8 /tmp/gather_cand.log
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
