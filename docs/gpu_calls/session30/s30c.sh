#!/usr/bin/env bash
# session 30 (branch s30 at its commit; session 29 s29n.sh as it was, not run then): main + the fp8 partials in the cache's units + the split's pass
# fused, split-fuse), call A: its GPU tests (the cache-units test at scale 2000 with fp16 and fp32 partials; requests
# past one split step; zero-length requests: the split's mapping), then the fp8 table, uniform and ragged (seed
# 39179), three ways in one call, each in its own process and Triton cache: main as shipped (its src carried in
# .carry/base_src, main at the commit given second), this branch with fp32 partials (the fused split alone), with fp16 partials
set -o pipefail
C=${1:-unknown}
BASE=${2:-unknown}    # main's commit whose src .carry/base_src holds (git archive BASE src | tar -x -C .carry/base_src --strip-components=1)
WAYS=${3:-main fp32 fp16}   # the tables to time (a call of 600 s holds the tests and three at 140 s each)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
# (three test processes at once: their Triton compiles are the time, one core each)
i=0
for sel in partials_in_cache_units more_requests zero_length; do
  i=$((i + 1))
  PYTHONPATH=/tmp/np:$PWD/src:/tmp/site timeout 150 python3 -m pytest -q tests/gpu/test_mla_decode_gpu.py -k $sel \
    > $OUT/tests$i.log 2>&1 &
done
wait
M="$WAYS"
for i in 1 2 3; do
  echo "tests$i: $(tail -1 $OUT/tests$i.log)"; grep -E "^FAILED|Error|rel err" $OUT/tests$i.log | head -4 | cut -c1-300
  if ! tail -1 $OUT/tests$i.log | grep -q " passed" || tail -1 $OUT/tests$i.log | grep -qE "failed|error"; then M=bad; fi
done
if [ "$M" = bad ]; then echo "tests did not pass: branch tables skipped"; M=$(echo "$WAYS" | grep -o main); fi
for m in $M; do
  if [ $m = main ]; then
    GIT_COMMIT=$BASE PYTHONPATH=/tmp/np:$PWD/.carry/base_src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$m timeout 140 python3 \
      benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-ragged \
      --ragged-seed 39179 --out $OUT/table_fp8_$m.json > $OUT/table_fp8_$m.log 2>&1
  else
    PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$m timeout 140 python3 benchmarks/probes/seg_cost.py \
      --partials $m --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-ragged --ragged-seed 39179 \
      --out $OUT/table_fp8_$m.json > $OUT/table_fp8_$m.log 2>&1
  fi
  echo "$m rc=$?"; grep -E "^\| H|accuracy|Error" $OUT/table_fp8_$m.log | cut -c1-120
done
