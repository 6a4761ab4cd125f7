#!/usr/bin/env bash
# session 20, call A: the cold-code probe's new form (a launch after another 256 KB binary); the fp8 ping-pong
# kernel's WLOOP = 1 against the shipped config (checked, timed at H = 128 batch 1-64 beside FlashMLA, timelines);
# fp8 H = 16 batch 8 / 32: the tuner's per-candidate timings beside the same four configs pinned; WLOOP's GPU test
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
timeout 40 python3 benchmarks/probes/cold_code.py --sizes 256,1024 --out $OUT/cold_code.json 2>&1 | tee $OUT/cold_code.log
timeout 150 python3 benchmarks/bench_mla_decode.py --hopper-variants --hopper-phases fp8 --hopper-heads 128 \
  --hopper-kinds "heads-on-M fp8" --hopper-variant-filter "WG1_FIRST': 1" --hopper-no-portable \
  --out $OUT/pp_wloop.json 2>&1 | tee $OUT/pp_wloop.log | grep -E "^check|^heads|Error" | cut -c1-400
for o in "" "WLOOP=1"; do
  timeout 50 python3 benchmarks/probes/timeline.py --cells fp8:128:8,fp8:128:64 ${o:+--overlay $o} \
    --out $OUT/timeline${o:+_wloop}.json 2>&1 | tee $OUT/timeline${o:+_wloop}.log | grep -v "^$"
done
timeout 100 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 \
  --vs-variant-filter "'NUM_BUF': 2, 'PREFETCH': 1, 'FAST_MAX': 1}|'NUM_BUF': 3, 'PREFETCH': 1, 'FAST_MAX': 1}|'LOOK': 0, 'RK64': 1, 'PT_EARLY': 1}" \
  --vs-batches-h16 8,32 --vs-batches-h128 "" --out $OUT/h16_picks.json 2>&1 | tee $OUT/h16_picks.log \
  | sed -n '/^| H=/,$p' | head -40
GRAPHTUNE_GPU_NEW=1 timeout 90 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider \
  -k "heads_on_m and WLOOP1" 2>&1 | tee $OUT/tests_wloop.log | grep -E "FAIL|ERROR|passed|failed|assert" | tail -6
