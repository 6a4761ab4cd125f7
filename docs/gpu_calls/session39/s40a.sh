#!/usr/bin/env bash
# prepared in session 39 for the next session (main; carry [".whl"]): (1) s39d.sh (SWAP 1 / 2's GPU tests and the
# pinned bf16 variants twice against RELOAD 1); (2) Nsight Compute's source view of T8 (fp8 H = 128 batch 64) and of
# the bf16 ping-pong kernel with SWAP 2 (where the pair waits once WG0's P.V of WG1's tile runs first); the CSVs under
# $OUT, read with `python benchmarks/probes/ncu_stalls.py FILE`.
set -o pipefail
LIMIT=${LIMIT:-570}
LIMIT=$(( LIMIT - 120 )) bash docs/gpu_calls/session39/s39d.sh
source docs/gpu_calls/lib.sh
left=$(( LIMIT - 10 - SECONDS )); [ $left -ge 40 ] && ncu_view t8 fp8 '{"PP": 0, "T8": 1}' $(( left < 60 ? left : 60 ))
left=$(( LIMIT - 10 - SECONDS )); [ $left -ge 40 ] && ncu_view swap2 bf16 \
  '{"PP": 1, "RELOAD": 1, "WG1_FIRST": 1, "SWAP": 2, "RF": 1}' $(( left < 60 ? left : 60 ))
