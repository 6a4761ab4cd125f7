#!/usr/bin/env bash
# session 33, call M (main checked out; carry [".whl"]): the branches session 32 prepared for s33a.sh / s33b.sh did not
# survive into this session's checkout, so this call takes main alone: the resource inspector's deciding check of
# sm_90's static 1 KB (docs/design.md, "Known limits"); the bf16 table, uniform and ragged (seed 39179), as shipped and
# with the bf16 kernels' start price at 4 tiles (benchmarks/probes/seg_cost.py --bf16 4); the fp8 table with the e4m3
# columns (e4m3-hi, landed in session 32, untimed) and ragged batches. FlashMLA timed in each process.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
C=${GIT_COMMIT:-unknown}
PYTHONPATH=/tmp/np:$PWD/src TRITON_CACHE_DIR=/tmp/tc_res timeout 60 python3 -m pytest -q -rs \
  tests/gpu/test_resources_gpu.py > $OUT/resources.log 2>&1
echo "resources: $(tail -1 $OUT/resources.log)"; grep -E "^FAILED|^E |SKIPPED" $OUT/resources.log | head -6 | cut -c1-300
GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_bf16 timeout 110 python3 \
  benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats bf16 --vs-variant-filter NONE \
  --vs-ragged --ragged-seed 39179 --out $OUT/table_bf16_main.json > $OUT/table_bf16_main.log 2>&1
echo "bf16 main rc=$?"
GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_bf16_seg4 timeout 110 python3 \
  benchmarks/probes/seg_cost.py --bf16 4 --configs none --vs-formats bf16 --vs-variant-filter NONE --vs-ragged \
  --ragged-seed 39179 --out $OUT/table_bf16_seg4.json > $OUT/table_bf16_seg4.log 2>&1
echo "bf16 seg4 rc=$?"
python3 benchmarks/compare_mla_tables.py $OUT/table_bf16_main.json $OUT/table_bf16_seg4.json \
  --labels main,seg4 --out $OUT/compare_bf16.json 2>&1 | tail -24
GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_e4 timeout 220 python3 \
  benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-variant-filter NONE --vs-e4m3 \
  --vs-ragged --ragged-seed 39179 --out $OUT/table_fp8_e4m3_main.json > $OUT/table_fp8_e4m3_main.log 2>&1
echo "fp8 e4m3 main rc=$?"; grep -E "^\| |accuracy|Error" $OUT/table_fp8_e4m3_main.log | cut -c1-170
