"""Which runs start tests/cpu in interpreter children (tests/_cpu_split.py): only those that collect both halves."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import _cpu_split


@pytest.mark.parametrize("args, want", [
    (["tests"], True),
    (["."], True),
    (["tests/gpu", "tests/cpu"], True),
    (["tests/gpu/test_mla_decode_gpu.py"], False),       # a GPU file alone: no children
    (["tests/gpu"], False),
    (["tests/cpu"], False),
    (["tests/cpu/test_cpu_split.py::test_x", "tests/gpu/test_compile_gpu.py"], True),
])
def test_children_only_when_both_halves_are_collected(monkeypatch, args, want):
    monkeypatch.setattr(_cpu_split, "_cuda", lambda: True)
    monkeypatch.delenv(_cpu_split.CHILD_VAR, raising=False)
    monkeypatch.chdir(_cpu_split.TESTS.parent)
    assert _cpu_split.cpu_suite_in_child(SimpleNamespace(args=args)) is want


def test_no_children_without_cuda_or_inside_a_child(monkeypatch):
    monkeypatch.chdir(_cpu_split.TESTS.parent)
    monkeypatch.setattr(_cpu_split, "_cuda", lambda: False)
    assert not _cpu_split.cpu_suite_in_child(SimpleNamespace(args=["tests"]))
    monkeypatch.setattr(_cpu_split, "_cuda", lambda: True)
    monkeypatch.setenv(_cpu_split.CHILD_VAR, "1")
    assert not _cpu_split.cpu_suite_in_child(SimpleNamespace(args=["tests"]))


def test_the_runs_selection_reaches_the_children_and_an_empty_selection_passes(monkeypatch, tmp_path):
    """``pytest tests -k mla`` on a GPU machine: the children run the matching tests of tests/cpu (not all of them,
    which the run would then wait for), and a child whose files hold no match (exit 5) does not fail the run."""
    import subprocess
    import tempfile
    started = []

    class Child:
        def __init__(self, argv, **kwargs):
            started.append(argv)
            self.rc = 5 if len(started) == 1 else 0     # the first child's files hold no match

        def wait(self):
            return self.rc

        def poll(self):
            return 0

    monkeypatch.setattr(subprocess, "Popen", Child)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))           # the children's logs and caches
    monkeypatch.setattr(_cpu_split.os, "cpu_count", lambda: 8)        # two children
    option = SimpleNamespace(maxfail=1, keyword="mla and not slow", markexpr="not gpu")
    _cpu_split.start_cpu_child(SimpleNamespace(option=option))
    assert len(started) == 2 and _cpu_split.cpu_child_pending()
    for argv in started:
        tail = argv[argv.index("no:cacheprovider") + 1:]
        assert tail == ["-x", "-k", "mla and not slow", "-m", "not gpu"], argv
    rc, _, _ = _cpu_split.wait_cpu_child()
    assert rc == 0 and not _cpu_split.cpu_child_pending()
