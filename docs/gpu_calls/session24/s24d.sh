#!/usr/bin/env bash
# session 24, call D: T8 taking the query's fp8 hi/lo pair from query8.py's kernel (no conversion in its prologue):
# its GPU tests, the second and third fp8 heads-on-M kernels at batch 1 / 8 / 32 / 64 beside FlashMLA, T8's timeline
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 150 python3 -m pytest -q tests/gpu/test_mla_decode_gpu.py -k "T81 or third or (tuned_per_bucket and fp8-H128)" > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests.log; grep -E "^FAILED|Error|assert" $OUT/tests.log | head -8 | cut -c1-300
timeout 110 python3 benchmarks/bench_mla_decode.py --hopper-variants --hopper-kinds "heads-on-M fp8" --hopper-no-portable \
  --hopper-variant-filter "T8|'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1}" --out $OUT/t8_variants.json > $OUT/t8_variants.log 2>&1
echo "variants rc=$?"; grep -E "^check|Error|error" $OUT/t8_variants.log | cut -c1-300
grep -E "^heads=" $OUT/t8_variants.log | sed 's/ tbs=.*//'
timeout 80 python3 benchmarks/probes/timeline.py --overlay PP=0,T8=1 --cells fp8:128:64,fp8:128:8 --out $OUT/timeline_t8.json > $OUT/timeline_t8.log 2>&1
echo "timeline rc=$?"; grep -E "^fp8|per program" $OUT/timeline_t8.log | cut -c1-700
