#!/usr/bin/env bash
# session 32, call D: the plan's GPU tests after the tuned path's planned launch keeps the plan's rows out of the key
# and the search (GraphtuneKernel.run_with): the captured-step tests (five cases) and the bit-for-bit tests.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
i=0
for sel in "step_plan and fp8-H16" "step_plan and fp8-H128" "step_plan and bf16" "given_a_plan"; do
  i=$((i + 1))
  GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src TRITON_CACHE_DIR=/tmp/tc_d$i timeout 170 python3 -m pytest \
    -q --tb=short tests/gpu/test_mla_decode_gpu.py -k "$sel" > $OUT/plan_d$i.log 2>&1 &
done
wait
for i in 1 2 3 4; do echo "plan_d$i: $(tail -1 $OUT/plan_d$i.log)"; grep -E "^FAILED|^E " $OUT/plan_d$i.log | head -4 | cut -c1-250; done
