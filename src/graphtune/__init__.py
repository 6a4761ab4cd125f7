"""graphtune: capture-safe, per-bucket Triton autotuning for CUDA-graph-captured inference servers.

The public names below are imported on first use (PEP 562), so ``import graphtune`` and commands that need
neither torch nor triton (``graphtune audit``, ``graphtune db path``) do not pay for importing them (about 2 s).
"""
from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from ._version import __version__

# public name -> the module that defines it
_EXPORTS = {
    "autotune": "tuner", "GraphtuneKernel": "tuner", "warmup": "tuner", "coverage": "tuner",
    "assert_covered": "tuner", "force": "tuner", "unforce": "tuner", "check_forces": "tuner", "freeze": "tuner",
    "Buckets": "keys", "Coverage": "coverage",
    "patch_triton": "patch", "unpatch_triton": "patch", "custom_op": "torch_ops",
    "unfreeze": "capture", "is_frozen": "capture", "set_policy": "capture",
    "set_process_group": "agreement", "tune_sharded": "sharded", "TuneTarget": "sharded",
    "inspect": "resources", "load": "db", "TuningDB": "db", "audit_paths": "audit", "AuditReport": "audit",
    "ab": "ab", "ABResult": "ab", "decide": "ab", "ThroughputModel": "model", "fit_points": "model",
    "GraphtuneError": "errors", "UntunedError": "errors", "TuningError": "errors", "ConfigError": "errors",
    "DatabaseError": "errors", "InspectError": "errors", "DistributedError": "errors",
}

__all__ = list(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        try:   # a submodule reached as an attribute (graphtune.tuner) before anything imported it
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError:
            raise AttributeError(f"module 'graphtune' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value   # later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


# Two public functions share their name with a submodule: graphtune.coverage (tuner.coverage; records in
# coverage.py) and graphtune.ab (ab.ab in ab.py). Importing a submodule sets it as an attribute of its package;
# here the function keeps the name, as with the eager imports this package used to make (the submodules stay
# importable by their full names: ``from graphtune.ab import decide``).
_SHADOWED = frozenset({"coverage", "ab"})


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
