#!/usr/bin/env bash
# session 24, call F: the T8 prologue's conversion over 64-column halves (QH 1: 757 instructions between the query's
# landing and its readiness against 1,010, compiled for sm_90) against the shipped form: timelines with the prologue
# marks at batch 64 and 8, and the decode's times beside FlashMLA
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for ov in PP=0,T8=1 PP=0,T8=1,QH=1; do
  timeout 60 python3 benchmarks/probes/timeline.py --overlay $ov --cells fp8:128:64,fp8:128:8 --out $OUT/timeline_${ov//[=,]/_}.json > $OUT/timeline_${ov//[=,]/_}.log 2>&1
  echo "timeline $ov rc=$?"; grep -E "^fp8|per program" $OUT/timeline_${ov//[=,]/_}.log | cut -c1-560
done
timeout 120 python3 benchmarks/bench_mla_decode.py --hopper-variants --hopper-kinds "heads-on-M fp8" --hopper-no-portable \
  --hopper-variant-filter "'T8': 1}|QH" --out $OUT/t8_variants.json > $OUT/t8_variants.log 2>&1
echo "variants rc=$?"; grep -E "^check|Error|error" $OUT/t8_variants.log | cut -c1-300
grep -E "^heads=" $OUT/t8_variants.log | sed 's/ tbs=.*//'
