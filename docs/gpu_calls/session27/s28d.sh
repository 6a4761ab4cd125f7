#!/usr/bin/env bash
# prepared in session 27 for branch split-cost: T8 given its query already in fp8, as FlashMLA's fp8 path gets it (the
# benchmark casts FlashMLA's query outside its timed call): Q8PRE with the pair made once per query tensor outside the
# captured graph (interface_hopper._DIAG_Q8_PREPARED), with the pair and with its hi half alone (_DIAG_NO_LO: the e4m3
# query); what an fp8-query API (q in e4m3 with its scale, as FlashMLA's descale_q) would give T8. After s27b.sh
# (Q8PRE's GPU tests) has passed.
set -o pipefail
C=${1:-unknown}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1 GIT_COMMIT=$C PYTHONPATH=/tmp/np:$PWD/src:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for nolo in 0 1; do
  timeout 250 python3 - $nolo > $OUT/t8_prepared_nolo$nolo.log 2>&1 <<'PY'
import os, sys
sys.path.insert(0, "benchmarks")
from triton.experimental.gluon import language as gl
from graphtune.kernels.mla_decode import interface_hopper, kernel_hopper_pp8
interface_hopper._DIAG_Q8_PREPARED = {}
kernel_hopper_pp8._DIAG_NO_LO = gl.constexpr(int(sys.argv[1]))
import bench_mla_decode
sys.exit(bench_mla_decode.main(["--hopper-variants", "--hopper-kinds", "heads-on-M fp8", "--hopper-no-portable",
                                "--hopper-variant-filter", "'T8': 1", "--hopper-overlay", "Q8PRE=1",
                                "--out", os.environ["OUT"] + f"/t8_prepared_nolo{sys.argv[1]}.json"]))
PY
  echo "prepared nolo=$nolo rc=$?"; grep -E "^check|Error|error" $OUT/t8_prepared_nolo$nolo.log | cut -c1-300
  grep -E "^heads=" $OUT/t8_prepared_nolo$nolo.log | sed 's/ tbs=.*//'
done
