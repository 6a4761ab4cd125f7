#!/usr/bin/env bash
# session 25, call B: T8 with P.V as fp8 wgmmas (PV8 1: P times 2^8 in e4m3 against V^T transposed into each buffer's
# second 32 KB, kernel_hopper.transpose_layout): GPU tests of its two configs, the T8 variants beside FlashMLA, PV8's
# timeline at batch 64
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
GRAPHTUNE_GPU_NEW=1 timeout 150 python3 -m pytest -q -x tests/gpu/test_mla_decode_gpu.py -k "PV8" > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests.log; grep -E "Error|assert|rel err" $OUT/tests.log | head -8 | cut -c1-300
timeout 170 python3 benchmarks/bench_mla_decode.py --hopper-variants --hopper-kinds "heads-on-M fp8" --hopper-no-portable \
  --hopper-variant-filter "'T8': 1" --out $OUT/pv8_variants.json > $OUT/pv8_variants.log 2>&1
echo "variants rc=$?"; grep -E "^check|Error|error" $OUT/pv8_variants.log | cut -c1-300
grep -E "^heads=" $OUT/pv8_variants.log | sed 's/ tbs=.*//'
timeout 60 python3 benchmarks/probes/timeline.py --overlay PP=0,T8=1,PV8=1 --cells fp8:128:64 --out $OUT/timeline_pv8.json > $OUT/timeline_pv8.log 2>&1
echo "timeline rc=$?"; grep -E "^fp8|per program" $OUT/timeline_pv8.log | cut -c1-700
