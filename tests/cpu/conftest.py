"""CPU tests: kernels run through the Triton interpreter. The switch must be set before kernels are
defined (triton.jit reads it at decoration), so it is set here, when tests/cpu is collected; on a CUDA
machine that also collects tests/gpu, tests/conftest.py runs tests/cpu in a child process instead."""
from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import numpy
import pytest

if tuple(int(p) for p in numpy.__version__.split(".")[:2] if p.isdigit()) >= (2, 4):
    # numpy 2.4 stopped converting 1-element arrays to Python scalars, which the interpreter relies on (loop
    # bounds): kernels would fail with "only 0-dimensional arrays can be converted to Python scalars"
    raise pytest.UsageError(f"tests/cpu runs kernels through Triton's interpreter, which needs numpy < 2.4 (found "
                            f"numpy {numpy.__version__}): pip install 'numpy<2.4' (the [test] extra pins it)")
