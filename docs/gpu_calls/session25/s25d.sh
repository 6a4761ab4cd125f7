#!/usr/bin/env bash
# session 25, call D: PV8 with P relabelled into the fp8 operand's register layout (no exchange between threads) and
# V^T's tokens in the same order: the small cases (run 3: faults at the P.V wgmmas, wrong outputs), memcheck on the
# first that fails; if none fails, the T8 variants beside FlashMLA
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 150 python3 benchmarks/probes/mla_cases.py --config '{"PP": 0, "T8": 1, "PV8": 1}' > $OUT/cases_pv8.log 2>&1
echo "PV8 rc=$?"; cat $OUT/cases_pv8.log
N=$(grep -n -m1 -E "illegal|rror|non-finite" $OUT/cases_pv8.log | cut -d: -f1)
if [ -n "$N" ]; then
  timeout 200 python3 benchmarks/probes/mla_cases.py --config '{"PP": 0, "T8": 1, "PV8": 1}' --sanitize $((N-1)) > $OUT/sanitize.log 2>&1
  echo "sanitize rc=$?"; grep -v "^case" $OUT/sanitize.log | grep -v "Host Frame" | head -20 | cut -c1-300
  exit 0
fi
timeout 200 python3 benchmarks/bench_mla_decode.py --hopper-variants --hopper-kinds "heads-on-M fp8" --hopper-no-portable \
  --hopper-variant-filter "'T8': 1" --out $OUT/pv8_variants.json > $OUT/pv8_variants.log 2>&1
echo "variants rc=$?"; grep -E "^check|Error|error" $OUT/pv8_variants.log | cut -c1-300
grep -E "^heads=" $OUT/pv8_variants.log | sed 's/ tbs=.*//'
