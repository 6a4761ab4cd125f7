"""The one module that knows ``JITFunction`` / ``CompiledKernel`` internals: the direct launch of a tuned hit.

``JITFunction.run`` binds every argument through a generated binder, computes Triton's specialisation key
and looks the compiled kernel up: most of a launch's host cost. A tuned hit here computes one cheaper
*specialisation signature* of the positional arguments (dtype and 16-byte alignment of each tensor,
divisibility by 16 / unit value / 32-bit range of each int, value of each constexpr), at least as fine as what
Triton specialises on, and launches the ``CompiledKernel`` that ``JITFunction.run`` returned for that
signature the first time. What ``JITFunction.run`` does on every launch and how this module keeps it:

- the current device and stream: asked the same way (``driver.active`` getters, resolved once);
- ``pre_run_hooks``: a kernel that has any is never launched directly (``FastLaunch.hit``, ``usable``);
- the guard that global variables the kernel read have not changed since compilation: checked here on every
  direct launch; a change sends the launch through ``JITFunction.run``, which raises Triton's own error;
- launch metadata and the profiler's enter/exit hooks: built only when a hook is registered.

Gluon kernels (``@gluon.jit``: a ``JITFunction`` subclass whose binder compiles through ``GluonASTSource``)
launch the same way: their ``CompiledKernel`` and launcher are Triton's own. Tensor-descriptor arguments
enter the signature with what Triton specialises them on (element type, block shape and, for Gluon, the
shared-memory layout: ``mangle_type``); the launcher builds the TMA descriptor from the compiled kernel's
metadata and the descriptor's base, shape and strides on every launch, as ``JITFunction.run`` does. A
kernel parameter named like a launch option (Gluon's ``num_warps: gl.constexpr``) is appended from the
config's options. A config with a ``pre_hook`` is never launched directly: the hook is arbitrary code that
must run before every launch and may change what the launch specialises on (a descriptor's block shape).
Each of these is pinned by a test against the installed Triton (tests/cpu/test_launch.py), which fails when
Triton changes the code this module mirrors.
"""
from __future__ import annotations

from operator import itemgetter
from typing import Any, Sequence

from triton import knobs
from triton.runtime.jit import JITFunction

from .descriptors import is_descriptor

_INT32_LO, _INT32_HI = -(2 ** 31), 2 ** 31
_MISSING = object()


def _get_device() -> int:
    global _get_device
    from triton.runtime.driver import driver
    _get_device = driver.active.get_current_device   # resolved once: the lazy driver proxy costs per access
    return _get_device()


def _get_stream(device: int):
    global _get_stream
    from triton.runtime.driver import driver
    _get_stream = driver.active.get_current_stream
    return _get_stream(device)


def _hook_set(hook: Any) -> bool:
    # triton 3.6 keeps hooks in (possibly empty) HookChains; older versions use None or a callable
    return hook is not None and bool(getattr(hook, "calls", True))


class Miss:
    """What ``FastLaunch.hit`` returns when nothing is cached: the key to ``remember`` the launch under."""

    __slots__ = ("key",)

    def __init__(self, key: tuple):
        self.key = key


