#!/usr/bin/env bash
# session 16, call F: the table beside FlashMLA as shipped at the end of the session (the reduction as a programmatic
# dependent from 8 requests); then the Hopper capture / replay GPU tests on this tree
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site PYTHONUNBUFFERED=1 GIT_COMMIT=$C
timeout 170 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-variant-filter NONE \
  --vs-batches-h16 1,8,32,64,128 --vs-batches-h128 1,8,32,64 --out $OUT/vs.json 2>&1 | tee $OUT/vs.log | grep -v "^  mla_decode" | tail -22
timeout 110 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_mla_decode_gpu.py \
  -k "hopper_capture or hopper_fp8_capture or tuned_per_bucket or zero_length or more_requests" 2>&1 | tee $OUT/tests.log | grep -E "FAIL|ERROR|passed|failed" | tail -8
