"""Rank agreement through ``torch.distributed``: collectives on plain data (kernel name, key, config dicts,
medians) that return the candidate index every rank uses. Knows nothing of kernels.

Why: tensor-parallel ranks that tune on their own pick different configs within timing noise, and then run
different kernels (non-deterministic results; in one engine a collective deadlock). Here every rank of a
process group ends with the same config for every key.

Modes (``set_process_group(group=None, mode="merge")``; with torch.distributed initialised, a world size
above one and nothing set, the default group and ``"merge"`` are used):

- ``"merge"``: every rank times its candidates; the medians are all-gathered and every rank takes the argmin
  of their sum over ranks (a candidate that failed on any rank counts as +inf; ties go to the lower index).
- ``"broadcast"``: rank 0's pick is used everywhere (a candidate that failed on another rank is never
  chosen: then rank 0's fastest candidate that every rank could run is).
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
collective's completion against a deadline, which works for gloo and NCCL alike. Sharded offline tuning
(sharded.py) uses the same monitored collectives (``gather_headers``, ``gather_bytes``).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from . import capture, settings
from ._log import logger
from .configs import config_label
from .errors import DistributedError, TuningError
from .state import STATE

if TYPE_CHECKING:
    import torch

__all__ = ["MODES", "set_process_group", "current_mode", "current_rank", "current_world_size", "agree",
           "agree_stored", "init_from_env", "merge_choice", "broadcast_choice", "stored_choice", "Group",
           "active_group", "gather_headers", "gather_bytes", "Header", "digest"]

MODES = ("merge", "broadcast", "off")
_MODE_CODES = {"off": 0, "merge": 1, "broadcast": 2}


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
    STATE.agreement = (group, mode)


def current_mode() -> str:
    """The mode in effect now: the one set (default ``"merge"``) when a group of more than one rank is
    active, else ``"off"``."""
    return STATE.agreement[1] if active_group(sharding=False) is not None else "off"


def current_rank() -> int:
    """This process's rank in the agreement group (0 when none is active)."""
    group = active_group(sharding=True)
    return group.rank if group is not None else 0


def current_world_size() -> int:
    """How many ranks the agreement group has (1 when none is active)."""
    group = active_group(sharding=True)
    return group.world if group is not None else 1


# ------------------------------------------------------------------------------------------------ the group


@dataclass(frozen=True)
class Group:
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


def active_group(sharding: bool) -> Group | None:
    """The group to agree over, or None (no torch.distributed, one rank, mode off, or not a member).
    Sharded tuning ignores the mode: "off" only switches off the agreement of online tuning."""
    group_setting, mode = STATE.agreement
    if not sharding and mode == "off":
        return None
    dist = _dist()
    if dist is None or not dist.is_initialized():
        return None
    pg = group_setting if group_setting is not None else dist.group.WORLD
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
    return Group(pg, rank, world, device)


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
class Header:
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
    def unpack(cls, data: bytes) -> Header:
        magic, digest, mode, n, index, flags, median = _HEADER.unpack_from(data)
        if magic != _MAGIC:
            raise DistributedError(f"graphtune: a peer sent an agreement header starting {magic!r}, not {_MAGIC!r}: "
                                   f"another collective is interleaved with graphtune's on this process group")
        text = data[_HEADER.size:].rstrip(b"\0").decode("utf-8", errors="replace")
        return cls(digest, mode, n, index, flags, median, text)


def digest(*parts: Any) -> int:
    blob = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return int.from_bytes(hashlib.blake2b(blob.encode(), digest_size=8).digest(), "little", signed=True)


def _next_seq(group: Group) -> int:
    seq = STATE.agreement_seq.get(group.pg, 0) + 1
    STATE.agreement_seq[group.pg] = seq
    return seq


def _store(group: Group) -> Any:
    try:
        from torch.distributed import distributed_c10d as c10d
        return c10d._get_process_group_store(group.pg)
    except Exception:  # noqa: BLE001 - the store only helps name missing ranks; without it they go unnamed
        return None


def _note_arrival(group: Group, seq: int, what: str) -> None:
    """Write 'rank r reached agreement #seq (what)' to the group's store, so a rank that times out can say
    which peers never arrived. One key per rank, overwritten each time: the store does not grow."""
    store = _store(group)
    if store is None:
        return
    try:
        store.set(f"graphtune/at/{group.rank}", f"{seq}|{what}")
    except Exception as exc:  # noqa: BLE001
        logger.debug("graphtune: could not note agreement #%d in the store: %s", seq, exc)


def _where_peers_are(group: Group, seq: int) -> tuple[list[int] | None, dict[int, str]]:
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


def _gather(group: Group, tensor: torch.Tensor, what: str) -> list[torch.Tensor]:
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


def _timeout_error(group: Group, seq: int, what: str, timeout: float) -> DistributedError:
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


def gather_headers(group: Group, header: Header, what: str) -> list[Header]:
    """All-gather one header per rank and check that every rank agrees on the same thing."""
    import torch
    data = torch.frombuffer(bytearray(header.pack()), dtype=torch.uint8).to(group.device)
    got = [Header.unpack(t.cpu().numpy().tobytes()) for t in _gather(group, data, what)]
    if len({h.digest for h in got}) != 1:
        lines = "".join(f"\n  rank {r}: {h.text}" for r, h in enumerate(got))
        raise DistributedError(f"graphtune: ranks disagree on what they tune (agreement #{STATE.agreement_seq[group.pg]}); "
                               f"every rank of the group must tune the same keys in the same order, with the "
                               f"same mode and candidates:{lines}")
    return got


def gather_bytes(group: Group, data: bytes, what: str) -> list[bytes]:
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


