#!/usr/bin/env bash
# session 36, call F (main; carry [".whl"]; cut to fit the session's last device time): (1) a bf16 cache's partial
# outputs in fp32 (shipped) / fp16 / bf16 at H = 128, batch 32 / 64, the public call with a plan, errors recorded;
# (2) fp8 H = 128 at batch 1 on the first heads-on-M kernel (as shipped) and on T8 (--third-min-batch 1), with and
# without a plan.
set -o pipefail
source docs/gpu_calls/lib.sh
gpu_prelude
PP="/tmp/np:$PWD/src:/tmp/site"
probe partials_h128 110 partials_probe.py --heads 128 --batches 32,64
probe first_b1 45 plan_probe.py --heads 128 --batches 1
probe t8_b1 45 plan_probe.py --heads 128 --batches 1 --third-min-batch 1
tar -czf $OUT/logs.tgz -C /tmp $(cd /tmp && ls *.log)
