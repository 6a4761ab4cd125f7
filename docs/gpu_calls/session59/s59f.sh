#!/usr/bin/env bash
# session 59, call F (carry [".whl"]; an H100 or an H200, say which): with the session's last ~290 s of device time, the
# staged query's timings alone -- wg2_qstage.patch applied to the device's copy, WG2 with four buffers pinned with a
# plan beside the two-buffer one-warpgroup config, fp8 H = 16, uniform and ragged (split_pdl.py checks each cell
# against the fp32 reference before timing it; the patch's GPU tests are s59e.sh's, not run here). LIMIT=SECONDS.
set -o pipefail
LIMIT=${LIMIT:-100}
source docs/gpu_calls/lib.sh
gpu_prelude
patch -p1 -s < docs/gpu_calls/session59/wg2_qstage.patch && echo "query staging patched" || exit 1
export GIT_COMMIT="${GIT_COMMIT:-unknown}+wg2_qstage.patch"
V='"V2": 1, "PREFETCH": 1, "FAST_MAX": 1, "CHAIN": 1, "RK64": 1'
W='"V2": 1, "WG2": 1, "FAST_MAX": 1'
probe wg2f_fp8 $(( LIMIT - 5 - SECONDS )) split_pdl.py --ways plan-first --ragged --rounds 3 --cells "fp8:16:64:32,64,128" \
  --configs "[{$V, \"NUM_BUF\": 2, \"COPY_FIRST\": 1}, {$W, \"NUM_BUF\": 4, \"RK64\": 1}]" \
  | grep -E "rc=|^\| (uniform|ragged)|rror|not timed" | cut -c1-260
