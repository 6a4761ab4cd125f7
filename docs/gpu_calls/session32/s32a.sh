#!/usr/bin/env bash
# session 32, call A (branch s31 checked out): the stack's GPU tests (s31a.sh without its probe), beside them the
# inspector's GPU tests (registers / shared memory / occupancy against the driver: settles whether sm_90's 1 KB
# static shared memory is the driver's reserve counted twice) and the isolation worker's GPU test (after session
# 31's worker protocol change); then main's fp8 table (s31b.sh main).
C=${1:-unknown}
BASE=${2:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
{ PYTHONPATH=/tmp/np:$PWD/src TRITON_CACHE_DIR=/tmp/tc_ri timeout 250 python3 -m pytest -q -rs \
    tests/gpu/test_resources_gpu.py tests/gpu/test_isolate_gpu.py > $OUT/resources_isolate.log 2>&1; } &
PROBE=0 bash .carry/s31a.sh $C
wait
echo "resources+isolate: $(tail -1 $OUT/resources_isolate.log)"; grep -E "^FAILED|^SKIPPED|assert" $OUT/resources_isolate.log | head -8 | cut -c1-300
bash .carry/s31b.sh $C $BASE main
