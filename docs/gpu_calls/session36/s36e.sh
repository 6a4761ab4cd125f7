#!/usr/bin/env bash
# session 36, call E (main; carry [".whl"]): fp8 H = 128 with a plan, (1) batch 8 on the fp8 ping-pong kernel (as
# shipped) and on T8 (the third kernel from batch 8 instead of 16: with a plan T8 gained 10% at batch 16, the ping-pong
# kernel does not read one), (2) the e4m3 query (query_precision="e4m3", FlashMLA's accuracy class) with a plan at
# batch 8-64 (T8 from 8 there as shipped).
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
probe() {   # name, args...
  local name=$1; shift
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 120 python3 \
    benchmarks/probes/plan_probe.py "$@" --out $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc=$? at ${SECONDS}s"; grep -v '^{' /tmp/$name.log | grep -v "^$" | cut -c1-300
}
probe pp_b8 --heads 128 --batches 8
probe t8_b8 --heads 128 --batches 8,16 --third-min-batch 8
probe e4m3 --heads 128 --batches 8,16,32,64 --query-precision e4m3
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
