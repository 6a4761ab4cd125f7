#!/usr/bin/env bash
# session 33's calls, prepared on the CPU machine (run from the repository root, main checked out and clean): each
# way's src into .carry/src_<way> (with its commit in COMMIT), the call scripts into .carry/, then branch s31 checked
# out (detached) for the device tool's copy of the working tree (its benchmarks/ and tests/ are main's plus the plan's
# tests). Afterwards: `git checkout -q main`.
set -euo pipefail
[ -z "$(git status --porcelain --untracked-files=no)" ] || { echo "prep.sh: the working tree has changes"; exit 1; }
git merge-base --is-ancestor main s31 || { echo "prep.sh: merge main into s31 first (its tests/ and benchmarks/ run)"; exit 1; }
rm -rf .carry/src_* .carry/base_src .carry/lazy_src
for way in main s30 lazy-price s31; do
  mkdir -p .carry/src_$way
  git archive $way src | tar -x -C .carry/src_$way --strip-components=1
  git rev-parse --short $way > .carry/src_$way/COMMIT
done
cp docs/gpu_calls/session33/s33*.sh .carry/
ls .whl/*.whl .whl/np/*.whl >/dev/null || { echo "prep.sh: .whl/ lacks the FlashMLA or numpy wheel"; exit 1; }
git checkout -q --detach s31
echo "carry [\".carry\", \".whl\"]; commands, in order:"
echo "  bash .carry/s33a.sh            (fp8: main, s30, lazy-price, s31; then split_plan.py on the fp8 cells)"
echo "  bash .carry/s33b.sh            (bf16: main, s31, s31 with the bf16 start price 4; fp8 e4m3 columns of main)"
