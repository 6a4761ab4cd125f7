"""Shared test set-up: seeding, a clean graphtune state around every test, and the CPU/GPU split.

tests/cpu runs kernels through the Triton interpreter: tests/cpu/conftest.py sets TRITON_INTERPRET=1 when
tests/cpu is collected (triton.jit reads it when a kernel is defined). tests/gpu needs CUDA and skips cleanly
without it. One process cannot define the same kernel both ways, so on a machine with CUDA a run that
collects tests/gpu (``python -m pytest tests``) leaves tests/cpu out of this process and runs it, with the
interpreter and no visible GPU, in child pytests started at session start (one per four cores, up to four, each
on a share of the files; they run beside tests/gpu; their result is the test in ``test_cpu_suite.py``); GPU tests
then really run on the GPU.
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from _cpu_split import (TESTS, cpu_child_pending, cpu_suite_in_child, start_cpu_child, stop_cpu_child,
                        wait_cpu_child)


def pytest_sessionstart(session):
    config = session.config
    if cpu_suite_in_child(config) and not config.option.collectonly:
        start_cpu_child(config)


def pytest_sessionfinish(session, exitstatus):
    if not cpu_child_pending():
        return
    if session.shouldstop or session.shouldfail or exitstatus == pytest.ExitCode.INTERRUPTED:
        stop_cpu_child()   # the run stopped early (-x, Ctrl-C): the children's result is not wanted
        return
    # the children ran but test_cpu_suite.py was not collected (e.g. ``pytest tests/gpu tests/cpu``): their
    # result still decides the run
    rc, tail, log = wait_cpu_child()
    if rc != 0:
        print(f"\ntests/cpu failed in an interpreter child (exit {rc}; full output in {log}):\n{tail}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_ignore_collect(collection_path, config):
    if cpu_suite_in_child(config) and (TESTS / "cpu") in [Path(collection_path).resolve(),
                                                          *Path(collection_path).resolve().parents]:
        return True
    return None


@pytest.fixture(autouse=True)
def _seed():
    # fresh random inputs each run, but reproducible within one run when a failure must be replayed
    import torch
    seed = random.SystemRandom().randrange(2**31)
    torch.manual_seed(seed)
    random.seed(seed)
    yield seed


@pytest.fixture(autouse=True)
def _clean_graphtune_state(monkeypatch, tmp_path):
    """Every test gets its own empty tuning database and starts and ends with a clean process state."""
    from graphtune import state
    monkeypatch.setenv("GRAPHTUNE_DB", str(tmp_path / "graphtune-test.sqlite"))
    for name in ("GRAPHTUNE_FORCE", "GRAPHTUNE_POLICY"):
        monkeypatch.delenv(name, raising=False)
    with state.scope():
        yield
