"""Cross-compilation, resource usage and occupancy of Triton configs for any NVIDIA target, without the GPU.

Each config of a kernel is compiled with ``triton.compile(ASTSource(...), target=GPUTarget("cuda", cc, 32))``
(``GluonASTSource`` for a ``@gluon.jit`` kernel) using the specialisation a real launch gets
(``tt.divisibility`` 16 on pointers and integers, as for 16-byte-aligned tensors and sizes divisible by 16):
without it Triton does not pipeline loads and the shared-memory figure is wrong by up to num_stages times.
Registers, stack and local memory come from the ``cuobjdump`` shipped in the triton wheel; dynamic shared
memory from ``metadata.shared``; the warps a block launches with from ``metadata.num_warps`` (a
warp-specialised kernel's worker partitions included) and its partitions from the TTGIR and PTX
(:func:`warp_partitions`). Occupancy follows the CUDA occupancy calculator (:func:`occupancy`).

Typical use::

    rows = inspect(kernel, target="sm_120", signature={"x_ptr": "*bf16", "n": "i32"}, constexprs={"D": 576})
    rows = inspect(gluon_kernel, target="sm_90", args={"x_desc": descriptor, "n": 4096})   # pre-hooks run first
    bad = check_configs_for_device(kernel.fn, kernel.configs, sig, constexprs)   # {config index: reason}
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import os
import re
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import triton

from ._log import logger
from .configs import config_from_dict, config_label, config_to_dict
from .descriptors import is_descriptor
from .errors import GraphtuneError, InspectError, one_line
from .sass import wgmma_findings

__all__ = [
    "Occupancy", "Partition", "ResourceRow", "Target", "aligned_args", "check_configs_for_device", "device_target",
    "get_target", "inspect", "list_targets", "occupancy", "signature_from_args", "warp_partitions",
]

_cache_lock = threading.Lock()   # guards the module's caches (compiles, checks, interpreter conversions)


# --------------------------------------------------------------------------------------------- targets

@dataclass(frozen=True)
class Target:
    """Per-SM and per-block limits of one compute capability (CUDA programming guide tables)."""
    name: str                          # "sm_90"
    capability: int                    # 90
    description: str
    shared_per_block_optin: int        # bytes one block may use after opting in (static + dynamic)
    shared_per_sm: int                 # bytes of shared memory per SM at the largest carve-out
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int = 65536
    registers_per_block: int = 65536
    max_registers_per_thread: int = 255
    max_threads_per_block: int = 1024
    warp_size: int = 32
    register_allocation_unit: int = 256    # registers are handed out per warp in units of 256
    warp_allocation_granularity: int = 4   # the register file is partitioned in groups of 4 warps
    shared_allocation_unit: int = 128
    reserved_shared_per_block: int = 1024  # the driver keeps 1 KB per block on sm_80 and later
    sm_count: int | None = None            # known only for target="device"

    @property
    def max_threads_per_sm(self) -> int:
        return self.max_warps_per_sm * self.warp_size

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "max_threads_per_sm": self.max_threads_per_sm}


_TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("sm_80", 80, "A100, A30", shared_per_block_optin=166912, shared_per_sm=167936,
           max_warps_per_sm=64, max_blocks_per_sm=32),
    Target("sm_86", 86, "RTX 30xx, A10, A40", shared_per_block_optin=101376, shared_per_sm=102400,
           max_warps_per_sm=48, max_blocks_per_sm=16),
    Target("sm_89", 89, "L4, L40, RTX 40xx", shared_per_block_optin=101376, shared_per_sm=102400,
           max_warps_per_sm=48, max_blocks_per_sm=24),
    Target("sm_90", 90, "H100, H200", shared_per_block_optin=232448, shared_per_sm=233472,
           max_warps_per_sm=64, max_blocks_per_sm=32),
    Target("sm_100", 100, "B200, GB200", shared_per_block_optin=232448, shared_per_sm=233472,
           max_warps_per_sm=64, max_blocks_per_sm=32),
    Target("sm_120", 120, "RTX PRO 6000 Blackwell, RTX 50xx", shared_per_block_optin=101376,
           shared_per_sm=102400, max_warps_per_sm=48, max_blocks_per_sm=24),
)}

# "sm_90", "sm90", "90", "sm_90a", "cuda:90" or "9.0"
_TARGET_RE = re.compile(r"(?:sm_?|cuda:)?(\d{2,3})[af]?|(\d{1,2})\.(\d)")


def list_targets() -> list[Target]:
    """The built-in targets, oldest first."""
    return sorted(_TARGETS.values(), key=lambda t: t.capability)


def _known_targets_text() -> str:
    return ", ".join(_TARGETS) + ", or 'device' (the live GPU)"


def get_target(target: str | int | Target) -> Target:
    """A :class:`Target` from ``"sm_90"``, ``"90"``, ``"sm90"``, ``"9.0"``, ``90``, ``"device"`` or a Target."""
    if isinstance(target, Target):
        return target
    if isinstance(target, int) and not isinstance(target, bool):
        text = str(target)
    elif isinstance(target, str):
        text = target.strip().lower()
    else:
        raise InspectError(f"target {target!r} is not a string or an int; known: {_known_targets_text()}")
    if text == "device":
        return device_target()
    match = _TARGET_RE.fullmatch(text)
    if match:
        capability = int(match.group(1)) if match.group(1) else int(match.group(2)) * 10 + int(match.group(3))
        found = _TARGETS.get(f"sm_{capability}")
        if found:
            return found
    raise InspectError(f"unknown target {target!r}; known: {_known_targets_text()}")


def device_target(device: int | None = None) -> Target:
    """The live GPU's limits, read through torch (the GPU is touched only here, and only when asked)."""
    import torch

    if not torch.cuda.is_available():
        raise InspectError("target 'device' needs a CUDA GPU and none is visible (torch.cuda.is_available() is "
                           f"False); name one instead: {', '.join(_TARGETS)}")
    index = torch.cuda.current_device() if device is None else device
    props = torch.cuda.get_device_properties(index)
    capability = props.major * 10 + props.minor
    base = _TARGETS.get(f"sm_{capability}")
    if base is None:
        # A capability the table does not know (sm_103, sm_121, ...): the same major's limits are the best
        # guess for what torch does not report (blocks per SM).
        same_major = [t for t in list_targets() if t.capability // 10 == props.major]
        base = (same_major or list_targets())[-1]
        logger.warning("device %s is sm_%d, not in the built-in table; blocks-per-SM limit taken from %s",
                       props.name, capability, base.name)
    warp_size = int(getattr(props, "warp_size", 32) or 32)
    return dataclasses.replace(
        base,
        name=f"sm_{capability}",
        capability=capability,
        description=f"{props.name} (device {index})",
        shared_per_block_optin=int(getattr(props, "shared_memory_per_block_optin", 0) or base.shared_per_block_optin),
        shared_per_sm=int(getattr(props, "shared_memory_per_multiprocessor", 0) or base.shared_per_sm),
        registers_per_sm=int(getattr(props, "regs_per_multiprocessor", 0) or base.registers_per_sm),
        max_warps_per_sm=int(getattr(props, "max_threads_per_multi_processor", 0) or base.max_threads_per_sm)
        // warp_size,
        warp_size=warp_size,
        sm_count=int(props.multi_processor_count),
    )


# ------------------------------------------------------------------------------------------- occupancy

@dataclass(frozen=True)
class Occupancy:
    """Blocks of one kernel resident on one SM, and what limits them."""
    threads_per_block: int
    registers_per_block: int       # as allocated: per-warp rounding included
    shared_per_block: int          # as allocated: reserved 1 KB and rounding included
    blocks_by_registers: int
    blocks_by_shared: int
    blocks_by_threads: int
    blocks_by_limit: int
    blocks: int
    warps: int
    occupancy_pct: float
    limiter: str                   # registers | shared_memory | threads | block_limit
    fits: bool                     # False: the block cannot launch at all on this target
    reason: str                    # why not, with the numbers; "" when it fits


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def occupancy(target: Target | str, registers: int, shared_bytes: int, num_warps: int) -> Occupancy:
    """Resident blocks per SM by the CUDA occupancy calculator's rules.

    ``shared_bytes`` is what the kernel asks for (static + dynamic); the per-block driver reservation and the
    allocation granularity are added here. The SM is assumed to run at its largest shared-memory carve-out,
    which is what the driver picks for a kernel that needs it (Triton sets the prefer-shared cache config
    above 48 KB).
    """
    t = get_target(target)
    if num_warps < 1 or registers < 0 or shared_bytes < 0:
        raise ValueError(f"occupancy: num_warps={num_warps} must be >= 1, registers={registers} and "
                         f"shared_bytes={shared_bytes} >= 0")
    threads = num_warps * t.warp_size
    registers_per_warp = _round_up(registers * t.warp_size, t.register_allocation_unit)
    registers_per_block = registers_per_warp * num_warps
    shared_per_block = _round_up(shared_bytes + t.reserved_shared_per_block, t.shared_allocation_unit)

    reason, limiter = "", ""
    if threads > t.max_threads_per_block:
        limiter = "threads"
        reason = (f"needs {threads} threads per block ({num_warps} warps), {t.name} allows "
                  f"{t.max_threads_per_block}")
    elif registers > t.max_registers_per_thread:
        limiter = "registers"
        reason = f"needs {registers} registers per thread, {t.name} allows {t.max_registers_per_thread}"
    elif registers_per_block > t.registers_per_block:
        limiter = "registers"
        reason = (f"needs {registers_per_block} registers per block ({registers} x {threads} threads), "
                  f"{t.name} allows {t.registers_per_block}")
    elif shared_bytes > t.shared_per_block_optin:
        limiter = "shared_memory"
        reason = f"needs {shared_bytes} B shared memory, {t.name} allows {t.shared_per_block_optin} B per block"
    if reason:
        return Occupancy(threads, registers_per_block, shared_per_block, 0, 0, 0, 0, 0, 0, 0.0, limiter, False,
                         reason)

    if registers_per_warp:
        warps_by_registers = t.registers_per_sm // registers_per_warp
        warps_by_registers -= warps_by_registers % t.warp_allocation_granularity
        blocks_by_registers = warps_by_registers // num_warps
    else:
        blocks_by_registers = t.max_blocks_per_sm
    blocks_by_shared = t.shared_per_sm // shared_per_block if shared_per_block else t.max_blocks_per_sm
    blocks_by_threads = t.max_warps_per_sm // num_warps
    blocks_by_limit = t.max_blocks_per_sm
    limits = {"registers": blocks_by_registers, "shared_memory": blocks_by_shared,
              "threads": blocks_by_threads, "block_limit": blocks_by_limit}
    blocks = min(limits.values())
    limiter = next(name for name, value in limits.items() if value == blocks)
    warps = blocks * num_warps
    return Occupancy(threads, registers_per_block, shared_per_block, blocks_by_registers, blocks_by_shared,
                     blocks_by_threads, blocks_by_limit, blocks, warps,
                     round(100.0 * warps / t.max_warps_per_sm, 2), limiter, blocks > 0,
                     "" if blocks > 0 else f"no block fits on one {t.name} SM ({limiter})")


# ------------------------------------------------------------------------------------------ the rows

@dataclass(frozen=True)
class Partition:
    """One partition of a warp-specialised region (``gl.warp_specialize``; ``op`` counts the regions).

    ``warps``: the partition's own warps (the default partition's are the config's ``num_warps``).
    ``requested_registers``: what the kernel asked for (``worker_num_regs``; None for the default partition).
    ``registers``: per thread while the region runs. With register reallocation (``setmaxnreg``) each worker
    partition gets its warpgroup's largest request rounded up to 8 and the default partition what is left of
    the block's budget (Triton's AllocateWarpGroups rule, checked against the ``setmaxnreg`` values in the
    PTX: None when they disagree); without it, every partition keeps the kernel's register count."""
    op: int
    name: str                      # "default", "partition0", ...
    warps: int
    requested_registers: int | None
    registers: int | None


@dataclass(frozen=True)
class ResourceRow:
    """Resources and occupancy of one config compiled for one target. Numbers are None when it did not compile.

    ``num_warps`` is the config's (a warp-specialised kernel's default partition); ``total_warps`` every warp
    the block launches with (worker partitions included, rounded up to whole warpgroups as Triton does), which
    ``threads_per_block`` and the occupancy use; ``partitions`` the warp-specialised regions' partitions."""
    config: dict[str, Any]
    label: str
    target: str
    num_warps: int
    num_stages: int
    num_ctas: int
    total_warps: int
    threads_per_block: int
    registers: int | None
    stack_bytes: int | None        # per thread; register spills land here
    local_bytes: int | None        # per thread, outside the stack frame
    spill_bytes: int | None        # stack + local: what the driver reports as local memory
    shared_static: int | None      # cuobjdump SHARED, less the driver's 1 KB reserve that it includes on sm_90+
    shared_dynamic: int | None     # metadata.shared: what Triton passes at launch
    shared_bytes: int | None       # static + dynamic
    blocks_by_registers: int | None
    blocks_by_shared: int | None
    blocks_by_threads: int | None
    blocks_by_limit: int | None
    resident_blocks: int
    resident_warps: int
    occupancy_pct: float
    limiter: str                   # registers | shared_memory | threads | block_limit | compile
    fits: bool
    reason: str
    partitions: tuple[Partition, ...] = ()
    # compile-time hazards read from the SASS, one line each (graphtune.sass): wgmmas whose descriptor is not written on
    # every path into them, or whose registers another instruction writes while they run; () when none, or when the
    # kernel has no wgmma
    hazards: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["config"] = dict(self.config)
        return out


@dataclass(frozen=True)
class _Usage:
    registers: int
    stack_bytes: int
    local_bytes: int
    shared_static: int
    shared_dynamic: int
    tensor_memory_columns: int | None
    total_warps: int | None = None                # metadata.num_warps: worker partitions included
    partitions: tuple[Partition, ...] = ()
    hazards: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Compiled:
    usage: _Usage | None
    error: str | None


@dataclass(frozen=True)
class _Spec:
    """A validated call description: runtime types, fixed constexprs and aligned argument names."""
    fn: Any
    signature: dict[str, str]       # runtime parameters only, Triton spelling
    constexprs: dict[str, Any]      # caller's constexprs, parameter defaults, specialised runtime values
    aligned: frozenset[str]
    given: frozenset[str]           # names the caller set in constexprs
    heuristics: tuple[str, ...]     # names a triton.heuristics wrapper computes at launch


# ------------------------------------------------------------------------------ kernel and arguments

def _is_jit_function(obj: Any) -> bool:
    from triton.runtime.jit import JITFunction
    return isinstance(obj, JITFunction)


def _is_interpreted(obj: Any) -> bool:
    return type(obj).__name__ == "InterpretedFunction" and type(obj).__module__ == "triton.runtime.interpreter"


_jit_twins: dict[int, tuple[Any, Any]] = {}
# Swapping module attributes is process-wide: one compile at a time while the interpreter switch is on.
_interpreter_lock = threading.RLock()


def _jit_twin(fn: Any) -> Any:
    """The JITFunction of an InterpretedFunction (what ``triton.jit`` returns under TRITON_INTERPRET=1)."""
    from triton.runtime.jit import JITFunction

    with _cache_lock:
        hit = _jit_twins.get(id(fn))
        if hit is None or hit[0] is not fn:
            hit = (fn, JITFunction(fn.fn, **fn.kwargs))   # the interpreted object is kept alive with its id
            _jit_twins[id(fn)] = hit
    return hit[1]


@contextlib.contextmanager
def _compiler_mode(fn: Any):
    """Let the compiler run in a process where TRITON_INTERPRET=1 (the CPU tests).

    There ``triton.jit`` made InterpretedFunctions of the kernel's helpers and of triton.language's own
    @jit functions (tl.sum, tl.max, ...), which code generation cannot call, and constexpr functions return
    bare values. For the duration of the compile the switch is off and every InterpretedFunction reachable
    from triton.language and from the kernel's globals (and modules named there) is replaced by its
    JITFunction twin; everything is put back afterwards.
    """
    import sys
    import types

    from triton import knobs

    if not knobs.runtime.interpret:
        yield
        return
    with _interpreter_lock, knobs.runtime.scope():
        knobs.runtime.interpret = False
        swapped: list[tuple[dict, str, Any]] = []
        pending = [vars(m) for name, m in list(sys.modules.items())
                   if m is not None and (name == "triton.language" or name.startswith("triton.language."))]
        pending.append(fn.__globals__)
        seen: set[int] = set()
        try:
            while pending:
                namespace = pending.pop()
                if id(namespace) in seen:
                    continue
                seen.add(id(namespace))
                for name, value in list(namespace.items()):
                    if _is_interpreted(value):
                        swapped.append((namespace, name, value))
                        namespace[name] = _jit_twin(value)
                        pending.append(value.fn.__globals__)
                    elif isinstance(value, types.ModuleType) and namespace is fn.__globals__:
                        pending.append(vars(value))
            swapped += _unpatched_language()
            yield
        finally:
            for namespace, name, value in reversed(swapped):
                namespace[name] = value


def _interpreter_made(value: Any) -> bool:
    func = value.func if isinstance(value, functools.partial) else value
    return getattr(func, "__module__", None) == "triton.runtime.interpreter" or value is print


def _unpatched_language() -> list[tuple[dict, str, Any]]:
    """Put triton.language's own functions back into its modules for a compile (the caller restores them).

    The interpreter replaces them with its own while a kernel runs and puts them back afterwards, except where a
    @jit helper called from the kernel patched a module the kernel itself does not name: triton 3.6's
    InterpretedFunction.__call__ patches the helper's ``triton.language.core`` and never restores it
    (tl.max, tl.sum and the other triton.language @jit functions are such helpers). Code generation then calls
    the interpreter's functions and fails ("'ir.value' object has no attribute 'dtype'"): seen on an H200 in the
    CPU tests' child process, whose fresh Triton cache made every compile run (session 8,
    docs/gpu_logs/session8_run1_cpu_child.log).
    """
    import triton.language as tl

    swapped: list[tuple[dict, str, Any]] = []
    for module in (tl.core, tl.math, tl.standard, tl):
        namespace = vars(module)
        for name, value in list(namespace.items()):
            if not _interpreter_made(value):
                continue
            original = (getattr(value, "__kwdefaults__", None) or {}).get("member")
            if original is None:
                exported = vars(tl).get(name)
                original = exported if exported is not None and not _interpreter_made(exported) else None
            if original is not None:
                swapped.append((namespace, name, value))
                namespace[name] = original
    return swapped


@dataclass(frozen=True)
class _Resolved:
    fn: Any
    configs: list[Any] | None
    heuristics: tuple[str, ...]
    signature: dict[str, str] | None
    constexprs: dict[str, Any] | None


def _resolve(kernel: Any) -> _Resolved:
    """Walk ``.fn`` from an autotuner / heuristics wrapper down to the JITFunction, collecting what is found."""
    obj, configs, heuristics = kernel, None, []
    signature = getattr(kernel, "graphtune_signature", None)
    constexprs = getattr(kernel, "graphtune_constexprs", None)
    for _ in range(32):
        if _is_interpreted(obj):
            obj = _jit_twin(obj)
        if _is_jit_function(obj):
            break
        if configs is None and getattr(obj, "configs", None) is not None:
            configs = list(obj.configs)
        values = getattr(obj, "values", None)
        if isinstance(values, dict):
            heuristics.extend(values)
        signature = signature if signature is not None else getattr(obj, "graphtune_signature", None)
        constexprs = constexprs if constexprs is not None else getattr(obj, "graphtune_constexprs", None)
        if not hasattr(obj, "fn"):
            raise InspectError(f"{kernel!r} is not a Triton kernel: no @triton.jit function found under it "
                               f"(stopped at {type(obj).__name__}, which has no .fn)")
        obj = obj.fn
    else:
        raise InspectError(f"{kernel!r}: more than 32 nested .fn wrappers, no @triton.jit function found")
    return _Resolved(obj, configs, tuple(heuristics),
                     dict(signature) if signature is not None else None,
                     dict(constexprs) if constexprs is not None else None)


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or repr(fn)


def _normalise_configs(configs: Iterable[Any] | None) -> list[triton.Config]:
    if configs is None:
        return [triton.Config({})]
    out = []
    for config in configs:
        if isinstance(config, triton.Config):
            out.append(config)
        elif isinstance(config, Mapping):
            out.append(config_from_dict(dict(config)))
        else:
            raise InspectError(f"config {config!r} is neither a triton.Config nor a dict")
    if not out:
        raise InspectError("configs is empty: give at least one triton.Config (or configs=None for the default)")
    return out


_INT_TYPES = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"}

_TORCH_DTYPES = {
    "float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "u1",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5", "float8_e4m3fnuz": "fp8e4b8", "float8_e5m2fnuz": "fp8e5b16",
}


def _alignable(ty: str) -> bool:
    """Pointers and integers get ``tt.divisibility`` at launch; floats and bools never do."""
    return ty.startswith("*") or ty in _INT_TYPES


def _check_type(fn: Any, name: str, ty: Any) -> None:
    from triton.language import str_to_ty

    try:
        if not isinstance(ty, str):
            raise TypeError
        str_to_ty(ty, None)
    except (KeyError, TypeError, IndexError, ValueError):
        raise InspectError(f"signature type {ty!r} for {name!r} of {_fn_name(fn)} is not a Triton type "
                           "(examples: *fp16, *bf16, *fp8e4nv, *i32, i32, i64, fp32)") from None


def _prepare(fn: Any, signature: Mapping[str, str], constexprs: Mapping[str, Any],
             specialize: bool | Iterable[str], heuristics: tuple[str, ...]) -> _Spec:
    """Validate the caller's signature and constexprs against the kernel's parameters."""
    name = _fn_name(fn)
    params = {p.name: p for p in fn.params}
    unknown = [k for k in signature if k not in params]
    if unknown:
        raise InspectError(f"signature names {unknown}, not parameters of {name}; parameters: {list(params)}")
    unknown = [k for k in constexprs if k not in params]
    if unknown:
        raise InspectError(f"constexprs name {unknown}, not parameters of {name}; parameters: {list(params)}")

    runtime: dict[str, str] = {}
    fixed: dict[str, Any] = {}
    for pname, ty in signature.items():
        if params[pname].is_constexpr:
            if ty == "constexpr":
                continue
            raise InspectError(f"{pname!r} of {name} is a tl.constexpr parameter: give its value in constexprs, "
                               f"not the type {ty!r} in signature")
        if pname in constexprs:
            raise InspectError(f"{pname!r} of {name} is given both in signature ({ty!r}) and in constexprs "
                               f"({constexprs[pname]!r}); keep one")
        _check_type(fn, pname, ty)
        runtime[pname] = ty
    fixed.update(constexprs)

    missing = []
    for pname, param in params.items():
        if param.is_constexpr or pname in runtime or pname in fixed:
            continue
        if param.has_default:
            # A launch that omits the argument passes the default: type it the same way.
            kind, value, _ = _spec_of_value(param, param.default)
            if kind == "constexpr":
                fixed[pname] = value
            else:
                runtime[pname] = kind
        else:
            missing.append(pname)
    if missing:
        raise InspectError(f"signature is missing {missing} of {name}; it covers {sorted(signature)}; runtime "
                           f"parameters: {[p for p, v in params.items() if not v.is_constexpr]}")
    for pname, param in params.items():
        if param.is_constexpr and pname not in fixed and param.has_default:
            fixed[pname] = param.default

    if specialize is True:
        aligned = frozenset(p for p, ty in runtime.items()
                            if _alignable(ty) and not params[p].do_not_specialize
                            and not params[p].do_not_specialize_on_alignment)
    elif specialize is False or specialize is None:
        aligned = frozenset()
    else:
        aligned = frozenset(specialize)
        bad = sorted(aligned - set(runtime))
        if bad:
            raise InspectError(f"specialize names {bad}, not runtime parameters in the signature of {name}; "
                               f"runtime parameters: {list(runtime)}")
    ordered_runtime = {p: runtime[p] for p in params if p in runtime}
    return _Spec(fn, ordered_runtime, fixed, aligned, frozenset(constexprs), heuristics)


def _config_constexprs(spec: _Spec, config: triton.Config, index: int) -> dict[str, Any]:
    """The constexprs one config compiles with: the caller's plus the config's kwargs."""
    fn, name = spec.fn, _fn_name(spec.fn)
    params = {p.name: p for p in fn.params}
    label = config_label(config)
    unknown = [k for k in config.kwargs if k not in params]
    if unknown:
        raise InspectError(f"config #{index} ({label}) sets {unknown}, not parameters of {name}; "
                           f"parameters: {list(params)}")
    runtime = [k for k in config.kwargs if not params[k].is_constexpr]
    if runtime:
        raise InspectError(f"config #{index} ({label}) sets runtime parameters {runtime} of {name}; the inspector "
                           "takes config values as tl.constexpr parameters only")
    clash = [k for k in config.kwargs if k in spec.given]
    if clash:
        raise InspectError(f"config #{index} ({label}) and constexprs both set {clash} of {name}; keep one "
                           "(triton.autotune rejects such a launch too)")
    # a parameter named like a launch option (Gluon's ``num_warps: gl.constexpr``) takes the config's value,
    # as a launch binds ``config.all_kwargs()`` to it
    options = {k: v for k, v in config.all_kwargs().items()
               if k not in config.kwargs and k in params and params[k].is_constexpr}
    clash = [k for k, v in options.items() if k in spec.given and spec.constexprs[k] != v]
    if clash:
        raise InspectError(f"config #{index} ({label}) launches with {', '.join(f'{k}={options[k]}' for k in clash)} "
                           f"but constexprs set {', '.join(f'{k}={spec.constexprs[k]!r}' for k in clash)} of "
                           f"{name}; a launch passes the config's value: drop it from constexprs")
    merged = {**spec.constexprs, **options, **config.kwargs}
    missing = [p for p, v in params.items() if v.is_constexpr and p not in merged]
    if missing:
        hint = (f" (a triton.heuristics wrapper computes {list(spec.heuristics)} at launch: pass those in "
                "constexprs)") if spec.heuristics else ""
        raise InspectError(f"constexpr {missing} of {name} has no value: not in constexprs "
                           f"{sorted(spec.constexprs)} nor in config #{index} ({label}){hint}")
    return {p: merged[p] for p in params if p in merged}


@dataclass(frozen=True)
class _PlainParam:
    """The parts of a KernelParam that type a value (for re-typing without the annotation)."""
    name: str = ""
    do_not_specialize: bool = False
    do_not_specialize_on_alignment: bool = False
    is_const: bool = False
    annotation_type: str = ""


def _spec_of_value(param: Any, value: Any) -> tuple[str, Any, bool]:
    """(Triton type or "constexpr", constexpr value, divisible by 16) of one launch argument.

    Mirrors the specialisation of a ``kernel[grid](...)`` launch in triton 3.x: ``None`` and the integer 1
    become constexprs, integers pick i32 / i64 / u64 by range, tensors are pointers to their dtype and count as
    aligned when their address is a multiple of 16.
    """
    specialize = not param.do_not_specialize
    align = specialize and not param.do_not_specialize_on_alignment
    annotated = getattr(param, "annotation_type", "")
    if annotated and value is not None:
        # An annotated parameter (``n: tl.int64``) keeps its type and is never turned into a constant;
        # only its alignment is taken from the value, and never for floats and bools.
        if annotated == "u1" or annotated[:2] in ("fp", "bf"):
            return annotated, None, False
        _, _, aligned = _spec_of_value(_PlainParam(name=param.name), value)
        return annotated, None, align and aligned
    if value is None:
        return "constexpr", None, False
    if isinstance(value, bool):
        return "u1", None, False
    if isinstance(value, int):
        if specialize and value == 1:
            return "constexpr", 1, False
        if -2**31 <= value < 2**31:
            ty = "i32"
        elif 2**63 <= value < 2**64:
            ty = "u64"
        elif -2**63 <= value < 2**63:
            ty = "i64"
        else:
            raise InspectError(f"argument {param.name!r} = {value} does not fit in 64 bits")
        return ty, None, align and value % 16 == 0
    if isinstance(value, float):
        return "fp32", None, False
    if is_descriptor(value):
        # what a launch specialises a descriptor on (element type, block shape, Gluon layout); never aligned
        from triton.runtime.jit import mangle_type
        return mangle_type(value), None, False
    dtype = getattr(value, "dtype", None)
    address = 0
    if dtype is None and type(value).__name__ == "dtype" and type(value).__module__ == "torch":
        dtype = value   # a bare torch dtype stands for a tensor of that dtype (as in JITFunction.warmup)
    elif dtype is not None and callable(getattr(value, "data_ptr", None)):
        address = value.data_ptr()
    else:
        raise InspectError(f"argument {param.name!r}: cannot derive a Triton type from {type(value).__name__} "
                           f"{value!r}; give the signature explicitly")
    element = _TORCH_DTYPES.get(str(dtype).rpartition(".")[2])
    if element is None:
        raise InspectError(f"argument {param.name!r}: tensor dtype {dtype} has no Triton pointer type here; "
                           f"known: {sorted(_TORCH_DTYPES)}")
    const = "k" if param.is_const else ""
    return f"*{const}{element}", None, align and address % 16 == 0


def _args_specs(fn: Any, args: Mapping[str, Any]) -> dict[str, tuple[str, Any, bool]]:
    fn = _resolve(fn).fn
    params = {p.name: p for p in fn.params}
    unknown = [k for k in args if k not in params]
    if unknown:
        raise InspectError(f"arguments {unknown} are not parameters of {_fn_name(fn)}; parameters: {list(params)}")
    missing = [p for p, v in params.items() if not v.is_constexpr and p not in args and not v.has_default]
    if missing:
        raise InspectError(f"arguments miss runtime parameters {missing} of {_fn_name(fn)}")
    out = {}
    for pname, value in args.items():
        if params[pname].is_constexpr:
            out[pname] = ("constexpr", value, False)
        else:
            out[pname] = _spec_of_value(params[pname], value)
    return out


def signature_from_args(fn: Any, args: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """Triton's signature and the constexprs of a launch with these arguments (name -> value).

    Tensors become ``"*bf16"``, ``"*fp8e4nv"``, ...; ints ``"i32"``/``"i64"``; floats ``"fp32"``; constexpr
    parameters, ``None`` and the int 1 (which Triton specialises) go to the constexprs. Parameters absent from
    ``args`` that are constexprs are left for the configs to supply.
    """
    signature, constexprs = {}, {}
    for pname, (kind, value, _) in _args_specs(fn, args).items():
        if kind == "constexpr":
            constexprs[pname] = value
        else:
            signature[pname] = kind
    return signature, constexprs


def aligned_args(fn: Any, args: Mapping[str, Any]) -> frozenset[str]:
    """Names a launch with these arguments marks divisible by 16; pass as ``specialize=`` to match it exactly."""
    return frozenset(p for p, (_, _, aligned) in _args_specs(fn, args).items() if aligned)


# ------------------------------------------------------------------------------------------ compiling

def _is_gluon(fn: Any) -> bool:
    is_gluon = getattr(fn, "is_gluon", None)
    return bool(is_gluon()) if callable(is_gluon) else False


def _source_class(fn: Any) -> Any:
    """What ``triton.compile`` takes for this kernel: ``GluonASTSource`` for a ``@gluon.jit`` kernel (its IR
    is built with the layouts the kernel spells out), else ``ASTSource``; the same choice the kernel's own
    binder makes at launch."""
    if _is_gluon(fn):
        from triton.experimental.gluon._runtime import GluonASTSource
        return GluonASTSource
    from triton.compiler import ASTSource
    return ASTSource


_WS_OP = re.compile(r"ttg\.warp_specialize\(")
_WS_REQUESTED = re.compile(r"requestedRegisters = array<i32: ([\d, ]+)>")
_WS_PARTITION = re.compile(r"^\s*partition(\d+)\(.*\)\s*num_warps\((\d+)\)", re.MULTILINE)
_PTX_SETMAXNREG = re.compile(r"setmaxnreg\.(?:inc|dec)\.sync\.aligned\.u32\s+(\d+)")
_PTX_MAXNREG = re.compile(r"^\s*\.maxnreg\s+(\d+)", re.MULTILINE)
_MIN_REALLOC_REGISTERS = 24        # setmaxnreg's lower bound: a default partition left fewer is not reallocated
_MAX_REALLOC_REGISTERS = 256       # and its upper bound


def warp_partitions(ttgir: str, ptx: str, num_warps: int, registers: int) -> tuple[Partition, ...]:
    """The partitions of every ``ttg.warp_specialize`` region of a compiled kernel, with their real warps and
    registers per thread (see :class:`Partition`); () for a kernel without one.

    Warps and requested registers are read from the TTGIR (``partitionN(...) num_warps(W)``,
    ``requestedRegisters``). Triton decides the registers each partition runs with while lowering that IR
    (``AllocateWarpGroups``: pad the workers to whole warpgroups with 1-16-register partitions, give each
    warpgroup its largest request rounded up to 8, the default partition the rest of ``maxnreg`` x warps)
    and emits them as ``setmaxnreg``; that result is kept in no metadata, so it is computed here by the same
    rule and accepted only when every value appears as a ``setmaxnreg`` in the PTX (None otherwise)."""
    starts = [m.start() for m in _WS_OP.finditer(ttgir)]
    if not starts:
        return ()
    ops: list[tuple[list[int] | None, list[int]]] = []
    for k, start in enumerate(starts):
        text = ttgir[start:starts[k + 1] if k + 1 < len(starts) else len(ttgir)]
        line = text.split("\n", 1)[0]
        req = _WS_REQUESTED.search(line)
        warps = [int(w) for _, w in sorted(((int(i), w) for i, w in _WS_PARTITION.findall(text)))]
        ops.append(([int(r) for r in req.group(1).split(",")] if req else None, warps))
    maxnreg_found = _PTX_MAXNREG.search(ptx)
    maxnreg = int(maxnreg_found.group(1)) if maxnreg_found else registers
    emitted = {int(v) for v in _PTX_SETMAXNREG.findall(ptx)}
    groups = -(-max(sum(w) for _, w in ops) // 4)
    out: list[Partition] = []
    for index, (requested, warps) in enumerate(ops):
        actual = _reallocated(requested, warps, groups, num_warps, maxnreg)
        if actual is None:
            regs = [registers] * (1 + len(warps))      # no setmaxnreg: every warp keeps the launch's count
        elif set(actual) <= emitted:
            regs = actual
        else:
            regs = [None] * (1 + len(warps))
        out.append(Partition(index, "default", num_warps, None, regs[0]))
        for i, w in enumerate(warps):
            out.append(Partition(index, f"partition{i}", w, requested[i] if requested else None, regs[1 + i]))
    return tuple(out)


def _reallocated(requested: list[int] | None, warps: list[int], groups: int, base: int,
                 maxnreg: int) -> list[int] | None:
    """Registers per thread of [default, partition0, ...] under Triton's register reallocation, or None when
    the region is not reallocated (no requests, or too few registers left for the default partition)."""
    if requested is None or len(requested) != len(warps):
        return None
    sizes, wanted = list(warps), list(requested)
    add = groups * 4 - sum(sizes)
    while add > 0:                     # padding partitions: powers of two, 16 registers each
        size = 1 << (add.bit_length() - 1)
        sizes.append(size)
        wanted.append(16)
        add -= size
    if sum(sizes) % 4:
        return None
    # start ids: the largest partitions first, from the default partition's warps on
    first, start = {}, base
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        first[i] = start
        start += sizes[i]
    warpgroups: list[list[int]] = []   # [largest request rounded up to 8, warps, partition indices...]
    for i in sorted(range(len(sizes)), key=lambda i: first[i]):
        if first[i] % 4 == 0 or not warpgroups:
            warpgroups.append([0, 0])
        group = warpgroups[-1]
        group[0] = max(group[0], -(-wanted[i] // 8) * 8)
        group[1] += sizes[i]
        group.append(i)
    budget = maxnreg * base + sum((maxnreg - g[0]) * g[1] for g in warpgroups)   # per 32 threads
    if budget <= 0:
        return None
    left = min(budget // base // 8 * 8, _MAX_REALLOC_REGISTERS)
    if left < _MIN_REALLOC_REGISTERS:
        return None
    per = {i: g[0] for g in warpgroups for i in g[2:]}
    return [left] + [per[i] for i in range(len(warps))]


_compile_cache: dict[tuple, _Compiled] = {}
_check_cache: dict[tuple, dict[int, str]] = {}
_CHECK_CACHE_SIZE = 1024
_RESOURCE_LINE = re.compile(r"\b(REG|STACK|SHARED|LOCAL):(\d+)")


def _cuobjdump() -> str:
    try:
        from triton import knobs
        return knobs.nvidia.cuobjdump.path   # honours TRITON_CUOBJDUMP_PATH, falls back to the wheel's copy
    except Exception as exc:  # noqa: BLE001 - any failure means: not usable
        default = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
        if os.access(default, os.X_OK):
            return default
        raise GraphtuneError(f"cuobjdump not found ({exc}); it ships in the triton wheel at {default}: install "
                             "triton with its NVIDIA backend, or set TRITON_CUOBJDUMP_PATH") from None


def _parse_resource_usage(text: str, kernel_name: str) -> dict[str, int]:
    """``Function NAME:`` then ``REG:.. STACK:.. SHARED:.. LOCAL:..`` per function; the kernel's line wins."""
    functions: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Function ") and stripped.endswith(":"):
            current = stripped[len("Function "):-1]
        elif current is not None and "REG:" in stripped:
            functions[current] = {k: int(v) for k, v in _RESOURCE_LINE.findall(stripped)}
    if kernel_name in functions:
        return functions[kernel_name]
    if len(functions) == 1:
        return next(iter(functions.values()))
    raise GraphtuneError(f"cuobjdump output has no resource line for kernel {kernel_name!r} "
                         f"(functions: {sorted(functions)}):\n{text}")


def _cuobjdump_text(cubin: bytes, flag: str) -> str:
    tool = _cuobjdump()
    with tempfile.TemporaryDirectory(prefix="graphtune-") as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        result = subprocess.run([tool, flag, path], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise GraphtuneError(f"{tool} {flag} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


# The bytes of the reserved-shared-memory section cuobjdump counts in SHARED on sm_90 and later: the driver's
# per-block reserve.
_RESERVED_SECTION = Target.reserved_shared_per_block


def static_shared(usage: dict[str, int], capability: int) -> int:
    """A kernel's static shared memory from its cuobjdump resource usage (``SHARED``), as the driver counts it.

    On sm_90 and later cuobjdump's SHARED holds the driver's per-block reserve as a 1 KB section
    (``.nv.shared.reserved.0``) once the kernel uses shared memory; occupancy() adds that reserve itself, so it is
    not static memory of the kernel's. Measured on an H200 (session 33): ``cuFuncGetAttribute(SHARED_SIZE_BYTES)``
    is 0 for a kernel cuobjdump reports 1,024 bytes for, and the driver's occupancy is 9 blocks at 24,576 B dynamic
    and 4 at 57,344 B (128 threads, 233,472 B per SM): the 1 KB counted once."""
    static = usage.get("SHARED", 0)
    if capability >= 90:
        static -= min(static, _RESERVED_SECTION)
    return static


def _resource_usage(cubin: bytes, kernel_name: str) -> dict[str, int]:
    return _parse_resource_usage(_cuobjdump_text(cubin, "--dump-resource-usage"), kernel_name)


def wgmma_hazards(kernel: Any) -> tuple[str, ...]:
    """What :mod:`graphtune.sass` finds wrong in a compiled kernel's SASS (``kernel.asm``: Triton's
    ``CompiledKernel``): wgmmas whose descriptor is not written on every path into them, registers a wgmma reads or
    writes that another instruction writes while it runs, and shared-memory stores and 8- / 16-bit conversions of
    registers not written on every path into them (ptxas faults seen in sessions 43 and 47). Read only for kernels with
    a wgmma (their PTX names ``wgmma.mma_async``); () for any other, or without its PTX and cubin."""
    asm = getattr(kernel, "asm", None)
    if not isinstance(asm, Mapping) or "wgmma.mma_async" not in str(asm.get("ptx", "")) or not asm.get("cubin"):
        return ()
    return tuple(str(u) for u in wgmma_findings(_cuobjdump_text(asm["cubin"], "--dump-sass")))


def _launch_options(config: triton.Config) -> dict[str, Any]:
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages, "num_ctas": config.num_ctas}
    if getattr(config, "maxnreg", None) is not None:
        options["maxnreg"] = config.maxnreg
    if getattr(config, "ir_override", None) is not None:
        options["ir_override"] = config.ir_override
    return options


def _freeze(value: Any) -> str:
    return repr(value)


def _kernel_key(fn: Any) -> tuple[str, str]:
    """Source-and-dependencies hash plus name: the same kernel text compiles the same way."""
    with _compiler_mode(fn):
        return fn.cache_key, getattr(fn, "__qualname__", _fn_name(fn))


def _compile(spec: _Spec, constexprs: dict[str, Any], options: dict[str, Any], target: Target) -> _Compiled:
    """Compile once per (kernel source, target, signature, constexprs, specialisation, options) per process;
    Triton's on-disk cache makes a repeat in another process cheap too."""
    from triton.backends.compiler import GPUTarget

    fn = spec.fn
    key = (_kernel_key(fn), target.capability,
           target.warp_size, tuple(spec.signature.items()),
           tuple(sorted((k, _freeze(v)) for k, v in constexprs.items())), tuple(sorted(spec.aligned)),
           tuple(sorted((k, _freeze(v)) for k, v in options.items())))
    with _cache_lock:
        hit = _compile_cache.get(key)
    if hit is not None:
        return hit

    # The signature a launch builds: every parameter in order, constexprs spelled "constexpr", and
    # tt.divisibility only on the aligned runtime arguments. Matching it keeps the compile identical.
    names = list(fn.arg_names)
    signature = {p: ("constexpr" if p in constexprs else spec.signature[p]) for p in names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, p in enumerate(names) if p in spec.aligned and p not in constexprs}
    started = time.perf_counter()
    try:
        # Triton prints the whole PTX to stdout when ptxas fails; the reason is kept, the dump is not.
        with contextlib.redirect_stdout(io.StringIO()), _compiler_mode(fn):
            kernel = triton.compile(_source_class(fn)(fn, signature, constexprs, attrs),
                                    target=GPUTarget("cuda", target.capability, target.warp_size), options=options)
    except Exception as exc:  # noqa: BLE001 - any compile failure makes the config unusable, with this reason
        logger.debug("compile of %s for %s with %s failed", _fn_name(fn), target.name, options, exc_info=True)
        result = _Compiled(None, one_line(exc))
    else:
        found = _resource_usage(kernel.asm["cubin"], kernel.metadata.name)
        static = static_shared(found, target.capability)
        tmem = getattr(kernel.metadata, "tmem_size", None)
        registers = found.get("REG", 0)
        result = _Compiled(_Usage(registers=registers, stack_bytes=found.get("STACK", 0),
                                  local_bytes=found.get("LOCAL", 0), shared_static=static,
                                  shared_dynamic=int(kernel.metadata.shared),
                                  tensor_memory_columns=int(tmem) if tmem is not None else None,
                                  total_warps=int(kernel.metadata.num_warps),
                                  partitions=warp_partitions(kernel.asm.get("ttgir", ""), kernel.asm.get("ptx", ""),
                                                             int(options["num_warps"]), registers),
                                  hazards=wgmma_hazards(kernel)), None)
        logger.debug("compiled %s for %s with %s in %.2f s: %s", _fn_name(fn), target.name, options,
                     time.perf_counter() - started, result.usage)
    with _cache_lock:
        _compile_cache[key] = result
    return result


# Triton's own launch check for Blackwell tensor memory (columns per CTA).
_MAX_TENSOR_MEMORY_COLUMNS = 512


def _row(config: triton.Config, target: Target, compiled: _Compiled) -> ResourceRow:
    data = config_to_dict(config)
    warps = (compiled.usage.total_warps if compiled.usage is not None else None) or config.num_warps
    common = dict(config=data, label=config_label(data), target=target.name, num_warps=config.num_warps,
                  num_stages=config.num_stages, num_ctas=config.num_ctas, total_warps=warps,
                  threads_per_block=warps * target.warp_size)
    if compiled.usage is None:
        return ResourceRow(**common, registers=None, stack_bytes=None, local_bytes=None, spill_bytes=None,
                           shared_static=None, shared_dynamic=None, shared_bytes=None, blocks_by_registers=None,
                           blocks_by_shared=None, blocks_by_threads=None, blocks_by_limit=None, resident_blocks=0,
                           resident_warps=0, occupancy_pct=0.0, limiter="compile", fits=False,
                           reason=f"compile failed for {target.name}: {compiled.error}")
    u = compiled.usage
    shared = u.shared_static + u.shared_dynamic
    # every warp of the block holds the launch's register count (setmaxnreg only moves registers between the
    # warpgroups of a block later), so the occupancy is that of the total warps
    occ = occupancy(target, u.registers, shared, warps)
    fits, reason = occ.fits, occ.reason
    if fits and u.tensor_memory_columns is not None and u.tensor_memory_columns > _MAX_TENSOR_MEMORY_COLUMNS:
        fits = False
        reason = (f"needs {u.tensor_memory_columns} tensor memory columns, {target.name} allows "
                  f"{_MAX_TENSOR_MEMORY_COLUMNS}")
    return ResourceRow(**common, registers=u.registers, stack_bytes=u.stack_bytes, local_bytes=u.local_bytes,
                       spill_bytes=u.stack_bytes + u.local_bytes, shared_static=u.shared_static,
                       shared_dynamic=u.shared_dynamic, shared_bytes=shared,
                       blocks_by_registers=occ.blocks_by_registers if occ.fits else None,
                       blocks_by_shared=occ.blocks_by_shared if occ.fits else None,
                       blocks_by_threads=occ.blocks_by_threads if occ.fits else None,
                       blocks_by_limit=occ.blocks_by_limit if occ.fits else None,
                       resident_blocks=occ.blocks if fits else 0, resident_warps=occ.warps if fits else 0,
                       occupancy_pct=occ.occupancy_pct if fits else 0.0, limiter=occ.limiter, fits=fits,
                       reason=reason, partitions=u.partitions, hazards=u.hazards)


# ------------------------------------------------------------------------------------------ public API

def inspect(kernel: Any, *, target: str | int | Target = "sm_90", signature: Mapping[str, str] | None = None,
            constexprs: Mapping[str, Any] | None = None, configs: Sequence[Any] | None = None,
            specialize: bool | Iterable[str] = True, args: Mapping[str, Any] | None = None) -> list[ResourceRow]:
    """Compile every config of ``kernel`` for ``target`` and report resources and occupancy, one row per config.

    ``kernel``: a graphtune or ``triton.autotune`` kernel (``.fn`` and ``.configs``), possibly over a
    ``triton.heuristics`` wrapper, or a ``@triton.jit`` / ``@gluon.jit`` function (then ``configs``, default
    one ``triton.Config({})``). ``configs`` given explicitly replace the kernel's own.
    ``signature``: Triton types of every runtime parameter (``{"x_ptr": "*bf16", "n": "i32"}``, a tensor
    descriptor as ``mangle_type`` spells it); defaults to the kernel's ``graphtune_signature`` attribute.
    ``args`` instead of ``signature``: the arguments of a launch by name (tensors on any device, tensor
    descriptors over them, ints, ...); each config's ``pre_hook`` runs on them first, as before a launch, so
    a descriptor it rebuilds per config is typed per config; alignment is then the arguments' own.
    ``constexprs`` (default ``graphtune_constexprs``) hold the tl.constexpr values the configs do not set; a
    parameter named like a launch option (Gluon's ``num_warps``) takes the config's value. ``specialize``:
    True marks every pointer and integer divisible by 16 as a launch with aligned tensors and sizes does
    (with ``args``: those that are), False none, or a set of parameter names.
    Bad input raises :class:`InspectError`; a config that fails to compile gets ``fits=False`` and the reason.
    """
    resolved = _resolve(kernel)
    tgt = get_target(target)
    fn = resolved.fn
    if args is not None:
        if signature is not None:
            raise InspectError(f"inspect({_fn_name(fn)}): give signature= or args=, not both")
        if not isinstance(args, Mapping):
            raise InspectError(f"inspect({_fn_name(fn)}): args={args!r} must map parameter names to values")
        return _inspect_args(resolved, tgt, args, constexprs, configs, specialize)
    if signature is None:
        signature = resolved.signature
    if signature is None:
        runtime = [p.name for p in fn.params if not p.is_constexpr and not p.has_default]
        raise InspectError(f"no signature for {_fn_name(fn)}: give Triton types for {runtime}, e.g. "
                           f"signature={{{', '.join(repr(p) + ': ...' for p in runtime[:3])}}} "
                           "(or set the kernel's graphtune_signature attribute)")
    merged_constexprs = {**(resolved.constexprs or {}), **(constexprs or {})}
    spec = _prepare(fn, signature, merged_constexprs, specialize, resolved.heuristics)
    config_list = _normalise_configs(configs if configs is not None else resolved.configs)
    # Validate every config before compiling any: bad input fails fast, not after minutes of ptxas.
    per_config = [_config_constexprs(spec, config, i) for i, config in enumerate(config_list)]
    return [_row(config, tgt, _compile(spec, cons, _launch_options(config), tgt))
            for config, cons in zip(config_list, per_config)]


def _inspect_args(resolved: _Resolved, tgt: Target, args: Mapping[str, Any], constexprs: Mapping[str, Any] | None,
                  configs: Sequence[Any] | None, specialize: bool | Iterable[str]) -> list[ResourceRow]:
    """``inspect`` with the launch's arguments: one signature per config, taken after its pre-hook."""
    fn = resolved.fn
    config_list = _normalise_configs(configs if configs is not None else resolved.configs)
    named = dict(args)
    jobs = []
    for i, config in enumerate(config_list):   # every config validated before any compiles
        if config.pre_hook is not None:
            # Triton's convention: the hook gets the arguments and the config's values by name and rebuilds
            # what depends on the config in place (a descriptor's block_shape and layout)
            config.pre_hook({**named, **config.all_kwargs()})
        signature, found = signature_from_args(fn, named)
        aligned = aligned_args(fn, named) if specialize is True else specialize
        merged = {**(resolved.constexprs or {}), **found, **(constexprs or {})}
        spec = _prepare(fn, signature, merged, aligned, resolved.heuristics)
        jobs.append((config, spec, _config_constexprs(spec, config, i)))
    return [_row(config, tgt, _compile(spec, cons, _launch_options(config), tgt)) for config, spec, cons in jobs]


def check_configs_for_device(kernel_fn: Any, configs: Sequence[Any], signature: Mapping[str, str],
                             constexprs: Mapping[str, Any] | None = None, target: str | int | Target = "device",
                             *, specialize: bool | Iterable[str] = True) -> dict[int, str]:
    """Configs that cannot launch on ``target``: ``{index in configs: reason}``; empty when all fit.

    Meant to run before timing: a config that needs more shared memory, threads or registers than the GPU
    has (or does not compile) is dropped with a reason instead of failing at launch. Cached per process on
    the arguments, so a second call for the same kernel and launch specialisation costs a dict lookup.
    Use :func:`signature_from_args` and :func:`aligned_args` to describe a real launch.
    """
    tgt = get_target(target)
    fn = _resolve(kernel_fn).fn
    config_list = _normalise_configs(configs)
    aligned = specialize if isinstance(specialize, bool) else tuple(sorted(specialize))
    key = (_kernel_key(fn), tgt,
           json.dumps([config_to_dict(c) for c in config_list], sort_keys=True, default=repr),
           tuple(sorted(signature.items())), tuple(sorted((k, _freeze(v)) for k, v in (constexprs or {}).items())),
           aligned)
    with _cache_lock:
        hit = _check_cache.get(key)
    if hit is not None:
        return dict(hit)
    rows = inspect(fn, target=tgt, signature=signature, constexprs=constexprs, configs=config_list,
                   specialize=specialize)
    result = {i: row.reason for i, row in enumerate(rows) if not row.fits}
    for i, reason in result.items():
        logger.info("%s: config #%d (%s) cannot run on %s: %s", _fn_name(fn), i, rows[i].label, tgt.name, reason)
    with _cache_lock:
        if len(_check_cache) >= _CHECK_CACHE_SIZE:
            _check_cache.pop(next(iter(_check_cache)))
        _check_cache[key] = result
    return dict(result)
