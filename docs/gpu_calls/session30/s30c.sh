#!/usr/bin/env bash
# session 30 (branch s30 at its commit; session 29's s29n.sh, not run then, with a fourth way): the fp8 table, uniform
# and ragged (seed 39179), each way in its own process and Triton cache: main as shipped (its src carried in
# .carry/base_src, main at the commit given second), this branch with fp32 partials (the fused split alone), with
# fp16 partials (partials in the cache's units), and branch lazy-price (its src carried in .carry/lazy_src: the fused
# split with the priced pass run only on ragged batches, fp32 partials). First the GPU tests of the ways' code (the
# cache-units test at scale 2000 with fp16 and fp32 partials; requests past one split step; zero-length requests: the
# split's mapping), four processes at once (their Triton compiles are the time, one core each); a way whose tests
# failed is not timed. A call holds the tests and three tables at 140 s: split the ways over two calls (third
# argument: "main fp32 lazy", then "fp16" with a fourth argument "notests", the tests the first call passed).
# .carry/lazy_src: git archive lazy-price src | tar -x -C .carry/lazy_src --strip-components=1, and its commit in
# .carry/lazy_src/COMMIT.
set -o pipefail
C=${1:-unknown}
BASE=${2:-unknown}    # main's commit whose src .carry/base_src holds (git archive BASE src | tar -x -C .carry/base_src --strip-components=1)
WAYS=${3:-main fp32 fp16}
TESTS=${4:-tests}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
M="$WAYS"
if [ "$TESTS" = tests ]; then
  i=0
  for sel in partials_in_cache_units more_requests zero_length; do
    i=$((i + 1))
    PYTHONPATH=/tmp/np:$PWD/src:/tmp/site timeout 150 python3 -m pytest -q tests/gpu/test_mla_decode_gpu.py -k $sel \
      > $OUT/tests$i.log 2>&1 &
  done
  if echo "$WAYS" | grep -q lazy; then
    PYTHONPATH=/tmp/np:$PWD/.carry/lazy_src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_lazy_tests timeout 150 python3 -m pytest \
      -q tests/gpu/test_mla_decode_gpu.py -k "more_requests or zero_length" > $OUT/tests_lazy.log 2>&1 &
  fi
  wait
  for f in $OUT/tests*.log; do
    echo "$(basename $f): $(tail -1 $f)"; grep -E "^FAILED|Error|rel err" $f | head -4 | cut -c1-300
    if ! tail -1 $f | grep -q " passed" || tail -1 $f | grep -qE "failed|error"; then
      if [ "$(basename $f)" = tests_lazy.log ]; then M=$(echo "$M" | sed 's/lazy//'); else M=$(echo "$M" | sed 's/fp32//; s/fp16//'); fi
      echo "tests did not pass: $(basename $f)'s ways not timed"
    fi
  done
fi
for m in $M; do
  if [ $m = main ]; then
    GIT_COMMIT=$BASE PYTHONPATH=/tmp/np:$PWD/.carry/base_src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$m timeout 140 python3 \
      benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-ragged \
      --ragged-seed 39179 --out $OUT/table_fp8_$m.json > $OUT/table_fp8_$m.log 2>&1
  elif [ $m = lazy ]; then
    GIT_COMMIT=$(cat .carry/lazy_src/COMMIT 2>/dev/null || echo unknown) \
    PYTHONPATH=/tmp/np:$PWD/.carry/lazy_src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$m timeout 140 python3 \
      benchmarks/probes/seg_cost.py --partials fp32 --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-ragged \
      --ragged-seed 39179 --out $OUT/table_fp8_$m.json > $OUT/table_fp8_$m.log 2>&1
  else
    PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$m timeout 140 python3 benchmarks/probes/seg_cost.py \
      --partials $m --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-ragged --ragged-seed 39179 \
      --out $OUT/table_fp8_$m.json > $OUT/table_fp8_$m.log 2>&1
  fi
  echo "$m rc=$?"; grep -E "^\| H|accuracy|Error" $OUT/table_fp8_$m.log | cut -c1-120
done
