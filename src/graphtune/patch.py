"""``patch_triton()``: give every stock ``triton.autotune`` kernel in the process graphtune's capture rules.

The patch replaces ``Autotuner.run`` on the class, so kernels decorated before the patch are covered as well
as those decorated after: an inference engine's kernels, which users cannot edit, get the same policy, force
overrides, coverage records, database and timer as ``graphtune.autotune`` kernels. Outside capture a patched
kernel still tunes on its first call per key and computes the same outputs.
"""
from __future__ import annotations

import threading
from typing import Any

from triton.runtime.autotuner import Autotuner

from ._log import logger
from .state import STATE
from .tuner import GraphtuneKernel

_lock = threading.Lock()   # guards making one adapter per stock kernel
_ATTR = "_graphtune_kernel"


def _adapter(at: Autotuner) -> GraphtuneKernel:
    gk = at.__dict__.get(_ATTR)
    if gk is not None:
        return gk
    with _lock:
        gk = at.__dict__.get(_ATTR)
        if gk is not None:
            return gk
        name = getattr(at.base_fn, "__name__", "kernel")
        # stock triton 3.6 silently drops key names that are not parameters; keep its behaviour, but say so
        keys = [k for k in at.keys if k in at.arg_names]
        dropped = [k for k in at.keys if k not in at.arg_names]
        if dropped:
            logger.warning("graphtune: stock kernel %r has key names %s that are not parameters; triton ignores "
                           "them (and 3.9 rejects them)", name, dropped)
        do_bench = None
        if at._do_bench is not None:
            stock_bench = at._do_bench

            def do_bench(fn, _b=stock_bench):
                out = _b(fn, quantiles=(0.5, 0.2, 0.8))
                return float(out[0]) if isinstance(out, (list, tuple)) else float(out)
        prune: dict[str, Any] = {}
        if at.early_config_prune:
            prune["early_config_prune"] = at.early_config_prune
        if at.perf_model:
            prune["perf_model"] = at.perf_model
            prune["top_k"] = at.configs_top_k
        gk = GraphtuneKernel(
            at.fn, at.arg_names, at.configs, keys, name=name, prune_configs_by=prune or None,
            reset_to_zero=at.reset_to_zero, restore_value=at.restore_value,
            pre_hook=at.pre_hook if at.user_defined_pre_hook else None,
            post_hook=at.post_hook if at.user_defined_post_hook else None, do_bench=do_bench)
        at.__dict__[_ATTR] = gk
        return gk


def _patched_run(self: Autotuner, *args, **kwargs):
    grid = kwargs.pop("grid", None)
    warmup = kwargs.pop("warmup", False)
    gk = _adapter(self)
    ret = gk.run(*args, grid=grid, warmup=warmup, **kwargs)
    self.best_config = gk.best_config
    return ret


class _Patch:
    """Returned by ``patch_triton()``; usable as a context manager that unpatches on exit."""

    def __enter__(self) -> _Patch:
        return self

    def __exit__(self, *exc: Any) -> None:
        unpatch_triton()


def patch_triton() -> _Patch:
    """Route every stock ``triton.autotune`` kernel through graphtune (idempotent)."""
    with STATE.lock:
        if STATE.stock_run is None:
            STATE.stock_run = Autotuner.run
            Autotuner.run = _patched_run
    return _Patch()


def unpatch_triton() -> None:
    """Restore stock ``Autotuner.run``. Kernels keep what they tuned while patched in graphtune's records."""
    with STATE.lock:
        if STATE.stock_run is not None:
            Autotuner.run = STATE.stock_run
            STATE.stock_run = None


def is_patched() -> bool:
    return STATE.stock_run is not None


def graphtune_kernel_of(kernel: Autotuner) -> GraphtuneKernel:
    """The graphtune kernel that serves a stock Autotuner while patched (made on first use)."""
    if not isinstance(kernel, Autotuner):
        raise TypeError(f"graphtune_kernel_of: {kernel!r} is not a triton.autotune kernel")
    return _adapter(kernel)
