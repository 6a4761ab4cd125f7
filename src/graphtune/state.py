"""All process-wide mutable state of graphtune, in one place, with one ``reset()`` and a ``scope()`` for tests.

Everything else is either immutable (settings are read from the environment when used), or belongs to one
object (a kernel's tuned choices live on that kernel; a database's connections on that database). What a
process accumulates across objects lives here:

==========================  ================================================================================
field                       what
==========================  ================================================================================
``kernels``                 kernel name -> the graphtune kernels defined under it (definitions, not results)
``forces``                  ``graphtune.force()`` pins: name -> parameters
``force_gen``               bumped whenever a force may have changed; kernels re-resolve when it moved
``frozen``                  ``graphtune.freeze()``: no kernel tunes from now on
``policy``                  ``set_policy()``; None: GRAPHTUNE_POLICY, then ``fallback``
``capture_override``        tests on CPU pretend a capture is in progress (None: ask torch)
``cuda_ok``                 whether CUDA is usable, asked once
``agreement``               (process group, mode) of ``set_process_group``
``agreement_seq``           process group -> agreements entered so far (the same on every rank)
``db``, ``db_spec``         the process-wide tuning database and the (path, read-only) it was opened with
``loaded``                  entries of export files read by ``graphtune.load``
``env_cache``               the environment identity per (interpreter, device)
``stock_run``               the stock ``Autotuner.run`` while ``patch_triton()`` is active
``overrides``               settings set in code (``settings.override``); they win over the environment
``warned``                  once-per-process warnings already given (Inductor bypassing a stock kernel, a
                            database problem)
``compile_hooks``           what ``patch_triton()``'s torch.compile hooks replaced, restored by ``unpatch_triton()``
==========================  ================================================================================

``reset()`` returns every field to its start value except ``kernels`` (kernels defined at import stay defined;
their in-memory results are forgotten) and the patch with its hooks (``unpatch_triton()`` owns them).
"""
from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator


@dataclass
class State:
    kernels: dict[str, list[Any]] = field(default_factory=dict)
    forces: dict[str, dict[str, Any]] = field(default_factory=dict)
    force_gen: int = 0
    frozen: bool = False
    policy: str | None = None
    capture_override: Callable[[], bool] | None = None
    cuda_ok: bool | None = None
    agreement: tuple[Any, str] = (None, "merge")
    agreement_seq: dict[Any, int] = field(default_factory=dict)
    db: Any = None
    db_spec: tuple | None = None
    loaded: dict[tuple, dict[tuple, Any]] = field(default_factory=dict)
    env_cache: dict[tuple[bool, int], Any] = field(default_factory=dict)
    stock_run: Any = None
    overrides: dict[str, str] = field(default_factory=dict)
    warned: set[str] = field(default_factory=set)
    compile_hooks: dict[str, Any] = field(default_factory=dict)
    # the timer's graph captures begun so far, and whether one is in progress (capture.timer_graph): work a pre-hook
    # skips once made (an MLA decode plan's fill) is made again in each, since the timer replays one candidate's
    # graph after another's
    timer_graphs: int = 0
    timer_capturing: bool = False
    # one lock for the fields above; kernels have their own lock for their own results
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)


STATE = State()


def reset() -> None:
    """Forget everything this process accumulated (tests): results held by every kernel, forces, freeze,
    policy, capture simulation, agreement settings, the open database, loaded exports, caches, overrides."""
    with STATE.lock:
        kernels = [k for ks in STATE.kernels.values() for k in ks]
        database = STATE.db
        STATE.forces.clear()
        STATE.force_gen += 1
        STATE.frozen = False
        STATE.policy = None
        STATE.capture_override = None
        STATE.cuda_ok = None
        STATE.agreement = (None, "merge")
        STATE.agreement_seq.clear()
        STATE.db, STATE.db_spec = None, None
        STATE.loaded.clear()
        STATE.env_cache.clear()
        STATE.overrides.clear()
        STATE.warned.clear()
    for k in kernels:
        k.reset()
    if database is not None:
        database.close()


@contextlib.contextmanager
def scope() -> Iterator[State]:
    """``with scope():`` runs its body from a clean state and leaves a clean state behind."""
    reset()
    try:
        yield STATE
    finally:
        reset()


def _after_fork_in_child() -> None:
    # a lock held by another thread at fork time would never be released in the child
    STATE.lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
