"""Isolated first launches: a candidate config that never ran on this device and software stack is launched
first in a worker process on the same GPU, so a config that faults (illegal memory access, a trap), hangs or
kills its process is recorded as failed and never launched in the caller.

Why: a kernel that faults poisons the CUDA context of its whole process (every later launch fails, tuning
included), so in-process tuning cannot catch it; one bad config in a search space would take a server down
during warm-up. Turned on by ``GRAPHTUNE_ISOLATE=1``, ``autotune(..., isolate=True)`` or
``graphtune tune --isolate``.

How: the worker (``multiprocessing`` spawn: a fresh interpreter, its own CUDA context) imports the kernel's
module by name or file path, takes CPU copies of the launch's arguments (a tensor descriptor travels over a
CPU copy of its base, with its strides) and the grid of each candidate (evaluated here), and for each
candidate restores the inputs, runs the config's pre-hook (pickled by reference, else the same config's hook
on the worker's own copy of the kernel), launches, synchronises and (with ``validate``) checks the outputs
(no NaN/inf, agreement with the first good candidate). It reports
``start i`` / ``ok i`` / ``fail i reason`` through a pipe. A candidate whose worker dies or does not answer
within ``GRAPHTUNE_ISOLATE_TIMEOUT_S`` is recorded as failed with that reason; a fresh worker goes on with
the rest. Configs proven safe are remembered in the tuning database per kernel identity and environment, so
later starts pay for no worker. Cost: one worker start (interpreter, torch, CUDA context, the kernel's
module) per screened key plus one compile and launch per unproven candidate; the compiled binaries land in
Triton's on-disk cache, which the caller then reuses.

Limits: the kernel must be importable by its module (defined at module level, not inside a function); the
worker imports that module, so its import must have no side effects that matter.
"""
from __future__ import annotations

import importlib
import importlib.util
import multiprocessing
import os
import pickle
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from . import settings
from ._loading import module_name_for
from ._log import logger
from .configs import config_to_dict
from .descriptors import copy_arg, tensor_of, tensors_of
from .errors import ConfigError, one_line


@dataclass(frozen=True)
class KernelRef:
    """How a worker finds the kernel: module name, the file it came from, and the attribute path in it."""

    module: str
    path: str | None
    qualname: str


def kernel_ref(space_name: str, fn: Any) -> KernelRef:
    base = fn
    while not callable(getattr(base, "__code__", None)) and hasattr(base, "fn"):
        base = base.fn
    qualname = getattr(base, "__qualname__", "")
    module = getattr(base, "__module__", "")
    if not qualname or "<locals>" in qualname or not module:
        raise ConfigError(f"kernel {space_name!r}: isolated evaluation needs a kernel defined at module level "
                          f"(it is {module}.{qualname}); define it in a module or turn isolation off")
    path = getattr(sys.modules.get(module), "__file__", None)
    if module == "__main__" and path is None:
        raise ConfigError(f"kernel {space_name!r}: isolated evaluation cannot import a kernel defined in an "
                          f"interactive __main__")
    return KernelRef(module=module, path=path, qualname=qualname)


@dataclass(frozen=True)
class Job:
    ref: KernelRef
    device: int
    args: tuple
    kwargs: dict[str, Any]
    candidates: tuple[tuple[int, dict[str, Any], tuple[int, ...]], ...]   # (index, config kwargs, grid)
    validate: bool
    reset_to_zero: tuple[str, ...]
    arg_names: tuple[str, ...]
    sys_path: tuple[str, ...]
    # index -> the config's pre_hook pickled (b"" when it does not pickle: the worker then takes the hook of the
    # same config on its own copy of the kernel); candidates without a pre-hook are absent
    hooks: dict[int, bytes] = field(default_factory=dict)


