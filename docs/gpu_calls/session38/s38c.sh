#!/usr/bin/env bash
# session 38, call A (main + EARLY_R + WE, uncommitted when it ran; carry [".whl"]): (1) EARLY_R's and WE's GPU tests
# (gated) and session 37's prepared tests (the ops' opcheck, the bf16 partials, the compiled-and-captured step); (2)
# pinned at H = 128 beside FlashMLA: the bf16 ping-pong kernel as shipped (WG1_FIRST 0 and 1) against EARLY_R, T8 as
# shipped (WL1 0 and 1) against WE; (3) as time allows, session 37's s38a probes: the scaled partials merged by half /
# whole rows (H = 128) and a two-wave V2 grid at fp8 H = 16.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 170 python3 -m pytest -q -n 8 \
  tests/gpu/test_compile_gpu.py tests/gpu/test_mla_decode_gpu.py \
  -k "EARLY_R or WE1 or opcheck or partials or compiled_and_captured" > /tmp/tests_s38c.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_s38c.log | tail -12 | cut -c1-300
variants() {   # variants NAME KIND FILTER CAP
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout $4 python3 \
    benchmarks/bench_mla_decode.py --hopper-variants --hopper-heads 128 --hopper-kinds "$2" --hopper-no-portable \
    --hopper-variant-filter "$3" --out $OUT/$1.json > /tmp/$1.log 2>&1
  echo "$1 rc=$? at ${SECONDS}s"; grep -E "^check|batch=" /tmp/$1.log | cut -c1-330
}
variants early_r_variants "heads-on-M" "'RELOAD': 1}|'WG1_FIRST': 1}|'EARLY_R'" 130
variants we_variants "heads-on-M fp8" "'T8': 1}|'WL1': 1}|'WE'" 130
left=$(( 400 - SECONDS )); [ $left -gt 60 ] && probe partials_rows_h128 $(( left < 120 ? left : 120 )) \
  partials_probe.py --heads 128 --batches 8,32,64
left=$(( 420 - SECONDS )); [ $left -gt 60 ] && probe plan_waves_h16 $left plan_probe.py --batches 8,32,64,128 \
  --b3 PROGRAMS_PER_SM=4
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_s38c.log early_r_variants.log we_variants.log \
  partials_rows_h128.log plan_waves_h16.log 2>/dev/null)
