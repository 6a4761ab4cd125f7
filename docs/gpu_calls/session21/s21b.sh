#!/usr/bin/env bash
# session 21, call B: OUT32 (a whole request's 16-bit output in whole 32-byte sectors) in the ping-pong kernels and
# the bf16 tokens-on-M kernel: its GPU tests, timed against the shipped configs beside FlashMLA, timelines
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
GRAPHTUNE_GPU_NEW=1 timeout 150 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider \
  -k "OUT32" 2>&1 | tee $OUT/tests_out32.log | grep -E "FAIL|ERROR|passed|failed|assert" | tail -8
timeout 240 python3 benchmarks/bench_mla_decode.py --hopper-variants --hopper-heads 16,128 \
  --hopper-kinds "heads-on-M,tokens-on-M,heads-on-M fp8" --hopper-variant-filter "WG1_FIRST': 1|'PIPE': 2" \
  --hopper-no-portable --out $OUT/out32.json 2>&1 | tee $OUT/out32.log | grep -E "^check|Error|^\|" | cut -c1-300
timeout 60 python3 benchmarks/probes/timeline.py --cells bf16:128:64,fp8:128:64 --overlay OUT32=1 \
  --out $OUT/timeline_out32.json 2>&1 | tee $OUT/timeline_out32.log | grep -v "^$" | cut -c1-900
