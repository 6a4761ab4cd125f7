#!/usr/bin/env bash
# session 55, call B (carry [".whl"]; an H100 or an H200, say which): the standing of every target cell with what
# landed since session 48 (the reduction's slots read early, streamed behind fp8 and, from this commit, fp8_ds_mla
# rows; the tuner's plan fix): the public call tuned per bucket with a step's plan beside FlashMLA, uniform and ragged
# (seed 39179): (1) bf16 H = 16 and 128, (2) fp8 H = 16 and 128 with the e4m3 columns (FlashMLA's accuracy class),
# (3) the row gather at page size 1 (fp8 H = 16, batch 32 / 64 / 128), (4) with what time is left, the bf16 ping-pong
# kernel streamed (STREAM_PP, off) against the slots read early alone, six rounds. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-560}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
PP="/tmp/np:$PWD/src:/tmp/site"
PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout ${BF16_CAP:-150} python3 benchmarks/bench_mla_decode.py \
  --vs-flashmla --configs none --vs-formats bf16 --vs-variant-filter NONE --vs-plan --vs-ragged --ragged-seed 39179 \
  --out $OUT/bf16.json > /tmp/bf16.log 2>&1
echo "bf16 rc=$? at ${SECONDS}s"; grep -E "^\| H=|^\| heads|accuracy" /tmp/bf16.log | cut -c1-600
PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout ${FP8_CAP:-220} python3 benchmarks/bench_mla_decode.py \
  --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-plan --vs-e4m3 --vs-ragged \
  --ragged-seed 39179 --out $OUT/fp8.json > /tmp/fp8.log 2>&1
echo "fp8 rc=$? at ${SECONDS}s"; grep -E "^\| H=|^\| heads|accuracy" /tmp/fp8.log | cut -c1-600
probe gather_page1 ${GATHER_CAP:-60} gather_route.py --formats fp8 --page-sizes 1 --batches 32,64,128 --plan | tail -8
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 60 ] && probe tail_pp $left reduce_tail.py --rounds ${ROUNDS:-6} --ragged --stream-gated \
  --cells "bf16:128:64:32,64" | grep -E "^\||rc=|rror|not timed" | cut -c1-250
tar -czf $OUT/logs55b.tgz -C /tmp $(cd /tmp && ls bf16.log fp8.log gather_page1.log tail_pp.log 2>/dev/null)
