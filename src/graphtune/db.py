"""The tuning database: every tuning result, kept in SQLite, shared by the processes of a host, exported as JSON.

One row per (kernel identity, environment identity, tuning key) holds every candidate's timing, the chosen
config, and when and where it was tuned. A process reads a kernel's rows with one query on that kernel's
first miss and applies only rows whose full identity matches it; other rows stay and are listed as stale.

Several tensor-parallel ranks write at once: the file is in WAL mode, writes are short ``BEGIN IMMEDIATE``
transactions retried while the database is busy, and a process never reuses a connection across ``fork``.
A damaged file of graphtune's is moved aside (never deleted) and a fresh one started: a cache must not stop a
server. Any other file is never touched (see "Whose file is it" below).

Whose file is it. graphtune stamps every database it creates with SQLite's ``application_id`` (bytes 68-71 of
the file header, ``_APPLICATION_ID``) in the same transaction that creates its tables, so a file is either
empty or carries the stamp. A file counts as graphtune's when its header carries the stamp, or (files created
before the stamp existed) when its application_id is 0 and its first page, or the start of its ``-wal`` file,
holds graphtune's schema; such a file is stamped on its next writable open. Everything else (another
program's SQLite database, an SQLite database with no tables, a text file, random bytes, a directory, a FIFO or
a device) is left exactly as it is: the database is turned off with an error naming the file and the setting
that pointed there (GRAPHTUNE_DB or --db). A file whose first 100 bytes are destroyed has no header left to carry the
stamp: even when graphtune's schema text is still inside, it is left in place and the error says so, because
moving a file on a guess could move another program's data; the person who knows it is theirs can move it.
A zero-length file is adopted (it holds nothing, and it is what a concurrent creator leaves for an instant).
A file this process may not open or write where it is (a read-only directory, file or mount) is not damaged:
the database is turned off with an error saying so (GRAPHTUNE_DB_READONLY=1 reads it), and the file stays.
Opening a database whose schema is current writes nothing, so a process that only reads never waits for one
that writes (in WAL mode readers are not blocked).

An export is written only where it replaces nothing a user tuned (``export_target``): never over the database
itself, a file that is not a graphtune export, or a path that is not a regular file; through a symlink it
replaces the link's target and keeps the link.

Failed writes are visible to whoever needs to know: ``check_writable`` and ``record_all`` (used by ``graphtune
tune`` and the CLI) raise DatabaseError naming the file and the cause; ``record`` (the serving path: a tuner
recording a result) only logs a warning.

``load(path)`` reads an export file into a process-local registry (consulted before the database, never
written to disk), so a package can ship tuned configs for each GPU and a read-only deployment can use them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import socket
import sqlite3
import stat
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypeVar

from . import settings
from ._launch_options import LAUNCH_OPTIONS, launch_option_problem
from ._log import logger
from .errors import DatabaseError
from .state import STATE
from .identity import EnvIdentity, KernelIdentity, current_env, env_mismatch

__all__ = [
    "CandidateResult", "Entry", "Summary", "ImportConflict", "ImportReport", "TuningDB", "get_db", "reset_db", "load",
    "loaded_entries", "clear_loaded", "staleness", "new_entry", "export_target", "FORMAT", "FORMAT_VERSION",
    "SCHEMA_VERSION",
]

T = TypeVar("T")

FORMAT = "graphtune-tuning"
FORMAT_VERSION = 1

_META_TABLE = "graphtune_meta"
_SQLITE_MAGIC = b"SQLite format 3\x00"
# Written to SQLite's application_id header field when graphtune creates a database: how a later open knows
# the file is graphtune's (and so may be moved aside when damaged) without trusting anything else in it.
_APPLICATION_ID = int.from_bytes(b"GTdb", "big")
# How SQLite stores the statement that created graphtune's first table (page 1 of the file): recognises the
# databases graphtune created before it stamped application_id.
_SCHEMA_MARK = f"CREATE TABLE {_META_TABLE} (".encode()
_WAL_SCAN_BYTES = 1 << 20
_QUICK_CHECK_MAX_BYTES = 64 << 20
_IMPORT_BATCH = 256
_BUSY_TIMEOUT_S = 30.0
_WRITE_ATTEMPTS = 8
_OPEN_LOCK_TIMEOUT_S = 60.0

_KERNEL_COLUMNS = ("kernel_name", "source_hash", "configs_hash")
_ENV_COLUMNS = ("gpu_name", "compute_capability", "triton_version", "torch_version", "cuda_version")
_ID_COLUMNS = _KERNEL_COLUMNS + _ENV_COLUMNS + ("key",)
_COLUMNS = _ID_COLUMNS + ("chosen", "chosen_median_ms", "candidates", "tuned_at", "host", "rank", "source")

# _MIGRATIONS[v] takes a database from schema version v to v + 1; version 0 is an empty file. A new schema
# version is one more tuple here (and _COLUMNS updated to what it leaves behind).
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        f"CREATE TABLE {_META_TABLE} (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE entries (
            kernel_name TEXT NOT NULL, source_hash TEXT NOT NULL, configs_hash TEXT NOT NULL,
            gpu_name TEXT NOT NULL, compute_capability TEXT NOT NULL, triton_version TEXT NOT NULL,
            torch_version TEXT NOT NULL, cuda_version TEXT NOT NULL,
            key TEXT NOT NULL,                -- JSON list of scalars
            chosen TEXT NOT NULL,             -- JSON object: the chosen config
            chosen_median_ms REAL,            -- the chosen candidate's median; NULL when it was not timed
            candidates TEXT NOT NULL,         -- JSON list: every candidate's timing or failure
            tuned_at REAL NOT NULL, host TEXT NOT NULL, rank INTEGER NOT NULL, source TEXT NOT NULL,
            PRIMARY KEY (kernel_name, source_hash, configs_hash, gpu_name, compute_capability,
                         triton_version, torch_version, cuda_version, key))""",
    ),
    (   # configs first launched in an isolated worker (isolate.py), per kernel and environment identity
        """CREATE TABLE isolated_configs (
            kernel_name TEXT NOT NULL, source_hash TEXT NOT NULL, configs_hash TEXT NOT NULL,
            gpu_name TEXT NOT NULL, compute_capability TEXT NOT NULL, triton_version TEXT NOT NULL,
            torch_version TEXT NOT NULL, cuda_version TEXT NOT NULL,
            config TEXT NOT NULL,             -- JSON object, sorted keys
            outcome TEXT NOT NULL,            -- "ok", or why it failed there (fault, hang, validation)
            checked_at REAL NOT NULL,
            PRIMARY KEY (kernel_name, source_hash, configs_hash, gpu_name, compute_capability,
                         triton_version, torch_version, cuda_version, config))""",
    ),
)
SCHEMA_VERSION = len(_MIGRATIONS)


# ---------------------------------------------------------------------------------------------------- records

@dataclass(frozen=True)
class CandidateResult:
    config: dict
    median_ms: float | None
    p20_ms: float | None
    p80_ms: float | None
    n: int
    failure: str | None = None
    resources: dict | None = None


@dataclass(frozen=True)
class Entry:
    kernel: KernelIdentity
    env: EnvIdentity
    key: tuple
    chosen: dict
    candidates: tuple[CandidateResult, ...]
    tuned_at: float
    host: str
    rank: int
    source: str = "tuned"

    @property
    def chosen_median_ms(self) -> float | None:
        """The median of the chosen config's candidate; None when it was not timed (forced, single config)."""
        for cand in self.candidates:
            if cand.config == self.chosen and cand.failure is None:
                return cand.median_ms
        return None


@dataclass(frozen=True)
class Summary:
    """An entry without its candidates, as ``graphtune db ls`` shows it (read without parsing the candidates)."""
    kernel: KernelIdentity
    env: EnvIdentity
    key: tuple
    chosen: dict
    chosen_median_ms: float | None
    tuned_at: float
    host: str
    rank: int
    source: str


@dataclass(frozen=True)
class ImportConflict:
    """An imported entry met a stored one for the same identity and key, with another config or timing."""
    kernel: str
    key: tuple
    gpu_name: str
    kept: str  # "existing" or "imported": the one with the lower chosen median (existing on a tie)
    existing_chosen: dict
    existing_median_ms: float | None
    imported_chosen: dict
    imported_median_ms: float | None


@dataclass(frozen=True)
class ImportReport:
    path: str
    added: int
    replaced: int
    kept: int
    conflicts: tuple[ImportConflict, ...]


def new_entry(kernel: KernelIdentity, env: EnvIdentity, key: tuple, chosen: dict,
              candidates: Sequence[CandidateResult], rank: int = 0, source: str = "tuned") -> Entry:
    """An Entry stamped with the current time and host name."""
    return Entry(kernel=kernel, env=env, key=tuple(key), chosen=dict(chosen), candidates=tuple(candidates),
                 tuned_at=time.time(), host=socket.gethostname(), rank=int(rank), source=source)


# ------------------------------------------------------------------------------------ JSON form and validation

class _Invalid(ValueError):
    """A field of an entry that is missing or has the wrong type; the message names the field."""


def _candidate_to_dict(cand: CandidateResult) -> dict[str, Any]:
    return {"config": cand.config, "median_ms": cand.median_ms, "p20_ms": cand.p20_ms, "p80_ms": cand.p80_ms,
            "n": cand.n, "failure": cand.failure, "resources": cand.resources}


def _entry_to_dict(entry: Entry) -> dict[str, Any]:
    k, e = entry.kernel, entry.env
    return {
        "kernel": {"name": k.name, "source_hash": k.source_hash, "configs_hash": k.configs_hash},
        "env": {name: getattr(e, name) for name in _ENV_COLUMNS},
        "key": list(entry.key),
        "chosen": entry.chosen,
        "candidates": [_candidate_to_dict(c) for c in entry.candidates],
        "tuned_at": entry.tuned_at,
        "host": entry.host,
        "rank": entry.rank,
        "source": entry.source,
    }