def screen(space: Any, candidates: Sequence[Any], args: tuple, kwargs: dict, grid, *,
           known: dict[str, str] | None = None) -> tuple[dict[int, str], dict[str, str]]:
    """Launch every candidate whose outcome is not ``known`` (config_key -> "ok" or the failure, as remembered
    in the database) in worker processes. Returns the failures by candidate index (known ones included, never
    launched again) and the outcomes learnt now, by config_key."""
    import torch
    known = known or {}
    failures: dict[int, str] = {}
    todo = []
    for i, c in enumerate(candidates):
        outcome = known.get(config_key(c))
        if outcome is None:
            todo.append(i)
        elif outcome != "ok":
            failures[i] = f"{outcome} (remembered from an earlier isolated launch)"
    if not todo:
        return failures, {}
    ref = kernel_ref(space.name, space.fn)
    nargs = space.nargs(args, kwargs)
    grids = []
    for i in todo:
        g = grid(dict(nargs, **candidates[i].all_kwargs())) if callable(grid) else grid
        grids.append((i, candidates[i].all_kwargs(), tuple(int(x) for x in g)))
    job = Job(ref=ref, device=torch.cuda.current_device(), args=tuple(copy_arg(a, "cpu") for a in args),
              kwargs={k: copy_arg(v, "cpu") for k, v in kwargs.items()}, candidates=tuple(grids),
              validate=bool(space.validate), reset_to_zero=tuple(space.reset_to_zero),
              arg_names=tuple(space.arg_names), sys_path=tuple(sys.path),
              hooks={i: _pickled(candidates[i].pre_hook) for i in todo if candidates[i].pre_hook is not None})
    t0 = time.perf_counter()
    new_failures, ok = _run(job, settings.isolate_timeout_s())
    logger.info("graphtune: %s: %d candidate(s) launched first in worker processes in %.2f s, %d failed",
                space.name, len(todo), time.perf_counter() - t0, len(new_failures))
    failures.update(new_failures)
    learnt = {config_key(candidates[i]): "ok" for i in ok}
    learnt.update({config_key(candidates[i]): why for i, why in new_failures.items()})
    return failures, learnt


def _pickled(hook: Any) -> bytes:
    try:
        return pickle.dumps(hook)
    except Exception:  # noqa: BLE001 - a lambda or a closure: the worker looks it up on its own kernel instead
        return b""


def _pre_hook(job: Job, i: int, config_kwargs: dict[str, Any], configs: list[Any]) -> Any:
    """The pre-hook candidate ``i`` runs with in the worker (None: it has none). Raises when it has one that
    neither travelled nor is found on the worker's own copy of the kernel."""
    if i not in job.hooks:
        return None
    if job.hooks[i]:
        try:
            return pickle.loads(job.hooks[i])
        except Exception:  # noqa: BLE001 - its module does not import here: try the kernel's own configs
            pass
    hook = next((c.pre_hook for c in configs if c.all_kwargs() == config_kwargs and c.pre_hook), None)
    if hook is None:
        raise ConfigError(f"the config's pre_hook does not pickle and no config of {job.ref.module}."
                          f"{job.ref.qualname} with {config_kwargs} has one here: define the hook at module level")
    return hook


def config_key(config: Any) -> str:
    """A config (``triton.Config`` or its dict) as the text the database remembers safe configs by."""
    import json
    return json.dumps(config if isinstance(config, dict) else config_to_dict(config), sort_keys=True, default=str)


def _run(job: Job, timeout_s: float) -> tuple[dict[int, str], list[int]]:
    ctx = multiprocessing.get_context("spawn")
    failures: dict[int, str] = {}
    ok: list[int] = []
    remaining = list(job.candidates)
    while remaining:
        parent, child = ctx.Pipe(duplex=False)
        sub = Job(**{**job.__dict__, "candidates": tuple(remaining)})
        proc = ctx.Process(target=_worker, args=(child, sub), daemon=True, name="graphtune-isolate")
        proc.start()
        child.close()
        current: int | None = None
        done: set[int] = set()
        # the first answer also pays for the worker's start (interpreter, torch, CUDA context)
        deadline = time.monotonic() + timeout_s + 60.0
        broken = None
        restart = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not parent.poll(min(left, 1.0)):
                if left <= 0:
                    broken = f"isolate: no answer within {timeout_s:g} s (GRAPHTUNE_ISOLATE_TIMEOUT_S): hung"
                    proc.kill()
                    break
                if not proc.is_alive() and not parent.poll(0):
                    broken = f"isolate: the worker process died (exit code {proc.exitcode})"
                    break
                continue
            try:
                msg = parent.recv()
            except EOFError:
                proc.join(5)
                broken = f"isolate: the worker process died (exit code {proc.exitcode})"
                break
            kind = msg[0]
            if kind == "start":
                current = msg[1]
                deadline = time.monotonic() + timeout_s
            elif kind == "ok":
                ok.append(msg[1])
                done.add(msg[1])
                current = None
            elif kind == "fail":
                failures[msg[1]] = msg[2]
                done.add(msg[1])
                current = None
            elif kind == "setup-failed":
                for i, _, _ in remaining:
                    failures[i] = f"isolate: the worker could not load the kernel: {msg[1]}"
                done.update(i for i, _, _ in remaining)
                break
            elif kind == "restart":
                restart = True
                break
            elif kind == "end":
                break
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        parent.close()
        if broken is not None:
            if current is None:   # died between candidates (or before the first): blame the next one
                current = next((i for i, _, _ in remaining if i not in done), None)
            if current is not None:
                failures[current] = broken
                done.add(current)
        remaining = [c for c in remaining if c[0] not in done]
        if broken is None and not restart and remaining:   # ended without reporting some: should not happen
            for i, _, _ in remaining:
                failures[i] = "isolate: the worker ended without running it"
            remaining = []
    return failures, ok


