#!/usr/bin/env bash
# session 56, call E (carry [".whl"]): the targets table's cells on an H200 only (the targets were set and last recorded
# on one: sessions 48 / 51), so on any other card it stops at once. The public call tuned per bucket with a step's plan
# beside FlashMLA, as shipped now (the reduction's slots read early and streamed, the split behind the kernel ahead):
# docs/gpu_calls/lib.sh's targets_h200. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-480}
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$name" in *H200*) ;; *) echo "on $name, not an H200: nothing run"; exit 0 ;; esac
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
targets_h200 "$LIMIT"
tar -czf $OUT/logs56e.tgz -C /tmp $(cd /tmp && ls fp8_h16.log gather_page1.log bf16.log fp8_h128.log 2>/dev/null)
