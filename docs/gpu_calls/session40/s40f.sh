#!/usr/bin/env bash
# session 40, call F (main + SM_SPLIT; carry [".whl"]): call E's timelines showed which SMs are slow persisting across
# runs (per-SM last exits of two runs correlated 0.71, TPC pairs 0.82). (1) SM_SPLIT's GPU test (weighted plans
# against the reference); (2) benchmarks/probes/sm_split.py: the shipped pinned config against SM_SPLIT with the even,
# balanced and speed-weighted plans, fp8 H = 16, batch 32 / 64 / 128. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-240}
source docs/gpu_calls/lib.sh
gpu_prelude
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 100 \
  python3 -m pytest -q -n 4 tests/gpu/test_mla_hopper_tok_gpu.py -k sm_split > /tmp/tests_s40f.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_s40f.log | tail -8 | cut -c1-300
left=$(( LIMIT - 5 - SECONDS )); [ $left -ge 40 ] && probe sm_split $left sm_split.py --batches 32,64,128
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_s40f.log sm_split.log 2>/dev/null)
