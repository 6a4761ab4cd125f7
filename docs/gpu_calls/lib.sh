#!/usr/bin/env bash
# What the device calls' scripts share (from session 35 on; the earlier scripts are kept as they ran). Source it from
# the repository root on the device: `source docs/gpu_calls/lib.sh`.
#
# gpu_prelude: FlashMLA (the sgl-flash-mla wheel) and numpy 2.2.6 from the carried .whl/ into /tmp/site and /tmp/np
# (the device has no network; the device README says how the wheels are fetched; pytest-xdist likewise:
# `pip download --no-deps --only-binary=:all: pytest-xdist execnet` into .whl/xd), unbuffered Python, the GPU's name.
gpu_prelude() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >/dev/null 2>&1
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl \
    >/dev/null 2>&1
  # pytest-xdist and execnet (.whl/xd, when carried) into /tmp/xd: the GPU tests in parallel workers (compiling is
  # what they spend their time on; session 35)
  if ls .whl/xd/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/xd \
      .whl/xd/*.whl >/dev/null 2>&1
  fi
  export PYTHONUNBUFFERED=1
  nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
}

# vs_table WAY SRC COMMIT FORMAT CAP: the public call's table beside FlashMLA (uniform and ragged, seed 39179) for the
# source tree SRC in its own process and Triton cache, into $OUT/FORMAT_WAY.json, its log /tmp/FORMAT_WAY.log, at most
# CAP seconds.
vs_table() {
  local way=$1 src=$2 commit=$3 fmt=$4 cap=$5
  GIT_COMMIT=$commit PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$way timeout "$cap" \
    python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats "$fmt" --vs-variant-filter NONE \
    --vs-ragged --ragged-seed 39179 --out "$OUT/${fmt}_$way.json" > "/tmp/${fmt}_$way.log" 2>&1
  echo "${fmt}_$way rc=$? at ${SECONDS}s"
}

# gpu_tests NAME CAP FILE FILTER: the GPU tests of FILE that pytest's -k FILTER selects, the knobs still gated in
# tests/gpu/_unproven.py included (GRAPHTUNE_GPU_NEW=1), in four workers (pytest-xdist from gpu_prelude) on the current
# source tree and the shared Triton cache, at most CAP seconds, its log /tmp/NAME.log; prints the counts and failures.
gpu_tests() {
  local name=$1 cap=$2 file=$3 filter=$4
  GRAPHTUNE_GPU_NEW=1 PYTHONPATH=/tmp/np:$PWD/src:/tmp/site:/tmp/xd TRITON_CACHE_DIR=/tmp/tc_main timeout "$cap" \
    python3 -m pytest -v -n 4 "$file" -k "$filter" > "/tmp/$name.log" 2>&1
  echo "$name rc=$? at ${SECONDS}s: $(grep -c " PASSED" "/tmp/$name.log") passed, $(grep -c " FAILED" "/tmp/$name.log") failed"
  grep -E "passed|failed|FAILED|Error|rel err" "/tmp/$name.log" | grep -v " PASSED" | tail -12 | cut -c1-300
}

# probe NAME CAP SCRIPT ARGS...: benchmarks/probes/SCRIPT with ARGS on the current source tree ($PWD/src) in the
# shared Triton cache, into $OUT/NAME.json, its log /tmp/NAME.log, at most CAP seconds; prints its rc and its table.
probe() {
  local name=$1 cap=$2 script=$3; shift 3
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main timeout "$cap" \
    python3 "benchmarks/probes/$script" "$@" --out "$OUT/$name.json" > "/tmp/$name.log" 2>&1
  echo "$name rc=$? at ${SECONDS}s"; grep -v '^{' "/tmp/$name.log" | grep -v "^$" | cut -c1-300
}

# ncu_view NAME FORMAT CONFIG CAP [ARGS...]: Nsight Compute's source view (stall reasons per SASS line, warp states,
# speed of light, memory workload) of the Hopper ping-pong kernels pinned to CONFIG (a JSON dict) at H = 128, batch 64,
# on a FORMAT cache (benchmarks/probes/ncu_mla.py, ARGS added to its own, e.g. --query-precision e4m3 --plan), at most
# CAP seconds; the details and per-line CSVs into
# $OUT/ncu_NAME_{details,sass}.csv and their summary (benchmarks/probes/ncu_stalls.py) printed.
ncu_view() {
  local name=$1 fmt=$2 cfg=$3 cap=$4; shift 4
  PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main timeout "$cap" ncu --profile-from-start off \
    --nvtx --kernel-name regex:hopper_pp --section SourceCounters --section WarpStateStats --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --import-source yes -o "/tmp/ncu_$name" -f python3 benchmarks/probes/ncu_mla.py \
    --heads 128 --batch 64 --kv-format "$fmt" --no-flashmla --config "$cfg" "$@" > "/tmp/ncu_$name.log" 2>&1
  echo "ncu $name rc=$? at ${SECONDS}s"
  ncu --import "/tmp/ncu_$name.ncu-rep" --page details --csv > "$OUT/ncu_${name}_details.csv" 2>/dev/null
  ncu --import "/tmp/ncu_$name.ncu-rep" --page source --print-source sass --csv > "$OUT/ncu_${name}_sass.csv" 2>/dev/null
  python3 benchmarks/probes/ncu_stalls.py "$OUT/ncu_${name}_sass.csv" --top 6 | cut -c1-200
}

# vs_plan NAME CAP ARGS...: the public call tuned per bucket with a step's plan beside FlashMLA
# (bench_mla_decode.py --vs-flashmla --vs-plan, ARGS added) on the current source tree, into $OUT/NAME.json, its log
# /tmp/NAME.log, at most CAP seconds; prints its rc and its tables' rows.
vs_plan() {
  local name=$1 cap=$2; shift 2
  GIT_COMMIT=${GIT_COMMIT:-unknown} PYTHONPATH=/tmp/np:$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_main timeout "$cap" \
    python3 benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-variant-filter NONE --vs-plan "$@" \
    --out "$OUT/$name.json" > "/tmp/$name.log" 2>&1
  echo "$name rc=$? at ${SECONDS}s"; grep -E "^\| H=|^\| heads|accuracy" "/tmp/$name.log" | cut -c1-400
}

# targets_h200 LIMIT: issue 14's targets table's cells (set and recorded on an H200) with what is left of LIMIT seconds
# (SECONDS counts from the script's start): fp8 H = 16 uniform and ragged (seed 39179), the row gather at page size 1,
# bf16 uniform and ragged, fp8 H = 128 with the e4m3 columns; their logs /tmp/{fp8_h16,gather_page1,bf16,fp8_h128}.log.
targets_h200() {
  local limit=$1 left
  vs_plan fp8_h16 130 --vs-formats fp8 --vs-batches-h128 "" --vs-ragged --ragged-seed 39179
  probe gather_page1 60 gather_route.py --formats fp8 --page-sizes 1 --batches 32,64,128 --plan | tail -8
  left=$(( limit - 10 - SECONDS ))
  [ $left -ge 60 ] && vs_plan bf16 $(( left < 160 ? left : 160 )) --vs-formats bf16 --vs-ragged --ragged-seed 39179
  left=$(( limit - 10 - SECONDS ))
  [ $left -ge 60 ] && vs_plan fp8_h128 $left --vs-formats fp8 --vs-batches-h16 "" --vs-e4m3
}
