#!/usr/bin/env bash
# session 39, call C (main + SWAP; carry [".whl"]): call B's Nsight Compute source view put WG1's wait for the left
# half of its next tile (WG0's request) first among the stalls (14% of all samples) and WG0's wait for WG1's P second
# (8%). (1) The GPU tests of SWAP 1 (WG1's own P.V first, its next tile's right half requested once that retired) and
# SWAP 2 (and WG1's other P.V only once WG0 issued its P.V of WG1's tile), with RF and RELOAD 1 / 2; (2) pinned at bf16
# H = 128 beside FlashMLA, twice (run-to-run noise): RELOAD 1 (WG1_FIRST 0 / 1), RELOAD 2 with WG1_FIRST 1, SWAP 1 / 2
# (alone, with RF, SWAP 1 with RF and RELOAD 2).
set -o pipefail
LIMIT=${LIMIT:-570}
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
if [ "${SKIP_TESTS:-0}" = 0 ]; then   # (SKIP_TESTS=1 where little device time is left: the timing's own check stays)
  GRAPHTUNE_GPU_NEW=1 PYTHONPATH=$PP:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout 150 python3 -m pytest -q -n 8 \
    tests/gpu/test_mla_decode_gpu.py -k "SWAP" > /tmp/tests_s39d.log 2>&1
  echo "tests rc=$? at ${SECONDS}s"; grep -E "passed|failed|FAILED|Error|assert" /tmp/tests_s39d.log | tail -12 | cut -c1-300
fi
for pass in 1 2; do
  left=$(( LIMIT - SECONDS )); [ $left -lt 90 ] && break
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=$PP TRITON_CACHE_DIR=/tmp/tc_main timeout $(( left < 200 ? left : 200 )) \
    python3 benchmarks/bench_mla_decode.py --hopper-variants --hopper-heads 128 --hopper-kinds "heads-on-M" \
    --hopper-no-portable --hopper-variant-filter "'RELOAD': 1}|'WG1_FIRST': 1}|'SWAP'" \
    --out $OUT/swap_variants_$pass.json > /tmp/swap_variants_$pass.log 2>&1
  echo "swap_variants_$pass rc=$? at ${SECONDS}s"; grep -E "^check" /tmp/swap_variants_$pass.log | cut -c1-200
done
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls tests_s39d.log swap_variants_*.log 2>/dev/null)
