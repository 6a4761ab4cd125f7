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
on the worker's own copy of the kernel), compiles, launches and synchronises. It reports
``start i`` / ``launch i`` (compiled, launching) / ``ok i`` / ``fail i reason`` through a pipe. Outputs are not
checked there: with ``validate`` the caller checks every candidate that launched safely, against one reference.
The worker dies with its parent (``PR_SET_PDEATHSIG``, else a watchdog thread), and its output goes to a file:
the last line of it joins the reason of a candidate it died or hung on (all of it is logged at DEBUG).

What is remembered (in the tuning database per kernel identity and environment, and on the kernel for this
process) is only what a candidate did while it ran: ``ok``; an exception it raised; the worker dying after it
started (its pre-hook, compile or launch); no answer within ``GRAPHTUNE_ISOLATE_TIMEOUT_S`` after its compile
finished. Problems of the worker itself fail the candidates for this search only, and are never remembered: a
worker that cannot start or load the kernel (a GPU out of memory next to a server), one that dies before
starting a candidate, a hang before the launch (a pre-hook, or a compile slowed down by a busy machine: the
compile is given ``_COMPILE_ALLOWANCE_S`` beyond the timeout). A fresh worker goes on with the rest after a
candidate kills one. Cost: one worker start (interpreter, torch, CUDA context, the kernel's module) per screened
key plus one compile and launch per unproven candidate; the compiled binaries land in Triton's on-disk cache,
which the caller then reuses.

Limits: the kernel must be importable by its module (defined at module level, not inside a function); the
worker imports that module, so its import must have no side effects that matter; a kernel defined in a script
(``__main__``) needs the script's work under ``if __name__ == "__main__":`` (the worker imports the script).
"""
from __future__ import annotations

import contextlib
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
from .configs import config_label, config_to_dict
from .descriptors import copy_arg, tensor_of
from .errors import ConfigError, one_line


@dataclass(frozen=True)
class KernelRef:
    """How a worker finds the kernel: module name, the file it came from, and the attribute path in it."""

    module: str
    path: str | None
    qualname: str


def kernel_ref(space_name: str, fn: Any) -> KernelRef:
    """Where a worker finds kernel ``space_name`` (its function ``fn``), else one ConfigError saying why a worker
    cannot import it: defined inside a function, in an interactive ``__main__`` or one read from no file
    (``python - < script.py``), or in a script that would run its work again in the worker (no
    ``if __name__ == "__main__":`` guard: the worker imports the script)."""
    base = fn
    while not callable(getattr(base, "__code__", None)) and hasattr(base, "fn"):
        base = base.fn
    qualname = getattr(base, "__qualname__", "")
    module = getattr(base, "__module__", "")
    if not qualname or "<locals>" in qualname or not module:
        raise ConfigError(f"kernel {space_name!r}: isolated evaluation needs a kernel defined at module level "
                          f"(it is {module}.{qualname}); define it in a module or turn isolation off")
    path = getattr(sys.modules.get(module), "__file__", None)
    if module == "__main__":
        if path is None or not os.path.isfile(path):
            raise ConfigError(f"kernel {space_name!r}: isolated evaluation cannot import a kernel defined in an "
                              f"interactive __main__ or one read from no file ({path or 'no file'}); define it in "
                              f"a module or turn isolation off")
        if not _guarded(path):
            raise ConfigError(f"kernel {space_name!r}: the script {path} has no `if __name__ == \"__main__\":` "
                              f"guard; the isolated worker imports the script, which would run its work again "
                              f"there: put the script's work under that guard")
    return KernelRef(module=module, path=path, qualname=qualname)


def _guarded(path: str) -> bool:
    """Whether the script at ``path`` has a top-level ``if __name__ == "__main__":`` (its work does not run when
    a worker imports it); a file that does not parse counts as guarded (its import fails in the worker, named)."""
    import ast
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
    except (OSError, SyntaxError, ValueError):
        return True
    for node in tree.body:
        test = node.test if isinstance(node, ast.If) else None
        if isinstance(test, ast.Compare) and len(test.comparators) == 1:
            names = {getattr(test.left, "id", None), getattr(test.comparators[0], "id", None)}
            values = {getattr(test.left, "value", None), getattr(test.comparators[0], "value", None)}
            if "__name__" in names and "__main__" in values:
                return True
    return False


@dataclass(frozen=True)
class Job:
    ref: KernelRef
    device: int
    args: tuple
    kwargs: dict[str, Any]
    candidates: tuple[tuple[int, dict[str, Any], tuple[int, ...]], ...]   # (index, config kwargs, grid)
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
    launched again; worker problems included, for this search only) and the outcomes to remember, by
    config_key: only what a candidate did while it ran (see the module's docstring)."""
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
              reset_to_zero=tuple(space.reset_to_zero), arg_names=tuple(space.arg_names), sys_path=tuple(sys.path),
              hooks={i: _pickled(candidates[i].pre_hook) for i in todo if candidates[i].pre_hook is not None})
    t0 = time.perf_counter()
    run = _run(job, settings.isolate_timeout_s())
    logger.info("graphtune: %s: %d candidate(s) launched first in worker processes in %.2f s, %d failed",
                space.name, len(todo), time.perf_counter() - t0, len(run.failures))
    for i in sorted(run.unproven):
        logger.warning("graphtune: %s: %s: %s", space.name, config_label(candidates[i]), run.failures[i])
    failures.update(run.failures)
    learnt = {config_key(candidates[i]): "ok" for i in run.ok}
    learnt.update({config_key(candidates[i]): why for i, why in run.failures.items() if i not in run.unproven})
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


