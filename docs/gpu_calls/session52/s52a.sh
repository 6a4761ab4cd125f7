#!/usr/bin/env bash
# session 52, call A (carry [".whl"]; an H100 or an H200, say which): the reduction's last round trips. (1) The GPU
# test of SEG_PLAN (a plan's slots equal the split kernels' own for every kernel family that reads a plan, at 132 / 7
# / 1 SMs; the decode with reduction.SEG_FROM_PLAN and ONE_STEP on, pinned and tuned + captured, against the fp32
# reference); (2) reduce_tail.py: the public call tuned per bucket with a plan, the reduction as shipped / reading the
# plan's slots before its wait / a request's slots in one step / both, checked and timed beside FlashMLA in one
# process (fp8 H = 16 batch 32 / 64 / 128 and page size 1 at 64 / 128, bf16 H = 16 at 128, bf16 H = 128 and fp8 H =
# 128 at 32 / 64), in the tests' Triton cache (their tuned spaces compiled there). Session 51's space question is the
# next call: docs/gpu_calls/session51/s51b.sh.
set -o pipefail
LIMIT=${LIMIT:-560}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
gpu_tests tests_a ${TESTS_CAP:-220} tests/gpu/test_mla_decode_gpu.py plan_slots
probe reduce_tail $(( LIMIT - 15 - SECONDS )) reduce_tail.py --rounds ${ROUNDS:-2} | grep -E "^\||rc=|rror|not timed" | cut -c1-250
tar -czf $OUT/logs52a.tgz -C /tmp $(cd /tmp && ls tests_a.log reduce_tail.log 2>/dev/null)
