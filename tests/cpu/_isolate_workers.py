"""Stand-ins for isolate._worker (no GPU on the CPU machine): they speak the worker's protocol and fail the way
a faulting or hanging kernel makes a real worker fail."""
from __future__ import annotations

import os
import time


def dies_on_bad(conn, job) -> None:
    for i, config, grid in job.candidates:
        conn.send(("start", i))
        if config.get("BAD"):
            os._exit(9)          # what a fault that kills the process looks like from the parent
        conn.send(("ok", i))
    conn.send(("end",))


def hangs_on_bad(conn, job) -> None:
    for i, config, grid in job.candidates:
        conn.send(("start", i))
        if config.get("BAD"):
            time.sleep(3600)
        conn.send(("ok", i))
    conn.send(("end",))


def poisoned_after_bad(conn, job) -> None:
    """A real worker after a fault: reports it, says its context is gone, and exits."""
    for i, config, grid in job.candidates:
        conn.send(("start", i))
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
        conn.send(("fail", i, "isolate: RuntimeError: Triton Error [CUDA]: an illegal memory access")
                  if config.get("BAD") else ("ok", i))
    conn.send(("end",))
