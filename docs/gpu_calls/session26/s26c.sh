#!/usr/bin/env bash
# session 26, call C (main): the per-bucket A/B (issue 14's V1/V3 decision) rerun on the Hopper kernels as they ship
# now: fp8 H = 16 (the tokens-on-M kernels, as in session 11), fp8 H = 128 (first heads-on-M kernel, ping-pong, T8)
# and bf16 H = 128 (first heads-on-M kernel, ping-pong), page size 64, 4096 tokens a request
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src COLUMNS=200
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
timeout 170 python3 -m graphtune ab mla_decode_hopper_h128 --sizes 1,8,32,64 --out $OUT/ab-h128 > $OUT/ab_h128.log 2>&1
echo "h128 fp8 rc=$?"; tail -8 $OUT/ab_h128.log
timeout 170 python3 -m graphtune ab mla_decode_hopper --sizes 1,8,32,128 --out $OUT/ab-h16 > $OUT/ab_h16.log 2>&1
echo "h16 fp8 rc=$?"; tail -8 $OUT/ab_h16.log
timeout 170 python3 -m graphtune ab mla_decode_hopper_h128_bf16 --sizes 1,8,32,64 --out $OUT/ab-h128-bf16 > $OUT/ab_h128_bf16.log 2>&1
echo "h128 bf16 rc=$?"; tail -8 $OUT/ab_h128_bf16.log
