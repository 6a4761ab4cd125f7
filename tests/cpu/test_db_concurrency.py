"""Eight tensor-parallel ranks on one host tuning and writing one database at once lose nothing."""
from __future__ import annotations

import multiprocessing as mp
import sqlite3
import threading
from pathlib import Path

import pytest

from graphtune.db import CandidateResult, Entry, TuningDB
from graphtune.identity import EnvIdentity, KernelIdentity

H200 = EnvIdentity("NVIDIA H200", "9.0", "3.6.0", "2.11.0+cu130", "13.0")
DECODE = KernelIdentity("_mla_decode_split_kernel", "0f3a9c1d2e4b5a67", "9e8d7c6b5a493827")
NORM = KernelIdentity("_rms_norm", "aa11bb22cc33dd44", "5566778899aabbcc")
RANKS = 8
KEYS_PER_RANK = 13  # rank r writes batches r*5 .. r*5+12: neighbours overlap on 8 keys, never all on one


def rank_keys(rank: int) -> list[int]:
    return list(range(rank * 5, rank * 5 + KEYS_PER_RANK))


def entry_for(kernel: KernelIdentity, batch: int, rank: int) -> Entry:
    # Every field derives from (batch, rank), so a row mixing two writers' fields would not match any entry.
    ms = 0.01 * (batch + 1) + 0.001 * rank
    config = {"BLOCK_N": 32 * (1 + rank % 2), "num_warps": 4 * (1 + batch % 2), "num_stages": 3, "num_ctas": 1}
    return Entry(kernel=kernel, env=H200, key=(batch, "torch.bfloat16"), chosen=config,
                 candidates=(CandidateResult(config, ms, ms * 0.9, ms * 1.1, 20 + rank),),
                 tuned_at=1_790_000_000.0 + rank, host=f"node-{rank}", rank=rank)


def _rank_main(path: str, rank: int, barrier) -> None:
    db = TuningDB(path)  # every rank opens (and may create) the file at the same moment
    barrier.wait()
    for batch in rank_keys(rank):
        db.load_kernel(DECODE, H200)  # a rank reads its first miss while others write
        db.record(entry_for(DECODE, batch, rank))
        db.record(entry_for(NORM, batch, rank))
    db.close()


def _check(path: Path, writers: dict[int, set[int]]) -> None:
    db = TuningDB(path)
    for kernel in (DECODE, NORM):
        stored = db.load_kernel(kernel, H200)
        assert sorted(k[0] for k in stored) == sorted(writers)
        for (batch, _), entry in stored.items():
            assert entry in [entry_for(kernel, batch, r) for r in writers[batch]]
    db.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    conn.close()


# Slow only because each spawned rank imports graphtune (and with it torch) afresh; the writes take < 1 s.
@pytest.mark.slow
def test_eight_processes_write_overlapping_keys(tmp_path):
    path = tmp_path / "shared" / "tuning.sqlite"
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(RANKS)
    procs = [ctx.Process(target=_rank_main, args=(str(path), rank, barrier)) for rank in range(RANKS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * RANKS
    writers: dict[int, set[int]] = {}
    for rank in range(RANKS):
        for batch in rank_keys(rank):
            writers.setdefault(batch, set()).add(rank)
    assert max(len(w) for w in writers.values()) == 3  # the test does exercise contended keys
    _check(path, writers)
    assert not list(path.parent.glob("*.damaged-*"))


def test_threads_share_one_connection(tmp_path):
    path = tmp_path / "tuning.sqlite"
    db = TuningDB(path)

    def work(rank: int) -> None:
        for batch in rank_keys(rank):
            db.record(entry_for(DECODE, batch, rank))
            db.record(entry_for(NORM, batch, rank))

    threads = [threading.Thread(target=work, args=(rank,)) for rank in range(RANKS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writers: dict[int, set[int]] = {}
    for rank in range(RANKS):
        for batch in rank_keys(rank):
            writers.setdefault(batch, set()).add(rank)
    _check(path, writers)


def _child_after_fork(db: TuningDB) -> None:
    db.record(entry_for(DECODE, 1000, 7))
    assert (1000, "torch.bfloat16") in db.load_kernel(DECODE, H200)


def test_forked_child_opens_its_own_connection(tmp_path):
    path = tmp_path / "tuning.sqlite"
    db = TuningDB(path)
    db.record(entry_for(DECODE, 1, 0))
    parent_conn = db._conn
    child = mp.get_context("fork").Process(target=_child_after_fork, args=(db,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    db.record(entry_for(DECODE, 2, 0))  # the parent's connection still works after the child exited
    assert db._conn is parent_conn
    assert sorted(db.load_kernel(DECODE, H200)) == [(1, "torch.bfloat16"), (2, "torch.bfloat16"),
                                                    (1000, "torch.bfloat16")]
