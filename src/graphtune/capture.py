"""Capture detection, the miss policy, freeze, and coverage records.

Rule: while a CUDA graph is being captured, or after ``freeze()``, graphtune never benchmarks, synchronises
or allocates. A key that was not tuned then follows the policy: ``fallback`` launches the nearest tuned
bucket's config (else the declared default, else the first config) and records the miss; ``raise`` raises
``UntunedError`` before anything is enqueued.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from . import settings
from .errors import UntunedError
from .keys import key_to_json

POLICIES = ("fallback", "raise")

_state_lock = threading.Lock()
_frozen = False
_policy: str | None = None
_cuda_ok: bool | None = None
# Tests on CPU set this to pretend a capture is in progress; production leaves it None so the real
# torch.cuda.is_current_stream_capturing() is asked.
_capture_override: Callable[[], bool] | None = None


def _cuda_available() -> bool:
    global _cuda_ok
    if _cuda_ok is None:
        _cuda_ok = bool(torch.cuda.is_available())
    return _cuda_ok


def is_capturing() -> bool:
    """True while the current CUDA stream is capturing a graph."""
    if _capture_override is not None:
        return bool(_capture_override())
    return _cuda_available() and torch.cuda.is_current_stream_capturing()


def freeze() -> None:
    """From now on no kernel tunes: misses follow the policy, as inside capture."""
    global _frozen
    _frozen = True


def unfreeze() -> None:
    global _frozen
    _frozen = False


def is_frozen() -> bool:
    return _frozen


def set_policy(policy: str | None) -> None:
    """Process-wide miss policy (``fallback`` or ``raise``); None returns to GRAPHTUNE_POLICY / fallback."""
    global _policy
    if policy is not None and policy not in POLICIES:
        raise ValueError(f"set_policy(policy={policy!r}): expected one of {POLICIES} or None")
    _policy = policy


def resolve_policy(kernel_policy: str | None) -> str:
    """Per-kernel ``policy=`` wins, then ``set_policy``, then GRAPHTUNE_POLICY, then ``fallback``."""
    return kernel_policy or _policy or settings.policy() or "fallback"


def why_no_tuning() -> str | None:
    """``"capture"`` / ``"frozen"`` when tuning is not allowed now, else None."""
    if is_capturing():
        return "capture"
    if _frozen:
        return "frozen"
    return None


# ---------------------------------------------------------------------------------------------- coverage


@dataclass
class MissRecord:
    key: tuple
    where: str            # "capture" or "frozen"
    action: str           # "fallback" or "raise"
    fallback: str | None  # label of the config launched, when action == "fallback"
    fallback_from: str    # "bucket <key>", "default", "first config", or "" for raise
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"key": list(key_to_json(self.key)), "where": self.where, "action": self.action,
                "fallback": self.fallback, "fallback_from": self.fallback_from, "count": self.count}


@dataclass
class KernelCoverage:
    name: str
    tuned: dict[tuple, dict[str, Any]] = field(default_factory=dict)   # key -> {config, source, hits}
    misses: dict[tuple, MissRecord] = field(default_factory=dict)
    excluded: dict[tuple, list[dict[str, Any]]] = field(default_factory=dict)  # key -> [{config, reason}]
    forced: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "forced": self.forced,
            "tuned": [{"key": list(key_to_json(k)), **v} for k, v in self.tuned.items()],
            "misses": [m.to_dict() for m in self.misses.values()],
            "excluded": [{"key": list(key_to_json(k)), "configs": v} for k, v in self.excluded.items()],
        }


@dataclass
class Coverage:
    """What every kernel tuned, hit and missed. ``str(coverage)`` is a table; ``to_dict()`` is JSON-ready."""

    kernels: dict[str, KernelCoverage]

    def to_dict(self) -> dict[str, Any]:
        return {"kernels": [k.to_dict() for k in self.kernels.values()],
                "total_misses": sum(m.count for k in self.kernels.values() for m in k.misses.values())}

    @property
    def misses(self) -> list[tuple[str, MissRecord]]:
        return [(k.name, m) for k in self.kernels.values() for m in k.misses.values()]

    def table(self):
        from rich.table import Table
        t = Table(title="graphtune coverage")
        for col in ("kernel", "key", "config", "source", "hits", "miss"):
            t.add_column(col)
        for kc in self.kernels.values():
            for key, info in kc.tuned.items():
                t.add_row(kc.name, str(list(key_to_json(key))), info["config"], info["source"], str(info["hits"]), "")
            for m in kc.misses.values():
                t.add_row(kc.name, str(list(key_to_json(m.key))), m.fallback or "-", m.fallback_from or m.action,
                          "", f"{m.where} x{m.count} ({m.action})")
            for key, rows in kc.excluded.items():
                for row in rows:
                    t.add_row(kc.name, str(list(key_to_json(key))), row["config"], "excluded", "",
                              row["reason"])
        return t

    def __str__(self) -> str:
        from rich.console import Console
        console = Console(width=140, record=True, file=open("/dev/null", "w"), force_terminal=False)
        console.print(self.table())
        return console.export_text()


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
