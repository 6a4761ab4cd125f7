#!/usr/bin/env bash
# session 47, call C (carry [".whl"]): PL again, its P pair's inline PTX reading no 16-bit register it rounded into (call
# B's build read a register before the PRMT that filled it: NaN; graphtune.sass.conversions_of_unwritten_registers
# finds it on the CPU). (1) p8_check at batch 8 of PL in P8's schedules, with VS too (VS passed in call B: 0 bad blocks,
# 3.8-5.5% faster at batch 8-64 with a plan); (2) P8's GPU tests (GRAPHTUNE_GPU_NEW=1); (3) plan_probe at fp8 H = 128
# with the e4m3 query: P8 + EI + VS against it with PL (the "tuned" column: T8 with the e4m3 query, fp16 P, PL's
# accuracy class), then the all-in schedule with VS against it with PL. LIMIT=SECONDS bounds it.
set -o pipefail
LIMIT=${LIMIT:-540}
source docs/gpu_calls/lib.sh
gpu_prelude
probe p8_check_pl2 100 p8_check.py --batch 8 --sms 132,7,1 --lengths uniform,mixed \
  --configs T8=1/P8=1/PL=1,T8=1/P8=1/EI=1/PL=1,T8=1/P8=1/EI=1/TE=1/NF=1/PL=1,T8=1/P8=1/EI=1/WL1=1/PL=1,T8=1/P8=1/EI=1/VS=1/PL=1
GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 \
  python3 -m pytest -q -n 3 tests/gpu/test_mla_decode_gpu.py -k "flashmlas_accuracy_class" > /tmp/tests_pl2.log 2>&1
echo "tests rc=$? at ${SECONDS}s"
grep -E "passed|failed|FAILED|Error:|rel err|lse err" /tmp/tests_pl2.log | tail -10 | cut -c1-300
if ! grep -qE " [1-9][0-9]* bad blocks" /tmp/p8_check_pl2.log && grep -q "wrote" /tmp/p8_check_pl2.log; then
  probe plan_pl_vs 100 plan_probe.py --format fp8 --heads 128 --query-precision e4m3 --batches 1,8,32,64 \
    --b2 BLOCK_N=64,T8=1,P8=1,EI=1,VS=1 --b3 PL=1 --tol 4e-2
  left=$(( LIMIT - 10 - SECONDS ))
  [ $left -ge 80 ] && probe plan_pl_vs_all $left plan_probe.py --format fp8 --heads 128 --query-precision e4m3 \
    --batches 8,32,64 --b2 BLOCK_N=64,T8=1,P8=1,EI=1,TE=1,NF=1,VS=1 --b3 PL=1 --tol 4e-2
fi
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls p8_check_pl2.log tests_pl2.log plan_*.log 2>/dev/null)
