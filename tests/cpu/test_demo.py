"""`graphtune demo` on a CPU-only machine, end to end, through the real command line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def test_cpu_demo_runs_end_to_end_in_under_two_minutes(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}   # the demo must set it up itself
    env["GRAPHTUNE_DB"] = str(tmp_path / "demo.sqlite")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "graphtune", "demo", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=300)
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert elapsed < 120, f"demo took {elapsed:.0f} s"
    report = json.loads((tmp_path / "out" / "demo.json").read_text())
    assert report["mode"] == "cpu"
    rows90, rows120 = report["inspect"]["sm_90"], report["inspect"]["sm_120"]
    assert rows90 and len(rows90) == len(rows120)
    assert all(r["registers"] for r in rows90)
    # the same configs fit on sm_90 and some do not on sm_120 (101,376 B of shared memory per block)
    assert all(r["fits"] for r in rows90)
    assert any(not r["fits"] and "101376" in r["reason"] for r in rows120)
    c90 = [m for m in report["model"] if m["c"] == 90]
    assert {round(m["step_ms"], 2) for m in c90} == {98.28, 80.9}
    flow = report["interpreter_flow"]
    assert flow["buckets_tuned"] == 4 and flow["worst_rel_err"] < 1e-4
    assert "fused_add_rmsnorm" in flow["untuned_error"] and "12" in flow["untuned_error"]
    assert "No CUDA GPU" in proc.stdout and "not GPU time" in proc.stdout


def test_demo_tunes_into_its_own_database_never_the_users(tmp_path, monkeypatch):
    """With GRAPHTUNE_DB set, the demo recorded its interpreter entries into the user's file
    (os.environ.setdefault kept the user's path); now it always uses its own, for the demo only."""
    import hashlib

    from graphtune import db as gdb, demo, settings
    from graphtune.cli import main
    from graphtune.kernels.rmsnorm import rmsnorm_kernel

    user = tmp_path / "mine.sqlite"
    monkeypatch.setenv("GRAPHTUNE_DB", str(user))
    mine = gdb.TuningDB(user)
    mine.record_all([gdb.new_entry(gdb.KernelIdentity("users_kernel", "s", "c"),
                                   gdb.EnvIdentity("NVIDIA H200", "9.0", "3.6.0", "2.11.0", "13.0"), (1,),
                                   {"BLOCK": 16}, [])])
    mine.close()
    before = (hashlib.md5(user.read_bytes()).hexdigest(), user.stat().st_mtime_ns)
    monkeypatch.setattr(demo, "_cpu_inspect", lambda console, full_space: {})   # (the slow part; not the point)
    assert main(["demo", "--cpu", "--out", str(tmp_path / "out")]) == 0
    assert (hashlib.md5(user.read_bytes()).hexdigest(), user.stat().st_mtime_ns) == before
    for path, expected in ((user, 0), (tmp_path / "out" / "demo-tuning.sqlite", 4)):
        store = gdb.TuningDB(path)
        assert len(store.entries(rmsnorm_kernel.name)) == expected, path   # (the main file's bytes can hide
        store.close()                                                      # a write still in the WAL)
    assert settings.db_path() == user   # the override ended with the demo
