#!/usr/bin/env bash
# session 57, call B (carry [".whl"]; an H200 or an H100, say which): on an H200 the targets table's cells (lib.sh's
# targets_h200: fp8 H = 16 uniform and ragged, the row gather at page size 1, bf16 uniform and ragged, fp8 H = 128 with
# the e4m3 columns), the first since session 51, with the split behind the kernel ahead (fp8 since session 56, bf16
# since session 57's call A); on an H100 the standing with it: bf16 (H = 16 and 128), fp8 H = 16 and the row gather at
# page size 1 (the public call tuned per bucket with a plan beside FlashMLA, uniform and ragged). LIMIT=SECONDS bounds
# it.
set -o pipefail
LIMIT=${LIMIT:-480}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*)
    targets_h200 "$LIMIT"
    tar -czf $OUT/logs57b.tgz -C /tmp $(cd /tmp && ls fp8_h16.log gather_page1.log bf16.log fp8_h128.log 2>/dev/null)
    exit 0 ;;
esac
vs_plan bf16 200 --vs-formats bf16 --vs-ragged --ragged-seed 39179
vs_plan fp8_h16 140 --vs-formats fp8 --vs-batches-h128 "" --vs-ragged --ragged-seed 39179
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 40 ] && probe gather_page1 $left gather_route.py --formats fp8 --page-sizes 1 --batches 32,64,128 --plan | tail -8
tar -czf $OUT/logs57b.tgz -C /tmp $(cd /tmp && ls bf16.log fp8_h16.log gather_page1.log 2>/dev/null)
