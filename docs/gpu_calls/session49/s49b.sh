#!/usr/bin/env bash
# session 49, call B (carry [".whl"]; an H100 or an H200, say which): tile pools in the load path's ceiling
# (benchmarks/probes/pool_stream.py): the even split's static ranges against each request's tiles claimed from a pool
# by its programs, laid in order and spread over the grid; fp8, page size 64 and 1, batch 32 / 64 / 128, uniform and
# ragged, each checked (every tile once, counters back at zero) before it is timed.
set -o pipefail
LIMIT=${LIMIT:-300}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
probe pool_stream $(( LIMIT - 10 )) pool_stream.py --batches 32,64,128 --page-sizes 64,1 | tail -40
