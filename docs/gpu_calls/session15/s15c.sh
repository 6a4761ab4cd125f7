#!/usr/bin/env bash
# session 15, call C: the reduction alone at batch 1 and 8 (new tree vs da5f5d1); fp8 H=128 batch 64 (the fp8
# ping-pong kernel's tail zeroing + the reduction) new vs mid; then tests/gpu/test_mla_decode_gpu.py
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
P="benchmarks/probes/reduce_sweep.py --h16 1,8 --h128 1 --shapes 64x1x128x4,32x1x256x4,16x1x512x4"
for t in new mid new2; do
  case $t in new*) S=$PWD/src;; *) S=$PWD/.carry/mid/src;; esac
  echo "== reduce $t"; GIT_COMMIT=$C PYTHONPATH=$S:/tmp/site timeout 60 python3 $P --out $OUT/reduce_$t.json 2>&1 | grep -E "^(bf16|fp8) H="
done
B="benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-variant-filter NONE --vs-formats fp8 --vs-batches-h16 128 --vs-batches-h128 32,64"
for t in new mid new2 mid2; do
  case $t in new*) S=$PWD/src; G=$C;; *) S=$PWD/.carry/mid/src; G=da5f5d1;; esac
  echo "== fp8 $t"; GIT_COMMIT=$G PYTHONPATH=$S:/tmp/site timeout 60 python3 $B --out $OUT/fp8_$t.json 2>&1 | grep -E "^\| H=|rror"
done
PYTHONPATH=/tmp/np:$PWD/src:/tmp/site timeout 330 python3 -m pytest tests/gpu/test_mla_decode_gpu.py -q -x -p no:cacheprovider 2>&1 | tee $OUT/readme_part1.log | tail -8
