#!/usr/bin/env bash
# session 19, call F: fp8 H = 128 (the cells call E's table did not reach before its time limit): ab1b062 against the
# tree of call A (34721ae), FlashMLA in the same run
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C
for t in new old; do
  P=/tmp/np:$PWD/src:/tmp/site; [ $t = old ] && P=/tmp/np:$PWD/.carry/old/src:/tmp/site
  PYTHONPATH=$P timeout 110 python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 \
    --vs-variant-filter "'PP': 1, 'RELOAD': 1, 'WG1_FIRST': 1}" \
    --vs-batches-h16 "" --vs-batches-h128 1,8,32,64 --out $OUT/vs_$t.json 2>&1 \
    | tee $OUT/vs_$t.log | grep -E "^\| H=|rel err" | sed "s/^/$t /"
done
