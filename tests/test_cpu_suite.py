"""On a CUDA machine, ``python -m pytest tests`` runs tests/cpu here, in a child pytest with the interpreter on
(see tests/conftest.py); elsewhere tests/cpu is collected directly and this test skips."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from _cpu_split import CHILD_VAR, TESTS, cpu_suite_in_child


def test_cpu_suite_through_the_interpreter(request):
    if not cpu_suite_in_child(request.config):
        pytest.skip("tests/cpu is collected in this process (no CUDA, or tests/gpu not selected)")
    env = {**os.environ, CHILD_VAR: "1", "TRITON_INTERPRET": "1"}
    argv = [sys.executable, "-m", "pytest", str(TESTS / "cpu"), "-q", "-p", "no:cacheprovider"]
    if getattr(request.config.option, "maxfail", 0) == 1:   # -x
        argv.append("-x")
    proc = subprocess.run(argv, env=env, cwd=TESTS.parent, capture_output=True, text=True)
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-40:])
    print(tail)
    assert proc.returncode == 0, f"tests/cpu failed in the interpreter child (exit {proc.returncode}):\n{tail}"
