from __future__ import annotations

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "tests/gpu" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_graphtune(monkeypatch, tmp_path):
    """Each GPU test gets an empty tuning database: results of one test must not satisfy another's misses."""
    monkeypatch.setenv("GRAPHTUNE_DB", str(tmp_path / "graphtune-gpu-test.sqlite"))
    from graphtune import capture, db
    db.reset_db()
    yield
    capture.set_policy(None)
    capture.unfreeze()
    db.reset_db()
