#!/usr/bin/env bash
# session 23, call D: T8 as the fp8 heads-on-M class's third kernel (tuned per bucket from batch 32): its GPU tests
# (every space config against the reference, tuned per bucket then captured and replayed), the public call's table
# beside FlashMLA (fp8, H = 128), then T8's WL0 variants against the shipped second kernel at batch 64
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 130 python3 -m pytest -q tests/gpu/test_mla_decode_gpu.py -k "T81 or third or (tuned_per_bucket and fp8-H128)" > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests.log; grep -E "^FAILED|Error|assert" $OUT/tests.log | head -8 | cut -c1-300
timeout 100 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-variant-filter NONE --vs-batches-h16 "" \
  --vs-formats fp8 --out $OUT/table_fp8_h128.json > $OUT/table.log 2>&1
echo "table rc=$?"; tail -14 $OUT/table.log | cut -c1-400
timeout 45 python3 benchmarks/bench_mla_decode.py --hopper-variants --hopper-kinds "heads-on-M fp8" --hopper-no-portable \
  --hopper-variant-filter "'T8': 1}|WL0|'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1}" --hopper-batches 64 --out $OUT/t8_wl0.json > $OUT/t8_wl0.log 2>&1
echo "variants rc=$?"; grep -E "^check|^heads=" $OUT/t8_wl0.log | cut -c1-400
