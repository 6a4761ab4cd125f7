#!/usr/bin/env bash
# session 45, call F (carry [".whl"]): the per-bucket A/B (issue 14's V1/V3 decision) over T8's space with the e4m3
# query beside p_precision="e4m3"'s (P8, P8 + EI, P8 + EI + TE + NF), each config pinned, page size 64, 4096 tokens a
# request, H = 128, batch 1 / 8 / 32 / 64.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=/tmp/np:$PWD/src COLUMNS=200
timeout ${CAP:-180} python3 -m graphtune ab mla_decode_hopper_h128_p8 --sizes 1,8,32,64 --out $OUT/ab-h128-p8 \
  > $OUT/ab_h128_p8.log 2>&1
echo "ab rc=$? at ${SECONDS}s"; tail -14 $OUT/ab_h128_p8.log | cut -c1-250
