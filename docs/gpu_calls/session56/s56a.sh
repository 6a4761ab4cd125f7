#!/usr/bin/env bash
# session 56, call A (session 55's call D, not run there) (carry [".whl"]; an H100 or an H200, say which): the split kernel launched as the programmatic
# dependent of the kernel ahead (interface_hopper.SPLIT_PDL, pinned launches): (1) its GPU test (a captured step of
# three layers, each a copy writing the query ahead of the decode; PDL 1 and 2, two and three buffers), (2)
# split_pdl.py beside FlashMLA (fp8 H = 16, the tuned path's two configs pinned, uniform and ragged), (3) with what time
# is left the same with a copy writing the query ahead of every call. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-280}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
gpu_tests tests_a ${TESTS_CAP:-70} tests/gpu/test_mla_hopper_tok_gpu.py "kernel_ahead"
probe pdl_a $(( (LIMIT - 10 - SECONDS) * 2 / 3 )) split_pdl.py ${PDL_ARGS:---ragged} --rounds ${ROUNDS:-3} \
  | grep -E "^\||rc=|rror|not timed" | cut -c1-250
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 40 ] && probe pdl_copy_a $left split_pdl.py --ahead copy --rounds ${ROUNDS:-3} --cells "fp8:16:64:32,64" \
  | grep -E "^\||rc=|rror|not timed" | cut -c1-250
tar -czf $OUT/logs56a.tgz -C /tmp $(cd /tmp && ls tests_a.log pdl_a.log pdl_copy_a.log 2>/dev/null)
