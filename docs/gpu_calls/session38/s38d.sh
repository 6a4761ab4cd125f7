#!/usr/bin/env bash
# session 38, call C (main with _plan_first's fill for T8's own grid and a pinned V2 config's PROGRAMS_PER_SM through
# pinned_config; carry [".whl"]; cut to fit the session's last ~4 minutes of device time): (1) T8 at fp8 H = 128 batch
# 1 / 2 as shipped and with SPLIT_MAX 32 on its space (whose plan call B filled for the wrong grid); (2) the two-wave V2
# grid at fp8 H = 16, batch 32 / 64 (s38a's probe, stopped by the key check in call A).
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
probe plan_t8_h128 40 plan_probe.py --heads 128 --batches 1,2
probe plan_t8_split32_h128 40 plan_probe.py --heads 128 --batches 1,2 --t8-split-max 32
probe plan_waves_h16 70 plan_probe.py --batches 32,64 --b3 PROGRAMS_PER_SM=4
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls plan_t8_h128.log plan_t8_split32_h128.log plan_waves_h16.log 2>/dev/null)
