#!/usr/bin/env bash
# session 14, call D: the split (new) against HEAD~2's even split (.carry/old) once more, then tests/gpu/test_mla_decode_gpu.py
set -o pipefail
C=${1:-unknown}; O=${2:-old}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
B="benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-variant-filter NONE --vs-batches-h16 1,8,32,64,128 --vs-batches-h128 1,8,32,64"
for tree in new old; do
  if [ $tree = old ]; then S=$PWD/.carry/old/src; G=$O; else S=$PWD/src; G=$C; fi
  GIT_COMMIT=$G PYTHONPATH=$S:/tmp/site timeout 120 python3 $B --out $OUT/table_$tree.json 2>&1 | grep -E "^\| H=|accuracy" > $OUT/table_$tree.log
  echo "== $tree"; cat $OUT/table_$tree.log
done
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site timeout 330 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -p no:cacheprovider 2>&1 | tee $OUT/readme_part1.log | tail -8
