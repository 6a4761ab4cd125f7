"""``patch_triton()``: give every stock ``triton.autotune`` kernel in the process graphtune's capture rules.

The patch replaces ``Autotuner.run`` on the class, so kernels decorated before the patch are covered as well
as those decorated after: an inference engine's kernels, which users cannot edit, get the same policy, force
overrides, coverage records, database and timer as ``graphtune.autotune`` kernels. Outside capture a patched
kernel still tunes on its first call per key and computes the same outputs.

Under ``torch.compile``: Dynamo records a stock kernel launch as a ``triton_kernel_wrapper_mutation`` node.
Backend ``aot_eager`` (and ``eager``) runs that node by calling the kernel, so the patched ``run`` applies and
graphtune tunes per bucket. Inductor instead re-emits the kernel source and tunes it with its own autotuner,
once per compiled shape: graphtune is bypassed. That cannot be undone from outside Inductor, so the patch
warns, once per kernel and naming it: when Dynamo traces a patched kernel for an Inductor backend (read from
the compile's backend), and again as a backstop when Inductor lowers one (custom backends that call Inductor).
"""
from __future__ import annotations

import threading
import warnings
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
        # stock triton 3.6 silently drops key names that are not arguments of the launch (not parameters, or
        # parameters the configs set); keep its behaviour, but say so
        config_set = {k for c in at.configs for k in c.kwargs}
        keys = [k for k in at.keys if k in at.arg_names and k not in config_set]
        dropped = [k for k in at.keys if k not in keys]
        if dropped:
            logger.warning("graphtune: stock kernel %r has key names %s that are not arguments of its launch (not "
                           "parameters, or set by its configs); triton 3.6 ignores them (3.9 rejects names that are "
                           "not parameters)", name, dropped)
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
            _install_compile_hooks()
    return _Patch()


def unpatch_triton() -> None:
    """Restore stock ``Autotuner.run``. Kernels keep what they tuned while patched in graphtune's records."""
    with STATE.lock:
        if STATE.stock_run is not None:
            Autotuner.run = STATE.stock_run
            STATE.stock_run = None
            _remove_compile_hooks()


def is_patched() -> bool:
    return STATE.stock_run is not None


def graphtune_kernel_of(kernel: Autotuner) -> GraphtuneKernel:
    """The graphtune kernel that serves a stock Autotuner while patched (made on first use)."""
    if not isinstance(kernel, Autotuner):
        raise TypeError(f"graphtune_kernel_of: {kernel!r} is not a triton.autotune kernel")
    return _adapter(kernel)


# ------------------------------------------------------------------------------------ torch.compile


def _kernel_name(kernel: Any) -> str:
    base = getattr(kernel, "base_fn", None) or getattr(kernel, "fn", None)
    return getattr(base, "__name__", None) or repr(kernel)


def warn_inductor_bypass(kernel: Any) -> None:
    """Warn (once per kernel name) that Inductor compiles this stock autotuned kernel without graphtune."""
    name = _kernel_name(kernel)
    if name in STATE.warned:
        return
    STATE.warned.add(name)
    msg = (f"graphtune: torch.compile's Inductor backend re-emits the stock triton.autotune kernel {name!r} and "
           f"tunes it itself (once per compiled shape, inside its own autotuner): patch_triton() does not apply "
           f"to it there, so no buckets, capture policy or database. To keep graphtune's tuning, compile with "
           f"backend='aot_eager', or launch the kernel from a torch custom op (graphtune.custom_op) so Inductor "
           f"keeps the launch opaque.")
    logger.warning(msg)
    warnings.warn(msg, RuntimeWarning, stacklevel=2)


def _backend_is_inductor() -> bool:
    """Best effort: is the compile Dynamo is running now for an Inductor backend?"""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator
        tx = InstructionTranslator.current_tx()
        fn = tx.output.compiler_fn if tx is not None else None
    except Exception:  # noqa: BLE001 - Dynamo internals moved: the lowering hook still warns
        return False
    for _ in range(8):
        if fn is None:
            return False
        if getattr(fn, "compiler_name", None) == "inductor" or \
                getattr(fn, "__name__", None) in ("inductor", "compile_fx"):
            return True
        fn = (getattr(fn, "_torchdynamo_orig_backend", None) or getattr(fn, "compiler_fn", None)
              or getattr(fn, "func", None))
    return False


def _install_compile_hooks() -> None:
    try:
        from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table
    except Exception:  # noqa: BLE001 - torch without user-kernel support in Dynamo: nothing to hook
        return
    original = kernel_side_table.add_kernel

    def add_kernel(kernel):
        # Dynamo found a stock kernel launch while tracing: that is the moment to know the backend
        if STATE.stock_run is not None and isinstance(kernel, Autotuner):
            _hook_inductor_lowering()
            if _backend_is_inductor():
                warn_inductor_bypass(kernel)
        return original(kernel)
    STATE.compile_hooks["add_kernel"] = (kernel_side_table, "add_kernel" in kernel_side_table.__dict__, original)
    kernel_side_table.add_kernel = add_kernel


def _hook_inductor_lowering() -> None:
    """Wrap Inductor's lowering of user Triton kernels (imported only once a stock kernel is being compiled)."""
    if "lowering" in STATE.compile_hooks:
        return
    try:
        from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table, triton_kernel_wrapper_mutation
        from torch._inductor.lowering import lowerings
    except Exception:  # noqa: BLE001
        return
    original = lowerings.get(triton_kernel_wrapper_mutation)
    if original is None:
        return

    def lowering(*args, **kwargs):
        try:
            kernel = kernel_side_table.get_kernel(kwargs["kernel_idx"])
        except Exception:  # noqa: BLE001
            kernel = None
        if STATE.stock_run is not None and isinstance(kernel, Autotuner):
            warn_inductor_bypass(kernel)
        return original(*args, **kwargs)
    STATE.compile_hooks["lowering"] = (lowerings, triton_kernel_wrapper_mutation, original)
    lowerings[triton_kernel_wrapper_mutation] = lowering


def _remove_compile_hooks() -> None:
    entry = STATE.compile_hooks.pop("add_kernel", None)
    if entry is not None:
        table, had_own, original = entry
        if had_own:
            table.add_kernel = original
        else:
            table.__dict__.pop("add_kernel", None)
    entry = STATE.compile_hooks.pop("lowering", None)
    if entry is not None:
        lowerings, op, original = entry
        lowerings[op] = original
