#!/usr/bin/env bash
# prepared in session 27 (main) for session 28: the per-bucket A/B of the H = 128 spaces with the pair (fp8) and bf16,
# now with their SPLIT_MAX 32 configs (batch 1: fewer, longer programs, half the partial outputs)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src COLUMNS=200
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for t in mla_decode_hopper_h128 mla_decode_hopper_h128_bf16; do
  timeout 280 python3 -m graphtune ab $t --sizes 1,8,32,64 --out $OUT/ab-$t > $OUT/ab_$t.log 2>&1
  echo "$t rc=$?"; tail -8 $OUT/ab_$t.log
done
