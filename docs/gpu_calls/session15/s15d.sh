#!/usr/bin/env bash
# session 15, call D: the rest of tests/gpu/test_mla_decode_gpu.py (call C ran its first 70 before its time limit),
# the 18-cell table of this tree against FlashMLA, then the README command's second half
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site timeout 210 python3 -m pytest $(cat .carry/part1_rest.txt) -q -p no:cacheprovider 2>&1 | tee $OUT/readme_part1_rest.log | tail -4
B="benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-variant-filter NONE --vs-batches-h16 1,8,32,64,128 --vs-batches-h128 1,8,32,64"
GIT_COMMIT=$C PYTHONPATH=$PWD/src:/tmp/site timeout 110 python3 $B --out $OUT/table_final.json 2>&1 | grep -E "^\| H=|accuracy|rror" | tee $OUT/table_final.log
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site timeout 240 python3 -m pytest tests -q -p no:cacheprovider --ignore tests/gpu/test_mla_decode_gpu.py 2>&1 | tee $OUT/readme_part2.log | tail -6
