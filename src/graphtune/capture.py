"""Capture detection, freeze, and the miss policy (which config a miss launches, or the error it raises).

Rule: while a CUDA graph is being captured, or after ``freeze()``, graphtune never benchmarks, synchronises
or allocates. A key that was not tuned then follows the policy: ``fallback`` launches the nearest tuned
bucket's config (else the declared default, else the first config; with isolation, never one recorded as
faulting) and records the miss; ``raise`` raises
``UntunedError`` before anything is enqueued.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable, Iterator, Sequence

import torch

from . import settings
from .errors import UntunedError
from .keys import key_to_json
from .state import STATE

POLICIES = ("fallback", "raise")


def cuda_available() -> bool:
    """Whether CUDA is usable in this process (asked once)."""
    ok = STATE.cuda_ok
    if ok is None:
        ok = STATE.cuda_ok = bool(torch.cuda.is_available())
    return ok


def on_gpu() -> bool:
    """Whether kernels run on the GPU here: CUDA is usable and Triton's interpreter is off."""
    return cuda_available() and not settings.interpret()


def simulate_capture(flag: bool | Callable[[], bool] | None) -> None:
    """Tests on CPU: pretend a capture is (True) or is not (False) in progress; None asks torch again."""
    STATE.capture_override = None if flag is None else (flag if callable(flag) else (lambda: bool(flag)))


def is_capturing() -> bool:
    """True while the current CUDA stream is capturing a graph."""
    override = STATE.capture_override
    if override is not None:
        return bool(override())
    return cuda_available() and torch.cuda.is_current_stream_capturing()


@contextlib.contextmanager
def timer_capture() -> Iterator[None]:
    """The timer captures a candidate's graph (timing.py) within this block: :func:`timer_graph` gives its number."""
    STATE.timer_graphs += 1
    STATE.timer_capturing = True
    try:
        yield
    finally:
        STATE.timer_capturing = False


def timer_graph() -> int | None:
    """While the timer captures a candidate's graph, the number of its graph captures so far, else None: state a
    pre-hook makes once and then reuses (an MLA decode plan's rows for a config's grid) must be made again in each of
    the timer's graphs, which are replayed one after another's; in any other capture (a server's step, a
    benchmark's) and outside one, once is right (a plan made before a server's graph is not made again in it)."""
    return STATE.timer_graphs if STATE.timer_capturing else None


def freeze() -> None:
    """From now on no kernel tunes: misses follow the policy, as inside capture (``graphtune.freeze`` checks
    settings and forces first: tuner.freeze)."""
    STATE.frozen = True


def unfreeze() -> None:
    STATE.frozen = False


def is_frozen() -> bool:
    return STATE.frozen


def set_policy(policy: str | None) -> None:
    """Process-wide miss policy (``fallback`` or ``raise``); None returns to GRAPHTUNE_POLICY / fallback."""
    if policy is not None and policy not in POLICIES:
        raise ValueError(f"set_policy(policy={policy!r}): expected one of {POLICIES} or None")
    STATE.policy = policy


def resolve_policy(kernel_policy: str | None) -> str:
    """Per-kernel ``policy=`` wins, then ``set_policy``, then GRAPHTUNE_POLICY, then ``fallback``."""
    return kernel_policy or STATE.policy or settings.policy() or "fallback"


def why_no_tuning() -> str | None:
    """``"capture"`` / ``"frozen"`` when tuning is not allowed now, else None."""
    if is_capturing():
        return "capture"
    if STATE.frozen:
        return "frozen"
    return None


def fallback_config(key: tuple, tuned: Iterable[tuple[tuple, Any]], distance: Callable[[tuple, tuple], float | None],
                    default: Any, configs: Sequence[Any], safe: Callable[[Any], bool] = lambda config: True
                    ) -> tuple[Any | None, str]:
    """The config a ``fallback`` miss launches and where it comes from: the nearest tuned bucket of the same
    non-bucketed key parts (``tuned``: (key, config) pairs; ``distance``: None when not comparable), else the
    declared ``default``, else the first of ``configs``; each only if ``safe`` (not recorded as faulting in an
    isolated launch), else the next. (None, "") when no config is safe."""
    best, best_d = None, None
    for k, config in tuned:
        d = distance(key, k)
        if d is None or not safe(config):
            continue
        # ties go to the larger bucket: servers pad batches up, so the larger bucket's config was tuned for at
        # least this much work
        if best_d is None or d < best_d or (d == best_d and k > best[0]):
            best, best_d = (k, config), d
    if best is not None:
        return best[1], f"nearest tuned bucket {list(key_to_json(best[0]))}"
    if default is not None and safe(default):
        return default, "declared default"
    first = next((c for c in configs if safe(c)), None)
    if first is None:
        return None, ""
    if first is configs[0]:
        return first, "first config"
    return first, "first config without a recorded isolation failure"


def untuned_error(name: str, key: tuple, key_names: tuple[str, ...], raw: tuple, where: str,
                  tuned: list[tuple]) -> UntunedError:
    shown = ", ".join(f"{n}={v}" for n, v in zip(key_names, raw))
    bucket = list(key_to_json(key))
    tuned_txt = "; ".join(str(list(key_to_json(k))) for k in tuned[:12]) or "none"
    if len(tuned) > 12:
        tuned_txt += f"; ... ({len(tuned)} in all)"
    place = "inside CUDA graph capture" if where == "capture" else "after graphtune.freeze()"
    return UntunedError(
        f"graphtune: kernel {name!r} has no tuned config for {shown} (key/bucket {bucket}) {place}; "
        f"tuning is not allowed there and the policy is 'raise'. Tuned keys: {tuned_txt}. "
        f"Remedy: warm this size up before capture (graphtune.warmup(fn, sizes, make_args) over every "
        f"captured batch size), load a tuning database/export that covers it, or use policy='fallback'.")
