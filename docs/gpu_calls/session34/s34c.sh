#!/usr/bin/env bash
# session 34, call C (branch vt: VT's second form, WG1's softmax before its P.V with P(r) scaled into a P tile of its
# own; carry [".whl"]): VT's GPU test, VT and T8 pinned beside FlashMLA (H = 128, fp8, batch 1 / 8 / 32 / 64), then
# Nsight Compute on each at batch 64 (speed of light, memory and compute workload: where VT's pair goes).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
C=${GIT_COMMIT:-unknown}
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc
GRAPHTUNE_GPU_NEW=1 timeout 120 python3 -m pytest -q -x tests/gpu/test_mla_decode_gpu.py -k "heads_on_m_variants and VT1" \
  > /tmp/vt_tests.log 2>&1
echo "vt tests rc=$? at ${SECONDS}s"; tail -3 /tmp/vt_tests.log | cut -c1-300
GIT_COMMIT=$C timeout 150 python3 benchmarks/bench_mla_decode.py --hopper-variants --hopper-heads 128 \
  --hopper-kinds "heads-on-M fp8" --hopper-variant-filter "'T8': 1}|'VT': 1" --hopper-no-portable \
  --out $OUT/vt2_variants.json > /tmp/vt_bench.log 2>&1
echo "vt bench rc=$? at ${SECONDS}s"; grep -E "^check|batch=" /tmp/vt_bench.log | cut -c1-260
for v in t8 vt; do
  cfg='{"PP": 0, "T8": 1}'; [ $v = vt ] && cfg='{"PP": 0, "T8": 1, "VT": 1}'
  left=$(( 540 - SECONDS )); [ $left -lt 40 ] && break
  timeout $(( left / 2 )) ncu --profile-from-start off --nvtx --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section ComputeWorkloadAnalysis --section WarpStateStats -o /tmp/ncu_$v -f python3 benchmarks/probes/ncu_mla.py \
    --heads 128 --batch 64 --kv-format fp8 --no-flashmla --config "$cfg" > /tmp/ncu_$v.log 2>&1
  echo "ncu $v rc=$? at ${SECONDS}s"
  ncu --import /tmp/ncu_$v.ncu-rep --page details --csv > $OUT/ncu_$v.csv 2>/dev/null
done
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
