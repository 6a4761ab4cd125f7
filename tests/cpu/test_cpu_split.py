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