def _field(data: Any, name: str, where: str) -> Any:
    if not isinstance(data, dict):
        raise _Invalid(f"{where or 'entry'} must be an object, got {type(data).__name__}")
    if name not in data:
        raise _Invalid(f"missing field '{where + '.' if where else ''}{name}'")
    return data[name]


def _str(data: Any, name: str, where: str = "", allow_empty: bool = True) -> str:
    value = _field(data, name, where)
    if not isinstance(value, str) or (not allow_empty and not value):
        raise _Invalid(f"field '{where + '.' if where else ''}{name}' must be a{'' if allow_empty else ' non-empty'} "
                       f"string, got {value!r}")
    return value


def _int(data: Any, name: str, where: str = "") -> int:
    value = _field(data, name, where)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Invalid(f"field '{where + '.' if where else ''}{name}' must be an integer >= 0, got {value!r}")
    return value


def _ms(data: Any, name: str, where: str, optional: bool = True) -> float | None:
    value = _field(data, name, where)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise _Invalid(f"field '{where}.{name}' must be a finite number >= 0{' or null' if optional else ''}, "
                       f"got {value!r}")
    return float(value)


def _object(value: Any, where: str, optional: bool = False) -> dict | None:
    if value is None and optional:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise _Invalid(f"field '{where}' must be an object with string keys, got {value!r}")
    return value


def _launch_problem(config: dict, where: str) -> str | None:
    """Why the launch options of a config (num_warps, num_stages, num_ctas, maxnreg) are not values Triton takes,
    naming the field; None when they are. Checked where a config enters (an import, ``load``), so a bad value
    is an error naming its file and entry there, not a failure of a later run that names nothing."""
    for name in LAUNCH_OPTIONS:
        if name in config:
            expected = launch_option_problem(name, config[name])
            if expected is not None:
                return f"field '{where}.{name}' must be {expected}, got {config[name]!r}"
    return None


def _config(value: Any, where: str) -> dict:
    """A config in JSON form: an object with string keys whose launch options are valid; else _Invalid."""
    config = _object(value, where)
    problem = _launch_problem(config, where)
    if problem is not None:
        raise _Invalid(problem)
    return config


def _scalar_key(value: Any, where: str) -> tuple:
    if not isinstance(value, (list, tuple)):
        raise _Invalid(f"field '{where}' must be a list of scalars, got {value!r}")
    for item in value:
        if item is not None and not isinstance(item, (bool, int, float, str)):
            raise _Invalid(f"field '{where}' must hold only ints, floats, strings, bools or null; "
                           f"{item!r} is a {type(item).__name__}")
        if isinstance(item, float) and not math.isfinite(item):
            raise _Invalid(f"field '{where}' holds {item!r}; keys must be finite")
    return tuple(value)


_CANDIDATE_FIELDS = frozenset(("config", "median_ms", "p20_ms", "p80_ms", "n", "failure", "resources"))
_MAX_FLOAT = sys.float_info.max


def _candidate_json(cand: Any, where: str) -> dict[str, Any]:
    """One candidate in JSON form, validated; the object itself when it is already in the form graphtune writes
    (the fast path that 200,000-entry imports and exports take), else a normalised copy or _Invalid."""
    # Every caller passes objects parsed from JSON text, whose keys are strings: the fast path need not look.
    if type(cand) is dict and cand.keys() == _CANDIDATE_FIELDS:
        resources, n, failure = cand["resources"], cand["n"], cand["failure"]
        med, p20, p80 = cand["median_ms"], cand["p20_ms"], cand["p80_ms"]
        if (type(cand["config"]) is dict and _launch_problem(cand["config"], "") is None
                and (resources is None or type(resources) is dict)
                and type(n) is int and n >= 0 and (failure is None or type(failure) is str)
                # a NaN fails the comparisons, an infinity the upper bound
                and (med is None or (type(med) is float and 0.0 <= med <= _MAX_FLOAT))
                and (p20 is None or (type(p20) is float and 0.0 <= p20 <= _MAX_FLOAT))
                and (p80 is None or (type(p80) is float and 0.0 <= p80 <= _MAX_FLOAT))):
            return cand
    failure = _field(cand, "failure", where)
    if failure is not None and not isinstance(failure, str):
        raise _Invalid(f"field '{where}.failure' must be a string or null, got {failure!r}")
    return {"config": _config(_field(cand, "config", where), f"{where}.config"),
            "median_ms": _ms(cand, "median_ms", where), "p20_ms": _ms(cand, "p20_ms", where),
            "p80_ms": _ms(cand, "p80_ms", where), "n": _int(cand, "n", where), "failure": failure,
            "resources": _object(_field(cand, "resources", where), f"{where}.resources", optional=True)}


def _entry_json(data: Any) -> dict[str, Any]:
    """Validate every field of one entry in JSON form (export file or database row); the entry in the form
    ``_entry_to_dict`` gives (numbers as floats, no unknown fields), or _Invalid naming the field."""
    kernel_data = _field(data, "kernel", "")
    kernel = {"name": _str(kernel_data, "name", "kernel", allow_empty=False),
              "source_hash": _str(kernel_data, "source_hash", "kernel"),
              "configs_hash": _str(kernel_data, "configs_hash", "kernel")}
    env_data = _field(data, "env", "")
    env = {name: _str(env_data, name, "env") for name in _ENV_COLUMNS}
    raw_candidates = _field(data, "candidates", "")
    if not isinstance(raw_candidates, list):
        raise _Invalid(f"field 'candidates' must be a list, got {raw_candidates!r}")
    candidates = [_candidate_json(cand, f"candidates[{i}]") for i, cand in enumerate(raw_candidates)]
    tuned_at = _field(data, "tuned_at", "")
    if isinstance(tuned_at, bool) or not isinstance(tuned_at, (int, float)) or not math.isfinite(tuned_at):
        raise _Invalid(f"field 'tuned_at' must be a time in seconds since the epoch, got {tuned_at!r}")
    return {"kernel": kernel, "env": env, "key": list(_scalar_key(_field(data, "key", ""), "key")),
            "chosen": _config(_field(data, "chosen", ""), "chosen"), "candidates": candidates,
            "tuned_at": float(tuned_at), "host": _str(data, "host"), "rank": _int(data, "rank"),
            "source": _str(data, "source", allow_empty=False)}


def _entry_from_dict(data: Any) -> Entry:
    """Validate every field of one entry in JSON form (export file or database row); raise _Invalid."""
    d = _entry_json(data)
    return Entry(kernel=KernelIdentity(**d["kernel"]), env=EnvIdentity(**d["env"]), key=tuple(d["key"]),
                 chosen=d["chosen"], candidates=tuple(CandidateResult(**c) for c in d["candidates"]),
                 tuned_at=d["tuned_at"], host=d["host"], rank=d["rank"], source=d["source"])


def _chosen_median(d: dict[str, Any]) -> float | None:
    """Entry.chosen_median_ms of an entry in JSON form."""
    for cand in d["candidates"]:
        if cand["config"] == d["chosen"] and cand["failure"] is None:
            return cand["median_ms"]
    return None


def _json_to_row(d: dict[str, Any], candidates_text: str | None = None) -> tuple:
    k, e = d["kernel"], d["env"]
    return (k["name"], k["source_hash"], k["configs_hash"], e["gpu_name"], e["compute_capability"],
            e["triton_version"], e["torch_version"], e["cuda_version"], _dumps(d["key"]), _dumps(d["chosen"]),
            _chosen_median(d), candidates_text if candidates_text is not None else _dumps(d["candidates"]),
            d["tuned_at"], d["host"], d["rank"], d["source"])


def _export_text(row: Sequence[Any]) -> str:
    """One database row as the JSON text of an export entry, validated like _row_to_json. When every candidate
    passed as stored (the usual case), the stored candidates text is written as it is instead of re-encoded:
    it is valid JSON of exactly the validated values, and re-encoding is most of an export's time."""
    stored = json.loads(row[11])
    d = _row_to_json(row, stored)
    if len(d["candidates"]) == len(stored) and all(a is b for a, b in zip(d["candidates"], stored)):
        rest = json.dumps({k: v for k, v in d.items() if k != "candidates"}, allow_nan=False)
        return f'{rest[:-1]}, "candidates": {row[11]}}}'
    return json.dumps(d, allow_nan=False)


def _keyed_export_text(row: Sequence[Any]) -> tuple[list, str]:
    # (key, text): the key orders the entries inside one identity's group
    return json.loads(row[8]), _export_text(row)


def _row_to_json(row: Sequence[Any], candidates: Any = None) -> dict[str, Any]:
    """A database row (the _COLUMNS) in JSON form, validated."""
    return _entry_json({
        "kernel": {"name": row[0], "source_hash": row[1], "configs_hash": row[2]},
        "env": dict(zip(_ENV_COLUMNS, row[3:8])),
        "key": json.loads(row[8]), "chosen": json.loads(row[9]),
        "candidates": json.loads(row[11]) if candidates is None else candidates,
        "tuned_at": row[12], "host": row[13], "rank": row[14], "source": row[15]})


_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def _dumps(value: Any) -> str:
    return _COMPACT.encode(value)


def _checked(entry: Entry) -> Entry:
    """The entry as it will read back from storage; bad types raise ValueError naming the field."""
    if not isinstance(entry, Entry):
        raise TypeError(f"expected a graphtune.db.Entry, got {type(entry).__name__}")
    try:
        return _entry_from_dict(json.loads(_dumps(_entry_to_dict(entry))))
    except (TypeError, ValueError) as exc:  # json.dumps: a value that is not JSON, or NaN / inf
        raise ValueError(f"entry for kernel {entry.kernel.name!r} key {entry.key!r}: {exc}") from None


