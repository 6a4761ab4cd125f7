"""When tests/cpu runs in a child pytest (see tests/conftest.py)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
CHILD_VAR = "GRAPHTUNE_TESTS_CPU_CHILD"   # set in the child pytest that runs tests/cpu


def _cuda() -> bool:
    import torch
    return torch.cuda.is_available()


def cpu_suite_in_child(config: pytest.Config) -> bool:
    """True when this process collects tests/gpu on a CUDA machine: tests/cpu then runs in a child."""
    if os.environ.get(CHILD_VAR) or not _cuda():
        return False
    gpu = TESTS / "gpu"
    for arg in config.args:
        path = Path(str(arg).split("::")[0]).resolve()
        if path == gpu or path in gpu.parents or gpu in path.parents:
            return True
    return False
