#!/usr/bin/env bash
# session 56, call B (carry [".whl"]; an H100 or an H200, say which): SPLIT_PDL = 2 on, the tuned path included.
# (1) the GPU tests of the tokens-on-M kernels (every one: the tuned fp8 / fp8_ds_mla / row-gather launches now run
# as programmatic dependents), the tuned PDL test among them; (2) split_pdl.py on the tuned path (off / wait-first /
# plan-first, the tuner's pick shared), fp8 and fp8_ds_mla at page size 64, the row gather at page size 1, uniform and
# ragged; then (3) on an H200 the targets' cells (the public call tuned with a plan beside FlashMLA: fp8 H = 16, the
# row gather, bf16, fp8 H = 128 with the e4m3 columns), on an H100 split_pdl.py tuned with a copy ahead.
# LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-560}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
gpu_tests tests_b ${TESTS_CAP:-170} tests/gpu/test_mla_hopper_tok_gpu.py ""
probe pdl_tuned_b 110 split_pdl.py --configs '[{}]' --ragged --rounds 3 \
  --cells "fp8:16:64:32,64,128 fp8_ds_mla:16:64:64 fp8:16:1:64,128" | grep -E "^\||rc=|rror|not timed" | cut -c1-250
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
PP="/tmp/np:$PWD/src:/tmp/site"
bench() {  # NAME CAP ARGS...: the public table beside FlashMLA into $OUT/NAME.json
  local n=$1 cap=$2; shift 2
  PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout $cap python3 benchmarks/bench_mla_decode.py --vs-flashmla \
    --configs none --vs-variant-filter NONE --vs-plan "$@" --out $OUT/$n.json > /tmp/$n.log 2>&1
  echo "$n rc=$? at ${SECONDS}s"; grep -E "^\| H=|^\| heads|accuracy" /tmp/$n.log | cut -c1-400
}
case "$name" in
  *H200*)
    bench fp8_h16 120 --vs-formats fp8 --vs-batches-h128 "" --vs-ragged --ragged-seed 39179
    probe gather_page1 60 gather_route.py --formats fp8 --page-sizes 1 --batches 32,64,128 --plan | tail -8
    left=$(( LIMIT - 10 - SECONDS ))
    [ $left -ge 60 ] && bench bf16 $(( left < 150 ? left : 150 )) --vs-formats bf16 --vs-ragged --ragged-seed 39179
    left=$(( LIMIT - 10 - SECONDS ))
    [ $left -ge 60 ] && bench fp8_h128 $left --vs-formats fp8 --vs-batches-h16 "" --vs-e4m3 ;;
  *)
    left=$(( LIMIT - 10 - SECONDS ))
    [ $left -ge 40 ] && probe pdl_copy_b $left split_pdl.py --configs '[{}]' --ahead copy --rounds 3 \
      --cells "fp8:16:64:32,64,128" | grep -E "^\||rc=|rror|not timed" | cut -c1-250 ;;
esac
tar -czf $OUT/logs56b.tgz -C /tmp $(cd /tmp && ls tests_b.log pdl_tuned_b.log pdl_copy_b.log fp8_h16.log gather_page1.log bf16.log fp8_h128.log 2>/dev/null)
