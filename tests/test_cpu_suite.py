"""On a CUDA machine, ``python -m pytest tests`` runs tests/cpu here, in child pytests with the interpreter on
(see tests/conftest.py); elsewhere tests/cpu is collected directly and this test skips."""
from __future__ import annotations

import pytest

from _cpu_split import cpu_suite_in_child, wait_cpu_child


def test_cpu_suite_through_the_interpreter(request):
    if not cpu_suite_in_child(request.config):
        pytest.skip("tests/cpu is collected in this process (no CUDA, or tests/gpu not selected)")
    rc, tail, log = wait_cpu_child()   # started at session start (tests/conftest.py), beside tests/gpu
    print(tail)
    assert rc == 0, f"tests/cpu failed in an interpreter child (exit {rc}; full output in {log}):\n{tail}"
