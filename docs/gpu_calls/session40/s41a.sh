#!/usr/bin/env bash
# prepared in session 40 for the next session's first call (main; carry [".whl"]; an H100 or an H200, say which):
# (1) s40f.sh: SM_SPLIT's GPU test (every weighted split, SM_SPLIT 1 and 2) and benchmarks/probes/sm_split.py (the
# even split against SM_SPLIT's even / balanced / weighted / request-aligned splits, fp8 H = 16, batch 32 / 64 / 128);
# (2) with the time left, s40b.sh's tables with a plan (fp8 with the e4m3 columns, bf16, the row gather at page size 1).
set -o pipefail
LIMIT=${LIMIT:-570}
LIMIT=150 bash docs/gpu_calls/session40/s40f.sh
mv $OUT/logs.tgz $OUT/logs_s40f.tgz 2>/dev/null     # (s40b.sh writes its own logs.tgz)
left=$(( LIMIT - 10 - SECONDS )); [ $left -ge 200 ] && LIMIT=$left bash docs/gpu_calls/session40/s40b.sh