def _entry_to_row(entry: Entry) -> tuple:
    k, e = entry.kernel, entry.env
    return (k.name, k.source_hash, k.configs_hash, e.gpu_name, e.compute_capability, e.triton_version,
            e.torch_version, e.cuda_version, _dumps(list(entry.key)), _dumps(entry.chosen), entry.chosen_median_ms,
            _dumps([_candidate_to_dict(c) for c in entry.candidates]), entry.tuned_at, entry.host, entry.rank,
            entry.source)


def _entry_from_row(row: Sequence[Any]) -> Entry:
    values = dict(zip(_COLUMNS, row))
    return _entry_from_dict({
        "kernel": {"name": values["kernel_name"], "source_hash": values["source_hash"],
                   "configs_hash": values["configs_hash"]},
        "env": {name: values[name] for name in _ENV_COLUMNS},
        "key": json.loads(values["key"]), "chosen": json.loads(values["chosen"]),
        "candidates": json.loads(values["candidates"]), "tuned_at": values["tuned_at"],
        "host": values["host"], "rank": values["rank"], "source": values["source"],
    })


_SUMMARY_COLUMNS = tuple(c for c in _COLUMNS if c != "candidates")


def _summary_from_row(row: Sequence[Any]) -> Summary:
    values = dict(zip(_SUMMARY_COLUMNS, row))
    names = ("kernel_name", "source_hash", "configs_hash") + _ENV_COLUMNS + ("host", "source")
    for name in names:
        if not isinstance(values[name], str):
            raise _Invalid(f"column {name!r} must be text, got {values[name]!r}")
    median = values["chosen_median_ms"]
    if median is not None and (not isinstance(median, (int, float)) or not math.isfinite(median)):
        raise _Invalid(f"column 'chosen_median_ms' must be a finite number or NULL, got {median!r}")
    return Summary(kernel=KernelIdentity(values["kernel_name"], values["source_hash"], values["configs_hash"]),
                   env=EnvIdentity(*(values[name] for name in _ENV_COLUMNS)),
                   key=_scalar_key(json.loads(values["key"]), "key"),
                   chosen=_object(json.loads(values["chosen"]), "chosen"),
                   chosen_median_ms=None if median is None else float(median), tuned_at=float(values["tuned_at"]),
                   host=values["host"], rank=int(values["rank"]), source=values["source"])


def _key_order(key: tuple) -> tuple:
    # Numbers before strings inside a key so that 16 sorts before 128, whatever the types mixed in.
    return tuple((0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, str(v))
                 for v in key)


def _identity_params(kernel: KernelIdentity, env: EnvIdentity) -> tuple[str, ...]:
    return (kernel.name, kernel.source_hash, kernel.configs_hash, env.gpu_name, env.compute_capability,
            env.triton_version, env.torch_version, env.cuda_version)


def _remove_isolated(conn: sqlite3.Connection, kernel: str | None, stale_in: EnvIdentity | None) -> int:
    """Delete the isolated-launch records of kernel name ``kernel`` (None: any), only those of an environment other
    than ``stale_in`` when given (they never apply there); how many."""
    clauses, params = [], []
    if kernel is not None:
        clauses.append("kernel_name = ?")
        params.append(kernel)
    if stale_in is not None:
        clauses.append("NOT (" + " AND ".join(f"{c} = ?" for c in _ENV_COLUMNS) + ")")
        params.extend(getattr(stale_in, c) for c in _ENV_COLUMNS)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    return conn.execute(f"DELETE FROM isolated_configs {where}", params).rowcount


def _sort_key(entry: Entry) -> tuple:
    # Numbers before strings inside a key so that 16 sorts before 128, whatever the types mixed in.
    key = tuple((0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, str(v))
                for v in entry.key)
    return (entry.kernel.name, entry.env.gpu_name, entry.kernel.source_hash, entry.kernel.configs_hash,
            dataclasses.astuple(entry.env), key, entry.tuned_at)


_JSON_WS = re.compile(r"[ \t\n\r]*")
_READ_CHUNK = 1 << 20


class _JSONStream:
    """Reads one JSON value after another from a text file, holding about one chunk in memory: an export's
    entries are read one at a time, so a file of any size is read in bounded memory."""

    def __init__(self, fh: Any) -> None:
        self._fh, self._buf, self._pos, self._consumed, self._eof = fh, "", 0, 0, False
        self._decoder = json.JSONDecoder(parse_constant=_reject_constant)

    def _more(self) -> bool:
        if self._eof:
            return False
        chunk = self._fh.read(_READ_CHUNK)
        if not chunk:
            self._eof = True
            return False
        self._consumed += self._pos
        self._buf, self._pos = self._buf[self._pos:] + chunk, 0
        return True

    def where(self) -> int:
        return self._consumed + self._pos

    def peek(self) -> str:
        buf, pos = self._buf, self._pos
        if pos < len(buf) and buf[pos] not in " \t\n\r":  # the common case, without the regex
            return buf[pos]
        while True:
            self._pos = _JSON_WS.match(self._buf, self._pos).end()
            if self._pos < len(self._buf) or not self._more():
                return self._buf[self._pos:self._pos + 1]

    def take(self, expected: str) -> str:
        found = self.peek()
        if found not in expected:
            what = " or ".join(repr(c) for c in expected)
            raise json.JSONDecodeError(f"expecting {what}, found {found or 'the end of the file'!r} at character "
                                       f"{self.where()}", "", 0)
        self._pos += 1
        return found

    def value(self) -> Any:
        return self._decode(False)[0]

    def _decode(self, text: bool) -> tuple[Any, str | None]:
        self.peek()
        while True:
            try:
                value, end = self._decoder.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError as exc:
                if self._more():
                    continue
                raise json.JSONDecodeError(f"{exc.msg} at character {self._consumed + exc.pos}", "", 0) from None
            if end == len(self._buf) and self._more():
                continue  # a number or literal may go on in the next chunk
            start, self._pos = self._pos, end
            return value, (self._buf[start:end] if text else None)

    def entry(self) -> tuple[Any, str | None]:
        """One array element, and when it is an object the JSON text of its "candidates" value as it stands in
        the file: an import stores that text instead of encoding the parsed list again (the largest cost of an
        import after parsing)."""
        if self.peek() != "{":
            return self.value(), None
        found = self._entry_in_buffer()
        if found is not None:
            return found
        self._pos += 1
        obj: dict[str, Any] = {}
        candidates_text = None
        if self.peek() == "}":
            self._pos += 1
            return obj, None
        while True:
            name = self.value()
            if type(name) is not str:
                raise json.JSONDecodeError(f"expecting a property name at character {self.where()}", "", 0)
            self.take(":")
            if name == "candidates":
                obj[name], candidates_text = self._decode(True)
            else:
                obj[name] = self.value()
            if self.take(",}") == "}":
                return obj, candidates_text

    def _entry_in_buffer(self) -> tuple[dict[str, Any], str | None] | None:
        """entry() for an object that lies wholly in the buffer (nearly all of them), in one tight loop; None
        (nothing consumed) when it runs into the end of the buffer or anything unusual: the general path then
        reads it, refilling the buffer as needed."""
        buf, pos, n = self._buf, self._pos + 1, len(self._buf)
        decode, ws = self._decoder.raw_decode, _JSON_WS.match
        obj: dict[str, Any] = {}
        text = None
        try:
            pos = ws(buf, pos).end()
            if buf[pos] == "}":
                self._pos = pos + 1
                return obj, None
            while True:
                if buf[pos] != '"':
                    return None
                close = buf.index('"', pos + 1)
                name = buf[pos + 1:close]
                if "\\" in name:
                    return None  # an escaped key: the general path decodes it
                pos = ws(buf, close + 1).end()
                if buf[pos] != ":":
                    return None
                pos = ws(buf, pos + 1).end()
                value, end = decode(buf, pos)
                if end >= n:
                    return None  # a number may go on in the next chunk
                if name == "candidates":
                    text = buf[pos:end]
                obj[name] = value
                pos = ws(buf, end).end()
                if buf[pos] == ",":
                    pos = ws(buf, pos + 1).end()
                elif buf[pos] == "}":
                    self._pos = pos + 1
                    return obj, text
                else:
                    return None
        except (IndexError, ValueError):  # the end of the buffer, or a value the general path will report
            return None

    def at_end(self) -> bool:
        return self.peek() == ""


def _export_header_problem(header: dict[str, Any]) -> str | None:
    if "format" in header and header["format"] != FORMAT:
        return (f"not a graphtune tuning export (expected \"format\": \"{FORMAT}\", found {header['format']!r})")
    if "version" in header:
        version = header["version"]
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            return f"\"version\" must be an integer >= 1, found {version!r}"
        if version > FORMAT_VERSION:
            return (f"has format version {version}, written by a newer graphtune; this one reads up to version "
                    f"{FORMAT_VERSION}: upgrade graphtune to load it")
    return None


