#!/usr/bin/env bash
# session 34, call F (main with fp16 partials for fp8 caches under the Hopper tokens-on-M kernels; no carry): the
# MLA GPU tests that run H = 16 fp8 split paths, within the call's limit. Not run in session 34 (no device time left).
set -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TRITON_CACHE_DIR=/tmp/tc
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 140 python3 -m pytest -q tests/gpu/test_mla_decode_gpu.py tests/gpu/test_mla_hopper_tok_gpu.py \
  -k "hopper_fp8_matches_reference or more_requests or zero_length or v2_matches_reference" 2>&1 | tail -6
