#!/usr/bin/env bash
# session 57, call A (session 56 call F again) (carry [".whl"]; an H100 or an H200, say which): the bf16 split kernels launched behind the kernel
# ahead (the tokens-on-M kernel at H = 16, the ping-pong kernel at H = 128; SPLIT_PDL = 2 on): (1) the PDL GPU test's
# seven cases and the bf16 / plan / streamed / tuned-and-captured tests of the decode file, the bf16 kernels with PDL
# (SPLIT_PDL_BF16, off in the product until this call: GRAPHTUNE_TEST_SPLIT_PDL_BF16=1); (2) split_pdl.py on the
# tuned path, bf16 H = 16 and H = 128, uniform and ragged. On an H200 instead (none came since session 51), the targets
# table's cells (lib.sh's targets_h200) with the time. LIMIT=SECONDS bounds it; TESTS_A2_CAP, PDL_CELLS and ROUNDS
# trim it.
set -o pipefail
LIMIT=${LIMIT:-330}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*)
    targets_h200 "$LIMIT"
    tar -czf $OUT/logs57a.tgz -C /tmp $(cd /tmp && ls fp8_h16.log gather_page1.log bf16.log fp8_h128.log 2>/dev/null)
    exit 0 ;;
esac
gpu_tests tests_a1 70 tests/gpu/test_mla_hopper_tok_gpu.py "kernel_ahead"
GRAPHTUNE_TEST_SPLIT_PDL_BF16=1 gpu_tests tests_a2 ${TESTS_A2_CAP:-110} tests/gpu/test_mla_decode_gpu.py \
  "bf16_kernels_with_a_plan or plan_slots or streamed_reduction or hopper_tuned_per_bucket or hopper_capture_replay"
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 40 ] && probe pdl_bf16_a $left split_pdl.py --configs '[{}]' --ragged --rounds ${ROUNDS:-3} \
  --cells "${PDL_CELLS:-bf16:16:64:32,64,128 bf16:128:64:32,64}" | grep -E "^\||rc=|rror|not timed" | cut -c1-250
tar -czf $OUT/logs57a.tgz -C /tmp $(cd /tmp && ls tests_a1.log tests_a2.log pdl_bf16_a.log 2>/dev/null)
