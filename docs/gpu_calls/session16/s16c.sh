#!/usr/bin/env bash
# session 16, call C: the row-gather route at page sizes 1 / 16 (GPU tests, then portable vs row gather through the
# public call, tuned per bucket, checked)
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 -m pytest tests/gpu/test_mla_hopper_tok_gpu.py -q -rA -p no:cacheprovider \
  -k "pages_below or (row_gather and (ps1-B6-2 or ps16)) or (tok_ds_matches and gather and ps1)" 2>&1 | tee $OUT/tests.log | grep -E "FAIL|ERROR|passed|failed|Error|assert" | tail -20
timeout 330 python3 benchmarks/probes/gather_route.py --out $OUT/gather_route.json 2>&1 | tee $OUT/gather_route.log | tail -30
