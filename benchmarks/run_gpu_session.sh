#!/usr/bin/env bash
# Everything that needs the GPU, in one call: tests, then each benchmark, each with its own time limit.
# Results JSON go to $OUT/r (then one tarball), the whole log to $OUT/log.txt.
#   GIT_COMMIT=<sha> OUT=/tmp/out bash benchmarks/run_gpu_session.sh [steps...]
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export GRAPHTUNE_DB="${OUT}/session-tuning.sqlite"
mkdir -p "$OUT/r"
LOG="$OUT/log.txt"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests dispatch resources tuning ab demo mla)
run() {  # name, limit, command...
  local name=$1 limit=$2; shift 2
  echo "=== $name (limit ${limit}s) $(date +%T)" | tee -a "$LOG"
  local t0=$SECONDS
  timeout "$limit" "$@" >>"$LOG" 2>&1
  local rc=$?
  echo "=== $name rc=$rc in $((SECONDS - t0))s" | tee -a "$LOG"
  (cd "$OUT" && tar czf results.tgz r 2>/dev/null)   # after every step: a later step running out of time loses nothing
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$LOG"
for s in "${steps[@]}"; do
  case $s in
    tests) run gpu-tests 150 python -m pytest tests/gpu -q -rA -s -p no:cacheprovider ;;
    coretests) run core-tests 120 python -m pytest tests/gpu/test_capture_gpu.py tests/gpu/test_timing_gpu.py -q -rA -s -p no:cacheprovider ;;
    mlatests) run mla-tests 150 python -m pytest tests/gpu/test_mla_decode_gpu.py -q -rA -p no:cacheprovider ;;
    dispatch) run dispatch 60 python benchmarks/bench_dispatch.py --out "$OUT/r" ;;
    resources) run resources 45 python benchmarks/check_resources.py --out "$OUT/r" ;;
    tuning) run tuning 150 python benchmarks/bench_tuning.py --out "$OUT/r" ;;
    ab) run ab 120 python -m graphtune ab mla_decode --sizes 1,8,32,60,90,128 --trials 5 --out "$OUT/r/ab" ;;
    demo) run demo 150 python -m graphtune demo --out "$OUT/r/demo" ;;
    mla) run mla-bench 200 python benchmarks/bench_mla_decode.py --check --check-heads 16,128 --page-sizes 1,64 \
           --out "$OUT/r/mla_decode.json" ;;
  esac
done
grep -E "^=== |passed|failed|FAILED|Error" "$LOG" | tail -60
