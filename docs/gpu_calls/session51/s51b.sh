#!/usr/bin/env bash
# session 51, call B (carry [".whl"]; an H100 or an H200, say which): the fp8 tokens-on-M space with RK64 alone.
# Session 51's call A (the s50a script, H200) had the second fp8 kernel pinned to two buffers with RK64 (no PT_EARLY)
# and a step's plan 4% faster at batch 32 than the tuner's pick (three buffers, RK64, PT_EARLY); since then the tuned
# space (HOPPER_TOK_FP8_V2_SPACE) has {RK64 1} and {NUM_BUF 3, RK64 1} too. (1) The decode beside FlashMLA, fp8 H = 16,
# batch 32 / 64 / 128, with a plan and without, and the pinned variants with a plan (two / three buffers, PT_EARLY on
# / off), twice, each time beside (2) the same call from a copy of the source with the space before session 51
# (/tmp/narrow/src, made here: src with space_narrow.patch, which takes the two rows out; the row gather's space
# follows it); (3) the row gather at page size 1 with a plan (the target's 3.0 TB/s at batch 64), both trees.
set -o pipefail
LIMIT=${LIMIT:-420}
source docs/gpu_calls/lib.sh
gpu_prelude
export GIT_COMMIT=${GIT_COMMIT:-unknown}
rm -rf /tmp/narrow && mkdir -p /tmp/narrow && cp -r src /tmp/narrow/ \
  && patch -s -d /tmp/narrow -p1 < docs/gpu_calls/session51/space_narrow.patch \
  && echo "narrow: $(grep -c '"RK64": 1}' /tmp/narrow/src/graphtune/kernels/mla_decode/interface_hopper.py) RK64-alone rows (0 expected)"
vs() {   # vs NAME SRC FILTER CAP (the copy's JSON names its commit as GIT_COMMIT+narrow)
  local c=$GIT_COMMIT; [ "${1%_*}" = narrow ] && c=$GIT_COMMIT+narrow
  GIT_COMMIT=$c PYTHONPATH=/tmp/np:$2:/tmp/site TRITON_CACHE_DIR=/tmp/tc_${1%_*} timeout $4 python3 \
    benchmarks/bench_mla_decode.py --vs-flashmla --configs none --vs-formats fp8 --vs-batches-h16 32,64,128 \
    --vs-batches-h128 "" --vs-plan --vs-variant-filter "$3" --out $OUT/$1.json > /tmp/$1.log 2>&1
  echo "$1 rc=$? at ${SECONDS}s"; grep -E "^\| H=" /tmp/$1.log | cut -c1-400
}
for i in 1 2; do
  vs main_$i $PWD/src "'PLAN'" ${VS_CAP:-80}
  vs narrow_$i /tmp/narrow/src NONE ${VS_CAP:-80}
done
for t in main narrow; do
  src=$PWD/src; [ $t = narrow ] && src=/tmp/narrow/src
  left=$(( (LIMIT - 10 - SECONDS) / 2 )); [ $t = narrow ] && left=$(( LIMIT - 10 - SECONDS ))
  c=$GIT_COMMIT; [ $t = narrow ] && c=$GIT_COMMIT+narrow
  [ $left -ge 30 ] && GIT_COMMIT=$c PYTHONPATH=/tmp/np:$src:/tmp/site TRITON_CACHE_DIR=/tmp/tc_$t timeout $left \
    python3 benchmarks/probes/gather_route.py --formats fp8 --page-sizes 1 --batches 64,128 --plan \
    --out $OUT/gather_$t.json > /tmp/gather_$t.log 2>&1
  echo "gather $t rc=$? at ${SECONDS}s"; grep -v '^{' /tmp/gather_$t.log | grep -v "^$" | tail -8 | cut -c1-250
done
tar -czf $OUT/logs51b.tgz -C /tmp $(cd /tmp && ls main_*.log narrow_*.log gather_*.log 2>/dev/null)
