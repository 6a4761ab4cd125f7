#!/usr/bin/env bash
# session 25, call G (main): WB 1 in the first fp8 heads-on-M kernel (its widening without bank conflicts) against the
# same kernel without it and FlashMLA, batch 1 / 8 / 32 / 64 at H = 128 (the kernel serves 1-7 on the tuned path)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 220 python3 benchmarks/bench_mla_decode.py --hopper-variants --hopper-kinds "heads-on-M fp8" --hopper-no-portable \
  --hopper-variant-filter "'PSMEM': 1, 'XCH': 1" --out $OUT/wb_variants.json > $OUT/wb_variants.log 2>&1
echo "wb variants rc=$?"; grep -E "^check|Error|error" $OUT/wb_variants.log | cut -c1-300
grep -E "^heads=" $OUT/wb_variants.log | sed 's/ tbs=.*//'
