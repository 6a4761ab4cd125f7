#!/usr/bin/env bash
# session 31's calls, prepared on the CPU machine (run from the repository root, main checked out and clean): main's
# src into .carry/base_src, the call scripts into .carry/, then branch s31 checked out (detached) for the device
# tool's copy of the working tree. Prints the commits the scripts take. Afterwards: `git checkout -q main`.
set -euo pipefail
[ -z "$(git status --porcelain --untracked-files=no)" ] || { echo "prep.sh: the working tree has changes"; exit 1; }
MAIN=$(git rev-parse --short main)
S31=$(git rev-parse --short s31)
E4=$(git rev-parse --short e4m3-hi)
rm -rf .carry/base_src
mkdir -p .carry/base_src
git archive main src | tar -x -C .carry/base_src --strip-components=1
cp docs/gpu_calls/session31/s31*.sh docs/gpu_calls/session30/s30b.sh .carry/
ls .whl/*.whl .whl/np/*.whl >/dev/null || { echo "prep.sh: .whl/ lacks the FlashMLA or numpy wheel"; exit 1; }
git checkout -q --detach s31
echo "carry [\".carry\", \".whl\"]; commands, in order:"
echo "  bash .carry/s31a.sh $S31"
echo "  bash .carry/s31b.sh $S31 $MAIN main   then   bash .carry/s31b.sh $S31 $MAIN s31"
echo "  bash .carry/s31c.sh $S31 $MAIN"
echo "  bash .carry/s30b.sh $S31              (if device time is left)"
echo "  (e4m3-hi alone, only if s31a's e4m3 tests fail: git checkout -q --detach e4m3-hi; bash .carry/s31e.sh $E4 $MAIN)"
