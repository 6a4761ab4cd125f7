#!/usr/bin/env bash
# session 57, call C (carry [".whl"]; an H200 only: on another card it stops at once): the targets table's cells
# (lib.sh's targets_h200) with the device time this session has left. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-250}
source docs/gpu_calls/lib.sh
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*) ;;
  *) echo "not an H200: nothing run"; exit 0 ;;
esac
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
targets_h200 "$LIMIT"
tar -czf $OUT/logs57c.tgz -C /tmp $(cd /tmp && ls fp8_h16.log gather_page1.log bf16.log fp8_h128.log 2>/dev/null)
