#!/usr/bin/env bash
# session 37, sixth call (main at f6ea515 + the working tree's scaled fp16 partials for the bf16 ping-pong kernel up to
# PP_PART16_MAX_BATCH requests; carry [".whl"]): (1) every bf16 GPU test of the Hopper path and the ops' opcheck;
# (2) the bf16 table beside FlashMLA with the plan, main (HEAD, a worktree) and this tree, each in its own process and
# Triton cache.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 python3 -m pytest -q -n 8 \
  tests/gpu/test_mla_decode_gpu.py tests/gpu/test_mla_hopper_tok_gpu.py tests/gpu/test_compile_gpu.py \
  -k "bf16 or partials or hopper_matches_reference or opcheck" > /tmp/tests_s37v.log 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_s37v.log | tail -12 | cut -c1-300
git worktree add -q /tmp/base HEAD && echo "base: $(git -C /tmp/base log --oneline -1 | cut -c1-60)"
for way in base p16; do
  src=$([ $way = base ] && echo /tmp/base/src || echo $PWD/src)
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$way timeout 100 \
    python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats bf16 --vs-variant-filter NONE \
    --vs-plan --vs-ragged --ragged-seed 39179 --out $OUT/bf16_$way.json > /tmp/bf16_$way.log 2>&1
  echo "bf16 $way rc=$? at ${SECONDS}s"; grep -E "^\| H=128" /tmp/bf16_$way.log | cut -c1-300
done
tar -czf $OUT/logs.tgz -C /tmp tests_s37v.log bf16_base.log bf16_p16.log
