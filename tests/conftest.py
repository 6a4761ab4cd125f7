"""Shared test set-up: seeding, NaN poisoning helper, and the CPU/GPU split.

tests/cpu runs without a GPU: kernels go through the Triton interpreter (TRITON_INTERPRET=1 is set by
tests/cpu/conftest.py before any kernel is defined). tests/gpu needs CUDA and skips cleanly without it.
"""
from __future__ import annotations

import random

import pytest


@pytest.fixture(autouse=True)
def _seed():
    # fresh random inputs each run, but reproducible within one run when a failure must be replayed
    import torch
    seed = random.SystemRandom().randrange(2**31)
    torch.manual_seed(seed)
    random.seed(seed)
    yield seed
