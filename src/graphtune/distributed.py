"""Rank agreement and sharded offline tuning through ``torch.distributed``.

Why: tensor-parallel ranks that tune on their own pick different configs within timing noise, and then run
different kernels (non-deterministic results; in one engine a collective deadlock). Here every rank of a
process group ends with the same config for every key.

Modes (``set_process_group(group=None, mode="merge")``; with torch.distributed initialised, a world size
above one and nothing set, the default group and ``"merge"`` are used):

- ``"merge"``: every rank times its candidates; the medians are all-gathered and every rank takes the argmin
  of their sum over ranks (a candidate that failed on any rank counts as +inf; ties go to the lower index).
- ``"broadcast"``: rank 0's pick is used everywhere (a candidate that failed on another rank is never
  chosen: then rank 0's fastest candidate that every rank could run is). ``should_time()`` tells the tuner
  that ranks other than 0 need not time at all.
- ``"off"``: no collectives; each rank keeps its own pick.

Stored results: before a rank uses an entry from its own database or loaded export, ``agree_stored`` asks
which ranks hold one for this key. When all do, all use one of them (``"broadcast"``: rank 0's; ``"merge"``:
the one with the lowest stored median, ranks whose median is unknown counting as +inf, rank 0's when none is
known, ties to the lower rank). When any rank lacks one, every rank tunes the key and agrees as above.

The collective contract
-----------------------
Every rank of the group meets the same keys in the same order (tensor-parallel ranks run the same shapes),
so every rank enters the same agreements in the same order: one all-gather of a fixed-size header per
agreement (a 64-bit hash of what is agreed on: phase, kernel name, key, mode and candidate configs), then,
when tuning, one all-gather of each rank's medians. A rank whose header differs makes every rank raise
``DistributedError`` listing each rank's kernel and key; the group stays usable (the collective completed).
A peer that does not answer within ``GRAPHTUNE_DIST_TIMEOUT_S`` makes the waiting ranks raise
``DistributedError`` naming the kernel, the key and the ranks that did not arrive (each rank notes the
agreement it has reached in the group's store, so the missing ones can be named); after that error the
group has a collective in flight and the process should stop. The timeout must exceed the spread of tuning
time between ranks (default 300 s). Inside CUDA graph capture, and while frozen, no collective ever runs:
misses there follow the local, deterministic policy, so warm every size up before capture.

Payloads are small tensors on the backend's device (CUDA for NCCL, CPU otherwise); the wait polls the
collective's completion against a deadline, which works for gloo and NCCL alike.

Sharded offline tuning (``tune_sharded``, ``graphtune tune MODULE:TARGET``): the (bucket, config) pairs are
dealt round-robin to the ranks, each rank times its share with ``GraphtuneKernel.time_candidates``, the rows
are all-gathered, every rank installs the argmin of each bucket, and rank 0 writes the export file and / or
the database. Run alone it does the same work in one process.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Sequence, runtime_checkable

from . import capture, settings
from ._log import logger
from .configs import config_label, config_to_dict
from .errors import DatabaseError, DistributedError, TuningError
from .keys import key_to_json

if TYPE_CHECKING:
    import torch
    import triton

    from .tuner import Choice, GraphtuneKernel

__all__ = ["MODES", "set_process_group", "current_mode", "current_rank", "current_world_size", "should_time",
           "agree", "agree_stored", "TuneTarget", "TunedBucket", "tune_sharded", "init_from_env", "merge_choice",
           "broadcast_choice", "stored_choice"]

MODES = ("merge", "broadcast", "off")
_MODE_CODES = {"off": 0, "merge": 1, "broadcast": 2}


@dataclass(frozen=True)
class _Setting:
    group: Any          # a ProcessGroup, or None for the default group
    mode: str


_setting = _Setting(None, "merge")
_seq: dict[Any, int] = {}   # process group -> agreements entered so far (the same on every rank)


def set_process_group(group: Any = None, mode: str = "merge") -> None:
    """Agree on configs across the ranks of ``group`` (None: the default group) in ``mode``: ``"merge"``,
    ``"broadcast"`` or ``"off"``. Every rank of the group must call it with the same arguments."""
    if mode not in MODES:
        raise ValueError(f"set_process_group(mode={mode!r}): expected one of {MODES}")
    if group is not None:
        dist = _dist()
        if dist is None or not dist.is_initialized():
            raise ValueError(f"set_process_group(group={group!r}): torch.distributed is not initialised; call "
                             f"torch.distributed.init_process_group first")
    global _setting
    _setting = _Setting(group, mode)


def current_mode() -> str:
    """The mode in effect now: the one set (default ``"merge"``) when a group of more than one rank is
    active, else ``"off"``."""
    return _setting.mode if _active(sharding=False) is not None else "off"


def current_rank() -> int:
    """This process's rank in the agreement group (0 when none is active)."""
    group = _active(sharding=True)
    return group.rank if group is not None else 0


