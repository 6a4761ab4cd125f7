#!/usr/bin/env bash
# session 31 (branch s31 at its commit: main + the fused split and fp16 partials (partials-main) + the per-step plan
# (split-plan) + the priced pass only on ragged batches (lazy-price) + the e4m3 precision's hi halves alone
# (e4m3-hi)), call A: the branch's GPU tests as six processes at once (their Triton compiles are the time, one core
# each; GRAPHTUNE_GPU_NEW=1 runs the PLAN gate's tests): every split kernel given a plan, bit for bit its own split's
# output and against the reference (three selections); a captured step with its plan, replayed with new lengths; the
# split's mapping (requests past one split step, zero-length requests, partials in the cache's units); the e4m3
# precision (the pre-pass's hi bytes, T8 with the lo columns NaN-poisoned, the public call, capture). Then, if all
# passed, benchmarks/probes/split_plan.py on the fp8 cells, uniform and ragged (seed 39179): each cell's tuned public
# call in steps of 8 layers with one plan a step against none; the plan kernel alone.
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
i=0
for sel in "given_a_plan and T81" "given_a_plan and PP1" "given_a_plan and not T81 and not PP1" "step_plan" \
    "partials_in_cache_units or more_requests or zero_length or split_max_configs" \
    "query_pair_is_its or never_reads_the_lo or query_precision_e4m3_matches or query_precision_e4m3_tuned"; do
  i=$((i + 1))
  GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_t$i timeout 280 python3 -m pytest \
    -q tests/gpu/test_mla_decode_gpu.py -k "$sel" > $OUT/tests$i.log 2>&1 &
done
wait
ok=1
for i in 1 2 3 4 5 6; do
  echo "tests$i: $(tail -1 $OUT/tests$i.log)"; grep -E "^FAILED|Error|rel err|differs" $OUT/tests$i.log | head -4 | cut -c1-300
  if ! tail -1 $OUT/tests$i.log | grep -q " passed" || tail -1 $OUT/tests$i.log | grep -qE "failed|error"; then ok=0; fi
done
if [ $ok = 0 ]; then echo "tests did not pass: probe skipped"; exit 1; fi
if [ "${PROBE:-1}" = 0 ]; then echo "probe not asked for (PROBE=0)"; exit 0; fi
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site timeout 290 python3 benchmarks/probes/split_plan.py \
  --cells fp8:16:32,fp8:16:64,fp8:128:32,fp8:128:64,fp8:16:8,fp8:16:128,fp8:128:8 --ragged-seed 39179 \
  --out $OUT/split_plan_fp8.json > $OUT/split_plan_fp8.log 2>&1
echo "probe rc=$?"; grep -E "^\| |Error" $OUT/split_plan_fp8.log | cut -c1-200
