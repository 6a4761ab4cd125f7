#!/usr/bin/env bash
# session 24, call B: T8 with WG0 widening V_L of WG1's tile before waiting for its P (EW), on RT + PL, with and without LO; prologue marks
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
GRAPHTUNE_GPU_NEW=1 timeout 150 python3 -m pytest -q -x tests/gpu/test_mla_decode_gpu.py -k "T81 and EW1" > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests.log; grep -E "Error|assert|mismatch" $OUT/tests.log | head -12 | cut -c1-300
timeout 240 python3 benchmarks/bench_mla_decode.py --hopper-variants --hopper-kinds "heads-on-M fp8" --hopper-no-portable \
  --hopper-variant-filter "'T8': 1}|'RT': 1, 'PL': 1" --out $OUT/t8_variants.json > $OUT/t8_variants.log 2>&1
echo "bench rc=$?"; grep -E "^check|Error|error" $OUT/t8_variants.log | cut -c1-300
grep -E "^heads=" $OUT/t8_variants.log | sed 's/ tbs=.*//'
for ov in PP=0,T8=1,RT=1,PL=1,EW=1; do
  timeout 70 python3 benchmarks/probes/timeline.py --overlay $ov --cells fp8:128:64 --out $OUT/timeline_${ov//[=,]/_}.json > $OUT/timeline_${ov//[=,]/_}.log 2>&1
  echo "timeline $ov rc=$?"; grep -E "per program|period" $OUT/timeline_${ov//[=,]/_}.log | tail -2
done
