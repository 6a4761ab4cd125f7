"""Stand-ins for isolate._worker (no GPU on the CPU machine): they speak the worker's protocol and fail the way
a faulting or hanging kernel makes a real worker fail. Also ``real_worker_on_cpu``: isolate._worker itself, run
in the spawned worker with its CUDA calls stubbed and the kernel run by Triton's interpreter, and a kernel whose
configs' pre-hooks fault in a worker the ways a GPU fault does (in the test process itself they only record that
they ran there, which a test asserts never happens)."""
from __future__ import annotations

import multiprocessing
import os
import signal
import time

import triton
import triton.language as tl

# ----------------------------------------------------------------------------------------- protocol stand-ins


def dies_on_bad(conn, job) -> None:
    for i, config, grid in job.candidates:
        conn.send(("start", i))
        conn.send(("launch", i))
        if config.get("BAD"):
            os._exit(9)          # what a fault that kills the process looks like from the parent
        conn.send(("ok", i))
    conn.send(("end",))


def hangs_on_bad(conn, job) -> None:
    """Compiles, then the launch of a bad one never returns."""
    for i, config, grid in job.candidates:
        conn.send(("start", i))
        conn.send(("launch", i))
        if config.get("BAD"):
            time.sleep(3600)
        conn.send(("ok", i))
    conn.send(("end",))


def hangs_before_launch_on_bad(conn, job) -> None:
    """A bad one never finishes compiling (a busy machine, a stuck compiler): no verdict on the config."""
    for i, config, grid in job.candidates:
        conn.send(("start", i))
        if config.get("BAD"):
            time.sleep(3600)
        conn.send(("launch", i))
        conn.send(("ok", i))
    conn.send(("end",))


def poisoned_after_bad(conn, job) -> None:
    """A real worker after a fault: reports it, says its context is gone, and exits."""
    for i, config, grid in job.candidates:
        conn.send(("start", i))
        conn.send(("launch", i))
        if config.get("BAD"):
            conn.send(("fail", i, "isolate: AcceleratorError: CUDA error: an illegal memory access"))
            conn.send(("restart",))
            conn.close()
            os._exit(3)
        conn.send(("ok", i))
    conn.send(("end",))


def reports_bad(conn, job) -> None:
    for i, config, grid in job.candidates:
        conn.send(("start", i))
        conn.send(("launch", i))
        conn.send(("fail", i, "isolate: RuntimeError: Triton Error [CUDA]: an illegal memory access")
                  if config.get("BAD") else ("ok", i))
    conn.send(("end",))


def cannot_load(conn, job) -> None:
    """A worker started next to a server that holds the GPU's memory."""
    conn.send(("setup-failed", "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB"))


def dies_at_start(conn, job) -> None:
    os._exit(9)


def noisy_dies_on_bad(conn, job) -> None:
    """Prints 20 lines from a bad candidate, then segfaults."""
    for i, config, grid in job.candidates:
        conn.send(("start", i))
        conn.send(("launch", i))
        if config.get("BAD"):
            for n in range(20):
                print(f"noise line {n}", flush=True)
            os.kill(os.getpid(), signal.SIGSEGV)
        conn.send(("ok", i))
    conn.send(("end",))


def writes_pid_and_hangs(conn, job) -> None:
    """Writes its pid to $ISOLATE_TEST_PIDFILE, then hangs in its first candidate."""
    with open(os.environ["ISOLATE_TEST_PIDFILE"], "w") as fh:
        fh.write(str(os.getpid()))
    conn.send(("start", job.candidates[0][0]))
    time.sleep(3600)


# --------------------------------------------------------------------------------- the real worker on the CPU


def real_worker_on_cpu(conn, job) -> None:
    """isolate._worker itself in the spawned process: CUDA calls stubbed, the arguments kept on the CPU, the
    kernel (defined with TRITON_INTERPRET=1, inherited from the tests) run by Triton's interpreter."""
    import importlib

    import torch

    from graphtune import isolate
    # imported at the first launch otherwise, after _worker unset TRITON_INTERPRET, and then built for the GPU,
    # which the interpreter's launch cannot use
    importlib.import_module("triton.experimental.gluon")
    torch.cuda.set_device = lambda device: None
    torch.cuda.synchronize = lambda *a, **k: None
    copy = isolate.copy_arg
    isolate.copy_arg = lambda value, device=None: copy(value, None if device is None else "cpu")
    isolate._context_ok = lambda torch: True
    isolate._load_kernel = _load_interpreted
    isolate._worker(conn, job)


def _load_interpreted(ref):
    import importlib

    from triton.runtime.interpreter import InterpretedFunction
    obj = importlib.import_module(ref.module)
    for part in ref.qualname.split("."):
        obj = getattr(obj, part)
    while not isinstance(obj, InterpretedFunction):
        obj = obj.fn
    return obj, []


LAUNCHED_HERE: list[tuple[str, int]] = []   # (fault, BLOCK) of faulting configs launched in the test process


def _in_worker() -> bool:
    return multiprocessing.current_process().name == "graphtune-isolate"


def _fault(kind: str, block: int) -> None:
    if not _in_worker():
        LAUNCHED_HERE.append((kind, block))
    elif kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif kind == "exit":
        os._exit(7)
    elif kind == "hang":
        time.sleep(3600)


def kills(nargs) -> None:
    _fault("kill", nargs["BLOCK"])


def segfaults(nargs) -> None:
    _fault("segv", nargs["BLOCK"])


def exits(nargs) -> None:
    _fault("exit", nargs["BLOCK"])


def hangs(nargs) -> None:
    _fault("hang", nargs["BLOCK"])


@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, WRONG: tl.constexpr):
    """out = 2 * x (3 * x with WRONG=1: a config that computes wrong values without faulting)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if WRONG:
        tl.store(out_ptr + offs, x * 3.0, mask=mask)
    else:
        tl.store(out_ptr + offs, x * 2.0, mask=mask)


def config(block: int, hook=None, wrong: int = 0) -> triton.Config:
    return triton.Config({"BLOCK": block, "WRONG": wrong}, num_warps=1, pre_hook=hook)
