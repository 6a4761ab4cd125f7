#!/usr/bin/env bash
# session 16, call A: the reduction as a programmatic dependent now that the split kernels trigger it (decode with
# and without PDL beside FlashMLA, 18 cells, checked); the 29 README part-2 GPU tests not run on session 15's tree;
# the Hopper decode GPU tests with PDL on; fp8 H128 B32 ping-pong vs widened-score kernel
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site PYTHONUNBUFFERED=1 GIT_COMMIT=$C
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
python3 -c "import torch,triton,numpy;print(torch.__version__,triton.__version__,numpy.__version__,torch.cuda.get_device_name())"
timeout 240 python3 benchmarks/probes/reduce_sweep.py --pdl --shapes 4x2x512x4 --out $OUT/pdl_sweep.json 2>&1 | tee $OUT/pdl_sweep.log | grep -v "^  "
timeout 150 python3 -m pytest -q -rA -p no:cacheprovider $(cat .carry/part2_last29.txt) 2>&1 | tee $OUT/part2_last29.log | grep -E "FAIL|ERROR|passed|failed" | tail -12
timeout 150 python3 -c "
import sys, pytest
from graphtune.kernels.mla_decode import interface
interface._REDUCE_PDL = True
sys.exit(pytest.main(['-q', '-rA', '-p', 'no:cacheprovider', 'tests/gpu/test_mla_decode_gpu.py', '-k',
  'hopper_capture or hopper_fp8_capture or hopper_matches or hopper_fp8_matches or zero_length or tuned_per_bucket or more_requests']))
" 2>&1 | tee $OUT/pdl_tests.log | grep -E "FAIL|ERROR|passed|failed" | tail -12
