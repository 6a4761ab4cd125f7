#!/usr/bin/env bash
# session 46, call F (carry [".whl"]): batch 1-4 of p_precision="e4m3" with fewer, fuller programs: P8 (and P8 + EI)
# pinned against the same with SPLIT_MAX 32 / 16 (at most that many programs a request: a tile pair a program at batch
# 1 where the default grid gives most programs one tile, and half the partials for the reduction), with a step's plan.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
for sm in 32 16; do
  probe p8_split$sm 90 plan_probe.py --format fp8 --heads 128 --query-precision e4m3 --batches 1,2,4 \
    --b2 BLOCK_N=64,T8=1,P8=1 --b3 SPLIT_MAX=$sm --tol 4e-2 | grep -E "^\| (uniform|ragged)|rc=|rror"
done
probe p8ei_split32 90 plan_probe.py --format fp8 --heads 128 --query-precision e4m3 --batches 1,2 \
  --b2 BLOCK_N=64,T8=1,P8=1,EI=1 --b3 SPLIT_MAX=32 --tol 4e-2 | grep -E "^\| (uniform|ragged)|rc=|rror"
