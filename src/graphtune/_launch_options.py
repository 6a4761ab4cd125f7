"""The launch options a config dict carries besides its meta-parameters, and the values each may take.

One rule for configs given in code (``configs.py``, which needs triton) and configs read from files (``db.py``,
which must not import triton): a bad value is found where it enters, naming it, not when a later run launches it.
"""
from __future__ import annotations

from typing import Any

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def launch_option_problem(name: str, value: Any) -> str | None:
    """What launch option ``name`` must be when ``value`` is not that (``"a power of two >= 1"``); None when the
    value is fine or ``name`` is not a launch option. Ints only (a bool is not one): Triton takes no other."""
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if name == "num_warps":
        return None if is_int and value >= 1 and not value & (value - 1) else "a power of two >= 1"
    if name == "num_stages":     # 0 is Triton's too (its HIP tutorials use it)
        return None if is_int and value >= 0 else "an int >= 0"
    if name == "num_ctas":
        return None if is_int and value >= 1 else "an int >= 1"
    if name == "maxnreg":
        return None if value is None or (is_int and value >= 1) else "an int >= 1 (or None)"
    return None
