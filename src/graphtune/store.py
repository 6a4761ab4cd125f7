"""A kernel's stored results: what the loaded exports and the database hold for it, and recording a result.

The one place that turns tuning rows into database records (``entry_from_rows``) and database records back into
``(config dict, source, median)`` for the tuner. A broken store never stops a server: reads and records that
fail are logged and the process goes on without them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import triton

from ._log import logger
from .configs import config_to_dict
from .identity import KernelIdentity, current_env
from .keys import key_to_json


@dataclass(frozen=True)
class Stored:
    """A stored choice for one key: the config (as a dict), where it came from, its stored median."""

    chosen: dict[str, Any]
    source: str              # "loaded" (an export file read by graphtune.load) or "database"
    median_ms: float | None
    host: str


def entry_from_rows(kernel: KernelIdentity, key: tuple, chosen: triton.Config, rows: Sequence[dict[str, Any]],
                    rank: int):
    """A database Entry for ``key`` from tuning rows (``search.TuneResult.rows`` form)."""
    from .db import CandidateResult, new_entry
    cands = [CandidateResult(config=r["config"], median_ms=r.get("median_ms"), p20_ms=r.get("p20_ms"),
                             p80_ms=r.get("p80_ms"), n=int(r.get("n") or 0), failure=r.get("failure"),
                             resources=r.get("resources")) for r in rows]
    return new_entry(kernel, current_env(), key_to_json(key), config_to_dict(chosen), cands, rank=rank)


def load_for(kernel: KernelIdentity, name: str) -> dict[tuple, Stored]:
    """Everything stored for this kernel identity in this environment, by JSON key: the database, then the
    loaded export files (which win)."""
    try:
        from . import db as dbmod
        env = current_env()
        out: dict[tuple, Any] = {}
        database = dbmod.get_db()
        if database is not None:
            out.update(database.load_kernel(kernel, env))
        out.update(dbmod.loaded_entries(kernel, env))
        return {tuple(k): _stored(e) for k, e in out.items()}
    except Exception as exc:  # noqa: BLE001 - a broken store must never stop a server
        logger.warning("graphtune: could not read stored results for %s: %s", name, exc)
        return {}


def _stored(entry: Any) -> Stored:
    return Stored(chosen=dict(entry.chosen), source="loaded" if entry.source == "loaded" else "database",
                  median_ms=entry.chosen_median_ms, host=entry.host)


def record(kernel: KernelIdentity, name: str, key: tuple, chosen: triton.Config, rows: Sequence[dict[str, Any]],
           rank: int) -> Stored | None:
    """Record a tuned result in the process-wide database; the stored form, or None when nothing was written
    (no database, or a write that failed: logged, never raised on the serving path)."""
    try:
        from . import db as dbmod
        database = dbmod.get_db()
        if database is None:
            return None
        entry = entry_from_rows(kernel, key, chosen, rows, rank)
        database.record(entry)
        return _stored(entry)
    except Exception as exc:  # noqa: BLE001
        logger.warning("graphtune: could not record result for %s %s: %s", name, list(key_to_json(key)), exc)
        return None


def isolated_outcomes(kernel: KernelIdentity) -> dict[str, str]:
    """Config (isolate.config_key) -> outcome ("ok" or the failure) of this kernel's configs already launched in
    an isolated worker on this device and software stack."""
    try:
        from . import db as dbmod
        database = dbmod.get_db()
        return database.isolated_configs(kernel, current_env()) if database is not None else {}
    except Exception as exc:  # noqa: BLE001
        logger.warning("graphtune: could not read isolated outcomes of %s: %s", kernel.name, exc)
        return {}


def record_isolated(kernel: KernelIdentity, outcomes: dict[str, str]) -> None:
    if not outcomes:
        return
    try:
        from . import db as dbmod
        database = dbmod.get_db()
        if database is not None:
            database.record_isolated(kernel, current_env(), outcomes)
    except Exception as exc:  # noqa: BLE001
        logger.warning("graphtune: could not remember isolated outcomes of %s: %s", kernel.name, exc)
