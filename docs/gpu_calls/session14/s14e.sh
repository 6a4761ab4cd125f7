#!/usr/bin/env bash
# session 14, call E: the gated split timed (tuned path + FlashMLA), then the README command's second half
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
GIT_COMMIT=$C PYTHONPATH=$PWD/src:/tmp/site timeout 75 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-variant-filter NONE --vs-batches-h16 1,8,128 --vs-batches-h128 64 --out $OUT/table_gated.json 2>&1 | grep -E "^\| H=|accuracy" | tee $OUT/table_gated.log
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site timeout 250 python3 -m pytest tests -q -p no:cacheprovider --ignore tests/gpu/test_mla_decode_gpu.py 2>&1 | tee $OUT/readme_part2.log | tail -6
