#!/usr/bin/env bash
# session 57, call A (carry [".whl"]; an H100 or an H200, say which): (1) the SM-weighted split (SMW: plan rows claimed
# per SM, kernel_hopper._claim_row): its GPU test, then benchmarks/probes/sm_weights.py (even / claimed / weighted /
# weighted-first beside FlashMLA, fp8 H = 16, uniform and ragged); (2) on an H100, session 56's call F: the bf16 split
# kernels launched behind the kernel ahead, their GPU test cases and the bf16 decode tests with PDL
# (GRAPHTUNE_TEST_SPLIT_PDL_BF16=1), then split_pdl.py on bf16 cells; on an H200 instead the targets table's cells
# (lib.sh's targets_h200) with the time left. LIMIT=SECONDS bounds it; SMW_CAP, PROBE_CAP, TESTS_A2_CAP, PDL_CELLS and
# ROUNDS trim it.
set -o pipefail
LIMIT=${LIMIT:-540}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
gpu_tests smw_tests ${SMW_CAP:-100} tests/gpu/test_mla_hopper_tok_gpu.py "sm_weighted"
probe smw_probe ${PROBE_CAP:-150} sm_weights.py --ragged --rounds ${ROUNDS:-3} | grep -E "^\||rc=|rror|not timed|left" | cut -c1-250
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*)
    targets_h200 "$LIMIT"
    tar -czf $OUT/logs57a.tgz -C /tmp $(cd /tmp && ls smw_tests.log smw_probe.log fp8_h16.log gather_page1.log bf16.log fp8_h128.log 2>/dev/null)
    exit 0 ;;
esac
gpu_tests tests_a1 70 tests/gpu/test_mla_hopper_tok_gpu.py "kernel_ahead"
GRAPHTUNE_TEST_SPLIT_PDL_BF16=1 gpu_tests tests_a2 ${TESTS_A2_CAP:-110} tests/gpu/test_mla_decode_gpu.py \
  "bf16_kernels_with_a_plan or plan_slots or streamed_reduction or hopper_tuned_per_bucket or hopper_capture_replay"
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 40 ] && probe pdl_bf16_a $left split_pdl.py --configs '[{}]' --ragged --rounds ${ROUNDS:-3} \
  --cells "${PDL_CELLS:-bf16:16:64:32,64,128 bf16:128:64:32,64}" | grep -E "^\||rc=|rror|not timed" | cut -c1-250
tar -czf $OUT/logs57a.tgz -C /tmp $(cd /tmp && ls smw_tests.log smw_probe.log tests_a1.log tests_a2.log pdl_bf16_a.log 2>/dev/null)