def current_world_size() -> int:
    """How many ranks the agreement group has (1 when none is active)."""
    group = _active(sharding=True)
    return group.world if group is not None else 1


def should_time() -> bool:
    """False on ranks other than 0 in ``"broadcast"`` mode (their timings would be ignored)."""
    group = _active(sharding=False)
    return not (group is not None and _setting.mode == "broadcast" and group.rank != 0)


# ------------------------------------------------------------------------------------------------ the group


@dataclass(frozen=True)
class _Group:
    pg: Any
    rank: int
    world: int
    device: Any   # torch.device of the payloads


def _dist() -> Any:
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    return dist if dist.is_available() else None


def _active(sharding: bool) -> _Group | None:
    """The group to agree over, or None (no torch.distributed, one rank, mode off, or not a member).
    Sharded tuning ignores the mode: "off" only switches off the agreement of online tuning."""
    if not sharding and _setting.mode == "off":
        return None
    dist = _dist()
    if dist is None or not dist.is_initialized():
        return None
    pg = _setting.group if _setting.group is not None else dist.group.WORLD
    world = dist.get_world_size(pg)
    rank = dist.get_rank(pg)
    if world <= 1 or rank < 0:
        return None
    import torch
    backend = str(dist.get_backend(pg)).lower()
    if "nccl" in backend and "gloo" not in backend:
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    return _Group(pg, rank, world, device)


def init_from_env() -> bool:
    """Initialise the default process group from torchrun's environment (``WORLD_SIZE``, ``RANK``,
    ``MASTER_ADDR``, ``MASTER_PORT``; ``LOCAL_RANK`` picks the GPU) when ``WORLD_SIZE`` > 1 and none is
    initialised: NCCL when CUDA is usable, gloo otherwise. True when this call initialised it. These are
    torchrun's variables, not graphtune settings, so they are read here."""
    dist = _dist()
    if dist is None or dist.is_initialized():
        return False
    world = int(os.environ.get("WORLD_SIZE", "1") or "1")
    if world <= 1:
        return False
    import datetime

    import torch
    use_nccl = torch.cuda.is_available() and not settings.interpret()
    if use_nccl:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0") or "0"))
    # the backend's own timeout only has to outlast ours: graphtune's waits end first with a clear error
    timeout = datetime.timedelta(seconds=max(600.0, 2 * settings.dist_timeout_s()))
    dist.init_process_group("nccl" if use_nccl else "gloo", timeout=timeout)
    return True


# ------------------------------------------------------------------------------------- monitored collectives


_HEADER = struct.Struct("<4sqqqqqd")   # magic, hash, mode, n candidates, index, flags, median (ms)
_HEADER_BYTES = 256                   # the header followed by a description of what the rank agrees on
_MAGIC = b"GTD1"
_HAS_STORED = 1


