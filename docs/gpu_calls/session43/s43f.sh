#!/usr/bin/env bash
# session 43, call F (main; carry [".whl"]): where P8 goes wrong (call E: its outputs not finite at batch >= 8 with
# 4096-token requests, and once at 1 SM with a query given in e4m3). (1) p8_check.py at batch 8, uniform and mixed
# lengths, 132 / 7 / 1 SMs: T8, P8, P8 with WL1, per request / head block / half, unwritten or not finite;
# (2) compute-sanitizer racecheck on a small P8 case (batch 2, 512 tokens, 1 SM). LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-300}
source docs/gpu_calls/lib.sh
gpu_prelude
probe p8_check 150 p8_check.py --batch 8 --sms 132,7,1 --lengths uniform,mixed
left=$(( LIMIT - 10 - SECONDS ))
if [ $left -ge 40 ]; then
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main timeout $left \
    compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 20 python3 benchmarks/probes/p8_check.py \
    --batch 2 --max-len 512 --sms 1 --lengths uniform --configs T8=1/P8=1 --out $OUT/p8_race.json > /tmp/p8_race.log 2>&1
  echo "racecheck rc=$? at ${SECONDS}s"; grep -E "hazard|Race|ERROR|bad blocks|RACECHECK SUMMARY" /tmp/p8_race.log | head -30 | cut -c1-300
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls p8_check.log p8_race.log 2>/dev/null)
