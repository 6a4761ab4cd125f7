#!/usr/bin/env bash
# session 25, call C: where T8 with PV8 1 faults (run 2: an illegal address in the GPU test's mixed batch and the
# benchmark's H = 64 check, none at batch 64 x 4096): small cases one process each, PV8 0 and 1, then
# compute-sanitizer memcheck on the first case that faults
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 150 python3 benchmarks/probes/mla_cases.py --config '{"PP": 0, "T8": 1}' > $OUT/cases_t8.log 2>&1
echo "T8 rc=$?"; cat $OUT/cases_t8.log
timeout 150 python3 benchmarks/probes/mla_cases.py --config '{"PP": 0, "T8": 1, "PV8": 1}' > $OUT/cases_pv8.log 2>&1
echo "PV8 rc=$?"; cat $OUT/cases_pv8.log
N=$(grep -n -m1 -E "illegal|error|Error|non-finite" $OUT/cases_pv8.log | cut -d: -f1)
[ -n "$N" ] && timeout 200 python3 benchmarks/probes/mla_cases.py --config '{"PP": 0, "T8": 1, "PV8": 1}' --sanitize $((N-1)) > $OUT/sanitize.log 2>&1
echo "sanitize rc=$?"; grep -v "^case" $OUT/sanitize.log | head -50 | cut -c1-300