@dataclass(frozen=True)
class _Header:
    digest: int
    mode: int
    n: int
    index: int
    flags: int
    median_ms: float
    text: str

    def pack(self) -> bytes:
        head = _HEADER.pack(_MAGIC, self.digest, self.mode, self.n, self.index, self.flags, self.median_ms)
        text = self.text.encode("utf-8")[: _HEADER_BYTES - _HEADER.size]
        return (head + text).ljust(_HEADER_BYTES, b"\0")

    @classmethod
    def unpack(cls, data: bytes) -> _Header:
        magic, digest, mode, n, index, flags, median = _HEADER.unpack_from(data)
        if magic != _MAGIC:
            raise DistributedError(f"graphtune: a peer sent an agreement header starting {magic!r}, not {_MAGIC!r}: "
                                   f"another collective is interleaved with graphtune's on this process group")
        text = data[_HEADER.size:].rstrip(b"\0").decode("utf-8", errors="replace")
        return cls(digest, mode, n, index, flags, median, text)


def _digest(*parts: Any) -> int:
    blob = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return int.from_bytes(hashlib.blake2b(blob.encode(), digest_size=8).digest(), "little", signed=True)


def _next_seq(group: _Group) -> int:
    seq = _seq.get(group.pg, 0) + 1
    _seq[group.pg] = seq
    return seq


def _store(group: _Group) -> Any:
    try:
        from torch.distributed import distributed_c10d as c10d
        return c10d._get_process_group_store(group.pg)
    except Exception:  # noqa: BLE001 - the store only helps name missing ranks; without it they go unnamed
        return None


def _note_arrival(group: _Group, seq: int, what: str) -> None:
    """Write 'rank r reached agreement #seq (what)' to the group's store, so a rank that times out can say
    which peers never arrived. One key per rank, overwritten each time: the store does not grow."""
    store = _store(group)
    if store is None:
        return
    try:
        store.set(f"graphtune/at/{group.rank}", f"{seq}|{what}")
    except Exception as exc:  # noqa: BLE001
        logger.debug("graphtune: could not note agreement #%d in the store: %s", seq, exc)


def _where_peers_are(group: _Group, seq: int) -> tuple[list[int] | None, dict[int, str]]:
    """The ranks that did not reach agreement #seq (None: unknown) and where each rank last was."""
    store = _store(group)
    if store is None:
        return None, {}
    missing: list[int] = []
    where: dict[int, str] = {}
    try:
        for r in range(group.world):
            key = f"graphtune/at/{r}"
            if not store.check([key]):
                missing.append(r)
                where[r] = "no agreement yet"
                continue
            at, _, what = store.get(key).decode("utf-8", errors="replace").partition("|")
            where[r] = f"agreement #{at}: {what}"
            if int(at) < seq:
                missing.append(r)
    except Exception as exc:  # noqa: BLE001
        logger.debug("graphtune: could not read agreement notes from the store: %s", exc)
        return None, {}
    return missing, where


def _gather(group: _Group, tensor: torch.Tensor, what: str) -> list[torch.Tensor]:
    """All-gather ``tensor`` (same shape on every rank), waiting at most GRAPHTUNE_DIST_TIMEOUT_S."""
    import torch
    import torch.distributed as dist
    timeout = settings.dist_timeout_s()
    seq = _next_seq(group)
    _note_arrival(group, seq, what)
    out = [torch.empty_like(tensor) for _ in range(group.world)]
    try:
        work = dist.all_gather(out, tensor, group=group.pg, async_op=True)
        deadline = time.monotonic() + timeout
        delay = 1e-4
        while not work.is_completed():
            if time.monotonic() >= deadline:
                raise _timeout_error(group, seq, what, timeout)
            time.sleep(delay)
            delay = min(2 * delay, 0.01)   # short first sleeps: peers usually arrive within milliseconds
        work.wait()   # raises the collective's own error, e.g. a peer that died
    except DistributedError:
        raise
    except Exception as exc:  # noqa: BLE001 - any backend error becomes one that names the agreement
        raise DistributedError(f"graphtune: {what}: the collective of agreement #{seq} failed on rank "
                               f"{group.rank} of {group.world}: {type(exc).__name__}: {exc}") from exc
    return out


