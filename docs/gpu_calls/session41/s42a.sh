#!/usr/bin/env bash
# prepared in session 41 for the next session's first call (main; carry [".whl"]; an H100 or an H200, say which): what
# the warpgroup barriers triton 3.6 puts before the bf16 ping-pong kernel's mbarrier waits (12) and expects (7) cost,
# measured before the rework that removes them (each mbarrier in an allocation of its own, static buffer indices):
# benchmarks/probes/ptx_strip.py takes them out of the kernel's PTX (triton's ir_override) and checks the output
# bit for bit against the kernel as compiled and against the fp32 reference, then times both with a plan beside
# FlashMLA, bf16 H = 128, batch 1 / 8 / 32 / 64 (then also the 12 before its TMA copies); then T8 (fp8 H = 128: 5 such barriers before waits, 1 before an
# expect) the same. Then SB, the rework itself (written in session 41, compiled: 16 fewer BAR.SYNC, no spill in the
# tile loops): its GPU tests and plan_probe.py beside the shipped config (b2) with and without a plan. LIMIT=SECONDS
# bounds it (570 recommended; the strip runs take ~90 s each).
set -o pipefail
LIMIT=${LIMIT:-570}
source docs/gpu_calls/lib.sh
gpu_prelude
probe ptx_strip_wait $(( (LIMIT - 20) / 4 )) ptx_strip.py --batches 1,8,32,64
left=$(( LIMIT - 10 - SECONDS )); [ $left -ge 60 ] && probe ptx_strip_both $(( left / 3 )) ptx_strip.py \
  --batches 1,8,32,64 --before wait,expect
left=$(( LIMIT - 10 - SECONDS )); [ $left -ge 60 ] && probe ptx_strip_copy $(( left / 2 )) ptx_strip.py \
  --batches 1,8,32,64 --before wait,expect,copy
left=$(( LIMIT - 10 - SECONDS )); [ $left -ge 60 ] && probe ptx_strip_t8 $left ptx_strip.py --format fp8 \
  --batches 1,8,32,64 --before wait,expect
left=$(( LIMIT - 10 - SECONDS ))
if [ $left -ge 90 ]; then
  GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 100 \
    python3 -m pytest -q -n 4 tests/gpu/test_mla_decode_gpu.py -k "SB1" > /tmp/tests_sb.log 2>&1
  echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_sb.log | tail -6 | cut -c1-300
  left=$(( LIMIT - 10 - SECONDS ))
  grep -q " passed" /tmp/tests_sb.log && ! grep -q "failed" /tmp/tests_sb.log && [ $left -ge 60 ] && \
    probe plan_sb $left plan_probe.py --format bf16 --heads 128 --batches 1,8,32,64 \
      --b2 BLOCK_N=64,PP=1,RELOAD=1,WG1_FIRST=1 --b3 SB=1
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls ptx_strip_wait.log ptx_strip_both.log ptx_strip_copy.log ptx_strip_t8.log tests_sb.log plan_sb.log 2>/dev/null)
