#!/usr/bin/env bash
# session 25, call A (prepared in session 24): the fp8 heads-on-M kernels with the bank-conflict-free widening
# (kernel_hopper.widen_layout, commit d3e0b89) on the public path: GPU tests of their configs, tuned per bucket then
# captured and replayed; the full table beside FlashMLA; T8's timeline at batch 64
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 200 python3 -m pytest -q tests/gpu/test_mla_decode_gpu.py -k "T81 or third or (fp8 and PP1) or (tuned_per_bucket and fp8-H128)" > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests.log; grep -E "^FAILED|Error|assert" $OUT/tests.log | head -8 | cut -c1-300
timeout 170 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-variant-filter NONE \
  --vs-batches-h16 1,8,32,64,128 --vs-batches-h128 1,8,32,64 --out $OUT/vs_flashmla.json > $OUT/table.log 2>&1
echo "table rc=$?"; grep -E "^\| |accuracy" $OUT/table.log | cut -c1-400
timeout 60 python3 benchmarks/probes/timeline.py --overlay PP=0,T8=1 --cells fp8:128:64 --out $OUT/timeline_t8.json > $OUT/timeline_t8.log 2>&1
echo "timeline rc=$?"; grep -E "^fp8|per program" $OUT/timeline_t8.log | cut -c1-700
