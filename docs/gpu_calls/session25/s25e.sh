#!/usr/bin/env bash
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/np:$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader
for lo in 0 1; do timeout 120 python3 docs/gpu_calls/session25/diag_pv8.py $lo 2>&1 | grep -E "^lo=|Error" | cut -c1-300; done
