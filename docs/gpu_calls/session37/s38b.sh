#!/usr/bin/env bash
# prepared in session 37 for the next session's second call (main; carry [".whl"]; meant for an H200): (1) T8 at fp8
# H = 128 batch 1 / 2 / 4 with SPLIT_MAX 32 on its space (a pair of tiles a program at batch 1-2, where the even split
# gives each of 66 programs about one tile, so WG1 idles) against T8 as shipped; (2) the fp8 (with the e4m3 columns)
# and bf16 tables beside FlashMLA with the plan, main as landed in session 37.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
probe plan_t8_h128 70 plan_probe.py --heads 128 --batches 1,2,4
probe plan_t8_split32_h128 70 plan_probe.py --heads 128 --batches 1,2,4 --t8-split-max 32
for fmt in fp8 bf16; do
  extra=$([ $fmt = fp8 ] && echo --vs-e4m3)
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 170 python3 \
    benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats $fmt --vs-variant-filter NONE --vs-plan \
    $extra --vs-ragged --ragged-seed 39179 --out $OUT/${fmt}_main.json > /tmp/${fmt}_main.log 2>&1
  echo "$fmt rc=$? at ${SECONDS}s"; grep -E "^\| H=|accuracy" /tmp/${fmt}_main.log | cut -c1-400
done
tar -czf $OUT/logs.tgz -C /tmp plan_t8_h128.log plan_t8_split32_h128.log fp8_main.log bf16_main.log
