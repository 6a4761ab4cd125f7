#!/usr/bin/env bash
# session 29's first call (main): the public table rerun as main ships it (the guarded priced split of session 28 in
# every fp8 kernel), both cache formats, uniform 4096-token requests and ragged batches (lengths uniform in 1..8191,
# seed 39179 as session 28's runs 2, 4, 5), FlashMLA beside; each format in its own process
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for fmt in fp8 bf16; do
  extra=""; [ $fmt = fp8 ] && extra="--vs-e4m3"
  timeout 270 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-variant-filter NONE --vs-formats $fmt \
    $extra --vs-ragged --ragged-seed 39179 --out $OUT/table_$fmt.json > $OUT/table_$fmt.log 2>&1
  echo "$fmt rc=$?"; grep -E "^\| |^Ragged|accuracy|Error" $OUT/table_$fmt.log | cut -c1-300
done
