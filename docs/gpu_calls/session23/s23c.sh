#!/usr/bin/env bash
# session 23, call C: T8 with the pair's last copy issued before the next score MMAs (ET), against ET 0, PF 0 and WL1 1 in the same run
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
GRAPHTUNE_GPU_NEW=1 timeout 170 python3 -m pytest -q -x tests/gpu/test_mla_decode_gpu.py -k "T81" > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests.log; grep -E "Error|assert|mismatch" $OUT/tests.log | head -12 | cut -c1-300
timeout 200 python3 benchmarks/bench_mla_decode.py --hopper-variants --hopper-kinds "heads-on-M fp8" --hopper-no-portable \
  --hopper-variant-filter "T8|'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1}" --out $OUT/t8_variants.json > $OUT/t8_variants.log 2>&1
echo "bench rc=$?"; grep -E "^check|^heads=|Error|error" $OUT/t8_variants.log | cut -c1-300; tail -12 $OUT/t8_variants.log
timeout 100 python3 benchmarks/probes/timeline.py --overlay PP=0,T8=1 --cells fp8:128:64,fp8:128:8 --out $OUT/timeline_t8.json > $OUT/timeline_t8.log 2>&1
echo "timeline rc=$?"; tail -30 $OUT/timeline_t8.log