@dataclass
class Run:
    """What the workers of one screening found: ``ok`` and ``failures`` by candidate index; ``unproven``: those
    of the failures that were the worker's problem, not the candidate's (reported, never remembered)."""

    ok: list[int] = field(default_factory=list)
    failures: dict[int, str] = field(default_factory=dict)
    unproven: set[int] = field(default_factory=set)

    def fail(self, i: int, why: str, proven: bool = True) -> None:
        self.failures[i] = why if proven else f"{why} (a problem of the worker, not of the config: not remembered)"
        if not proven:
            self.unproven.add(i)

    def done(self, i: int) -> bool:
        return i in self.failures or i in self.ok


# beyond GRAPHTUNE_ISOLATE_TIMEOUT_S: a worker's start (interpreter, torch, CUDA context), and a candidate's
# pre-hook and compile before its launch, which a busy machine can slow down
_START_ALLOWANCE_S = 60.0
_COMPILE_ALLOWANCE_S = 120.0


def _run(job: Job, timeout_s: float) -> Run:
    """Screen ``job.candidates`` in as many workers as it takes: a fresh one after a candidate kills or poisons
    one, none after a worker that ran no candidate (its problem is not a candidate's)."""
    ctx = multiprocessing.get_context("spawn")
    run = Run()
    remaining = list(job.candidates)
    while remaining:
        before = len(run.ok) + len(run.failures)
        why = _session(ctx, Job(**{**job.__dict__, "candidates": tuple(remaining)}), timeout_s, run)
        remaining = [c for c in remaining if not run.done(c[0])]
        if why is not None and remaining and len(run.ok) + len(run.failures) == before:
            for i, _, _ in remaining:
                run.fail(i, why, proven=False)
            remaining = []
    return run


def _session(ctx, job: Job, timeout_s: float, run: Run) -> str | None:
    """One worker over ``job.candidates``, its outcomes added to ``run``. Returns why the worker ended without
    running the rest (None: it ran them all, or asked to be restarted after a fault)."""
    import tempfile
    parent, child = ctx.Pipe(duplex=False)
    fd, output = tempfile.mkstemp(prefix="graphtune-isolate-", suffix=".log")
    os.close(fd)
    proc = ctx.Process(target=_entry, args=(_worker, child, job, output, os.getpid()), daemon=True,
                       name="graphtune-isolate")
    try:
        proc.start()
    except BaseException:
        # (a job that does not pickle, no memory to fork): its own error, not join()'s "can only join a started
        # process", and no output file left behind
        parent.close()
        child.close()
        with contextlib.suppress(OSError):
            os.unlink(output)
        raise
    try:
        child.close()
        current, phase, why = _listen(parent, proc, job, timeout_s, run)
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        parent.close()
        tail = _output_tail(output)
    if why is not None and tail:
        why = f"{why}; its last output: {tail}"
    if why is not None and current is not None:
        # a fault, a kill or an exit while the candidate ran is the candidate's; a hang is only once its compile
        # finished (a hang before may be a pre-hook or a slow compile on a busy machine)
        run.fail(current, why, proven=phase == "launch" or "no answer" not in why)
        return None
    return why


def _listen(parent, proc, job: Job, timeout_s: float, run: Run) -> tuple[int | None, str, str | None]:
    """Read the worker's reports into ``run`` until it ends. Returns the candidate it was running, its phase
    (``start``: pre-hook and compile; ``launch``) and why the worker broke off (None: it ended normally)."""
    current: int | None = None
    phase = ""
    deadline = time.monotonic() + timeout_s + _START_ALLOWANCE_S
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not parent.poll(min(left, 1.0)):
            if left <= 0:
                proc.kill()
                where = "" if phase == "launch" else (" before launching it (pre-hook or compile)" if current is not None
                                                      else " before it started a candidate")
                return current, phase, f"isolate: no answer within {timeout_s:g} s (GRAPHTUNE_ISOLATE_TIMEOUT_S)" \
                                       f"{where}: hung"
            if not proc.is_alive() and not parent.poll(0):
                proc.join(5)
                return current, phase, _died(proc, current)
            continue
        try:
            msg = parent.recv()
        except EOFError:
            proc.join(5)
            return current, phase, _died(proc, current)
        kind = msg[0]
        if kind == "start":
            current, phase = msg[1], "start"
            deadline = time.monotonic() + timeout_s + _COMPILE_ALLOWANCE_S
        elif kind == "launch":
            phase = "launch"
            deadline = time.monotonic() + timeout_s
        elif kind == "ok":
            run.ok.append(msg[1])
            current = None
        elif kind in ("fail", "unproven"):
            run.fail(msg[1], msg[2], proven=kind == "fail")
            current = None
        elif kind == "setup-failed":
            return None, "", f"isolate: the worker could not load the kernel: {msg[1]}"
        elif kind == "restart":
            return None, "", None
        elif kind == "end":
            missing = [i for i, _, _ in job.candidates if not run.done(i)]
            return None, "", ("isolate: the worker ended without running it" if missing else None)


