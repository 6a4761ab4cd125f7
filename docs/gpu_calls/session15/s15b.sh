#!/usr/bin/env bash
# session 15, call B: the new reduction rule (new) against session 14's end (mid, da5f5d1) on the 18 cells, and the
# even split (old, d704fb7) against both at batch 1
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
B="benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-variant-filter NONE"
FULL="--vs-batches-h16 1,8,32,64,128 --vs-batches-h128 1,8,32,64"
ONE="--vs-batches-h16 1 --vs-batches-h128 1"
run() {  # tree src commit batches
  GIT_COMMIT=$3 PYTHONPATH=$2:/tmp/site timeout 150 python3 $B $4 --out $OUT/table_$1.json 2>&1 | grep -E "^\| H=|accuracy|Error|error" > $OUT/table_$1.log
  echo "== $1"; cat $OUT/table_$1.log
}
run new $PWD/src $C "$FULL"
run mid $PWD/.carry/mid/src da5f5d1 "$FULL"
run old1 $PWD/.carry/old/src d704fb7 "$ONE"
run mid1 $PWD/.carry/mid/src da5f5d1 "$ONE"
