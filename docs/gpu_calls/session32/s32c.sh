#!/usr/bin/env bash
# session 32, call C: the plan's GPU tests again after the bit-for-bit test's merge was given the fp8 scale (the test
# merged an fp8 cache's partials, in the cache's units, without it), and the captured-step test's log in full.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
i=0
for sel in "given_a_plan and T81" "given_a_plan and PP1" "given_a_plan and not T81 and not PP1"; do
  i=$((i + 1))
  GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src TRITON_CACHE_DIR=/tmp/tc_t$i timeout 150 python3 -m pytest \
    -q tests/gpu/test_mla_decode_gpu.py -k "$sel" > $OUT/plan$i.log 2>&1 &
done
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src TRITON_CACHE_DIR=/tmp/tc_t4 timeout 150 python3 -m pytest \
  -q -x --tb=long tests/gpu/test_mla_decode_gpu.py -k "step_plan" > $OUT/step.log 2>&1
wait
for i in 1 2 3; do echo "plan$i: $(tail -1 $OUT/plan$i.log)"; grep -E "^FAILED|Error" $OUT/plan$i.log | head -3 | cut -c1-250; done
echo "step: $(tail -1 $OUT/step.log)"; grep -E "^FAILED|^ERROR" $OUT/step.log | head; grep -n -E "Error|error|^E " $OUT/step.log | head -20 | cut -c1-250
grep -n -B30 "illegal memory" $OUT/step.log | grep -E "\.py:[0-9]+" | head -20 | cut -c1-250
