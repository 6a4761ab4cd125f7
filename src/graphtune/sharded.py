"""Sharded offline tuning (``tune_sharded``, ``graphtune tune MODULE:TARGET``) and its export.

The (bucket, config) pairs are dealt round-robin to the ranks of the agreement group, each rank times its share
(``search.time_candidates``), the rows are all-gathered, every rank installs the argmin of each bucket, and rank 0
writes the export file and / or the database. Run alone it does the same work in one process.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

from . import capture
from ._log import logger
from .agreement import Header, active_group, digest, gather_bytes, gather_headers, init_from_env
from .configs import config_label, config_to_dict
from .errors import DatabaseError, UserCodeError, one_line
from .keys import key_to_json
from .search import all_failed_error, candidate_indices, time_candidates
from .store import entry_from_rows
from .tuner import GraphtuneKernel

__all__ = ["TuneTarget", "TunedBucket", "tune_sharded"]


@runtime_checkable
class TuneTarget(Protocol):
    """What ``graphtune tune MODULE:TARGET`` tunes: a kernel, the sizes to tune by default, and the arguments
    of one launch per size. ``make_args(size) -> (args, kwargs, grid)``; each bucket is tuned on the arguments
    of the first size that maps to it."""

    kernel: GraphtuneKernel
    default_sizes: Sequence[int]

    def make_args(self, size: int) -> tuple[tuple, dict, Any]: ...


@dataclass(frozen=True)
class TunedBucket:
    """The config chosen for one bucket by sharded tuning, and every candidate's row."""

    key: tuple                          # as stored: dtypes as text
    sizes: tuple[int, ...]              # the requested sizes that map to this bucket
    config: dict[str, Any]
    label: str
    median_ms: float | None
    candidates: tuple[dict[str, Any], ...]   # index, config, median_ms/p20_ms/p80_ms/n or failure, rank

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class _Bucket:
    key: tuple
    sizes: list[int]
    indices: list[int]   # candidate config indices (after the kernel's pruning)


def check_target(target: Any, spec: str | None = None) -> None:
    """A TypeError unless ``target`` has a graphtune kernel and a callable make_args. ``spec``, the MODULE:ATTR
    it was loaded from, is named in the message when given (the object alone, ``5``, says little)."""
    name = f"tune target {spec} ({target!r})" if spec else f"tune target {target!r}"
    missing = [a for a in ("kernel", "make_args") if not hasattr(target, a)]
    if missing or not callable(getattr(target, "make_args", None)):
        raise TypeError(f"{name} lacks {missing or ['a callable make_args']}: it needs kernel (a "
                        f"GraphtuneKernel), default_sizes and make_args(size) -> (args, kwargs, grid)")
    if not isinstance(target.kernel, GraphtuneKernel):
        raise TypeError(f"{name}: kernel is {target.kernel!r}, not a GraphtuneKernel (decorate it "
                        f"with graphtune.autotune)")


def _check_sizes(sizes: Sequence[Any]) -> list[int]:
    out = []
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, int) or s < 1:
            raise ValueError(f"sizes must be ints >= 1, got {s!r} in {list(sizes)}")
        out.append(s)
    if not out:
        raise ValueError("tune_sharded: no sizes to tune")
    return out


def _make_args(target: TuneTarget, size: int) -> tuple[tuple, dict, Any]:
    try:
        made = target.make_args(size)
    except Exception as exc:  # noqa: BLE001 - user code: name it and the size it failed on
        raise UserCodeError(f"{type(target).__name__}.make_args({size}) raised {one_line(exc)}") from exc
    if not isinstance(made, (tuple, list)) or len(made) != 3:
        raise TypeError(f"{type(target).__name__}.make_args({size}) returned {type(made).__name__}; expected "
                        f"(args, kwargs, grid)")
    args, kwargs, grid = made
    return tuple(args), dict(kwargs or {}), grid


def _time_share(kernel: GraphtuneKernel, args: tuple, kwargs: dict, grid, indices: list[int]) -> list[dict]:
    known = kernel.isolation_outcomes() if kernel.space.isolating else None
    rows, learnt = time_candidates(kernel.space, args, kwargs, grid, indices, isolated=known)
    kernel.remember_isolated(learnt)
    for pos, row in enumerate(rows):
        if "failure" not in row and row.get("median_ms") is None:
            # a single survivor may be left unsampled (nothing to compare it with here), but the other ranks'
            # candidates are its rivals: time it paired with itself.
            rows[pos] = time_candidates(kernel.space, args, kwargs, grid, [indices[pos], indices[pos]],
                                        isolated=known)[0][0]
    return rows


