#!/usr/bin/env bash
# session 35, call B (main with fp16 partials on every Hopper split kernel; carry [".whl"]): (1) the MLA GPU tests of
# every fp8 path (the tokens-on-M V2 kernel's, the heads-on-M kernels', T8's, the e4m3 query's) in 8 xdist workers;
# (2) timelines with fixed-cost lines (benchmarks/probes/timeline.py) at fp8 H = 16 batch 32 / 64: where the ~11 us
# that no batch amortises go now; (3) the row gather at page size 1 (fp8, H = 16, batch 64 / 128; target 3.0 TB/s).
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 250 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_decode_gpu.py tests/gpu/test_mla_hopper_tok_gpu.py -k "fp8 or e4m3 or v2_matches" \
  > /tmp/tests_fp8.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; tail -6 /tmp/tests_fp8.log | cut -c1-300
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main timeout 130 python3 benchmarks/probes/timeline.py \
  --cells fp8:16:32,fp8:16:64 --lengths 1024,2048,4096 --out $OUT/timeline.json > /tmp/timeline.log 2>&1
echo "timeline rc=$? at ${SECONDS}s"; cat /tmp/timeline.log | cut -c1-900
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main timeout 150 python3 benchmarks/probes/gather_route.py \
  --formats fp8 --page-sizes 1 --batches 64,128 --out $OUT/gather.json > /tmp/gather.log 2>&1
echo "gather rc=$? at ${SECONDS}s"; tail -8 /tmp/gather.log | cut -c1-300
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
