"""graphtune: capture-safe, per-bucket Triton autotuning for CUDA-graph-captured inference servers."""
from __future__ import annotations

from .errors import (ConfigError, DatabaseError, DistributedError, GraphtuneError, InspectError, TuningError,
                     UntunedError)

__version__ = "0.1.0"