def _iter_export(path: str | os.PathLike, as_json: bool = False) -> Iterator[Any]:
    """The entries of an export file one at a time, each validated; any problem is a DatabaseError naming the
    file (raised when it is met: a caller that must be all-or-nothing undoes what it did with earlier ones)."""
    path = Path(path)
    try:
        fh = open(path, encoding="utf-8")
    except OSError as exc:
        raise DatabaseError(f"cannot read tuning export {path}: {exc}") from None

    def bad(text: str) -> DatabaseError:
        sep = " " if text.startswith("has ") else ": "
        return DatabaseError(f"tuning export {path}{sep}{text}")

    with fh:
        stream = _JSONStream(fh)
        header: dict[str, Any] = {}
        seen_entries = False
        try:
            if stream.peek() != "{":
                found = stream.value()
                raise bad(f"not a graphtune tuning export (expected \"format\": \"{FORMAT}\", found "
                          f"{type(found).__name__!r})")
            stream.take("{")
            if stream.peek() == "}":
                stream.take("}")
            else:
                while True:
                    name = stream.value()
                    if not isinstance(name, str):
                        raise json.JSONDecodeError(f"expecting a property name at character {stream.where()}", "", 0)
                    stream.take(":")
                    if name == "entries" and stream.peek() == "[":
                        seen_entries = True
                        problem = _export_header_problem(header)
                        if problem is not None:
                            raise bad(problem)
                        stream.take("[")
                        if stream.peek() == "]":
                            stream.take("]")
                        else:
                            i = 0
                            while True:
                                item, candidates_text = stream.entry() if as_json else (stream.value(), None)
                                try:
                                    if not as_json:
                                        yield _entry_from_dict(item)
                                    else:
                                        d = _entry_json(item)
                                        raw = item["candidates"]
                                        # that text encodes the validated list when validation changed nothing
                                        # (it returned the very candidate objects it was given)
                                        same = (candidates_text is not None and len(raw) == len(d["candidates"])
                                                and all(a is b for a, b in zip(d["candidates"], raw)))
                                        yield d, candidates_text if same else None
                                except _Invalid as exc:
                                    raise bad(f"entry {i}: {exc}; nothing was imported") from None
                                i += 1
                                if stream.take(",]") == "]":
                                    break
                    else:
                        header[name] = stream.value()
                        if name == "entries":
                            raise bad(f"\"entries\" must be a list, found {type(header[name]).__name__}")
                        problem = _export_header_problem(header)
                        if problem is not None:
                            raise bad(problem)
                    if stream.take(",}") == "}":
                        break
            if not stream.at_end():
                raise json.JSONDecodeError(f"extra data at character {stream.where()}", "", 0)
        except json.JSONDecodeError as exc:
            raise DatabaseError(f"tuning export {path} is not valid JSON: {exc.msg}") from None
        except UnicodeDecodeError as exc:
            raise DatabaseError(f"cannot read tuning export {path}: {exc}") from None
        except _Invalid as exc:
            raise bad(str(exc)) from None
        if "format" not in header:
            raise bad(f"not a graphtune tuning export (expected \"format\": \"{FORMAT}\", found None)")
        if "version" not in header:
            raise bad("\"version\" must be an integer >= 1, found None")
        if not seen_entries:
            raise bad("\"entries\" must be a list, found NoneType")


def _is_export(path: Path) -> bool:
    """Whether a file holds a graphtune export: its header's "format" (before "entries", where graphtune writes
    it) names graphtune's format. Reads the header only; anything else (another program's file, an SQLite
    database, text that is not an export) is not one."""
    try:
        with open(path, encoding="utf-8") as fh:
            stream = _JSONStream(fh)
            stream.take("{")
            while stream.peek() == '"':
                name = stream.value()
                stream.take(":")
                if name == "format":
                    return stream.value() == FORMAT
                if name == "entries":
                    return False
                stream.value()
                stream.take(",")
    except (OSError, ValueError):  # JSONDecodeError, UnicodeDecodeError and _Invalid are ValueErrors
        pass
    return False


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (through links, another spelling, a hard link); paths of which one does
    not exist yet are compared as resolved."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def export_target(path: str | os.PathLike, database: str | os.PathLike | None = None,
                  origin: str | None = None) -> Path:
    """The file an export to ``path`` writes: ``path``, or the real target of a symlink (replaced there, so the
    link stays a link). Refuses, with one line naming the path (and ``origin``, the option that gave it) before
    anything is written or tuned, a path an export must not replace: the tuning database ``database``, a path
    that exists and is not a regular file (a directory, a FIFO, a device, a socket), an existing file that is
    not a graphtune export (an SQLite database, ours or another program's, or anything else), a directory that
    does not exist. An earlier export or an empty file may be replaced: nothing a user tuned is lost."""
    given = Path(path).expanduser()
    target = Path(os.path.realpath(given))

    def refuse(why: str) -> DatabaseError:
        via = f" (a link to {target})" if given.is_symlink() else ""
        return DatabaseError(f"cannot write tuning export {path}{f' (from {origin})' if origin else ''}{via}: "
                             f"{why}; nothing was written")

    if database is not None:
        base = Path(database).expanduser()
        if _same_file(target, base):
            raise refuse(f"it is the tuning database {database} itself; give the export another file name")
        # (its side files: the lock graphtune's writers take, SQLite's WAL, index and journal; an empty lock file
        # would otherwise pass as "an empty file")
        for suffix in (".lock", "-wal", "-shm", "-journal"):
            if _same_file(target, base.with_name(base.name + suffix)):
                raise refuse(f"it is the tuning database's {suffix.lstrip('.-')} file; give the export another file "
                             f"name")
    try:
        info = target.stat()
    except FileNotFoundError:
        if not target.parent.is_dir():
            raise refuse(f"directory {target.parent} does not exist") from None
        return target
    except OSError as exc:
        raise refuse(str(exc)) from None
    what = _not_regular(info.st_mode)
    if what is not None:
        raise refuse(f"it is {what}, not a regular file; give a file name for the export")
    if info.st_size and not _is_export(target):
        with open(target, "rb") as fh:
            sqlite = fh.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
        kind = "an SQLite database" if sqlite else "a file that is not a graphtune tuning export"
        raise refuse(f"it is {kind}, which graphtune does not replace; give the export another file name")
    return target


def _read_export(path: str | os.PathLike) -> list[Entry]:
    """Every entry of an export file, validated; any problem is a DatabaseError naming the file."""
    return list(_iter_export(path))


def _reject_constant(name: str) -> Any:
    raise _Invalid(f"{name} is not a number JSON allows")


def _merge(existing: Entry | None, new: Entry) -> tuple[str, ImportConflict | None]:
    """What an import does with ``new``: "add", "replace" or "keep", and the conflict to report, if any."""
    return _merge_values(None if existing is None else (existing.chosen, existing.chosen_median_ms), new.chosen,
                         new.chosen_median_ms, new.kernel.name, new.key, new.env.gpu_name)


def _merge_values(existing: tuple[dict, float | None] | None, chosen: dict, new_ms: float | None, kernel: str,
                  key: tuple, gpu_name: str) -> tuple[str, ImportConflict | None]:
    """_merge on the values it compares: (chosen, median) stored, if any, and those of the new entry."""
    if existing is None:
        return "add", None
    old_chosen, old_ms = existing
    if old_chosen == chosen and old_ms == new_ms:
        return "keep", None
    better = new_ms is not None and (old_ms is None or new_ms < old_ms)
    conflict = ImportConflict(kernel=kernel, key=key, gpu_name=gpu_name, kept="imported" if better else "existing",
                              existing_chosen=old_chosen, existing_median_ms=old_ms, imported_chosen=chosen,
                              imported_median_ms=new_ms)
    return ("replace" if better else "keep"), conflict


def staleness(entries: Sequence[Entry], env: EnvIdentity) -> list[str | None]:
    """Why each entry would not be applied in ``env`` (None: it would be).

    An entry is stale when its environment differs from ``env``, or when it is superseded: a newer entry of
    the same kernel name in ``env`` has another source hash or candidate list, i.e. the kernel changed and was
    re-tuned since. (A process that has not re-tuned yet cannot be told apart from an old one from here: the
    database does not know the source of kernels it has not seen.)
    """
    newest: dict[str, tuple[float, str, str]] = {}
    for entry in entries:
        if entry.env == env:
            k = entry.kernel
            stamp = (entry.tuned_at, k.source_hash, k.configs_hash)
            if stamp > newest.get(k.name, (-math.inf, "", "")):
                newest[k.name] = stamp
    out: list[str | None] = []
    for entry in entries:
        if entry.env != env:
            out.append("environment: " + "; ".join(env_mismatch(entry.env, env)))
            continue
        _, source_hash, configs_hash = newest[entry.kernel.name]
        changed = [what for what, mine, new in (("source", entry.kernel.source_hash, source_hash),
                                                ("candidate list", entry.kernel.configs_hash, configs_hash))
                   if mine != new]
        out.append(f"superseded: kernel {' and '.join(changed)} changed and was re-tuned" if changed else None)
    return out


# ---------------------------------------------------------------------------------------------------- the store



def _warn_once(path: Path, kind: str, message: str, *args: Any) -> None:
    token = f"db:{path}:{kind}"   # once per process (state.STATE.warned), until reset_db()
    if token not in STATE.warned:
        STATE.warned.add(token)
        logger.warning(message, *args)