def _load_kernel(ref: KernelRef) -> tuple[Any, list[Any]]:
    """The kernel's JITFunction in this (worker) process, and the configs of the tuner wrapping it (their
    pre-hooks are this process's own functions: a hook never crosses the process boundary)."""
    from triton.runtime.jit import JITFunction
    module = None
    if ref.module in sys.modules and ref.module != "__main__":
        module = sys.modules[ref.module]
    if module is None:
        try:
            module = importlib.import_module(ref.module) if ref.module != "__main__" else None
        except ImportError:
            module = None
    if module is None:
        if ref.path is None:
            raise ImportError(f"cannot import {ref.module}")
        spec = importlib.util.spec_from_file_location(module_name_for(ref.path, "_graphtune_isolated"), ref.path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    obj: Any = module
    for part in ref.qualname.split("."):
        obj = getattr(obj, part)
    configs: list[Any] = []
    while not isinstance(obj, JITFunction) and hasattr(obj, "fn"):
        if not configs and isinstance(getattr(obj, "configs", None), (list, tuple)):
            configs = list(obj.configs)
        obj = obj.fn
    if not isinstance(obj, JITFunction):
        raise TypeError(f"{ref.module}.{ref.qualname} is {obj!r}, not a Triton kernel")
    return obj, configs


def _worker(conn, job: Job) -> None:   # runs in the spawned process
    try:
        sys.path[:] = list(job.sys_path)
        os.environ.pop("TRITON_INTERPRET", None)
        import torch
        torch.cuda.set_device(job.device)
        jit, configs = _load_kernel(job.ref)
        dev = torch.device("cuda", job.device)
        pristine = [copy_arg(a, dev) for a in job.args]
        pristine_kw = {k: copy_arg(v, dev) for k, v in job.kwargs.items()}
    except Exception as exc:  # noqa: BLE001
        conn.send(("setup-failed", one_line(exc)))
        conn.close()
        return
    from .validate import check_outputs
    reference = None
    for i, config_kwargs, grid in job.candidates:
        conn.send(("start", i))
        args = [copy_arg(a) for a in pristine]
        kwargs = {k: copy_arg(v) for k, v in pristine_kw.items()}
        named = dict(zip(job.arg_names, args), **kwargs)
        for n in job.reset_to_zero:
            tensor_of(named[n]).zero_()
        try:
            # the config's pre-hook, as the tuner runs it before every launch (it rebuilds descriptors)
            hook = _pre_hook(job, i, config_kwargs, configs)
            if hook is not None:
                hook({**named, **config_kwargs})
            jit[grid](*args, **kwargs, **config_kwargs)
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001
            conn.send(("fail", i, f"isolate: {one_line(exc)}"))
            if not _context_ok(torch):
                conn.send(("restart",))   # the context is poisoned: the parent starts a fresh worker for the rest
                conn.close()
                os._exit(3)
            continue
        why = None
        if job.validate:
            before = tensors_of(dict(zip(job.arg_names, pristine), **pristine_kw))
            outs = {n: t for n, t in tensors_of(named).items() if not torch.equal(t, before[n])}
            why = check_outputs(outs, reference, before, "the first good candidate")
            if why is None and reference is None:
                reference = outs
            why = f"isolate: {why}" if why else None
        conn.send(("fail", i, why) if why else ("ok", i))
    conn.send(("end",))
    conn.close()


def _context_ok(torch) -> bool:
    try:
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001
        return False
