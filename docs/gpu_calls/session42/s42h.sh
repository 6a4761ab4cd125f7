#!/usr/bin/env bash
# session 42 call H (main; carry [".whl"]): with SM1 + RA the pair waits on its data rather than on its softmaxes, so
# two knobs measured before SM1 are timed again on top of it, beside the shipped config with a plan (bf16 H = 128,
# batch 8 / 32 / 64): INDEP (WG1's softmax from its own max, both softmaxes at once; GPU-tested on SM1 + RA in call D)
# and RELOAD 0 (WG0's reload of an odd tile's left half after the next scores are issued). LIMIT=SECONDS.
set -o pipefail
LIMIT=${LIMIT:-150}
source docs/gpu_calls/lib.sh
gpu_prelude
for v in INDEP=1 RELOAD=0; do
  left=$(( LIMIT - 10 - SECONDS )); [ $left -ge 40 ] || break
  probe plan_${v//=/_} $(( left < 75 ? left : 75 )) plan_probe.py --format bf16 --heads 128 --batches 8,32,64 \
    --b2 BLOCK_N=64,PP=1,RELOAD=1,WG1_FIRST=1,SM1=1,RA=1 --b3 $v
done
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls plan_INDEP_1.log plan_RELOAD_0.log 2>/dev/null)
