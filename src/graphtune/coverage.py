"""Coverage records: per kernel, what was tuned (and from where), hit, missed inside capture or while frozen,
and which configs were excluded with their reasons. ``str(coverage)`` is a table; ``to_dict()`` is JSON-ready.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

from .keys import key_to_json


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
    # key -> {config, source, hits} (+ timings: the candidates as this process's search timed them)
    tuned: dict[tuple, dict[str, Any]] = field(default_factory=dict)
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
        console = Console(width=140, record=True, file=io.StringIO(), force_terminal=False)
        console.print(self.table())
        return console.export_text()