class FastLaunch:
    """Direct launches of one ``JITFunction``'s compiled kernels, keyed by (raw key values, signature).

    ``key_positions``: the position of each key argument, all positional. The cache is keyed by the key
    arguments' own values, not their buckets: a hit then calls no bucket function, and a value not seen yet
    takes the slow path once (which finds its bucket's choice) and is remembered. ``MAX_ENTRIES`` bounds it."""

    MAX_ENTRIES = 16384   # distinct (key values, signature) pairs; past it the cache starts over

    __slots__ = ("jit", "arg_names", "constexpr", "cache", "key_of", "min_args", "tensor_types", "desc_types")

    def __init__(self, jit: JITFunction, arg_names: Sequence[str], key_positions: Sequence[int] = ()):
        self.jit = jit
        self.arg_names = tuple(arg_names)
        constexpr_pos = {p.num for p in jit.params if p.is_constexpr}
        self.constexpr = tuple(i in constexpr_pos for i in range(len(self.arg_names)))
        positions = tuple(key_positions)
        # one C call builds the key tuple (itemgetter of one position returns the value, not a tuple)
        self.key_of = itemgetter(*positions) if len(positions) > 1 else \
            (lambda args, p=positions[0]: (args[p],)) if positions else (lambda args: ())
        self.min_args = max(positions, default=-1) + 1
        self.tensor_types: set[type] = set()   # types seen to have data_ptr (torch.Tensor and subclasses)
        self.desc_types: set[type] = set()     # tensor-descriptor classes seen (descriptors.is_descriptor)
        # (key values, signature) -> (payload, CompiledKernel, config values appended positionally)
        self.cache: dict[tuple, tuple[Any, Any, tuple]] = {}

    def hit(self, args: tuple, grid) -> Any:
        """Launch the cached compiled kernel for these positional arguments and return it; on no hit a ``Miss``
        (the key to remember the next launch under), or None when the arguments are left to Triton's binder.
        One frame for the whole hot path: every call costs on a path measured in microseconds."""
        if not self.min_args <= len(args) <= len(self.constexpr):
            return None
        # the specialisation signature, inline (a frame of its own costs on every launch)
        spec = []
        tensor_types = self.tensor_types
        for a, constexpr in zip(args, self.constexpr):
            t = type(a)
            if constexpr:
                spec.append((t, a))
            elif t is int:
                spec.append(4 if a == 1 else ((a % 16 == 0) | ((not _INT32_LO <= a < _INT32_HI) << 1)))
            elif t in tensor_types or (hasattr(a, "data_ptr") and not tensor_types.add(t)):
                spec.append((a.dtype, (a.data_ptr() & 15) == 0))
            elif a is None or t is float or t is bool:
                spec.append(t)
            elif t in self.desc_types or (is_descriptor(a) and not self.desc_types.add(t)):
                # what Triton specialises a descriptor on (mangle_type): element type, block shape, layout
                spec.append((t, a.base.dtype, tuple(a.block_shape), getattr(a, "layout", None)))
            else:
                return None  # anything else (tuples, numpy scalars, ...) goes through Triton's own binder
        key = (self.key_of(args), tuple(spec))
        found = self.cache.get(key)
        jit = self.jit
        if found is None or jit.pre_run_hooks or (jit.used_global_vals and not self.globals_unchanged()):
            return Miss(key)
        payload, compiled, tail = found
        payload.hits += 1
        full = args + tail
        if callable(grid):
            grid = grid(dict(zip(self.arg_names, full)))
        n = len(grid)
        stream = _get_stream(_get_device())
        enter = knobs.runtime.launch_enter_hook
        exit_ = knobs.runtime.launch_exit_hook
        if _hook_set(enter) or _hook_set(exit_):
            meta = compiled.launch_metadata(grid, stream, *full)
        else:  # no profiler hooks: skip building metadata nobody reads
            meta = enter = exit_ = None
        compiled.run(grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1, stream, compiled.function,
                     compiled.packed_metadata, meta, enter, exit_, *full)
        return compiled

    def usable(self) -> bool:
        """Whether a direct launch may run now (``hit`` checks the same inline)."""
        return not self.jit.pre_run_hooks

    def tail(self, config_kwargs: dict[str, Any], n_args: int, options: dict[str, Any] | None = None
             ) -> tuple | None:
        """Config values appended positionally: only when the config's kwargs and, for parameters named like
        a launch option (Gluon's ``num_warps``), its ``options`` are exactly the parameters after the args."""
        names = self.arg_names[n_args:]
        if not set(config_kwargs) <= set(names):
            return None
        values = {**(options or {}), **config_kwargs}
        if any(k not in values for k in names):
            return None
        return tuple(values[k] for k in names)

    def remember(self, key: tuple, payload: Any, compiled: Any, tail: tuple) -> None:
        if hasattr(compiled, "packed_metadata") and hasattr(compiled, "run"):
            if len(self.cache) >= self.MAX_ENTRIES:
                self.cache.clear()
            self.cache[key] = (payload, compiled, tail)

    def globals_unchanged(self) -> bool:
        for (name, _), (val, globals_dict) in self.jit.used_global_vals.items():
            if globals_dict.get(name, _MISSING) != val:
                return False
        return True