def _timeout_error(group: _Group, seq: int, what: str, timeout: float) -> DistributedError:
    missing, where = _where_peers_are(group, seq)
    if missing is None:
        who = "peer ranks (which ones is unknown: the group's store could not be read)"
    else:
        who = f"rank(s) {missing} of {group.world}"
    lines = "".join(f"\n  rank {r}: {where[r]}" for r in sorted(where))
    return DistributedError(
        f"graphtune: {what}: no answer from {who} within {timeout:g} s (GRAPHTUNE_DIST_TIMEOUT_S) at agreement "
        f"#{seq}, waiting on rank {group.rank}. Every rank of the group must tune the same keys in the same order "
        f"(see graphtune.distributed); a rank that is still tuning needs a larger GRAPHTUNE_DIST_TIMEOUT_S."
        + (f" Where each rank was:{lines}" if lines else ""))


def _gather_headers(group: _Group, header: _Header, what: str) -> list[_Header]:
    """All-gather one header per rank and check that every rank agrees on the same thing."""
    import torch
    data = torch.frombuffer(bytearray(header.pack()), dtype=torch.uint8).to(group.device)
    got = [_Header.unpack(t.cpu().numpy().tobytes()) for t in _gather(group, data, what)]
    if len({h.digest for h in got}) != 1:
        lines = "".join(f"\n  rank {r}: {h.text}" for r, h in enumerate(got))
        raise DistributedError(f"graphtune: ranks disagree on what they tune (agreement #{_seq[group.pg]}); "
                               f"every rank of the group must tune the same keys in the same order, with the "
                               f"same mode and candidates:{lines}")
    return got


def _gather_bytes(group: _Group, data: bytes, what: str) -> list[bytes]:
    """All-gather a byte string of any length (two collectives: the lengths, then the padded bytes)."""
    import torch
    length = torch.tensor([len(data)], dtype=torch.int64, device=group.device)
    lengths = [int(t.item()) for t in _gather(group, length, what)]
    padded = bytearray(data.ljust(max(lengths), b"\0")) or bytearray(b"\0")
    tensor = torch.frombuffer(padded, dtype=torch.uint8).to(group.device)
    return [t.cpu().numpy().tobytes()[:n] for t, n in zip(_gather(group, tensor, what), lengths)]


# --------------------------------------------------------------------------------------------- decisions


def merge_choice(scores: Sequence[Sequence[float]]) -> int | None:
    """``scores[rank][i]``: rank's median of candidate i (+inf: failed there). The argmin of the sum over
    ranks, summed in rank order so every rank computes the same float; ties to the lower index; None when
    every candidate failed on some rank."""
    best, best_total = None, math.inf
    for i in range(len(scores[0]) if scores else 0):
        total = 0.0
        for row in scores:
            total += row[i]
        if total < best_total:
            best, best_total = i, total
    return best


def broadcast_choice(scores: Sequence[Sequence[float]], root_pick: int) -> int | None:
    """Rank 0's pick when every rank can run it, else rank 0's fastest candidate that every rank can run
    (ties to the lower index); None when no candidate runs on every rank."""
    ok = [all(math.isfinite(row[i]) for row in scores) for i in range(len(scores[0]) if scores else 0)]
    if 0 <= root_pick < len(ok) and ok[root_pick]:
        return root_pick
    best, best_ms = None, math.inf
    for i, fine in enumerate(ok):
        if fine and (best is None or scores[0][i] < best_ms):
            best, best_ms = i, scores[0][i]
    return best


def stored_choice(mode: str, indices: Sequence[int], medians: Sequence[float]) -> tuple[int, int] | None:
    """Which stored entry every rank uses: ``indices[r]`` is rank r's stored config index (-1: none),
    ``medians[r]`` its stored median (+inf / NaN: unknown). Returns (config index, rank it came from), or
    None when some rank holds no entry (then every rank tunes)."""
    if not indices or any(i < 0 for i in indices):
        return None
    if mode == "broadcast":
        return indices[0], 0
    known = [(m, r) for r, m in enumerate(medians) if math.isfinite(m)]
    rank = min(known)[1] if known else 0
    return indices[rank], rank


# ------------------------------------------------------------------------------------------- online agreement


def _describe(phase: str, kernel: GraphtuneKernel, key: tuple, mode: str, n: int) -> str:
    return f"{phase} kernel {kernel.name!r} key {list(key_to_json(key))} (mode {mode}, {n} candidates)"


