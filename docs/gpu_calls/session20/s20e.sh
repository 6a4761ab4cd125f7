#!/usr/bin/env bash
# session 20, call E: QSPLIT (the fp8 ping-pong kernel's query conversion split over its two warpgroups): its GPU tests
# (GRAPHTUNE_GPU_NEW=1), checked and timed against the shipped config at H = 128 batch 1-64 beside FlashMLA, and the
# timelines of both at batch 8 / 64
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
GRAPHTUNE_GPU_NEW=1 timeout 150 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider \
  -k "QSPLIT1" 2>&1 | tee $OUT/tests_qsplit.log | grep -E "FAIL|ERROR|passed|failed|assert" | tail -8
timeout 150 python3 benchmarks/bench_mla_decode.py --hopper-variants --hopper-phases fp8 --hopper-heads 128 \
  --hopper-kinds "heads-on-M fp8" --hopper-variant-filter "WG1_FIRST': 1" --hopper-no-portable \
  --out $OUT/pp_qsplit.json 2>&1 | tee $OUT/pp_qsplit.log | grep -E "^check|^heads|Error" | cut -c1-330
for o in "" "QSPLIT=1"; do
  timeout 50 python3 benchmarks/probes/timeline.py --cells fp8:128:8,fp8:128:64 ${o:+--overlay $o} \
    --out $OUT/timeline${o:+_qsplit}.json 2>&1 | tee $OUT/timeline${o:+_qsplit}.log | grep -v "^$"
done