def _died(proc, current: int | None) -> str:
    where = "" if current is not None else " before it started a candidate"
    return f"isolate: the worker process died{where} (exit code {proc.exitcode})"


def _output_tail(path: str) -> str:
    """The last non-empty line a worker wrote (at most 200 characters; all of it goes to the DEBUG log), and the
    file removed."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        os.unlink(path)
    except OSError:
        return ""
    if text.strip():
        logger.debug("graphtune: isolated worker output:\n%s", text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    return lines[-1] if len(lines[-1]) <= 200 else lines[-1][:197] + "..."


def _load_kernel(ref: KernelRef) -> tuple[Any, list[Any]]:
    """The kernel's JITFunction in this (worker) process, and the configs of the tuner wrapping it (their
    pre-hooks are this process's own functions: a hook never crosses the process boundary). A kernel of the
    parent's ``__main__`` script is taken from ``__mp_main__``, the script as ``multiprocessing`` already
    imported it here (importing it again by path would define its kernels twice)."""
    from triton.runtime.jit import JITFunction
    module = None
    if ref.module == "__main__":
        module = sys.modules.get("__mp_main__")
    elif ref.module in sys.modules:
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


def _entry(work, conn, job: Job, output: str, parent_pid: int) -> None:   # runs in the spawned process
    """The worker process: dies with its parent, writes its output to ``output`` (not the user's terminal),
    then runs ``work`` (``_worker``) over the job."""
    _die_with_parent(parent_pid)
    _redirect_output(output)
    work(conn, job)


def _die_with_parent(parent_pid: int) -> None:
    """Make this worker end when its parent does (a parent killed with SIGKILL would otherwise leave a hung
    worker holding its CUDA context and memory): ``PR_SET_PDEATHSIG`` on Linux, else a thread that watches the
    parent's pid."""
    import signal
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        armed = sys.platform.startswith("linux") and libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) == 0  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        armed = False
    if os.getppid() != parent_pid:   # the parent is already gone (before the signal was armed)
        os._exit(1)
    if not armed:
        import threading

        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGKILL)
        threading.Thread(target=watch, daemon=True, name="graphtune-isolate-watchdog").start()


def _redirect_output(path: str) -> None:
    """Send this process's stdout and stderr (file descriptors 1 and 2, so a crash report of the runtime too)
    to ``path``, line-buffered so nothing is lost when the process is killed."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    for stream, target in ((sys.stdout, 1), (sys.stderr, 2)):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):
            pass
        os.dup2(fd, target)
    os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)
        except (AttributeError, ValueError):
            pass


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
    for i, config_kwargs, grid in job.candidates:
        conn.send(("start", i))
        args = [copy_arg(a) for a in pristine]
        kwargs = {k: copy_arg(v) for k, v in pristine_kw.items()}
        named = dict(zip(job.arg_names, args), **kwargs)
        for n in job.reset_to_zero:
            tensor_of(named[n]).zero_()
        try:
            hook = _pre_hook(job, i, config_kwargs, configs)
        except ConfigError as exc:   # the worker cannot run it as the caller would: no verdict on the config
            conn.send(("unproven", i, f"isolate: {one_line(exc)}"))
            continue
        try:
            # the config's pre-hook, as the tuner runs it before every launch (it rebuilds descriptors)
            if hook is not None:
                hook({**named, **config_kwargs})
            if hasattr(jit, "warmup"):
                jit.warmup(*args, grid=grid, **kwargs, **config_kwargs)   # compiled: the launch alone is timed
            conn.send(("launch", i))
            jit[grid](*args, **kwargs, **config_kwargs)
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001
            conn.send(("fail", i, f"isolate: {one_line(exc)}"))
            if not _context_ok(torch):
                conn.send(("restart",))   # the context is poisoned: the parent starts a fresh worker for the rest
                conn.close()
                os._exit(3)
            continue
        conn.send(("ok", i))
    conn.send(("end",))
    conn.close()


def _context_ok(torch) -> bool:
    try:
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001
        return False
