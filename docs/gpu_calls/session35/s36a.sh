#!/usr/bin/env bash
# prepared in session 35 for the next session's first call (main; carry [".whl"]; meant for an H200: the issue's
# targets and session 35 call A's table are H200 figures): (1) the fp8 and bf16 tables beside FlashMLA with the plan
# column (`--vs-plan`: the public call given a step's plan, made before the graph), uniform and ragged; (2) the row
# gather at page size 1 (fp8, H = 16, batch 64 / 128; target 3.0 TB/s).
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
for fmt in fp8 bf16; do
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 200 python3 \
    benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats $fmt --vs-variant-filter NONE --vs-plan \
    --vs-ragged --ragged-seed 39179 --out $OUT/${fmt}_plan.json > /tmp/${fmt}_plan.log 2>&1
  echo "$fmt rc=$? at ${SECONDS}s"; grep -E "^\| H=|accuracy" /tmp/${fmt}_plan.log | cut -c1-400
done
PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 150 python3 benchmarks/probes/gather_route.py \
  --formats fp8 --page-sizes 1 --batches 64,128 --out $OUT/gather.json > /tmp/gather.log 2>&1
echo "gather rc=$? at ${SECONDS}s"; tail -6 /tmp/gather.log | cut -c1-300
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