def agree(kernel: GraphtuneKernel, key: tuple, candidates: Sequence[triton.Config], alive: Sequence[int],
          results: Sequence[dict[str, Any]], best_local: int) -> int:
    """The candidate index every rank of the group uses for ``key``, after this rank timed ``candidates``.

    ``alive``: indices that compiled (and validated) here; ``results[i]``: candidate i's ``median_ms`` (or
    ``failure``); ``best_local``: this rank's pick (-1 when nothing is alive here). Without an active group
    (or in mode "off", inside capture, while frozen) it returns ``best_local`` and runs no collective.
    Raises TuningError on every rank when no candidate ran on every rank, DistributedError when the ranks are
    not at the same key or a peer does not answer in time.
    """
    group = _active(sharding=False)
    if group is None or capture.why_no_tuning() is not None:
        return best_local
    import torch
    mode = _setting.mode
    n = len(candidates)
    what = _describe("tune", kernel, key, mode, n)
    digest = _digest("tune", kernel.name, key_to_json(key), mode, [config_to_dict(c) for c in candidates])
    headers = _gather_headers(group, _Header(digest, _MODE_CODES[mode], n, best_local, 0, math.nan, what), what)

    alive_set = set(alive)
    mine = []
    for i in range(n):
        median = results[i].get("median_ms") if i < len(results) else None
        if i not in alive_set or results[i].get("failure"):
            mine.append(math.inf)
        else:
            # alive but untimed (the only survivor here, or a rank that skipped timing in broadcast mode)
            mine.append(float(median) if median is not None else 0.0)
    payload = torch.tensor(mine, dtype=torch.float64, device=group.device)
    scores = [t.cpu().tolist() for t in _gather(group, payload, what)]

    chosen = merge_choice(scores) if mode == "merge" else broadcast_choice(scores, headers[0].index)
    if chosen is None:
        lines = "".join(f"\n  {config_label(c)}: failed on rank(s) "
                        f"{[r for r in range(group.world) if not math.isfinite(scores[r][i])]}"
                        for i, c in enumerate(candidates))
        raise TuningError(f"graphtune: no candidate config of kernel {kernel.name!r} ran on every rank for key "
                          f"{list(key_to_json(key))}:{lines}")
    if mode == "broadcast" and chosen != headers[0].index:
        logger.warning("graphtune: %s %s: rank 0 picked %s, which failed on another rank; every rank uses %s",
                       kernel.name, list(key_to_json(key)), config_label(candidates[headers[0].index])
                       if 0 <= headers[0].index < n else "nothing", config_label(candidates[chosen]))
    if chosen != best_local:
        logger.info("graphtune: %s %s: ranks agreed on %s (mode %s; this rank's own pick was %s)", kernel.name,
                    list(key_to_json(key)), config_label(candidates[chosen]), mode,
                    config_label(candidates[best_local]) if 0 <= best_local < n else "nothing")
    return chosen


