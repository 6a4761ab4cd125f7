#!/usr/bin/env bash
# session 22, call F: T8 with the query conversion as loops (cold instruction cache) and the tail rows zeroed in shared memory by the owner (one conversion per P.V chunk)
# FlashMLA, timelines of T8 and the shipped ping-pong kernel (fp8, H = 128, batch 8 and 64)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
GRAPHTUNE_GPU_NEW=1 timeout 200 python3 -m pytest -q -x tests/gpu/test_mla_decode_gpu.py -k "T81" > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests.log
timeout 240 python3 benchmarks/bench_mla_decode.py --hopper-variants --hopper-kinds "heads-on-M fp8" --hopper-no-portable \
  --hopper-variant-filter "T8|'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1}" --out $OUT/t8_variants.json > $OUT/t8_variants.log 2>&1
echo "bench rc=$?"; grep -E "^check|^heads=|Error|error" $OUT/t8_variants.log | cut -c1-300
timeout 150 python3 benchmarks/probes/timeline.py --overlay PP=0,T8=1 --cells fp8:128:64,fp8:128:8 --out $OUT/timeline_t8f.json > $OUT/timeline_t8f.log 2>&1
echo "timeline rc=$?"; tail -40 $OUT/timeline_t8f.log
