"""The tuner with a real database across real processes: start-up from a complete database costs nothing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

WORKER = Path(__file__).with_name("_db_start_worker.py")


def _run(db: Path, n_configs: int = 4, **env) -> dict:
    e = {**os.environ, "GRAPHTUNE_DB": str(db), "TRITON_INTERPRET": "1", **env}
    e.pop("GRAPHTUNE_NO_DB", None)
    proc = subprocess.run([sys.executable, str(WORKER), str(n_configs)], capture_output=True, text=True, env=e,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_second_process_starts_from_database_with_zero_benchmarks(tmp_path):
    db = tmp_path / "tune.sqlite"
    first = _run(db)
    assert first["tune_count"] == 3 and first["bench_calls"] == 3 * 4 and first["sources"] == ["tuned"]
    second = _run(db)
    assert second["bench_calls"] == 0 and second["tune_count"] == 0
    assert second["candidate_launches"] == []      # no losing candidate was compiled or launched
    assert second["sources"] == ["database"]


def test_changed_config_list_is_never_applied(tmp_path):
    db = tmp_path / "tune.sqlite"
    _run(db, n_configs=4)
    other = _run(db, n_configs=3)                  # a different candidate list: a different identity
    assert other["tune_count"] == 3 and other["sources"] == ["tuned"]


def test_readonly_database_is_read_but_never_written(tmp_path):
    db = tmp_path / "tune.sqlite"
    _run(db)
    before = db.read_bytes()
    ro = _run(db, n_configs=2, GRAPHTUNE_DB_READONLY="1")   # tunes (not in db) but must not write
    assert ro["tune_count"] == 3
    again = _run(db, n_configs=2, GRAPHTUNE_DB_READONLY="1")
    assert again["tune_count"] == 3                # nothing was written by the read-only run
    assert _run(db)["bench_calls"] == 0            # the original entries are still there
    assert db.read_bytes()[:16] == before[:16]