def agree_stored(kernel: GraphtuneKernel, key: tuple, stored: Choice | None) -> Choice | None:
    """On a miss: the stored choice every rank uses for ``key``, or None when every rank must tune it.

    ``stored`` is what this rank found in its own database / loaded exports (None: nothing). With an active
    group, outside capture and not frozen, one collective tells which ranks hold an entry; see the module
    docstring for which entry wins. Otherwise ``stored`` is returned as it is. A stored config that is not
    one of ``kernel.configs`` counts as no entry (it cannot be named to the other ranks)."""
    group = _active(sharding=False)
    if group is None or capture.why_no_tuning() is not None:
        return stored
    mode = _setting.mode
    dicts = [config_to_dict(c) for c in kernel.configs]
    index = -1
    if stored is not None:
        mine = config_to_dict(stored.config)
        index = dicts.index(mine) if mine in dicts else -1
    median = math.inf
    if stored is not None and isinstance(stored.timings.get("median_ms"), (int, float)):
        median = float(stored.timings["median_ms"])
    what = _describe("stored lookup", kernel, key, mode, len(dicts))
    digest = _digest("stored", kernel.name, key_to_json(key), mode, dicts)
    headers = _gather_headers(group, _Header(digest, _MODE_CODES[mode], len(dicts), index,
                                             _HAS_STORED if index >= 0 else 0, median, what), what)
    picked = stored_choice(mode, [h.index if h.flags & _HAS_STORED else -1 for h in headers],
                           [h.median_ms for h in headers])
    if picked is None:
        holders = [r for r, h in enumerate(headers) if h.flags & _HAS_STORED]
        if holders:
            logger.info("graphtune: %s %s: only rank(s) %s of %d hold a stored result; every rank tunes it",
                        kernel.name, list(key_to_json(key)), holders, group.world)
        return None
    idx, source_rank = picked
    assert stored is not None   # every rank holds an entry when one is picked
    if idx == index:
        return stored
    choice = type(stored)(kernel.configs[idx], stored.source)
    choice.timings = {"agreed_from_rank": source_rank, "median_ms": headers[source_rank].median_ms}
    logger.info("graphtune: %s %s: using rank %d's stored %s instead of this rank's %s (mode %s)", kernel.name,
                list(key_to_json(key)), source_rank, config_label(kernel.configs[idx]), config_label(stored.config),
                mode)
    return choice


# ------------------------------------------------------------------------------------------ sharded tuning


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