def tune_sharded(target: TuneTarget, sizes: Sequence[int] | None = None, *, out: str | os.PathLike | None = None,
                 db: bool | str | os.PathLike = False) -> dict[tuple, TunedBucket]:
    """Tune ``target.kernel`` for every bucket the ``sizes`` (default ``target.default_sizes``) map to.

    Under a process group of several ranks (the one of ``set_process_group``, else the default group,
    initialised from torchrun's environment when needed) the (bucket, config) pairs are dealt round-robin
    to the ranks; every rank installs every bucket's winner; rank 0 writes ``out`` (an export file in the
    format of ``graphtune db export``) and, with ``db`` (True: the default database; a path: that file), records
    the entries in the database. Returns {key: TunedBucket} in the order of ``sizes``."""
    check_target(target)
    kernel = target.kernel
    sizes = _check_sizes(list(sizes) if sizes is not None else list(getattr(target, "default_sizes", ())))
    if capture.why_no_tuning() is not None:
        raise RuntimeError(f"tune_sharded({kernel.name!r}) inside CUDA graph capture or while frozen")
    database = _database(db)   # before any timing: a read-only database must not cost a tuning run
    if out is not None:
        # and a file an export must not replace (the database, another file, not a regular file): refused now,
        # not after the run (the export is written first, so a refusal then would lose the database's copy too)
        from .db import export_target
        export_target(out, database.path if database is not None else None, origin="out")
    init_from_env()
    group = active_group(sharding=True)
    rank, world = (group.rank, group.world) if group is not None else (0, 1)
    t0 = time.perf_counter()

    buckets: list[_Bucket] = []
    by_key: dict[tuple, _Bucket] = {}
    rows: list[dict[str, Any]] = []
    dealt = 0   # items (bucket, config) dealt so far, in the same order on every rank
    try:
        for size in sizes:
            args, kwargs, grid = _make_args(target, size)
            key = kernel.key_of(args, kwargs)
            if key in by_key:
                by_key[key].sizes.append(size)
                continue
            bucket = _Bucket(key, [size], candidate_indices(kernel.space, args, kwargs))
            by_key[key] = bucket
            buckets.append(bucket)
            mine = [i for j, i in enumerate(bucket.indices) if (dealt + j) % world == rank]
            dealt += len(bucket.indices)
            if mine:
                logger.info("graphtune: rank %d times %d of %d configs of %s for %s", rank, len(mine),
                            len(bucket.indices), kernel.name, list(key_to_json(key)))
                for row in _time_share(kernel, args, kwargs, grid, mine):
                    rows.append({**row, "bucket": len(buckets) - 1, "rank": rank})
            del args, kwargs   # free this size's inputs before the next make_args (GPU memory)
    except Exception as exc:
        if group is not None:
            # the peers' next collective is the plan's: meet it with this rank's failure, so that they raise now,
            # naming it, instead of waiting for this rank until the timeout (this rank raises its own error)
            what = f"sharded tuning of kernel {kernel.name!r} failed here: {one_line(exc)}"
            with contextlib.suppress(Exception):
                gather_headers(group, Header(digest("sharded-failed", kernel.name, rank), 0, 0, 0, 0, math.nan,
                                             what), what)
        raise

    if group is not None:
        plan = [(list(key_to_json(b.key)), b.indices) for b in buckets]
        what = f"sharded tuning of kernel {kernel.name!r} ({len(buckets)} buckets, {dealt} timings)"
        dg = digest("sharded", kernel.name, plan, [config_to_dict(c) for c in kernel.configs],
                    kernel.identity().source_hash)
        gather_headers(group, Header(dg, 0, len(buckets), dealt, 0, math.nan, what), what)
        rows = [r for blob in gather_bytes(group, json.dumps(rows).encode(), what) for r in json.loads(blob)]

    results: dict[tuple, TunedBucket] = {}
    entries = []
    for b, bucket in enumerate(buckets):
        mine = sorted((r for r in rows if r["bucket"] == b), key=lambda r: r["index"])
        found = {r["index"] for r in mine}
        assert found == set(bucket.indices), f"rows for {sorted(found)}, expected {bucket.indices}"
        timed = [r for r in mine if "failure" not in r and r.get("median_ms") is not None]
        if not timed:
            raise all_failed_error(kernel.name, bucket.key, mine)
        best = min(timed, key=lambda r: (r["median_ms"], r["index"]))
        config = kernel.configs[best["index"]]
        candidates = tuple({k: v for k, v in r.items() if k != "bucket"} for r in mine)
        kernel.install(bucket.key, config, [dict(r) for r in candidates], source="tuned", record=False)
        key_json = key_to_json(bucket.key)
        results[key_json] = TunedBucket(key=key_json, sizes=tuple(bucket.sizes), config=config_to_dict(config),
                                        label=config_label(config), median_ms=best["median_ms"],
                                        candidates=candidates)
        entries.append(entry_from_rows(kernel.identity(), bucket.key, config, mine, rank=0))
    logger.info("graphtune: tuned %s for %d buckets on %d rank(s) in %.2f s", kernel.name, len(buckets), world,
                time.perf_counter() - t0)
    if rank == 0:
        _write(kernel, entries, out, database)
    return results


def _database(db: bool | str | os.PathLike | None) -> Any:
    """The database ``tune_sharded(db=...)`` records in (None: none); a read-only one is an error."""
    if db is False or db is None:
        return None
    from .db import TuningDB
    store = TuningDB(None if db is True else db)
    if store.readonly:
        raise DatabaseError(f"tuning database {store.path} is read-only (GRAPHTUNE_DB_READONLY=1): tuned results "
                            f"could not be recorded; unset it or write an export file instead")
    store.check_writable()   # a directory, a read-only file, another program's file: an error before any timing
    return store


def _write(kernel: GraphtuneKernel, entries: list, out: str | os.PathLike | None, database: Any) -> None:
    from .db import TuningDB
    if out is not None:
        # the export format is the database's: go through a private database so the file is written by
        # the same code as `graphtune db export`
        with tempfile.TemporaryDirectory(prefix="graphtune-export-") as tmp:
            scratch = TuningDB(Path(tmp) / "export.sqlite", readonly=False)
            scratch.record_all(entries)   # raises, where record() would only warn and export too little
            scratch.export(out, kernel=kernel.name)
            scratch.close()
        logger.info("graphtune: wrote %d entries of %s to %s", len(entries), kernel.name, out)
    if database is not None:
        # After the export file, so a database that fails now does not lose what --out keeps. record_all raises
        # DatabaseError naming the file and the cause (record() only warns: that is for the serving path).
        try:
            database.record_all(entries)
        finally:
            database.close()
        logger.info("graphtune: recorded %d entries of %s in %s", len(entries), kernel.name, database.path)