def _is_busy(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


_ACCESS_ERRORS = ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")


def _is_access(exc: BaseException) -> bool:
    """Whether an SQLite error says this process may not open or write the file where it is (a read-only file,
    directory or mount, a permission): no sign of damage, so such a file is never moved aside for it."""
    name = getattr(exc, "sqlite_errorname", None)
    if name:
        return name.startswith(_ACCESS_ERRORS)
    text = str(exc).lower()
    return any(w in text for w in ("readonly", "read-only", "unable to open", "permission denied"))


def _not_regular(mode: int) -> str | None:
    """What a path that is not a regular file is ("a directory", "a FIFO", ...); None for a regular file. Such a
    path is never a tuning database or an export graphtune may write: SQLite and os.replace would misuse it."""
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return None if stat.S_ISREG(mode) else "not a regular file"


def _tables_of(path: Path) -> list[str] | None:
    """The table names of an SQLite file, read without writing or locking anything (None: unreadable)."""
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
        try:
            return sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        finally:
            conn.close()
    except sqlite3.Error:
        return None


def _classify(path: Path) -> tuple[str, str]:
    """Whose file ``path`` is, from its bytes alone (never opened by SQLite for writing, never changed):
    ("missing", ""), ("empty", ""), ("ours", "") or ("foreign", why); a path that is not a regular file (a
    directory, a FIFO, a device) is foreign, whatever its size. A file that cannot be read raises OSError: that
    is a permission problem, not damage."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return "missing", ""
    what = _not_regular(info.st_mode)
    if what == "a directory":
        return "foreign", "it is a directory"
    if what is not None:  # a FIFO or a device: never opened, nothing created beside it
        return "foreign", f"it is not a regular file ({what})"
    size = info.st_size
    if size == 0:  # holds nothing; also what a process creating the database leaves for an instant
        return "empty", ""
    with open(path, "rb") as fh:
        head = fh.read(65536)
    if not head.startswith(_SQLITE_MAGIC):
        if _SCHEMA_MARK in head:
            return "foreign", ("it has no SQLite header (its first bytes were overwritten) although graphtune's "
                               "schema text is inside: it may be a damaged graphtune database, but without its "
                               "header graphtune cannot prove it created it, so it does not move it")
        return "foreign", f"it is not an SQLite file (it starts with {head[:16]!r})"
    if len(head) < 100:
        return "foreign", (f"it is a truncated SQLite file ({size} bytes, shorter than the 100-byte header that "
                           f"would show which program created it)")
    app_id = int.from_bytes(head[68:72], "big")
    if app_id == _APPLICATION_ID:
        return "ours", ""
    if app_id != 0:
        return "foreign", f"it is the SQLite database of another application (application_id {app_id:#010x})"
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if _SCHEMA_MARK in head[:max(page_size, 512)] or _SCHEMA_MARK in _wal_head(path):
        return "ours", ""  # created by a graphtune from before the application_id stamp
    tables = _tables_of(path)
    if tables is None:
        return "foreign", "it is an SQLite database that graphtune did not create"
    if not tables:
        return "foreign", "it is an SQLite database with no tables that graphtune did not create"
    shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
    return "foreign", f"it is an SQLite database without graphtune's tables (its tables: {shown})"


def _wal_head(path: Path) -> bytes:
    # A database created before the stamp, never checkpointed, has its schema only in the WAL: its creating
    # transaction is among the first frames.
    try:
        with open(path.with_name(path.name + "-wal"), "rb") as fh:
            return fh.read(_WAL_SCAN_BYTES)
    except OSError:
        return b""


def _inspect(conn: sqlite3.Connection, path: Path | None = None) -> tuple[str, Any]:
    """("ok"|"empty"|"old", version), ("future", version), ("damaged", why), ("busy", why) or ("access", why):
    this process may not open or write the file there, which says nothing about the file."""
    try:
        if path is None or _deep_check(path):
            rows = conn.execute("PRAGMA quick_check").fetchall()
            if rows != [("ok",)]:  # its rows hold newlines: one line, for a warning of one line
                return "damaged", "PRAGMA quick_check: " + " ".join("; ".join(str(r[0]) for r in rows[:3]).split())
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            return "empty", 0
        if _META_TABLE not in tables:
            return "damaged", f"not a graphtune database (its tables: {', '.join(sorted(tables)[:5])})"
        row = conn.execute(f"SELECT value FROM {_META_TABLE} WHERE name = 'schema_version'").fetchone()
        try:
            version = int(row[0])
        except (TypeError, ValueError):
            return "damaged", f"schema version {row[0] if row else None!r} in {_META_TABLE} is not a number"
        if version > SCHEMA_VERSION:
            return "future", version
        if version < 1:
            return "damaged", f"schema version {version} is not one graphtune ever wrote"
        if version < SCHEMA_VERSION:
            return "old", version
        columns = tuple(r[1] for r in conn.execute("PRAGMA table_info(entries)"))
        if sorted(columns) != sorted(_COLUMNS):
            return "damaged", f"table 'entries' has columns {columns}, schema version {version} has {_COLUMNS}"
        return "ok", version
    except sqlite3.DatabaseError as exc:
        if _is_busy(exc):
            return "busy", str(exc)
        if _is_access(exc):
            return "access", str(exc)
        return "damaged", f"SQLite cannot read it: {exc}"


def _deep_check(path: Path) -> bool:
    """Whether opening runs PRAGMA quick_check, which reads every page: for files up to _QUICK_CHECK_MAX_BYTES
    (a few thousand entries; 200,000 entries are about 800 MiB, seconds of reading at every process start).
    A larger file gets the checks of its header, schema and meta table only; damage deeper in it shows as an
    error of the read that meets it (a warning on the serving path, an error from the CLI), and the file is not
    moved aside on that account."""
    try:
        return path.stat().st_size <= _QUICK_CHECK_MAX_BYTES
    except OSError:
        return True


@contextlib.contextmanager
def _open_lock(path: Path) -> Iterator[None]:
    """Serialise check-and-repair at open among processes, so no rank judges a file another is creating.
    Best effort: without fcntl, or when the lock file cannot be made, opening goes on unlocked (the schema
    transaction still makes creation safe)."""
    fd = None
    try:
        import fcntl
        fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    except (ImportError, OSError):
        pass
    if fd is None:
        yield
        return
    try:
        deadline = time.monotonic() + _OPEN_LOCK_TIMEOUT_S
        locked = False
        while not locked and time.monotonic() < deadline:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = True
            except BlockingIOError:
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _settled(conn: sqlite3.Connection) -> bool:
    """Whether a database whose schema _inspect found current needs nothing written at open: stamped with
    graphtune's application_id and in WAL mode. Opening it then takes no write lock, so a process that only
    reads (``graphtune db ls``) never waits for a writer: in WAL mode readers are not blocked."""
    return (conn.execute("PRAGMA application_id").fetchone()[0] == _APPLICATION_ID
            and conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal")


class _ProbeDone(Exception):
    """Raised by _write_probe after its write succeeded, so that _transaction rolls the write back."""


def _write_probe(conn: sqlite3.Connection) -> None:
    # BEGIN IMMEDIATE succeeds on a read-only file; only a real write finds out.
    conn.execute(f"INSERT OR REPLACE INTO {_META_TABLE} (name, value) VALUES ('write_check', '')")
    raise _ProbeDone


_instances: "weakref.WeakSet[TuningDB]" = weakref.WeakSet()
# Connections inherited through fork: closing one in the child could checkpoint or unlock the parent's
# database behind its back, so the child keeps them referenced (never closed, never used) until it exits.
_abandoned: list[sqlite3.Connection] = []


class TuningDB:
    """The SQLite tuning database at ``path`` (default: settings.db_path()), opened on first use.

    Reads never raise for a damaged, missing or unusable file: they find nothing and a warning says why
    (``problem`` says it to a caller that must report it). ``record`` never raises for storage trouble either (a
    cache must not stop a server); ``check_writable``, ``record_all``, ``import_file``, ``prune`` and ``export``,
    which a person asks for, raise DatabaseError naming the file and the cause.

    ``origin`` names what chose the path, for error messages: "--db" from the CLI; by default "GRAPHTUNE_DB"
    (or the user cache directory when it is unset) without ``path``, "the path given" with one.
    """

    def __init__(self, path: str | os.PathLike | None = None, readonly: bool | None = None,
                 origin: str | None = None) -> None:
        self.path = (settings.expand_path(os.fspath(path), origin or "path") if path is not None
                     else settings.db_path())
        self.readonly = settings.db_readonly() if readonly is None else bool(readonly)
        if origin is None:
            if path is not None:
                origin = "the path given"
            elif settings._get("GRAPHTUNE_DB"):
                origin = "GRAPHTUNE_DB"
            else:
                origin = "the default location (GRAPHTUNE_DB is unset)"
        self.origin = origin
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._state = "closed"  # closed (open on next use) | ready | off (unusable for this process)
        self._off_reason = ""
        self._quiet = False
        self._pid = os.getpid()
        _instances.add(self)

    def __repr__(self) -> str:
        return f"TuningDB({str(self.path)!r}, readonly={self.readonly})"

    # -- opening --------------------------------------------------------------------------------------------

    def _abandon_after_fork(self) -> None:
        if self._conn is not None:
            _abandoned.append(self._conn)
        self._conn, self._state, self._pid = None, "closed", os.getpid()
        self._lock = threading.RLock()  # another thread may have held the parent's lock at the fork

    def _ready(self) -> sqlite3.Connection | None:
        """The connection, opening the database on first use; None when there is nothing to read."""
        if self._pid != os.getpid():
            self._abandon_after_fork()
        if self._state == "closed":
            try:
                if self.readonly:
                    self._open_readonly()
                else:
                    self._open_writable()
            except (sqlite3.Error, OSError) as exc:  # anything _inspect did not classify: never raise on open
                if isinstance(exc, sqlite3.Error) and _is_access(exc):
                    self._no_access(str(exc))
                else:
                    self._turn_off(f"cannot open tuning database {self.path} (from {self.origin}): {exc}")
        return self._conn if self._state == "ready" else None

    def _ready_quietly(self) -> sqlite3.Connection | None:
        """_ready for a caller that reports a failure itself (raises it, or hands it to the CLI): no warning is
        logged besides, so the reason is said once."""
        self._quiet = True
        try:
            return self._ready()
        finally:
            self._quiet = False

    def _no_access(self, cause: str) -> None:
        """Turn the database off because this process may not open or write the file where it is (a read-only
        directory, file or mount): not damage, so the file stays as it is; reading needs no write access."""
        how = ("read", "") if self.readonly else ("open", " for writing")
        self._turn_off(f"cannot {how[0]} tuning database {self.path} (from {self.origin}){how[1]} here: {cause}; "
                       f"the file was left as it is"
                       + ("" if self.readonly else "; to only read it, set GRAPHTUNE_DB_READONLY=1"))

    def _turn_off(self, reason: str) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn, self._state, self._off_reason = None, "off", reason
        if not self._quiet:  # a caller that raises the reason itself (the CLI) needs no warning besides
            _warn_once(self.path, "off:" + reason, "%s; running without a tuning database", reason)

    def _connect(self) -> sqlite3.Connection:
        # One connection per process, shared by its threads under self._lock.
        return sqlite3.connect(str(self.path), timeout=_BUSY_TIMEOUT_S, isolation_level=None,
                               check_same_thread=False)

    def _foreign(self, why: str) -> None:
        self._turn_off(f"{self.path} (from {self.origin}) is not a graphtune tuning database: {why}; graphtune "
                       f"left it untouched: point {self.origin if self.origin in ('GRAPHTUNE_DB', '--db') else 'it'}"
                       f" at another file, or move this one away")

    def _whose(self) -> str | None:
        """_classify, turning the database off (and returning None) for a file that is not graphtune's."""
        try:
            kind, why = _classify(self.path)
        except OSError as exc:
            self._turn_off(f"cannot read tuning database {self.path} (from {self.origin}): {exc}")
            return None
        if kind == "foreign":
            self._foreign(why)
            return None
        return kind

    def _open_writable(self) -> None:
        # Judged before the lock too, so that another program's file never gets a lock file next to it.
        if self._whose() is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._turn_off(f"cannot create the directory of tuning database {self.path} (from {self.origin}): {exc}")
            return
        with _open_lock(self.path):
            kind = self._whose()  # again under the lock: another process may have created or repaired it
            if kind is None:
                return
            problem = None
            conn = None
            verdict = None
            if kind == "ours":
                verdict, detail = self._inspect_readonly()
                if verdict == "retry":
                    conn = self._connect()
                    verdict, detail = _inspect(conn, self.path)
                elif verdict != "damaged":
                    conn = self._connect()
                if verdict == "access":
                    conn.close()
                    self._no_access(detail)
                    return
                if verdict == "damaged":
                    problem = detail
                elif verdict == "future":
                    conn.close()
                    # A newer graphtune wrote this file: it is not damaged, so it is not moved aside (that would
                    # hide the newer version's results from it, e.g. two environments sharing one cache
                    # directory), and this version must not write rows the newer schema may not expect.
                    # Reading it would guess at a layout this code does not know. So: no database at all.
                    self._turn_off(f"tuning database {self.path} has schema version {detail}, newer than this "
                                   f"graphtune's {SCHEMA_VERSION} (left untouched)")
                    return
                elif verdict == "busy":
                    conn.close()
                    self._turn_off(f"tuning database {self.path} stayed locked for {_BUSY_TIMEOUT_S:.0f} s ({detail})")
                    return
            if problem is not None:
                if conn is not None:
                    conn.close()
                    conn = None
                if not self._move_aside(problem):
                    return
            if conn is None:
                conn = self._connect()
                # Before the first table: an entry with a few candidates and their resources is 2-3 KB, and a
                # 4 KiB page holds one such row, an 8 KiB page three (a third less file to write and read).
                conn.execute("PRAGMA page_size = 8192")
            self._conn = conn
            if not (verdict == "ok" and _settled(conn)):
                # Schema and application_id first, in one transaction (a new file goes from empty to stamped with
                # tables at once, so no other process ever sees an unstamped SQLite file of ours), then WAL.
                future = self._transaction(self._migrate)
                if future is not None:
                    self._turn_off(f"tuning database {self.path} has schema version {future}, newer than this "
                                   f"graphtune's {SCHEMA_VERSION} (left untouched)")
                    return
                self._transaction(lambda c: c.execute("PRAGMA journal_mode=WAL").fetchone(), begin=False)
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: safe against a crashed process
            self._state = "ready"

    def _inspect_readonly(self) -> tuple[str, Any]:
        """_inspect through a read-only connection first: a connection that may write would, on closing, fold
        a damaged file's WAL into it or delete an unreadable WAL, and those are set aside with the file as found.
        A verdict that may come from the read-only connection itself (a hot journal it cannot roll back, a -shm
        it cannot create) is not taken as damage: the caller inspects again through a writable connection."""
        try:
            conn = sqlite3.connect(self.path.resolve().as_uri() + "?mode=ro", uri=True, timeout=_BUSY_TIMEOUT_S,
                                   isolation_level=None)
        except sqlite3.Error as exc:
            return "retry", str(exc)
        try:
            verdict, detail = _inspect(conn, self.path)
        finally:
            conn.close()
        if verdict == "access":
            return "retry", detail
        return verdict, detail

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> int | None:
        """Bring the schema to SCHEMA_VERSION inside the caller's write transaction; the newer version found,
        if any. Read again under the write lock: another rank may have created the schema meanwhile."""
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = 0
        if _META_TABLE in tables:
            version = int(conn.execute(f"SELECT value FROM {_META_TABLE} WHERE name = 'schema_version'").fetchone()[0])
        if version > SCHEMA_VERSION:
            return version
        for step in range(version, SCHEMA_VERSION):
            for statement in _MIGRATIONS[step]:
                conn.execute(statement)
            conn.execute(f"INSERT OR REPLACE INTO {_META_TABLE} (name, value) VALUES ('schema_version', ?)",
                         (str(step + 1),))
            logger.debug("tuning database schema: version %d -> %d", step, step + 1)
        if conn.execute("PRAGMA application_id").fetchone()[0] != _APPLICATION_ID:
            conn.execute(f"PRAGMA application_id = {_APPLICATION_ID}")  # new, or created before the stamp
        return None

    def _move_aside(self, problem: str) -> bool:
        target = self.path.with_name(f"{self.path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        n = 1
        while target.exists():
            target = self.path.with_name(f"{self.path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}-{n}")
            n += 1
        try:
            os.rename(self.path, target)
            for suffix in ("-wal", "-shm", "-journal"):
                sibling = self.path.with_name(self.path.name + suffix)
                if sibling.exists():
                    os.rename(sibling, target.with_name(target.name + suffix))
        except OSError as exc:
            self._turn_off(f"tuning database {self.path} is damaged ({problem}) and could not be moved aside: {exc}")
            return False
        logger.warning("tuning database %s is damaged (%s): moved it to %s (kept, not deleted) and started a "
                       "fresh one", self.path, problem, target)
        return True

    def _open_readonly(self) -> None:
        kind = self._whose()
        if kind in ("missing", "empty"):
            return  # nothing to read; looked for again on the next use, and never created
        if kind is None:
            return
        uri = self.path.resolve().as_uri()
        try:
            conn = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=_BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.OperationalError:
            # A WAL file on a read-only mount cannot get its -shm index; immutable reads it as it stands.
            conn = sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True, isolation_level=None,
                                   check_same_thread=False)
        verdict, detail = _inspect(conn, self.path)
        if verdict == "ok":
            self._conn, self._state = conn, "ready"
            return
        conn.close()
        if verdict == "empty":
            return
        if verdict == "damaged":
            self._turn_off(f"tuning database {self.path} is damaged ({detail}); left in place because "
                           f"GRAPHTUNE_DB_READONLY=1")
        elif verdict == "old":
            self._turn_off(f"tuning database {self.path} has schema version {detail}, older than this graphtune's "
                           f"{SCHEMA_VERSION}, and GRAPHTUNE_DB_READONLY=1 forbids migrating it")
        elif verdict == "future":
            self._turn_off(f"tuning database {self.path} has schema version {detail}, newer than this "
                           f"graphtune's {SCHEMA_VERSION}")
        elif verdict == "access":
            self._no_access(detail)
        else:
            self._turn_off(f"tuning database {self.path} stayed locked for {_BUSY_TIMEOUT_S:.0f} s ({detail})")

    def _transaction(self, body: Callable[[sqlite3.Connection], T], begin: bool = True) -> T:
        """Run ``body`` in one write transaction, retried while another process holds the write lock."""
        conn = self._conn
        assert conn is not None
        delay = 0.01
        for attempt in range(_WRITE_ATTEMPTS):
            try:
                if begin:
                    conn.execute("BEGIN IMMEDIATE")
                result = body(conn)
                if begin:
                    conn.execute("COMMIT")
                return result
            except sqlite3.OperationalError as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if not _is_busy(exc) or attempt == _WRITE_ATTEMPTS - 1:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            if self._pid == os.getpid() and self._conn is not None:
                self._conn.close()
            self._conn, self._state = None, "closed"

    @property
    def usable(self) -> bool:
        """Whether this process can read the database (False: missing in read-only mode, or turned off)."""
        with self._lock:
            return self._ready() is not None

    @property
    def problem(self) -> str | None:
        """Why this process cannot use the database (opening it first if needed); None when it can, or when it
        is simply missing in read-only mode. For callers that must report rather than carry on (the CLI)."""
        with self._lock:
            if self._state == "closed":
                self._ready_quietly()
            return self._off_reason if self._state == "off" else None

    def check_writable(self) -> None:
        """Raise DatabaseError naming the file, what chose it and the cause unless a write would land: read-only
        mode, a file that is not graphtune's, a directory, a read-only file or directory, a newer schema. The
        check writes a row and rolls it back, so the file is not changed."""
        with self._lock:
            self._writable("nothing can be recorded")
            try:
                self._transaction(_write_probe)
            except _ProbeDone:
                return
            except sqlite3.Error as exc:
                raise DatabaseError(f"cannot write tuning database {self.path} (from {self.origin}): {exc}") from None

    def record_all(self, entries: Sequence[Entry]) -> int:
        """Store tuning results in one transaction (each replacing any entry with the same identity and key), for
        callers that report what they stored: any failure is a DatabaseError naming the file and the cause, and
        then nothing is stored. Returns how many entries were stored."""
        rows = [_entry_to_row(_checked(e)) for e in entries]
        insert = (f"INSERT OR REPLACE INTO entries ({', '.join(_COLUMNS)}) "
                  f"VALUES ({', '.join('?' * len(_COLUMNS))})")
        with self._lock:
            self._writable("nothing recorded")
            try:
                self._transaction(lambda c: c.executemany(insert, rows))
            except sqlite3.Error as exc:
                raise DatabaseError(f"could not record {len(rows)} entries in tuning database {self.path} "
                                    f"(from {self.origin}): {exc}; nothing was recorded") from None
        return len(rows)

    # -- reading --------------------------------------------------------------------------------------------

    def _rows(self, where: str = "", params: Sequence[Any] = ()) -> list[Entry]:
        conn = self._ready()
        if conn is None:
            return []
        rows = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM entries {where}", params).fetchall()
        out = []
        for row in rows:
            try:
                out.append(_entry_from_row(row))
            except (_Invalid, ValueError) as exc:  # a row edited by hand: skip it, keep the rest
                _warn_once(self.path, f"row:{row[:9]}", "tuning database %s: skipping unreadable entry of kernel "
                           "%r key %s: %s", self.path, row[0], row[8], exc)
        return out

    def load_kernel(self, kernel: KernelIdentity, env: EnvIdentity) -> dict[tuple, Entry]:
        """Every stored entry of ``kernel`` whose full identity (kernel and environment) matches, by key.
        One query; never raises for storage trouble (it logs a warning and returns what it could read)."""
        where = "WHERE " + " AND ".join(f"{c} = ?" for c in _ID_COLUMNS[:-1])
        with self._lock:
            try:
                found = self._rows(where, _identity_params(kernel, env))
            except sqlite3.Error as exc:
                _warn_once(self.path, "read", "could not read tuning database %s: %s", self.path, exc)
                return {}
        return {entry.key: entry for entry in found}

    def entries(self, kernel_name: str | None = None, stale_only: bool = False,
                env: EnvIdentity | None = None) -> list[Entry]:
        """Stored entries (of one kernel name), sorted; ``stale_only``: those ``staleness`` finds stale in
        ``env`` (default: this process's environment)."""
        with self._lock:
            try:
                if kernel_name is None:
                    found = self._rows()
                else:
                    found = self._rows("WHERE kernel_name = ?", (kernel_name,))
            except sqlite3.Error as exc:
                raise DatabaseError(f"cannot read tuning database {self.path}: {exc}") from None
        found.sort(key=_sort_key)
        if stale_only:
            reasons = staleness(found, env if env is not None else current_env())
            found = [e for e, why in zip(found, reasons) if why is not None]
        return found

    def stale(self, env: EnvIdentity | None = None) -> list[Entry]:
        return self.entries(stale_only=True, env=env)

    # -- reading at scale: streamed, in bounded memory -------------------------------------------------------

    @staticmethod
    def _filter(kernel_name: str | None, device: str | None) -> tuple[str, list[Any]]:
        clauses, params = [], []
        if kernel_name is not None:
            clauses.append("kernel_name = ?")
            params.append(kernel_name)
        if device is not None:  # GPU names are ASCII: NOCASE is the casefold of the filter
            clauses.append("gpu_name = ? COLLATE NOCASE")
            params.append(device.strip())
        return ("WHERE " + " AND ".join(clauses)) if clauses else "", params

    def iter_entries(self, kernel_name: str | None = None, device: str | None = None, *,
                     summary: bool = False, batch: int = 256) -> Iterator[Any]:
        """Stored entries (``Summary`` objects with ``summary=True``, which skips parsing the candidates) of one
        kernel name and / or GPU name (case-insensitive), streamed: memory holds one batch of rows and one
        kernel identity's entries in one environment, whatever the size of the database. Order: kernel name,
        source and candidate-list hashes, environment (the primary key's order, so no sort of the table), then
        the key with numbers in numeric order. Unreadable rows are skipped with a warning; storage trouble is a
        DatabaseError."""
        if summary:
            return self._stream(kernel_name, device, _SUMMARY_COLUMNS, _summary_from_row, lambda e: e.key, batch)
        return self._stream(kernel_name, device, _COLUMNS, _entry_from_row, lambda e: e.key, batch)

    def _stream(self, kernel_name: str | None, device: str | None, columns: Sequence[str],
                parse: Callable[[Sequence[Any]], Any], key_of: Callable[[Any], Sequence[Any]],
                batch: int) -> Iterator[Any]:
        where, params = self._filter(kernel_name, device)
        order = ", ".join(_ID_COLUMNS)
        sql = f"SELECT {', '.join(columns)} FROM entries {where} ORDER BY {order}"
        with self._lock:
            conn = self._ready()
            if conn is None:
                return
            try:
                cursor = conn.execute(sql, params)
            except sqlite3.Error as exc:
                raise DatabaseError(f"cannot read tuning database {self.path}: {exc}") from None
        group: list[Any] = []
        group_id: tuple | None = None
        while True:
            with self._lock:
                try:
                    rows = cursor.fetchmany(batch)
                except sqlite3.Error as exc:
                    raise DatabaseError(f"cannot read tuning database {self.path}: {exc}") from None
            if not rows:
                break
            for row in rows:
                ident = tuple(row[:8])
                if ident != group_id:
                    group.sort(key=lambda e: _key_order(key_of(e)))
                    yield from group
                    group, group_id = [], ident
                try:
                    group.append(parse(row))
                except (_Invalid, ValueError, TypeError) as exc:  # a row edited by hand: skip it, keep the rest
                    _warn_once(self.path, f"row:{row[:9]}", "tuning database %s: skipping unreadable entry of "
                               "kernel %r key %s: %s", self.path, row[0], row[8], exc)
        group.sort(key=lambda e: _key_order(key_of(e)))
        yield from group

    def count(self, kernel_name: str | None = None, device: str | None = None) -> int:
        """How many entries (of one kernel name, of one GPU name) are stored; one indexed query."""
        where, params = self._filter(kernel_name, device)
        return int(self._scalar_query(f"SELECT COUNT(*) FROM entries {where}", params)[0][0])

    def kernel_names(self) -> list[str]:
        return [r[0] for r in self._scalar_query("SELECT DISTINCT kernel_name FROM entries ORDER BY 1", ())]

    def gpu_names(self, kernel_name: str | None = None) -> list[str]:
        where, params = self._filter(kernel_name, None)
        return [r[0] for r in self._scalar_query(f"SELECT DISTINCT gpu_name FROM entries {where} ORDER BY 1", params)]

    def _scalar_query(self, sql: str, params: Sequence[Any]) -> list[tuple]:
        with self._lock:
            conn = self._ready()
            if conn is None:
                return [(0,)] if sql.startswith("SELECT COUNT") else []
            try:
                return conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise DatabaseError(f"cannot read tuning database {self.path}: {exc}") from None

    def staleness_of(self, env: EnvIdentity | None = None) -> Callable[[Any], str | None]:
        """``staleness`` for entries streamed one at a time (``Entry`` or ``Summary``): what makes an entry
        superseded (the newest entry of its kernel name in ``env``) is looked up once per kernel name, by query,
        instead of from a list of every entry."""
        env = env if env is not None else current_env()
        newest: dict[str, tuple[str, str] | None] = {}
        where = " AND ".join(f"{c} = ?" for c in _ENV_COLUMNS)
        sql = (f"SELECT source_hash, configs_hash FROM entries WHERE kernel_name = ? AND {where} "
               f"ORDER BY tuned_at DESC, source_hash DESC, configs_hash DESC LIMIT 1")

        def reason(entry: Any) -> str | None:
            if entry.env != env:
                return "environment: " + "; ".join(env_mismatch(entry.env, env))
            name = entry.kernel.name
            if name not in newest:
                rows = self._scalar_query(sql, (name,) + dataclasses.astuple(env))
                newest[name] = tuple(rows[0]) if rows else None
            found = newest[name]
            if found is None:
                return None
            changed = [what for what, mine, new in (("source", entry.kernel.source_hash, found[0]),
                                                    ("candidate list", entry.kernel.configs_hash, found[1]))
                       if mine != new]
            return f"superseded: kernel {' and '.join(changed)} changed and was re-tuned" if changed else None

        return reason

    # -- writing --------------------------------------------------------------------------------------------

    def _writable(self, what: str) -> sqlite3.Connection:
        if self.readonly:
            raise DatabaseError(f"tuning database {self.path} is read-only (GRAPHTUNE_DB_READONLY=1): {what}")
        conn = self._ready_quietly()  # the reason is raised, not logged as well
        if conn is None:
            raise DatabaseError(f"{self._off_reason or f'tuning database {self.path} is not usable'}; {what}")
        return conn

    def record(self, entry: Entry) -> None:
        """Store one live tuning result, replacing any entry with the same identity and key (the newest tuning
        is the truth for this process). Bad field types raise ValueError; storage trouble only logs."""
        row = _entry_to_row(_checked(entry))
        if self.readonly:
            logger.debug("GRAPHTUNE_DB_READONLY=1: not recording %s key %s", entry.kernel.name, entry.key)
            return
        with self._lock:
            if self._ready() is None:
                return
            try:
                self._transaction(lambda c: c.execute(
                    f"INSERT OR REPLACE INTO entries ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                    row))
            except sqlite3.Error as exc:
                logger.warning("could not record the tuning of %s key %s in %s: %s", entry.kernel.name, entry.key,
                               self.path, exc)

    def isolated_configs(self, kernel: KernelIdentity, env: EnvIdentity) -> dict[str, str]:
        """Configs (sorted-key JSON) of ``kernel`` first launched in an isolated worker in ``env``, with the
        outcome: ``"ok"`` or why it failed."""
        where = " AND ".join(f"{c} = ?" for c in _ID_COLUMNS[:-1])
        with self._lock:
            conn = self._ready()
            if conn is None:
                return {}
            try:
                rows = conn.execute(f"SELECT config, outcome FROM isolated_configs WHERE {where}",
                                    _identity_params(kernel, env)).fetchall()
            except sqlite3.Error as exc:
                _warn_once(self.path, "read", "could not read tuning database %s: %s", self.path, exc)
                return {}
        return {r[0]: r[1] for r in rows}

    def record_isolated(self, kernel: KernelIdentity, env: EnvIdentity, outcomes: dict[str, str]) -> None:
        """Remember the outcome (``"ok"`` or the failure) of configs first launched in an isolated worker."""
        if self.readonly or not outcomes:
            return
        params = _identity_params(kernel, env)
        now = time.time()
        with self._lock:
            if self._ready() is None:
                return
            try:
                self._transaction(lambda c: c.executemany(
                    f"INSERT OR REPLACE INTO isolated_configs ({', '.join(_ID_COLUMNS[:-1])}, config, outcome, "
                    f"checked_at) VALUES ({', '.join('?' * (len(_ID_COLUMNS) - 1))}, ?, ?, ?)",
                    [(*params, cfg, outcome, now) for cfg, outcome in outcomes.items()]))
            except sqlite3.Error as exc:
                logger.warning("could not remember isolated outcomes of %s in %s: %s", kernel.name, self.path, exc)

    def remove(self, stale: bool = False, kernel: str | None = None, env: EnvIdentity | None = None) -> list[Entry]:
        """Delete the stale entries (in ``env``, default this process's), those of one kernel name, or the stale
        ones of one kernel name; return what was deleted. Asking for neither is a ValueError. The isolated-launch
        records of the same kernels go too (``remove_all`` also counts them)."""
        return self.remove_all(stale=stale, kernel=kernel, env=env)[0]

    def remove_all(self, stale: bool = False, kernel: str | None = None, env: EnvIdentity | None = None
                   ) -> tuple[list[Entry], int]:
        """``remove``, in one transaction with the isolated-launch records (isolated_configs) of the same
        selection (one kernel name's; with ``stale``, those of another environment): the deleted entries and how
        many records went with them."""
        if not stale and kernel is None:
            raise ValueError("prune needs stale=True and/or kernel=NAME; it never removes every entry by default")
        if stale and env is None:
            env = current_env()
        where, params = ("WHERE kernel_name = ?", (kernel,)) if kernel is not None else ("", ())

        def body(conn: sqlite3.Connection) -> tuple[list[Entry], int]:
            rows = conn.execute(f"SELECT rowid, {', '.join(_COLUMNS)} FROM entries {where}", params).fetchall()
            entries, rowids = [], []
            for row in rows:
                try:
                    entries.append(_entry_from_row(row[1:]))
                    rowids.append(row[0])
                except (_Invalid, ValueError):
                    continue
            chosen = list(zip(entries, rowids))
            if stale:
                chosen = [pair for pair, why in zip(chosen, staleness(entries, env)) if why is not None]
            conn.executemany("DELETE FROM entries WHERE rowid = ?", [(rowid,) for _, rowid in chosen])
            return sorted((e for e, _ in chosen), key=_sort_key), _remove_isolated(conn, kernel, env if stale else None)

        with self._lock:
            self._writable("nothing removed")
            try:
                return self._transaction(body)
            except sqlite3.Error as exc:
                raise DatabaseError(f"could not prune tuning database {self.path}: {exc}") from None

    def prune(self, stale: bool = False, kernel: str | None = None) -> int:
        """``remove`` that returns how many entries it deleted."""
        return len(self.remove(stale=stale, kernel=kernel))

    # -- export and import ----------------------------------------------------------------------------------

    def export(self, path: str | os.PathLike, kernel: str | None = None, device: str | None = None,
               origin: str | None = None) -> int:
        """Write the entries (of one kernel name, of one GPU name, case-insensitive) to a JSON file; how many.
        Streamed, one entry per line: memory does not grow with the database. Written to a temporary file
        renamed over ``path`` at the end, so a reader never sees half a file and a failure leaves no file.
        ``path`` is checked first (``export_target``): the database itself, a file that is not an export or not
        a regular file is refused; a symlink's target is replaced, the link kept. ``origin``: the option that
        named ``path``, for the error."""
        target = export_target(path, self.path, origin)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        n = 0
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(f'{{"format": {json.dumps(FORMAT)}, "version": {FORMAT_VERSION}, '
                         f'"exported_at": {json.dumps(time.time())}, "entries": [')
                # rows go to JSON form without becoming Entry objects: validated all the same, at a third of the cost
                for _, text in self._stream(kernel, device, _COLUMNS, _keyed_export_text, lambda t: t[0], 256):
                    fh.write((",\n" if n else "\n") + text)
                    n += 1
                fh.write("\n]}\n")
            os.replace(tmp, target)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise DatabaseError(f"cannot write tuning export {path}: {exc}") from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return n

    def import_file(self, path: str | os.PathLike) -> ImportReport:
        """Import an export file in one transaction: new entries are added; where an entry exists, the one with
        the better (lower) chosen median stays and the conflict is reported. Any problem with the file is a
        DatabaseError naming it, and nothing is imported. The file is read one entry at a time (memory does not
        grow with its size), inside the transaction that a problem rolls back."""
        where = "WHERE " + " AND ".join(f"{c} = ?" for c in _ID_COLUMNS)
        values = f"({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
        insert = f"INSERT OR REPLACE INTO entries {values}"
        add = f"INSERT OR IGNORE INTO entries {values}"

        def body(conn: sqlite3.Connection) -> ImportReport:
            counts = {"add": 0, "replace": 0, "keep": 0}
            conflicts = []

            def one(entry: dict[str, Any], row: tuple) -> None:
                if conn.execute(add, row).rowcount == 1:
                    counts["add"] += 1
                    return
                found = conn.execute(f"SELECT chosen, chosen_median_ms FROM entries {where}", row[:9]).fetchone()
                existing = None
                if found is not None:
                    try:
                        existing = (json.loads(found[0]), found[1])
                    except ValueError:
                        existing = ({}, None)  # a row edited by hand: the imported entry replaces it
                action, conflict = _merge_values(existing, entry["chosen"], row[10], entry["kernel"]["name"],
                                                 tuple(entry["key"]), entry["env"]["gpu_name"])
                counts[action] += 1
                if conflict is not None:
                    conflicts.append(conflict)
                if action != "keep":
                    conn.execute(insert, row)

            def flush(batch: list[tuple[dict[str, Any], tuple]]) -> None:
                # Most entries of a large import are new: add a batch in one executemany, and only when some
                # row of it already existed (fewer changes than rows) undo it and merge row by row.
                conn.execute("SAVEPOINT import_batch")
                before = conn.total_changes
                conn.executemany(add, [row for _, row in batch])
                if conn.total_changes - before == len(batch):
                    conn.execute("RELEASE import_batch")
                    counts["add"] += len(batch)
                    return
                conn.execute("ROLLBACK TO import_batch")
                conn.execute("RELEASE import_batch")
                for entry, row in batch:
                    one(entry, row)

            batch: list[tuple[dict[str, Any], tuple]] = []
            for entry, candidates_text in _iter_export(path, as_json=True):
                batch.append((entry, _json_to_row(entry, candidates_text)))
                if len(batch) == _IMPORT_BATCH:
                    flush(batch)
                    batch = []
            if batch:
                flush(batch)
            return ImportReport(path=str(path), added=counts["add"], replaced=counts["replace"], kept=counts["keep"],
                                conflicts=tuple(conflicts))

        with self._lock:
            self._writable(f"nothing imported from {path}")
            try:
                return self._transaction(body)
            except (sqlite3.Error, _Invalid) as exc:
                raise DatabaseError(f"could not import {path} into tuning database {self.path}: {exc}; "
                                    f"nothing was imported") from None


# --------------------------------------------------------------------------------------- process-wide state
# The open database and the loaded export entries live in graphtune.state (one place for process state).


def get_db() -> TuningDB | None:
    """The process-wide database (None when GRAPHTUNE_NO_DB=1), opened lazily on its first use; a change of
    GRAPHTUNE_DB or GRAPHTUNE_DB_READONLY since the last call gives a new one."""
    if settings.db_disabled():
        return None
    spec = (settings.db_path(), settings.db_readonly())
    with STATE.lock:
        if STATE.db is None or STATE.db_spec != spec:
            STATE.db, STATE.db_spec = TuningDB(None, readonly=spec[1]), spec
        return STATE.db


def reset_db() -> None:
    """Close and forget the process-wide database and the once-per-process warnings (tests)."""
    with STATE.lock:
        database, STATE.db, STATE.db_spec = STATE.db, None, None
        STATE.warned.difference_update([w for w in STATE.warned if w.startswith("db:")])
    if database is not None:
        database.close()


def load(path: str | os.PathLike) -> ImportReport:
    """Read an export file into this process's registry of shipped entries (consulted before the database,
    never written to disk, so it works with GRAPHTUNE_DB_READONLY=1). Entries of other GPUs or versions are
    held but never match. Between two files, the better chosen median wins and the conflict is reported. A bad
    file is a DatabaseError naming it, and nothing is loaded."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise DatabaseError(f"graphtune.load(path={path!r}): expected the path of a tuning export file")
    incoming = _read_export(path)
    counts = {"add": 0, "replace": 0, "keep": 0}
    conflicts = []
    with STATE.lock:
        for entry in incoming:
            table = STATE.loaded.setdefault((entry.kernel, entry.env), {})
            action, conflict = _merge(table.get(entry.key), entry)
            counts[action] += 1
            if conflict is not None:
                conflicts.append(conflict)
            if action != "keep":
                table[entry.key] = entry
    report = ImportReport(path=str(path), added=counts["add"], replaced=counts["replace"], kept=counts["keep"],
                          conflicts=tuple(conflicts))
    logger.info("loaded %d tuning entries from %s (%d replaced, %d kept, %d conflicts)", report.added, path,
                report.replaced, report.kept, len(report.conflicts))
    return report


def loaded_entries(kernel: KernelIdentity, env: EnvIdentity) -> dict[tuple, Entry]:
    """The entries ``load`` read for exactly this kernel and environment identity, by key."""
    with STATE.lock:
        return dict(STATE.loaded.get((kernel, env), {}))


def clear_loaded() -> None:
    with STATE.lock:
        STATE.loaded.clear()


def _after_fork_in_child() -> None:
    for db in list(_instances):
        db._abandon_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