def _check_target(target: Any) -> None:
    from .tuner import GraphtuneKernel
    missing = [a for a in ("kernel", "make_args") if not hasattr(target, a)]
    if missing or not callable(getattr(target, "make_args", None)):
        raise TypeError(f"tune target {target!r} lacks {missing or ['a callable make_args']}: it needs kernel (a "
                        f"GraphtuneKernel), default_sizes and make_args(size) -> (args, kwargs, grid)")
    if not isinstance(target.kernel, GraphtuneKernel):
        raise TypeError(f"tune target {target!r}: kernel is {target.kernel!r}, not a GraphtuneKernel (decorate it "
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
    made = target.make_args(size)
    if not isinstance(made, (tuple, list)) or len(made) != 3:
        raise TypeError(f"{type(target).__name__}.make_args({size}) returned {type(made).__name__}; expected "
                        f"(args, kwargs, grid)")
    args, kwargs, grid = made
    return tuple(args), dict(kwargs or {}), grid


def _candidate_indices(kernel: GraphtuneKernel, args: tuple, kwargs: dict) -> list[int]:
    """Indices of ``kernel.configs`` the kernel's own pruning keeps for these arguments (all without one), so
    offline tuning never times a config that online tuning would have excluded for this shape."""
    if kernel.early_config_prune is None and kernel.perf_model is None:
        return list(range(len(kernel.configs)))
    nargs = {**dict(zip(kernel.arg_names, args)), **kwargs}
    dicts = [config_to_dict(c) for c in kernel.configs]
    kept = [config_to_dict(c) for c in kernel._prune(nargs, kwargs)]
    return sorted({dicts.index(d) for d in kept if d in dicts})


def _time_share(kernel: GraphtuneKernel, args: tuple, kwargs: dict, grid, indices: list[int]) -> list[dict]:
    rows = kernel.time_candidates(args, kwargs, grid, indices)
    for pos, row in enumerate(rows):
        if "failure" not in row and row.get("median_ms") is None:
            # time_candidates skips sampling when a single candidate is left (nothing to compare it with
            # there), but the other ranks' candidates are its rivals: time it paired with itself.
            again = kernel.time_candidates(args, kwargs, grid, [indices[pos], indices[pos]])[0]
            rows[pos] = again
    return rows


def tune_sharded(target: TuneTarget, sizes: Sequence[int] | None = None, *, out: str | os.PathLike | None = None,
                 db: bool | str | os.PathLike = False) -> dict[tuple, TunedBucket]:
    """Tune ``target.kernel`` for every bucket the ``sizes`` (default ``target.default_sizes``) map to.

    Under a process group of several ranks (the one of ``set_process_group``, else the default group,
    initialised from torchrun's environment when needed) the (bucket, config) pairs are dealt round-robin
    to the ranks; every rank installs every bucket's winner; rank 0 writes ``out`` (an export file in the
    format of ``graphtune db export``) and, with ``db`` (True: the default database; a path: that file), records
    the entries in the database. Returns {key: TunedBucket} in the order of ``sizes``."""
    _check_target(target)
    kernel = target.kernel
    sizes = _check_sizes(list(sizes) if sizes is not None else list(getattr(target, "default_sizes", ())))
    if capture.why_no_tuning() is not None:
        raise RuntimeError(f"tune_sharded({kernel.name!r}) inside CUDA graph capture or while frozen")
    database = _database(db)   # before any timing: a read-only database must not cost a tuning run
    init_from_env()
    group = _active(sharding=True)
    rank, world = (group.rank, group.world) if group is not None else (0, 1)
    t0 = time.perf_counter()

    buckets: list[_Bucket] = []
    by_key: dict[tuple, _Bucket] = {}
    rows: list[dict[str, Any]] = []
    dealt = 0   # items (bucket, config) dealt so far, in the same order on every rank
    for size in sizes:
        args, kwargs, grid = _make_args(target, size)
        key = kernel.key_of(args, kwargs)
        if key in by_key:
            by_key[key].sizes.append(size)
            continue
        bucket = _Bucket(key, [size], _candidate_indices(kernel, args, kwargs))
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

    if group is not None:
        plan = [(list(key_to_json(b.key)), b.indices) for b in buckets]
        what = f"sharded tuning of kernel {kernel.name!r} ({len(buckets)} buckets, {dealt} timings)"
        digest = _digest("sharded", kernel.name, plan, [config_to_dict(c) for c in kernel.configs])
        _gather_headers(group, _Header(digest, 0, len(buckets), dealt, 0, math.nan, what), what)
        rows = [r for blob in _gather_bytes(group, json.dumps(rows).encode(), what) for r in json.loads(blob)]

    results: dict[tuple, TunedBucket] = {}
    entries = []
    for b, bucket in enumerate(buckets):
        mine = sorted((r for r in rows if r["bucket"] == b), key=lambda r: r["index"])
        found = {r["index"] for r in mine}
        assert found == set(bucket.indices), f"rows for {sorted(found)}, expected {bucket.indices}"
        timed = [r for r in mine if "failure" not in r and r.get("median_ms") is not None]
        if not timed:
            lines = "".join(f"\n  {config_label(r['config'])}: {r.get('failure', 'not timed')}" for r in mine)
            raise TuningError(f"graphtune: every candidate config of kernel {kernel.name!r} failed for key "
                              f"{list(key_to_json(bucket.key))}:{lines}")
        best = min(timed, key=lambda r: (r["median_ms"], r["index"]))
        config = kernel.configs[best["index"]]
        candidates = tuple({k: v for k, v in r.items() if k != "bucket"} for r in mine)
        kernel.install(bucket.key, config, [dict(r) for r in candidates], source="tuned", record=False)
        key_json = key_to_json(bucket.key)
        results[key_json] = TunedBucket(key=key_json, sizes=tuple(bucket.sizes), config=config_to_dict(config),
                                        label=config_label(config), median_ms=best["median_ms"],
                                        candidates=candidates)
        entries.append(_entry(kernel, bucket.key, config, mine))
    logger.info("graphtune: tuned %s for %d buckets on %d rank(s) in %.2f s", kernel.name, len(buckets), world,
                time.perf_counter() - t0)
    if rank == 0:
        _write(kernel, entries, out, database)
    return results


def _entry(kernel: GraphtuneKernel, key: tuple, config: triton.Config, rows: list[dict[str, Any]]):
    from .db import CandidateResult, new_entry
    from .identity import current_env
    cands = [CandidateResult(config=r["config"], median_ms=r.get("median_ms"), p20_ms=r.get("p20_ms"),
                             p80_ms=r.get("p80_ms"), n=int(r.get("n") or 0), failure=r.get("failure"))
             for r in rows]
    return new_entry(kernel.identity(), current_env(), key_to_json(key), config_to_dict(config), cands, rank=0)


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
