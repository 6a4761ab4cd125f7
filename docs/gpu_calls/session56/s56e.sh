#!/usr/bin/env bash
# session 56, call E (carry [".whl"]): the targets table's cells on an H200 only (the targets were set and last recorded
# on one: sessions 48 / 51), so on any other card it stops at once. The public call tuned per bucket with a step's plan
# beside FlashMLA, as shipped now (the reduction's slots read early and streamed, the split behind the kernel ahead):
# (1) fp8 H = 16, uniform and ragged (seed 39179; the 0.8x target), (2) the row gather at page size 1 (the 3.0 TB/s
# target at batch 64), (3) bf16 H = 16 and 128, uniform and ragged, (4) fp8 H = 128 with the e4m3 columns, uniform.
# LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-480}
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
bench fp8_h16 130 --vs-formats fp8 --vs-batches-h128 "" --vs-ragged --ragged-seed 39179
probe gather_page1 60 gather_route.py --formats fp8 --page-sizes 1 --batches 32,64,128 --plan | tail -8
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 60 ] && bench bf16 $(( left < 160 ? left : 160 )) --vs-formats bf16 --vs-ragged --ragged-seed 39179
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 60 ] && bench fp8_h128 $left --vs-formats fp8 --vs-batches-h16 "" --vs-e4m3
tar -czf $OUT/logs56e.tgz -C /tmp $(cd /tmp && ls fp8_h16.log gather_page1.log bf16.log fp8_h128.log 2>/dev/null)
