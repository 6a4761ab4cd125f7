"""Isolated evaluation (isolate.py) on the CPU: a candidate whose worker dies, hangs or reports a fault is
recorded as failed with its reason, a fresh worker goes on with the rest, known outcomes are never launched
again, and a config with a recorded failure is never launched in this process (fallback, force, single config).
The protocol tests use stand-in workers (tests/cpu/_isolate_workers.py); the ``cpu_isolation`` fixture runs
isolate._worker itself through Triton's interpreter with faults simulated by config pre-hooks; the GPU test
(tests/gpu/test_isolate_gpu.py) runs a real faulting kernel."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch
import triton

import _isolate_workers as fake
import graphtune
from graphtune import capture, isolate, store
from graphtune.errors import ConfigError, TuningError, UntunedError
from graphtune.isolate import Job, KernelRef


def _job(bad: set[int], n: int = 4) -> Job:
    return Job(ref=KernelRef("m", None, "k"), device=0, args=(), kwargs={},
               candidates=tuple((i, {"BLOCK": 16, "BAD": int(i in bad)}, (1,)) for i in range(n)),
               reset_to_zero=(), arg_names=(), sys_path=())


@pytest.mark.parametrize("worker,timeout,reason", [
    (fake.dies_on_bad, 30.0, "the worker process died (exit code 9)"),
    (fake.hangs_on_bad, 2.0, "no answer within 2 s"),
    (fake.reports_bad, 30.0, "illegal memory access"),
    (fake.poisoned_after_bad, 30.0, "illegal memory access"),
], ids=["dies", "hangs", "reports", "poisoned-restarts"])
def test_a_bad_candidate_fails_with_its_reason_and_the_rest_still_run(monkeypatch, worker, timeout, reason):
    monkeypatch.setattr(isolate, "_worker", worker)
    run = isolate._run(_job({1}), timeout)
    assert set(run.failures) == {1} and reason in run.failures[1], run.failures
    assert sorted(run.ok) == [0, 2, 3] and run.unproven == set()   # the candidate's own failure: remembered


def test_two_bad_candidates_each_get_a_fresh_worker(monkeypatch):
    monkeypatch.setattr(isolate, "_worker", fake.dies_on_bad)
    run = isolate._run(_job({0, 2}), 30.0)
    assert sorted(run.failures) == [0, 2] and sorted(run.ok) == [1, 3]


def test_known_outcomes_are_not_launched_again(monkeypatch):
    import triton

    class _Space:
        name = "iso_known"
        fn = None

    configs = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})]
    known = {isolate.config_key(configs[0]): "ok",
             isolate.config_key(configs[1]): "isolate: the worker process died (exit code 9)"}
    failures, learnt = isolate.screen(_Space(), configs, (), {}, (1,), known=known)
    assert learnt == {} and list(failures) == [1] and "remembered" in failures[1]


def test_a_kernel_defined_in_a_function_cannot_be_isolated():
    def local_kernel():
        pass
    with pytest.raises(ValueError, match="defined at module level"):
        isolate.kernel_ref("k", local_kernel)


# ------------------------------------------------------------------ worker problems are not the config's


@pytest.mark.parametrize("worker,reason", [
    (fake.cannot_load, "could not load the kernel: OutOfMemoryError: CUDA out of memory"),
    (fake.dies_at_start, "died before it started a candidate (exit code 9)"),
], ids=["cannot-load", "dies-at-start"])
def test_a_worker_that_runs_no_candidate_blames_none(monkeypatch, worker, reason):
    monkeypatch.setattr(isolate, "_worker", worker)
    run = isolate._run(_job(set()), 30.0)
    assert sorted(run.failures) == [0, 1, 2, 3] and run.unproven == {0, 1, 2, 3} and run.ok == []
    assert all(reason in why and "not remembered" in why for why in run.failures.values()), run.failures


def test_a_hang_before_the_launch_is_not_remembered(monkeypatch):
    monkeypatch.setattr(isolate, "_COMPILE_ALLOWANCE_S", 0.0)
    monkeypatch.setattr(isolate, "_worker", fake.hangs_before_launch_on_bad)
    run = isolate._run(_job({1}), 2.0)
    assert run.unproven == {1} and "before launching it" in run.failures[1] and sorted(run.ok) == [0, 2, 3]


def test_screen_remembers_only_what_a_candidate_did(monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(isolate, "_worker", fake.cannot_load)
    kernel = graphtune.autotune([fake.config(16), fake.config(32)], key=["n"], name="iso_unproven")(fake.double_kernel)
    x = torch.zeros(8)
    failures, learnt = isolate.screen(kernel.space, kernel.configs, (x, x.clone(), 8), {}, (1,))
    assert sorted(failures) == [0, 1] and learnt == {}


def test_db_prune_kernel_removes_its_isolated_records(capsys):
    from graphtune.cli import main as cli_main
    from graphtune.db import get_db
    from graphtune.identity import current_env
    kernel = graphtune.autotune([fake.config(16), fake.config(32)], key=["n"], name="iso_prune")(fake.double_kernel)
    store.record_isolated(kernel.identity(), {isolate.config_key(kernel.configs[1]): "isolate: hung"})
    assert store.isolated_outcomes(kernel.identity())
    assert cli_main(["db", "prune", "--kernel", "iso_prune"]) == 0
    assert "removed 0 entries and 1 isolated-launch records" in capsys.readouterr().out
    assert get_db().isolated_configs(kernel.identity(), current_env()) == {}


# --------------------------------------------------------------------- the real worker on the CPU (fixture)


@pytest.fixture
def cpu_isolation(monkeypatch):
    """Isolation on the CPU: isolate._worker itself screens interpreted kernels (fake.real_worker_on_cpu), faults
    come from config pre-hooks (fake.kills, ...), which record in fake.LAUNCHED_HERE any run in this process.
    Yields the list of worker starts (one entry per worker)."""
    from graphtune import search
    monkeypatch.setattr(search, "_screenable", lambda space: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(isolate, "_worker", fake.real_worker_on_cpu)
    monkeypatch.setenv("GRAPHTUNE_ISOLATE_TIMEOUT_S", "3")
    fake.LAUNCHED_HERE.clear()
    starts: list[int] = []
    session = isolate._session
    monkeypatch.setattr(isolate, "_session", lambda *a: starts.append(1) or session(*a))
    yield starts
    capture.simulate_capture(None)
    fake.LAUNCHED_HERE.clear()


def _kernel(name, configs, **kw):
    def bench(fn):
        fn()
        return 1.0
    return graphtune.autotune(configs, key=["n"], name=name, isolate=True, do_bench=bench, **kw)(fake.double_kernel)


def _launch(kernel, n):
    x = torch.randn(n)
    out = torch.full((n,), float("nan"))
    kernel[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, out, n)
    return x, out


def _excluded(name):
    cov = graphtune.coverage([name]).to_dict()["kernels"][0]
    return {c["config"].split(",")[0]: c["reason"] for e in cov["excluded"] for c in e["configs"]}


def test_a_config_that_killed_a_worker_is_never_the_fallback(cpu_isolation):
    kernel = _kernel("iso_fallback", [fake.config(32, fake.kills), fake.config(16), fake.config(64)])
    x, out = _launch(kernel, 100)
    torch.testing.assert_close(out, 2 * x)
    assert "died" in _excluded("iso_fallback")["BLOCK=32"]
    kernel.reset()   # a later process: nothing tuned in memory, the outcomes in the database
    capture.simulate_capture(True)
    with pytest.warns(RuntimeWarning, match=r"fallback BLOCK=16,.*first config without a recorded isolation"):
        x, out = _launch(kernel, 300)
    torch.testing.assert_close(out, 2 * x)
    assert fake.LAUNCHED_HERE == [] and len(cpu_isolation) == 2   # the first worker died; a fresh one went on


def _recorded_kill(kernel, *configs):
    store.record_isolated(kernel.identity(), {isolate.config_key(c): "isolate: the worker process died (exit code -9)"
                                              for c in configs})


def test_a_faulting_default_is_skipped_and_none_safe_raises(cpu_isolation):
    c32, c16 = fake.config(32, fake.kills), fake.config(16, fake.segfaults)
    kernel = _kernel("iso_default", [c32, c16], default=c32)
    _recorded_kill(kernel, c32)
    capture.simulate_capture(True)
    with pytest.warns(RuntimeWarning, match=r"fallback BLOCK=16,"):
        _launch(kernel, 300)
    assert fake.LAUNCHED_HERE == [("segv", 16)]   # the safe one ran here (its hook only records it)
    fake.LAUNCHED_HERE.clear()
    kernel.reset()
    _recorded_kill(kernel, c16)
    with pytest.raises(UntunedError, match="every config that could fall back failed its isolated first launch"):
        _launch(kernel, 500)
    assert fake.LAUNCHED_HERE == [] and cpu_isolation == []


def test_a_force_naming_a_recorded_faulting_config_is_refused(cpu_isolation):
    kernel = _kernel("iso_force", [fake.config(16), fake.config(32, fake.kills)])
    _recorded_kill(kernel, kernel.configs[1])
    graphtune.force("iso_force", BLOCK=32)
    try:
        with pytest.raises(ConfigError, match=r"BLOCK=32,.*failed its isolated first launch.*not launched"):
            _launch(kernel, 100)
    finally:
        graphtune.unforce("iso_force")
    assert fake.LAUNCHED_HERE == []


def test_a_single_config_is_screened_before_its_first_launch(cpu_isolation):
    kernel = _kernel("iso_single", [fake.config(32, fake.kills)])
    with pytest.raises(TuningError, match=r"only config BLOCK=32,.*isolated first launch: isolate: the worker "
                                          r"process died \(exit code -9\)"):
        _launch(kernel, 100)
    with pytest.raises(TuningError, match="remembered|died"):
        _launch(kernel, 300)
    assert fake.LAUNCHED_HERE == [] and len(cpu_isolation) == 1


def test_without_a_database_outcomes_are_kept_in_memory(cpu_isolation, monkeypatch):
    monkeypatch.setenv("GRAPHTUNE_NO_DB", "1")
    kernel = _kernel("iso_nodb", [fake.config(16), fake.config(32, fake.exits), fake.config(64)])
    _launch(kernel, 100)
    assert "exit code 7" in _excluded("iso_nodb")["BLOCK=32"]
    starts = len(cpu_isolation)
    x, out = _launch(kernel, 300)    # a new key: no worker, the failure known in memory
    torch.testing.assert_close(out, 2 * x)
    assert len(cpu_isolation) == starts and fake.LAUNCHED_HERE == []


def test_validation_is_not_decided_in_the_worker(cpu_isolation):
    configs = [fake.config(16), fake.config(32, fake.kills), fake.config(64, wrong=1), fake.config(128)]
    kernel = _kernel("iso_validate", configs, validate=True)
    x, out = _launch(kernel, 100)
    torch.testing.assert_close(out, 2 * x)
    excluded = _excluded("iso_validate")
    assert set(excluded) == {"BLOCK=32", "BLOCK=64"}, excluded   # BLOCK=128 agrees with BLOCK=16
    known = store.isolated_outcomes(kernel.identity())
    assert known[isolate.config_key(configs[3])] == "ok" and known[isolate.config_key(configs[2])] == "ok"


# ------------------------------------------------------------------------------------ the worker's process


def test_a_hung_worker_dies_with_its_parent(tmp_path):
    pidfile = tmp_path / "worker.pid"
    script = (f"import sys; sys.path[:0] = {[str(Path(__file__).parent), *sys.path]!r}\n"
              "import _isolate_workers as fake\nfrom graphtune import isolate\n"
              "isolate._worker = fake.writes_pid_and_hangs\n"
              "job = isolate.Job(ref=isolate.KernelRef('m', None, 'k'), device=0, args=(), kwargs={}, "
              "candidates=((0, {}, (1,)),), reset_to_zero=(), arg_names=(), sys_path=())\n"
              "isolate._run(job, 3600.0)\n")
    # TMPDIR: the killed parent leaves its worker's output file behind, here rather than in /tmp
    parent = subprocess.Popen([sys.executable, "-c", script],
                              env={**os.environ, "ISOLATE_TEST_PIDFILE": str(pidfile), "TMPDIR": str(tmp_path)})
    try:
        deadline = time.monotonic() + 60
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.2)
        worker = int(pidfile.read_text())
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 5
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(worker)
    if alive:
        os.kill(worker, signal.SIGKILL)
    assert not alive, "the worker outlived its parent"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_worker_output_stays_off_the_terminal_and_its_last_line_joins_the_reason(monkeypatch, capfd):
    monkeypatch.setattr(isolate, "_worker", fake.noisy_dies_on_bad)
    run = isolate._run(_job({1}), 30.0)
    assert run.failures[1].endswith("its last output: noise line 19"), run.failures[1]
    captured = capfd.readouterr()
    assert "noise line" not in captured.out + captured.err


# ------------------------------------------------------------------------------- kernels a worker can import


def _main_kernel(monkeypatch, tmp_path, text):
    import types
    script = tmp_path / "serve.py"
    script.write_text(text)
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", main)

    def k():
        pass
    k.__module__, k.__qualname__ = "__main__", "k"
    return k


def test_a_script_kernel_needs_a_guarded_script(monkeypatch, tmp_path):
    guarded = _main_kernel(monkeypatch, tmp_path, "def k(): pass\nif __name__ == '__main__':\n    k()\n")
    assert isolate.kernel_ref("k", guarded).module == "__main__"
    unguarded = _main_kernel(monkeypatch, tmp_path, "def k(): pass\nk()\n")
    with pytest.raises(ConfigError, match=r"no `if __name__ == \"__main__\":` guard.*put the script's work under"):
        isolate.kernel_ref("k", unguarded)
    stdin = _main_kernel(monkeypatch, tmp_path, "")
    sys.modules["__main__"].__file__ = "<stdin>"
    with pytest.raises(ConfigError, match=r"read from no file \(<stdin>\)"):
        isolate.kernel_ref("k", stdin)


def test_the_worker_takes_a_script_kernel_from_mp_main(monkeypatch):
    import types
    mp_main = types.ModuleType("__mp_main__")
    mp_main.k = "the script's own object"
    monkeypatch.setitem(sys.modules, "__mp_main__", mp_main)
    with pytest.raises(TypeError, match="the script's own object"):   # found there, not imported again by path
        isolate._load_kernel(KernelRef("__main__", "/nonexistent/serve.py", "k"))


def test_a_heuristics_kernel_says_isolation_does_not_cover_it():
    wrapped = triton.heuristics({"WRONG": lambda args: 0})(fake.double_kernel)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graphtune.autotune([triton.Config({"BLOCK": 16})], key=["n"], name="iso_heur", isolate=True)(wrapped)
    assert any("triton.heuristics, which isolation does not cover" in str(w.message) for w in caught)


def test_tune_prints_each_failed_config_with_its_reason(capsys):
    from types import SimpleNamespace

    from graphtune.cli.tune import _print
    bucket = SimpleNamespace(sizes=[8], label="BLOCK=16,num_warps=1,num_stages=3", median_ms=0.01,
                             candidates=[{"config": {"BLOCK": 16, "num_warps": 1, "num_stages": 3}, "median_ms": 0.01},
                                         {"config": {"BLOCK": 32, "num_warps": 1, "num_stages": 3},
                                          "failure": "isolate: the worker process died (exit code -9)"}])
    target = SimpleNamespace(kernel=SimpleNamespace(name="k", configs=[1, 2]))
    _print(target, {(8,): bucket}, 1.0, 1, None, False)
    assert "bucket 8: BLOCK=32,num_warps=1,num_stages=3 failed: isolate: the worker process died (exit code -9)" \
        in capsys.readouterr().out


def test_a_worker_that_cannot_start_raises_its_own_error_and_leaves_no_file(tmp_path, monkeypatch):
    """A job that does not pickle (a lock among the arguments): its TypeError, not join()'s "can only join a
    started process", and the worker's output file removed (session 31's diff review)."""
    import multiprocessing
    import tempfile
    import threading

    from graphtune import isolate
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    job = isolate.Job(ref=None, device=0, args=(threading.Lock(), ), kwargs={}, candidates=(), reset_to_zero=(),
                      arg_names=("x", ), sys_path=())
    with pytest.raises(TypeError, match="pickle"):
        isolate._session(multiprocessing.get_context("spawn"), job, 5.0, isolate.Run())
    assert list(tmp_path.iterdir()) == []
