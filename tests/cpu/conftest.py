"""CPU tests: kernels run through the Triton interpreter. The switch must be set before kernels are
defined (triton.jit reads it at decoration), so it is set here, at collection of tests/cpu."""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _clean_graphtune_state(monkeypatch, tmp_path):
    """Every test gets its own empty tuning database and a clean process state."""
    from graphtune import capture, tuner
    monkeypatch.setenv("GRAPHTUNE_DB", str(tmp_path / "graphtune-test.sqlite"))
    monkeypatch.delenv("GRAPHTUNE_FORCE", raising=False)
    monkeypatch.delenv("GRAPHTUNE_POLICY", raising=False)
    _reset_db()
    yield
    capture._capture_override = None
    capture.unfreeze()
    capture.set_policy(None)
    tuner.unforce()
    tuner.reset_all()
    _reset_db()


def _reset_db() -> None:
    try:
        from graphtune import db
    except ImportError:
        return
    reset = getattr(db, "reset_db", None)
    if reset is not None:
        reset()
