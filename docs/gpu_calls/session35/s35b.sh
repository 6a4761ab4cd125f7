#!/usr/bin/env bash
# session 35, call B (main: fp16 partials on every Hopper split kernel, and FILL1 written; carry [".whl"]):
# (1) the MLA GPU tests of every fp8 path (the tokens-on-M V2 kernel's with FILL1's, the heads-on-M kernels', T8's,
# the e4m3 query's) in 8 xdist workers; (2) FILL1 against the V2 kernel's space beside FlashMLA and the tuned path
# (fp8, H = 16, uniform and ragged); (3) timelines with fixed-cost lines (benchmarks/probes/timeline.py) at fp8 H = 16
# batch 32 / 64, then the same cells with FILL1.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 230 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_decode_gpu.py tests/gpu/test_mla_hopper_tok_gpu.py -k "fp8 or e4m3 or v2_matches" \
  > /tmp/tests_fp8.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error" /tmp/tests_fp8.log | tail -8 | cut -c1-300
GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 200 python3 \
  benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-batches-h128 "" --vs-ragged \
  --ragged-seed 39179 --vs-variant-filter \
  "'NUM_BUF': 2, 'PREFETCH': 1, 'FAST_MAX': 1}|'NUM_BUF': 3, 'PREFETCH': 1, 'FAST_MAX': 1}|'RK64': 1, 'PT_EARLY': 1}|'FILL1': 1}" \
  --out $OUT/fill1.json > /tmp/fill1.log 2>&1
echo "fill1 rc=$? at ${SECONDS}s"
PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 80 python3 benchmarks/probes/timeline.py \
  --cells fp8:16:32,fp8:16:64 --lengths 1024,2048,4096 --out $OUT/timeline.json > /tmp/timeline.log 2>&1
echo "timeline rc=$? at ${SECONDS}s"; grep -v "^$" /tmp/timeline.log | cut -c1-700
PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout 50 python3 benchmarks/probes/timeline.py \
  --cells fp8:16:32,fp8:16:64 --overlay FILL1=1 --out $OUT/timeline_fill1.json > /tmp/timeline_fill1.log 2>&1
echo "timeline_fill1 rc=$? at ${SECONDS}s"; grep -v "^$" /tmp/timeline_fill1.log | cut -c1-700
grep -E "^\| H=16|accuracy" /tmp/fill1.log | cut -c1-400
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
