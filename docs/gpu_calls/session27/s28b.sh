#!/usr/bin/env bash
# prepared in session 27 (main) for session 28, after s28a.sh passed its tests: the per-bucket A/B of the fp8 H = 128
# spaces with query_precision="e4m3" (which kernel that mode should run from which batch: T8_E4M3_MIN_BATCH), beside
# the same A/B with the pair in the same call
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src COLUMNS=200
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for t in mla_decode_hopper_h128_e4m3 mla_decode_hopper_h128; do
  timeout 170 python3 -m graphtune ab $t --sizes 1,8,32,64 --out $OUT/ab-$t > $OUT/ab_$t.log 2>&1
  echo "$t rc=$?"; tail -8 $OUT/ab_$t.log
done