def _describe(phase: str, name: str, key: Sequence[Any], mode: str, configs: Sequence[dict[str, Any]],
              source: str) -> str:
    """What a rank agrees on, as the line a mismatch error prints for it: the candidates' hash and the kernel
    source's, so that ranks that differ only there say where (a config changed, another build of the kernel)."""
    configs_hash = hashlib.sha256(json.dumps(list(configs), sort_keys=True, default=str).encode()).hexdigest()[:8]
    return (f"{phase} kernel {name!r} key {list(key)} (mode {mode}, {len(configs)} candidates {configs_hash}"
            + (f", source {source[:8]}" if source else "") + ")")


def agree(name: str, key: Sequence[Any], configs: Sequence[dict[str, Any]], alive: Sequence[int],
          medians: Sequence[float | None], best_local: int, source: str = "") -> int:
    """The candidate index every rank of the group uses for ``key`` (JSON-able values), after this rank timed
    ``configs`` (config dicts).

    ``alive``: indices that compiled (and validated) here; ``medians[i]``: candidate i's median in ms (None when
    alive but untimed); ``best_local``: this rank's pick (-1 when nothing is alive here); ``source``: the kernel
    source's hash (ranks running another build of the kernel disagree, named). Without an active group
    (or in mode "off", inside capture, while frozen) it returns ``best_local`` and runs no collective.
    Raises TuningError on every rank when no candidate ran on every rank, DistributedError when the ranks are
    not at the same key or a peer does not answer in time.
    """
    group = active_group(sharding=False)
    if group is None or capture.why_no_tuning() is not None:
        return best_local
    import torch
    mode = STATE.agreement[1]
    key = list(key)
    n = len(configs)
    what = _describe("tune", name, key, mode, configs, source)
    headers = gather_headers(group, Header(digest("tune", name, key, mode, list(configs), source),
                                           _MODE_CODES[mode], n, best_local, 0, math.nan, what), what)
    alive_set = set(alive)
    mine = []
    for i in range(n):
        median = medians[i] if i < len(medians) else None
        if i not in alive_set:
            mine.append(math.inf)
        else:
            # alive but untimed (the only survivor here)
            mine.append(float(median) if median is not None else 0.0)
    payload = torch.tensor(mine, dtype=torch.float64, device=group.device)
    scores = [t.cpu().tolist() for t in _gather(group, payload, what)]

    chosen = merge_choice(scores) if mode == "merge" else broadcast_choice(scores, headers[0].index)
    if chosen is None:
        lines = "".join(f"\n  {config_label(c)}: failed on rank(s) "
                        f"{[r for r in range(group.world) if not math.isfinite(scores[r][i])]}"
                        for i, c in enumerate(configs))
        raise TuningError(f"graphtune: no candidate config of kernel {name!r} ran on every rank for key "
                          f"{key}:{lines}")
    if mode == "broadcast" and chosen != headers[0].index:
        logger.warning("graphtune: %s %s: rank 0 picked %s, which failed on another rank; every rank uses %s",
                       name, key, config_label(configs[headers[0].index]) if 0 <= headers[0].index < n
                       else "nothing", config_label(configs[chosen]))
    if chosen != best_local:
        logger.info("graphtune: %s %s: ranks agreed on %s (mode %s; this rank's own pick was %s)", name, key,
                    config_label(configs[chosen]), mode,
                    config_label(configs[best_local]) if 0 <= best_local < n else "nothing")
    return chosen


def agree_stored(name: str, key: Sequence[Any], configs: Sequence[dict[str, Any]], index: int,
                 median_ms: float | None, source: str = "") -> tuple[int, int] | None:
    """On a miss: which stored entry every rank uses for ``key``, as (config index, rank it came from), or None
    when every rank must tune it.

    ``index``: the position in ``configs`` of the config this rank found in its own database / loaded exports
    (-1: none, or a config that is not a candidate and cannot be named to the other ranks); ``median_ms``: its
    stored median (None: unknown). With an active group, outside capture and not frozen, one collective tells
    which ranks hold an entry; see the module docstring for which entry wins. Otherwise this rank's own entry
    is used as it is: (index, own rank), or None without one. ``source``: as :func:`agree`'s."""
    group = active_group(sharding=False)
    if group is None or capture.why_no_tuning() is not None:
        return (index, current_rank()) if index >= 0 else None
    mode = STATE.agreement[1]
    key = list(key)
    median = float(median_ms) if isinstance(median_ms, (int, float)) else math.inf
    what = _describe("stored lookup", name, key, mode, configs, source)
    headers = gather_headers(group, Header(digest("stored", name, key, mode, list(configs), source),
                                           _MODE_CODES[mode], len(configs), index,
                                           _HAS_STORED if index >= 0 else 0, median, what), what)
    picked = stored_choice(mode, [h.index if h.flags & _HAS_STORED else -1 for h in headers],
                           [h.median_ms for h in headers])
    if picked is None:
        holders = [r for r, h in enumerate(headers) if h.flags & _HAS_STORED]
        if holders:
            logger.info("graphtune: %s %s: only rank(s) %s of %d hold a stored result; every rank tunes it",
                        name, key, holders, group.world)
        return None
    if picked[0] != index:
        logger.info("graphtune: %s %s: using rank %d's stored %s instead of this rank's %s (mode %s)", name, key,
                    picked[1], config_label(configs[picked[0]]), config_label(configs[index]), mode)
    return picked


def collective_now() -> bool:
    """Whether an agreement would run a collective now (a group of several ranks, mode not "off", outside
    capture and not frozen)."""
    return active_group(sharding=False) is not None and capture.why_no_tuning() is None
