#!/usr/bin/env bash
# prepared in session 41 for the next session's first call (main; carry [".whl"]; an H100 or an H200, say which): what
# the warpgroup barriers triton 3.6 puts before the bf16 ping-pong kernel's mbarrier waits (12) and expects (7) cost,
# measured before the rework that removes them (each mbarrier in an allocation of its own, static buffer indices):
# benchmarks/probes/ptx_strip.py takes them out of the kernel's PTX (triton's ir_override) and checks the output
# bit for bit against the kernel as compiled and against the fp32 reference, then times both with a plan beside
# FlashMLA, bf16 H = 128, batch 1 / 8 / 32 / 64 (then also the 12 before its TMA copies); then T8 (fp8 H = 128: 5 such barriers before waits, 1 before an
# expect) the same. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-420}
source docs/gpu_calls/lib.sh
gpu_prelude
probe ptx_strip_wait $(( (LIMIT - 20) / 4 )) ptx_strip.py --batches 1,8,32,64
left=$(( LIMIT - 10 - SECONDS )); [ $left -ge 60 ] && probe ptx_strip_both $(( left / 3 )) ptx_strip.py \
  --batches 1,8,32,64 --before wait,expect
left=$(( LIMIT - 10 - SECONDS )); [ $left -ge 60 ] && probe ptx_strip_copy $(( left / 2 )) ptx_strip.py \
  --batches 1,8,32,64 --before wait,expect,copy
left=$(( LIMIT - 10 - SECONDS )); [ $left -ge 60 ] && probe ptx_strip_t8 $left ptx_strip.py --format fp8 \
  --batches 1,8,32,64 --before wait,expect
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls ptx_strip_wait.log ptx_strip_both.log ptx_strip_copy.log ptx_strip_t8.log 2>/dev/null)
