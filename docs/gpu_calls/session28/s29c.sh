#!/usr/bin/env bash
# prepared in session 27 (main) for session 28: SPLIT_MAX (the heads-on-M grid capped at 32 programs a request, which
# changes batch 1-2 only) on the GPU: its gated tests, then the per-bucket A/B of the fp8 H = 128 spaces with
# query_precision="e4m3" (which kernel that mode should run from which batch: T8_E4M3_MIN_BATCH; its spaces hold the
# SPLIT_MAX configs too: whether fewer, longer programs win at batch 1)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src COLUMNS=200
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
GRAPHTUNE_GPU_NEW=1 timeout 240 python3 -m pytest -q tests/gpu/test_mla_decode_gpu.py -k "split_max" > $OUT/tests_split_max.log 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests_split_max.log; grep -E "Error|assert|rel err" $OUT/tests_split_max.log | head -8 | cut -c1-300
timeout 300 python3 -m graphtune ab mla_decode_hopper_h128_e4m3 --sizes 1,8,32,64 --out $OUT/ab-h128-e4m3 > $OUT/ab_h128_e4m3.log 2>&1
echo "ab e4m3 rc=$?"; tail -8 $OUT/ab_h128_e4m3.log
