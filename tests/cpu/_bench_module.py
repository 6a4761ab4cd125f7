"""benchmarks/bench_mla_decode.py loaded as a module for the CPU tests: a fresh copy on each call (the tests select
variants, which changes the module's state), under a name of the caller's."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_mla_decode.py"


def load_bench_mla_decode(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
