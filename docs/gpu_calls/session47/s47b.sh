#!/usr/bin/env bash
# session 47, call B (carry [".whl"]; an H100 or an H200, say which): s47a.sh's VS with PL beside it. PL: P8's P as an
# e4m3 pair (hi = e4m3(2^8 P), lo = e4m3(2^8 P - hi)), each multiplied by V^T (fp8 P.V, twice the P.V wgmmas), so the
# e4m3 query's accuracy (~5e-4, session 24) with P8's untouched fp8 V, no widening. (1) p8_check at batch 8 (132 / 7 /
# 1 SMs, uniform and mixed lengths) of VS and PL; (2) P8's GPU tests with both (GRAPHTUNE_GPU_NEW=1); (3) plan_probe at
# fp8 H = 128 with the e4m3 query: P8 + EI against it with PL, with VS, and the all-in schedule against it with PL.
# LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-540}
source docs/gpu_calls/lib.sh
gpu_prelude
probe p8_check_pl 120 p8_check.py --batch 8 --sms 132,7,1 --lengths uniform,mixed \
  --configs T8=1/P8=1/EI=1,T8=1/P8=1/EI=1/PL=1,T8=1/P8=1/PL=1,T8=1/P8=1/EI=1/TE=1/NF=1/PL=1,T8=1/P8=1/EI=1/WL1=1/PL=1,T8=1/P8=1/EI=1/TE=1/NF=1/VS=1,T8=1/P8=1/VS=1
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 \
  python3 -m pytest -q -n 3 tests/gpu/test_mla_decode_gpu.py -k "flashmlas_accuracy_class" > /tmp/tests_pl.log 2>&1
echo "tests rc=$? at ${SECONDS}s"
grep -E "passed|failed|FAILED|Error:|rel err|lse err" /tmp/tests_pl.log | tail -10 | cut -c1-300
probe plan_pl_ei 100 plan_probe.py --format fp8 --heads 128 --query-precision e4m3 --batches 1,8,32,64 \
  --b2 BLOCK_N=64,T8=1,P8=1,EI=1 --b3 PL=1 --tol 4e-2
probe plan_vs_ei 100 plan_probe.py --format fp8 --heads 128 --query-precision e4m3 --batches 1,8,32,64 \
  --b2 BLOCK_N=64,T8=1,P8=1,EI=1 --b3 VS=1 --tol 4e-2
left=$(( LIMIT - 10 - SECONDS ))
[ $left -ge 80 ] && probe plan_pl_all $left plan_probe.py --format fp8 --heads 128 --query-precision e4m3 \
  --batches 8,32,64 --b2 BLOCK_N=64,T8=1,P8=1,EI=1,TE=1,NF=1 --b3 PL=1 --tol 4e-2
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls p8_check_pl.log tests_pl.log plan_*.log 2>/dev/null)
