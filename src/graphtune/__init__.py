"""graphtune: capture-safe, per-bucket Triton autotuning for CUDA-graph-captured inference servers."""
from __future__ import annotations

from .ab import ABResult, ab, decide
from .audit import AuditReport, audit_paths
from .capture import is_frozen, set_policy, unfreeze
from .coverage import Coverage
from .db import TuningDB, load
from .agreement import set_process_group
from .errors import (ConfigError, DatabaseError, DistributedError, GraphtuneError, InspectError, TuningError,
                     UntunedError)
from .keys import Buckets
from .model import ThroughputModel, fit_points
from .resources import inspect
from .patch import patch_triton, unpatch_triton
from .sharded import TuneTarget, tune_sharded
from .tuner import (GraphtuneKernel, assert_covered, autotune, check_forces, coverage, force, freeze, unforce,
                    warmup)
from .torch_ops import custom_op

from ._version import __version__

__all__ = [
    "autotune", "Buckets", "GraphtuneKernel", "warmup", "coverage", "assert_covered", "Coverage",
    "patch_triton", "unpatch_triton", "custom_op", "freeze", "unfreeze", "is_frozen", "set_policy", "force", "unforce", "check_forces",
    "set_process_group", "tune_sharded", "TuneTarget", "inspect", "load", "TuningDB", "audit_paths", "AuditReport", "ab", "ABResult", "decide", "ThroughputModel", "fit_points",
    "GraphtuneError", "UntunedError", "TuningError", "ConfigError", "DatabaseError", "InspectError",
    "DistributedError",
]
