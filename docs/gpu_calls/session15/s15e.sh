#!/usr/bin/env bash
# session 15, call E: the README command's second half from where call D's time limit cut it (GPU tests 96-124)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl >/dev/null 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=/tmp/np:$PWD/src timeout 200 python3 -m pytest $(cat .carry/part2_rest.txt) -q -p no:cacheprovider 2>&1 | tee $OUT/readme_part2_rest.log | tail -5
