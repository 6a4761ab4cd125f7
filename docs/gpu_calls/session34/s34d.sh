#!/usr/bin/env bash
# session 34, call D (main; carry [".carry", ".whl"]: .carry/src_main = main's src, .carry/src_p16 = branch p16's):
# where p16's fp16 partials lose time (call B: 13 of 18 fp8 cells slower, H = 128 batch 8 / 32 by 14-18%). For main
# and p16, each in its own process and Triton cache: benchmarks/probes/reduce_sweep.py on fp8, H = 16 batch 32 / 64
# and H = 128 batch 8 / 32 (the split kernel alone, the reduction alone as the decode runs it and one shape, the
# decode, FlashMLA).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for way in main p16; do
  src=$PWD/.carry/src_$way
  GIT_COMMIT=$(cat $src/COMMIT) PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$way timeout 200 \
    python3 benchmarks/probes/reduce_sweep.py --formats fp8 --h16 32,64 --h128 8,32 --shapes 16x1x512x4 \
    --out $OUT/reduce_sweep_$way.json > /tmp/rs_$way.log 2>&1
  echo "$way rc=$? at ${SECONDS}s"; grep -v "^\s*$" /tmp/rs_$way.log | tail -30 | cut -c1-200
done
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls rs_*.log)
