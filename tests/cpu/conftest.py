"""CPU tests: kernels run through the Triton interpreter. The switch must be set before kernels are
defined (triton.jit reads it at decoration), so it is set here, when tests/cpu is collected; on a CUDA
machine that also collects tests/gpu, tests/conftest.py runs tests/cpu in a child process instead."""
from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"
