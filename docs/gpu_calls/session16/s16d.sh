#!/usr/bin/env bash
# session 16, call D: the row-gather route on path='auto' (GATHER_AUTO on): the GPU tests it touches, then the GPU demo
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 300 python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_compile_gpu.py::test_shipped_kernels_in_a_reduce_overhead_decode_step tests/gpu/test_compile_gpu.py::test_shipped_ops_pass_opcheck_on_gpu \
  tests/gpu/test_mla_decode_gpu.py::test_capture_replay_equals_eager tests/gpu/test_mla_decode_gpu.py::test_tuned_public_path_and_check_mode \
  "tests/gpu/test_mla_decode_gpu.py::test_default_config_matches_reference" \
  tests/gpu/test_mla_hopper_tok_gpu.py -k "not row_gather_matches and not tok_ds_matches and not v2_matches and not chain and not pipe" \
  2>&1 | tee $OUT/tests.log | grep -E "FAIL|ERROR|passed|failed|Error" | tail -20
timeout 150 python3 -m graphtune demo --out $OUT/demo 2>&1 | tail -30 > $OUT/demo.log; tail -22 $OUT/demo.log
