#!/usr/bin/env bash
# session 42 call B (main; carry [".whl"]; an H100 or an H200, say which): a request-aligned split at H = 128. At batch
# 64 the 66 programs of a head block (132 SMs) take 62 tiles each, so nearly every program crosses a request (two
# segments: a second query load and pipeline start, partials for the reduction); SPLIT_MAX = 64 / batch gives 64
# programs of whole requests or halves (uniform 4096-token requests: 64 / 32 tiles each, one segment). plan_probe.py
# times the shipped config with a plan (b2) beside the same with that SPLIT_MAX (b3), uniform and ragged, bf16 (the
# ping-pong kernel) then fp8 (T8), batch 8 / 32 / 64, beside FlashMLA. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-540}
source docs/gpu_calls/lib.sh
gpu_prelude
for fmt in bf16 fp8; do
  if [ $fmt = bf16 ]; then base=BLOCK_N=64,PP=1,RELOAD=1,WG1_FIRST=1; else base=BLOCK_N=64,T8=1; fi
  for bs in 64:1 32:2 8:8; do
    b=${bs%:*}; sm=${bs#*:}
    left=$(( LIMIT - 10 - SECONDS )); [ $left -ge 40 ] || break 2
    probe align_${fmt}_b$b $(( left < 120 ? left : 120 )) plan_probe.py --format $fmt --heads 128 --batches $b \
      --b2 $base --b3 SPLIT_MAX=$sm
  done
done
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls align_*.log 2>/dev/null)
