#!/usr/bin/env bash
# session 55, call C (carry [".whl"]): the targets table's cells on an H200 only (the targets were set and last
# recorded on one: session 48), so on any other card it stops at once. The public call tuned per bucket with a step's
# plan beside FlashMLA, uniform and ragged (seed 39179): (1) fp8 H = 16 (the 0.8x target), (2) the row gather at page
# size 1 (the 3.0 TB/s target at batch 64), (3) bf16 H = 16 and 128, (4) fp8 H = 128 with the e4m3 columns, uniform
# only. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-560}
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$name" in *H200*) ;; *) echo "on $name, not an H200: nothing run"; exit 0 ;; esac
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
PP="/tmp/np:$PWD/src:/tmp/site"
bench() {  # NAME CAP ARGS...: the public table beside FlashMLA into $OUT/NAME.json
  local n=$1 cap=$2; shift 2
  PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout $cap python3 benchmarks/bench_mla_decode.py --vs-flashmla \
    --configs none --vs-variant-filter NONE --vs-plan "$@" --out $OUT/$n.json > /tmp/$n.log 2>&1
  echo "$n rc=$? at ${SECONDS}s"; grep -E "^\| H=|^\| heads|accuracy" /tmp/$n.log | cut -c1-400
}
bench fp8_h16 120 --vs-formats fp8 --vs-batches-h128 "" --vs-ragged --ragged-seed 39179
probe gather_page1 60 gather_route.py --formats fp8 --page-sizes 1 --batches 32,64,128 --plan | tail -8
bench bf16 150 --vs-formats bf16 --vs-ragged --ragged-seed 39179
bench fp8_h128 $(( LIMIT - 10 - SECONDS )) --vs-formats fp8 --vs-batches-h16 "" --vs-e4m3
tar -czf $OUT/logs55c.tgz -C /tmp $(cd /tmp && ls fp8_h16.log gather_page1.log bf16.log fp8_h128.log 2>/dev/null)
