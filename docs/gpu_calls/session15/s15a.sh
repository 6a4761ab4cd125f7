python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np .whl/np/*.whl
export PYTHONPATH=/tmp/np:$PWD/src:/tmp/site PYTHONUNBUFFERED=1 GIT_COMMIT=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
timeout 540 python3 benchmarks/probes/reduce_sweep.py --out $OUT/reduce_sweep_session15_run1.json 2>&1 | tee $OUT/reduce_sweep_run1.log
