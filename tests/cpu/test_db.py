"""The tuning database: identity matching, staleness, damage, read-only use, export / import, the CLI."""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import re
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import triton
import triton.language as tl

from graphtune import db as gdb
from graphtune.cli import main as cli_main
from graphtune.db import CandidateResult, Entry, TuningDB, get_db, load, loaded_entries, new_entry, reset_db
from graphtune.errors import DatabaseError
from graphtune.identity import (EnvIdentity, KernelIdentity, current_env, env_mismatch, kernel_identity,
                                reset_env_cache)

H200 = EnvIdentity("NVIDIA H200", "9.0", "3.6.0", "2.11.0+cu130", "13.0")
KERNEL = KernelIdentity("_mla_decode_split_kernel", "0f3a9c1d2e4b5a67", "9e8d7c6b5a493827")
KEY = (90, "torch.float8_e4m3fn", 576, True)


def cfg(block_n: int, warps: int = 4, stages: int = 3) -> dict:
    return {"BLOCK_N": block_n, "num_warps": warps, "num_stages": stages, "num_ctas": 1}


def make_entry(kernel: KernelIdentity = KERNEL, env: EnvIdentity = H200, key: tuple = KEY, best_ms: float = 0.19,
               chosen_block: int = 32, tuned_at: float = 1_790_000_000.0, rank: int = 0) -> Entry:
    other = 64 if chosen_block != 64 else 32
    candidates = (
        CandidateResult(cfg(chosen_block), best_ms, best_ms * 0.97, best_ms * 1.05, 37,
                        resources={"registers": 255, "spills": 0, "shared_bytes": 49152}),
        CandidateResult(cfg(other, 8), best_ms * 1.3, best_ms * 1.25, best_ms * 1.4, 11),
        CandidateResult(cfg(16), None, None, None, 0, failure="OutOfResources: shared memory 262144 > 232448"),
    )
    return Entry(kernel=kernel, env=env, key=key, chosen=cfg(chosen_block), candidates=candidates,
                 tuned_at=tuned_at, host="node-3", rank=rank)


@pytest.fixture
def db_file(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "cache" / "tuning.sqlite"
    monkeypatch.setenv("GRAPHTUNE_DB", str(path))
    monkeypatch.delenv("GRAPHTUNE_DB_READONLY", raising=False)
    monkeypatch.delenv("GRAPHTUNE_NO_DB", raising=False)
    reset_db()
    gdb.clear_loaded()
    yield path
    reset_db()
    gdb.clear_loaded()


def write_export(path: Path, items: list[Entry], **override) -> Path:
    doc = {"format": gdb.FORMAT, "version": gdb.FORMAT_VERSION, "exported_at": 1.0,
           "entries": [gdb._entry_to_dict(e) for e in items]}
    doc.update(override)
    path.write_text(json.dumps(doc))
    return path


def graphtune_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "graphtune" and r.levelno >= logging.WARNING]


# ------------------------------------------------------------------------------------------- identity


@triton.jit
def _scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@triton.jit
def _scale_kernel_v2(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 3, mask=offs < n)


def test_kernel_identity_follows_source_and_candidate_list():
    configs = [triton.Config({"BLOCK": 128}, num_warps=4), triton.Config({"BLOCK": 256}, num_warps=8)]
    a = kernel_identity("_scale", _scale_kernel, configs)
    assert a == kernel_identity("_scale", _scale_kernel, list(configs))
    assert len(a.source_hash) == 16 and len(a.configs_hash) == 16
    assert kernel_identity("_scale", _scale_kernel_v2, configs).source_hash != a.source_hash
    assert kernel_identity("_scale", _scale_kernel, configs[:1]).configs_hash != a.configs_hash
    wrapped = triton.autotune(configs=configs, key=["n"])(_scale_kernel)
    assert kernel_identity("_scale", wrapped, configs) == a  # the Autotuner's inner JITFunction is what counts
    with pytest.raises(ValueError, match="non-empty"):
        kernel_identity("", _scale_kernel, configs)


_HELPER_MODULE = """
import triton
import triton.language as tl

SCALE = tl.constexpr({scale})


@triton.jit
def _helper(x):
    return x * {factor}


@triton.jit
def _kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, _helper(tl.load(x_ptr + offs, mask=offs < n)) * SCALE, mask=offs < n)
"""


def _kernel_from(tmp_path, name, scale, factor):
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(_HELPER_MODULE.format(scale=scale, factor=factor))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._kernel


def test_kernel_identity_follows_the_helpers_and_constexpr_globals_it_uses(tmp_path, monkeypatch):
    """The kernel's own text is the same in all four modules: a helper's body or a module-level constexpr differs,
    which changes what Triton compiles, so a config tuned for one is not applied to another. (Compiled JIT
    functions: under the interpreter Triton keys no dependencies, and the identity is the kernel's text alone.)"""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    configs = [triton.Config({"BLOCK": 128}, num_warps=4)]
    base = kernel_identity("_k", _kernel_from(tmp_path, "base", 2, 2), configs)
    assert kernel_identity("_k", _kernel_from(tmp_path, "same", 2, 2), configs) == base
    assert kernel_identity("_k", _kernel_from(tmp_path, "helper", 2, 3), configs).source_hash != base.source_hash
    assert kernel_identity("_k", _kernel_from(tmp_path, "scale", 4, 2), configs).source_hash != base.source_hash


def test_current_env_without_gpu(monkeypatch):
    import torch

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)   # the same on a machine with a GPU
    reset_env_cache()
    env = current_env()
    assert (env.gpu_name, env.compute_capability) == ("cpu", "")
    assert env.cuda_version == (torch.version.cuda or "")
    assert (env.triton_version, env.torch_version) == (triton.__version__, torch.__version__)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert current_env().gpu_name == "interpreter"
    reset_env_cache()
    assert env_mismatch(H200, dataclasses.replace(H200, torch_version="2.13.0")) == [
        "torch_version 2.11.0+cu130 != 2.13.0"]


def test_import_graphtune_survives_a_damaged_database_and_leaves_it_alone(tmp_path):
    garbage = tmp_path / "tuning.sqlite"
    garbage.write_bytes(b"\x00garbage" * 100)
    code = "import graphtune, graphtune.db, graphtune.identity, graphtune.cli"
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "GRAPHTUNE_DB": str(garbage)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert garbage.read_bytes() == b"\x00garbage" * 100 and os.listdir(tmp_path) == ["tuning.sqlite"]


# ---------------------------------------------------------------------------------- record and load


def test_record_then_load_round_trips_every_field(db_file):
    entry = make_entry()
    db = TuningDB()
    db.record(entry)
    assert db_file.exists()
    fresh = TuningDB()  # another process's view: nothing cached
    assert fresh.load_kernel(KERNEL, H200) == {KEY: entry}
    assert fresh.entries() == [entry]
    assert entry.chosen_median_ms == pytest.approx(0.19)


def test_new_entry_stamps_time_and_host(db_file):
    entry = new_entry(KERNEL, H200, [60, "torch.bfloat16"], cfg(32), [CandidateResult(cfg(32), 0.13, 0.12, 0.14, 9)],
                      rank=5)
    assert entry.key == (60, "torch.bfloat16") and entry.rank == 5 and entry.host == socket.gethostname()
    assert abs(entry.tuned_at - time.time()) < 60 and entry.chosen_median_ms == 0.13


def test_load_kernel_is_one_query(db_file):
    db = TuningDB()
    for n in (1, 8, 60, 90):
        db.record(make_entry(key=(n, "torch.bfloat16")))
    db.load_kernel(KERNEL, H200)  # opened and checked
    statements: list[str] = []
    db._conn.set_trace_callback(statements.append)
    found = db.load_kernel(KERNEL, H200)
    assert sorted(found) == [(1, "torch.bfloat16"), (8, "torch.bfloat16"), (60, "torch.bfloat16"),
                             (90, "torch.bfloat16")]
    assert len(statements) == 1 and statements[0].lstrip().upper().startswith("SELECT")


IDENTITY_FIELDS = [("kernel", f.name) for f in dataclasses.fields(KernelIdentity)] + [
    ("env", f.name) for f in dataclasses.fields(EnvIdentity)]


@pytest.mark.parametrize("part,field", IDENTITY_FIELDS, ids=[f"{p}.{f}" for p, f in IDENTITY_FIELDS])
def test_entry_of_another_identity_is_never_applied(db_file, part, field):
    db = TuningDB()
    db.record(make_entry())
    kernel, env = KERNEL, H200
    if part == "kernel":
        kernel = dataclasses.replace(KERNEL, **{field: getattr(KERNEL, field) + "x"})
    else:
        env = dataclasses.replace(H200, **{field: getattr(H200, field) + "x"})
    assert db.load_kernel(kernel, env) == {}
    assert db.load_kernel(KERNEL, H200) == {KEY: make_entry()}  # still stored, still applied where it matches
    if part == "env":
        assert db.stale(env) == [make_entry()]
        assert db.stale(H200) == []


def test_live_record_replaces_even_a_faster_entry(db_file):
    db = TuningDB()
    db.record(make_entry(best_ms=0.10, chosen_block=64))
    retuned = make_entry(best_ms=0.25, chosen_block=32, tuned_at=1_790_000_100.0)
    db.record(retuned)
    assert db.load_kernel(KERNEL, H200) == {KEY: retuned}


@pytest.mark.parametrize("bad,match", [
    ({"key": (90, [1, 2])}, "only ints, floats, strings"),
    ({"key": (float("nan"),)}, "JSON|finite"),
    ({"candidates": (CandidateResult(cfg(32), float("inf"), None, None, 3),)}, "JSON|finite"),
    ({"candidates": (CandidateResult(cfg(32), 0.1, 0.1, 0.1, -1),)}, "integer >= 0"),
    ({"chosen": {"BLOCK_N": object()}}, "JSON|serializable"),
], ids=["list-in-key", "nan-in-key", "inf-median", "negative-n", "object-in-config"])
def test_record_rejects_entries_that_cannot_round_trip(db_file, bad, match):
    db = TuningDB()
    with pytest.raises(ValueError, match=match):
        db.record(dataclasses.replace(make_entry(), **bad))
    assert db.entries() == []


# ----------------------------------------------------------------------------------- stale and prune


def test_stale_lists_other_environments_and_superseded_sources(db_file):
    db = TuningDB()
    current = make_entry(key=(8,), tuned_at=2000.0)
    old_torch = make_entry(env=dataclasses.replace(H200, torch_version="2.10.0"), key=(8,))
    old_source = make_entry(kernel=dataclasses.replace(KERNEL, source_hash="1111222233334444"), key=(60,),
                            tuned_at=1000.0)
    other_kernel = make_entry(kernel=KernelIdentity("_rms_norm", "aa", "bb"), key=(4096,), tuned_at=500.0)
    for e in (current, old_torch, old_source, other_kernel):
        db.record(e)
    assert db.stale(H200) == sorted([old_torch, old_source], key=gdb._sort_key)
    assert db.entries(kernel_name="_rms_norm", stale_only=True, env=H200) == []
    assert len(db.entries()) == 4  # listing never removes
    why = gdb.staleness([old_torch, current, old_source], H200)
    assert why[0] == "environment: torch_version 2.10.0 != 2.11.0+cu130"
    assert why[1] is None and why[2] == "superseded: kernel source changed and was re-tuned"


def test_prune_removes_only_what_was_asked(db_file):
    db = TuningDB()
    current = make_entry(key=(8,))
    stale = make_entry(env=dataclasses.replace(H200, gpu_name="NVIDIA H100 80GB HBM3"), key=(8,))
    other = make_entry(kernel=KernelIdentity("_rms_norm", "aa", "bb"), key=(4096,))
    for e in (current, stale, other):
        db.record(e)
    with pytest.raises(ValueError, match="stale=True and/or kernel=NAME"):
        db.prune()
    assert db.entries() == sorted([current, stale, other], key=gdb._sort_key)
    assert db.remove(stale=True, env=H200) == [stale]
    assert db.prune(kernel="_rms_norm") == 1
    assert db.entries() == [current]


# ------------------------------------------------------------------------------------------- damage


def _healthy_bytes(tmp_path: Path) -> bytes:
    path = tmp_path / "healthy.sqlite"
    db = TuningDB(path)
    for n in range(1, 40):
        db.record(make_entry(key=(n, "torch.bfloat16")))
    db.close()
    return path.read_bytes()


def _wrong_schema(tmp_path: Path) -> bytes:
    path = tmp_path / "other-app.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users VALUES (1, 'ada')")
    conn.commit()
    conn.close()
    return path.read_bytes()


def _bad_version(tmp_path: Path) -> bytes:
    path = tmp_path / "bad-version.sqlite"
    db = TuningDB(path)
    db.entries()
    db.close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE graphtune_meta SET value = 'one' WHERE name = 'schema_version'")
    conn.commit()
    conn.close()
    return path.read_bytes()


def _legacy_bytes(tmp_path: Path) -> bytes:
    """A database as a graphtune from before the application_id stamp left it (application_id 0)."""
    path = tmp_path / "legacy.sqlite"
    db = TuningDB(path)
    for n in range(1, 40):
        db.record(make_entry(key=(n, "torch.bfloat16")))
    db.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 0")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = path.read_bytes()
    assert data[68:72] == bytes(4)
    return data


def _empty_sqlite(tmp_path: Path) -> bytes:
    path = tmp_path / "no-tables.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 7")  # writes a header, creates no table
    conn.commit()
    conn.close()
    return path.read_bytes()


def _other_application(tmp_path: Path) -> bytes:
    path = tmp_path / "other-app-id.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 1179402563")  # Fossil's
    conn.execute("CREATE TABLE graphtune_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.commit()
    conn.close()
    return path.read_bytes()


# Damaged files of graphtune's own: moved aside (renamed, never deleted), and a fresh database started.
DAMAGE = {
    "truncated-mid-page": (lambda tmp: _healthy_bytes(tmp)[:6001], "malformed"),
    "truncated-at-page": (lambda tmp: _healthy_bytes(tmp)[:8192], "malformed"),
    "schema-version-not-a-number": (_bad_version, "not a number"),
    "legacy-unstamped-truncated": (lambda tmp: _legacy_bytes(tmp)[:20001], "malformed"),
}

# Files graphtune cannot prove it created: never moved, never written; the database is off with an error that
# names the file and the variable that pointed there.
FOREIGN = {
    "header-only": (lambda tmp: _healthy_bytes(tmp)[:57], "truncated SQLite file (57 bytes"),
    "garbage": (lambda tmp: random.Random(7).randbytes(5000), "not an SQLite file"),
    "text-file": (lambda tmp: b"SQLite format 2\nnot really\n" * 40, "not an SQLite file"),
    "wrong-schema": (_wrong_schema, "without graphtune's tables (its tables: users)"),
    "sqlite-without-tables": (_empty_sqlite, "with no tables that graphtune did not create"),
    "other-application-id": (_other_application, "another application (application_id 0x464c4143)"),
    # ours once, but its first 100 bytes were overwritten: nothing left proves it; left for a person to move
    "header-destroyed": (lambda tmp: b"\xff" * 100 + _healthy_bytes(tmp)[100:], "may be a damaged graphtune"),
}


@pytest.mark.parametrize("kind", list(DAMAGE), ids=list(DAMAGE))
def test_damaged_file_is_moved_aside_once_and_a_fresh_db_works(db_file, tmp_path, caplog, kind):
    make_bytes, why = DAMAGE[kind]
    original = make_bytes(tmp_path)
    db_file.parent.mkdir(parents=True, exist_ok=True)
    db_file.write_bytes(original)
    caplog.set_level(logging.WARNING, logger="graphtune")
    db = get_db()
    assert db.load_kernel(KERNEL, H200) == {}
    db.record(make_entry())
    assert db.load_kernel(KERNEL, H200) == {KEY: make_entry()}
    assert TuningDB().entries() == [make_entry()]  # a second opener finds a healthy file: no new warning
    aside = sorted(db_file.parent.glob("tuning.sqlite.damaged-*"))
    assert [p.name for p in aside if not p.name.endswith(("-wal", "-shm"))] == [aside[0].name]
    assert aside[0].read_bytes() == original
    warnings = graphtune_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert str(db_file) in warnings[0] and str(aside[0]) in warnings[0] and why in warnings[0]
    assert db_file.read_bytes()[68:72] == gdb._APPLICATION_ID.to_bytes(4, "big")  # the fresh one is stamped


@pytest.mark.parametrize("readonly", [False, True], ids=["writable", "readonly"])
@pytest.mark.parametrize("kind", list(FOREIGN), ids=list(FOREIGN))
def test_a_file_graphtune_did_not_create_is_never_touched(db_file, tmp_path, caplog, monkeypatch, kind, readonly):
    make_bytes, why = FOREIGN[kind]
    original = make_bytes(tmp_path)
    db_file.parent.mkdir(parents=True, exist_ok=True)
    db_file.write_bytes(original)
    if readonly:
        monkeypatch.setenv("GRAPHTUNE_DB_READONLY", "1")
    caplog.set_level(logging.WARNING, logger="graphtune")
    db = get_db()
    assert db.load_kernel(KERNEL, H200) == {}
    db.record(make_entry())  # the serving path: a warning, never an exception
    assert db.entries() == [] and not db.usable
    assert db.problem is not None and why in db.problem
    assert f"{db_file} (from GRAPHTUNE_DB) is not a graphtune tuning database" in db.problem
    if not readonly:
        with pytest.raises(DatabaseError, match=re.escape(why)):
            db.check_writable()
        with pytest.raises(DatabaseError, match=re.escape(why)):
            db.record_all([make_entry()])
    with pytest.raises(DatabaseError):
        db.import_file(write_export(tmp_path / "x.json", [make_entry(key=(2,))]))
    assert db_file.read_bytes() == original
    assert os.listdir(db_file.parent) == ["tuning.sqlite"]  # not moved, no lock file, no -wal beside it
    warnings = graphtune_warnings(caplog)
    assert len(warnings) == 1 and "left it untouched" in warnings[0] and "GRAPHTUNE_DB" in warnings[0]


def test_cli_names_a_foreign_file_and_the_option_that_pointed_there(tmp_path, capsys):
    other = tmp_path / "app.sqlite"
    other.write_bytes(_wrong_schema(tmp_path))
    before = other.read_bytes()
    for argv in (["db", "ls"], ["db", "show", KERNEL.name], ["db", "export", "-o", str(tmp_path / "o.json")],
                 ["db", "prune", "--stale"], ["db", "import", str(write_export(tmp_path / "in.json", [make_entry()]))]):
        assert cli_main(argv + ["--db", str(other)]) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{other} (from --db) is not a graphtune tuning database" in err[0], err
    assert other.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["app.sqlite", "in.json", "other-app.sqlite"]


def test_an_unstamped_graphtune_database_is_recognised_and_stamped(db_file, tmp_path):
    db_file.parent.mkdir(parents=True)
    db_file.write_bytes(_legacy_bytes(tmp_path))
    db = TuningDB()
    assert len(db.entries()) == 39 and db.problem is None
    db.close()  # the last connection to close checkpoints the WAL into the file
    assert db_file.read_bytes()[68:72] == gdb._APPLICATION_ID.to_bytes(4, "big")
    assert not list(db_file.parent.glob("*.damaged-*"))


def test_an_unstamped_database_whose_schema_is_only_in_its_wal_is_recognised(db_file, tmp_path):
    # created by an old graphtune and never checkpointed: the main file has a header and no tables yet
    db_file.parent.mkdir(parents=True)
    keep = sqlite3.connect(db_file, isolation_level=None)
    keep.execute("PRAGMA journal_mode=WAL")
    keep.execute("PRAGMA wal_autocheckpoint=0")
    for statement in gdb._MIGRATIONS[0]:
        keep.execute(statement)
    keep.execute("INSERT INTO graphtune_meta VALUES ('schema_version', '1')")
    assert gdb._SCHEMA_MARK not in db_file.read_bytes()
    assert gdb._classify(db_file) == ("ours", "")
    TuningDB().record(make_entry())
    assert TuningDB().entries() == [make_entry()]
    keep.close()


def test_damaged_file_siblings_move_with_it(db_file, tmp_path, caplog):
    db_file.parent.mkdir(parents=True)
    db_file.write_bytes(_healthy_bytes(tmp_path)[:4096])  # graphtune's own, cut short
    Path(str(db_file) + "-wal").write_bytes(b"wal bytes")
    TuningDB().record(make_entry())
    aside = next(db_file.parent.glob("tuning.sqlite.damaged-*[0-9]"))
    assert Path(str(aside) + "-wal").read_bytes() == b"wal bytes"
    assert TuningDB().entries() == [make_entry()]


def test_future_schema_is_left_alone_and_unused(db_file, caplog):
    first = TuningDB()
    first.record(make_entry())
    first.close()
    conn = sqlite3.connect(db_file)
    conn.execute("UPDATE graphtune_meta SET value = '99' WHERE name = 'schema_version'")
    conn.commit()
    # fold the WAL into the file now, so a later checkpoint by a collected connection cannot change its bytes
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = db_file.read_bytes()
    caplog.set_level(logging.WARNING, logger="graphtune")
    db = TuningDB()
    assert db.load_kernel(KERNEL, H200) == {}
    db.record(make_entry(key=(1,)))
    assert db.entries() == [] and not db.usable
    with pytest.raises(DatabaseError, match="schema version 99"):
        db.import_file(write_export(db_file.parent / "x.json", [make_entry(key=(2,))]))
    assert db_file.read_bytes() == before and not list(db_file.parent.glob("*.damaged-*"))
    warnings = graphtune_warnings(caplog)
    assert len(warnings) == 1 and "schema version 99, newer than" in warnings[0]


def test_empty_file_becomes_a_database_at_the_current_schema(db_file):
    db_file.parent.mkdir(parents=True)
    db_file.touch()
    TuningDB().record(make_entry())
    conn = sqlite3.connect(db_file)
    version = conn.execute("SELECT value FROM graphtune_meta WHERE name = 'schema_version'").fetchone()[0]
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    conn.close()
    assert (int(version), mode) == (gdb.SCHEMA_VERSION, "wal")


def test_a_directory_in_the_way_is_reported_not_moved(db_file, caplog):
    db_file.mkdir(parents=True)
    caplog.set_level(logging.WARNING, logger="graphtune")
    db = TuningDB()
    db.record(make_entry())
    assert db.load_kernel(KERNEL, H200) == {} and db_file.is_dir()
    assert not list(db_file.parent.glob("*.damaged-*"))
    assert len(graphtune_warnings(caplog)) == 1


def test_schema_migration_is_an_appended_step(db_file, monkeypatch):
    TuningDB().record(make_entry())
    appended = gdb.SCHEMA_VERSION + 1
    monkeypatch.setattr(gdb, "_MIGRATIONS", gdb._MIGRATIONS + (
        ("ALTER TABLE entries ADD COLUMN note TEXT NOT NULL DEFAULT ''",),))
    monkeypatch.setattr(gdb, "SCHEMA_VERSION", appended)
    monkeypatch.setattr(gdb, "_COLUMNS", gdb._COLUMNS + ("note",))
    assert TuningDB().load_kernel(KERNEL, H200) == {KEY: make_entry()}
    conn = sqlite3.connect(db_file)
    version = conn.execute("SELECT value FROM graphtune_meta WHERE name = 'schema_version'").fetchone()[0]
    columns = [r[1] for r in conn.execute("PRAGMA table_info(entries)")]
    conn.close()
    assert version == str(appended) and columns[-1] == "note"


# ----------------------------------------------------------------------------------------- read-only


def test_readonly_missing_file_creates_nothing(db_file, monkeypatch):
    monkeypatch.setenv("GRAPHTUNE_DB_READONLY", "1")
    db = get_db()
    assert db.readonly and db.load_kernel(KERNEL, H200) == {} and db.entries() == []
    db.record(make_entry())
    assert not db_file.parent.exists()


def test_readonly_reads_and_never_writes(db_file, monkeypatch):
    TuningDB().record(make_entry())
    TuningDB().close()
    monkeypatch.setenv("GRAPHTUNE_DB_READONLY", "1")
    db = get_db()
    assert db.load_kernel(KERNEL, H200) == {KEY: make_entry()}
    db.record(make_entry(key=(1,)))
    with pytest.raises(DatabaseError, match="read-only"):
        db.import_file(write_export(db_file.parent / "x.json", [make_entry(key=(2,))]))
    with pytest.raises(DatabaseError, match="read-only"):
        db.prune(kernel=KERNEL.name)
    assert TuningDB(readonly=False).entries() == [make_entry()]


def test_readonly_damaged_file_stays_in_place(db_file, monkeypatch, caplog):
    db_file.parent.mkdir(parents=True)
    db_file.write_bytes(b"not a database at all" * 10)
    monkeypatch.setenv("GRAPHTUNE_DB_READONLY", "1")
    caplog.set_level(logging.WARNING, logger="graphtune")
    assert get_db().load_kernel(KERNEL, H200) == {}
    assert sorted(os.listdir(db_file.parent)) == ["tuning.sqlite"]
    assert len(graphtune_warnings(caplog)) == 1


def test_get_db_follows_settings(db_file, monkeypatch, tmp_path):
    first = get_db()
    assert get_db() is first and first.path == db_file
    monkeypatch.setenv("GRAPHTUNE_DB", str(tmp_path / "other.sqlite"))
    assert get_db() is not first and get_db().path == tmp_path / "other.sqlite"
    monkeypatch.setenv("GRAPHTUNE_NO_DB", "1")
    assert get_db() is None


# ----------------------------------------------------------------------------------- export / import


def _sample() -> list[Entry]:
    h100 = dataclasses.replace(H200, gpu_name="NVIDIA H100 80GB HBM3")
    rms = KernelIdentity("_rms_norm", "aa", "bb")
    return [make_entry(key=(n, "torch.bfloat16")) for n in (1, 8, 90)] + [
        make_entry(env=h100, key=(8, "torch.bfloat16")), make_entry(kernel=rms, key=(4096,))]


def test_export_import_round_trip(db_file, tmp_path):
    db = TuningDB()
    for e in _sample():
        db.record(e)
    out = tmp_path / "tuned.json"
    assert db.export(out) == 5
    doc = json.loads(out.read_text())
    assert (doc["format"], doc["version"]) == ("graphtune-tuning", 1) and doc["exported_at"] > 0
    target = TuningDB(tmp_path / "elsewhere.sqlite")
    report = target.import_file(out)
    assert (report.added, report.replaced, report.kept, report.conflicts) == (5, 0, 0, ())
    assert target.entries() == db.entries()
    again = target.import_file(out)
    assert (again.added, again.kept, again.conflicts) == (0, 5, ())


def test_export_filters_by_kernel_and_device(db_file, tmp_path):
    db = TuningDB()
    for e in _sample():
        db.record(e)
    assert db.export(tmp_path / "h200.json", device="nvidia h200") == 4
    assert db.export(tmp_path / "one.json", kernel=KERNEL.name, device="NVIDIA H200") == 3
    names = {e["kernel"]["name"] for e in json.loads((tmp_path / "one.json").read_text())["entries"]}
    assert names == {KERNEL.name}


def test_import_keeps_the_better_median_and_reports_conflicts(db_file, tmp_path):
    db = TuningDB()
    db.record(make_entry(key=(1,), best_ms=0.050, chosen_block=32))
    db.record(make_entry(key=(8,), best_ms=0.050, chosen_block=32))
    db.record(make_entry(key=(60,), best_ms=0.130, chosen_block=32))
    incoming = [make_entry(key=(1,), best_ms=0.037, chosen_block=64),  # faster: replaces
                make_entry(key=(8,), best_ms=0.061, chosen_block=64),  # slower: stored one stays
                make_entry(key=(60,), best_ms=0.130, chosen_block=32),  # identical: kept quietly
                make_entry(key=(128,), best_ms=0.254)]  # new
    report = db.import_file(write_export(tmp_path / "in.json", incoming))
    assert (report.added, report.replaced, report.kept) == (1, 1, 2)
    assert [(c.key, c.kept, c.existing_median_ms, c.imported_median_ms) for c in report.conflicts] == [
        ((1,), "imported", 0.050, 0.037), ((8,), "existing", 0.050, 0.061)]
    stored = db.load_kernel(KERNEL, H200)
    assert stored[(1,)].chosen == cfg(64) and stored[(8,)].chosen == cfg(32) and (128,) in stored


BAD_FILES = {
    "not-json": ('{"format": "graphtune-tuning", "version": 1, "entries": [', "not valid JSON"),
    "wrong-format": (json.dumps({"format": "triton-cache", "version": 1, "entries": []}), "not a graphtune"),
    "future-version": (dict(version=2), "format version 2, written by a newer graphtune"),
    "version-not-int": (dict(version="1"), "must be an integer"),
    "entries-not-list": (dict(entries={"a": 1}), "must be a list"),
    "missing-gpu-name": ("drop:env.gpu_name", "entry 1: missing field 'env.gpu_name'"),
    "n-as-string": ("set:candidates.0.n=3", "entry 1: field 'candidates[0].n' must be an integer"),
    "nan-median": ("nan", "NaN"),
}


@pytest.mark.parametrize("kind", list(BAD_FILES), ids=list(BAD_FILES))
def test_bad_import_file_names_the_file_and_imports_nothing(db_file, tmp_path, kind):
    spec, match = BAD_FILES[kind]
    path = tmp_path / f"{kind}.json"
    good = [make_entry(key=(1,)), make_entry(key=(2,))]
    if isinstance(spec, dict):
        write_export(path, good, **spec)
    elif spec == "drop:env.gpu_name" or spec.startswith("set:"):
        doc = {"format": gdb.FORMAT, "version": 1, "entries": [gdb._entry_to_dict(e) for e in good]}
        if spec.startswith("drop"):
            del doc["entries"][1]["env"]["gpu_name"]
        else:
            doc["entries"][1]["candidates"][0]["n"] = "3"
        path.write_text(json.dumps(doc))
    elif spec == "nan":
        write_export(path, good)
        path.write_text(path.read_text().replace('"median_ms": 0.19', '"median_ms": NaN', 1))
    else:
        path.write_text(spec)
    db = TuningDB()
    db.record(make_entry(key=(99,)))
    with pytest.raises(DatabaseError, match=re.escape(match)) as info:
        db.import_file(path)
    assert str(path) in str(info.value)
    assert db.entries() == [make_entry(key=(99,))]
    with pytest.raises(DatabaseError, match=re.escape(match)):
        load(path)
    assert loaded_entries(KERNEL, H200) == {}


def test_load_is_an_in_memory_overlay_that_works_read_only(db_file, tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHTUNE_DB_READONLY", "1")
    h200 = write_export(tmp_path / "h200.json", [make_entry(key=(1,), best_ms=0.05), make_entry(key=(8,))])
    h100 = write_export(tmp_path / "h100.json", [
        make_entry(env=dataclasses.replace(H200, gpu_name="NVIDIA H100 80GB HBM3"), key=(1,))])
    faster = write_export(tmp_path / "faster.json", [make_entry(key=(1,), best_ms=0.04, chosen_block=64)])
    assert load(h200).added == 2 and load(h100).added == 1
    report = load(faster)
    assert report.replaced == 1 and [c.kept for c in report.conflicts] == ["imported"]
    found = loaded_entries(KERNEL, H200)
    assert sorted(found) == [(1,), (8,)] and found[(1,)].chosen == cfg(64)
    assert loaded_entries(dataclasses.replace(KERNEL, configs_hash="other"), H200) == {}
    assert not db_file.parent.exists()


# ------------------------------------------------------------------------------------------------ CLI


def test_cli_path_ls_show(db_file, capsys):
    assert cli_main(["db", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(db_file)
    assert cli_main(["db", "ls"]) == 0
    assert "0 entries" in capsys.readouterr().out and not db_file.parent.exists()
    db = TuningDB()
    for e in _sample():
        db.record(e)
    assert cli_main(["db", "ls"]) == 0
    out = capsys.readouterr().out
    assert "_mla_decode_split_kernel" in out and "_rms_norm" in out and "5 entries (5 stale)" in out
    # the test entries were tuned on an H200 (triton 3.6.0, torch 2.11.0+cu130): which fields differ depends on
    # the machine running the test (a CUDA build of torch 2.11 matches torch and CUDA; a GPU is never visible here)
    from graphtune.identity import current_env
    here = current_env()
    fields = [label for label, field in (("GPU", "gpu_name"), ("cc", "compute_capability"), ("triton", "triton_version"),
                                         ("torch", "torch_version"), ("CUDA", "cuda_version"))
              if getattr(H200, field) != getattr(here, field)]
    assert fields[:2] == ["GPU", "cc"] and f"stale: other {', '.join(fields)}" in out
    assert cli_main(["db", "ls", "--stale", "--kernel", "_rms_norm"]) == 0
    assert "1 stale entries" in capsys.readouterr().out
    assert cli_main(["db", "show", KERNEL.name, "--key", "90, torch.bfloat16"]) == 0
    out = capsys.readouterr().out
    assert "OutOfResources: shared memory" in out and "registers=255" in out and "0.1900" in out
    assert out.count("key (") == 1
    assert cli_main(["db", "show", "_no_such_kernel"]) == 1
    assert "kernels there: _mla_decode_split_kernel, _rms_norm" in capsys.readouterr().err


def test_cli_export_import_prune(db_file, tmp_path, capsys):
    db = TuningDB()
    for e in _sample():
        db.record(e)
    out = tmp_path / "h100.json"
    assert cli_main(["db", "export", "-o", str(out), "--device", "NVIDIA H100 80GB HBM3"]) == 0
    assert "exported 1 entries" in capsys.readouterr().out
    assert cli_main(["db", "export", "-o", str(tmp_path / "none.json"), "--device", "NVIDIA B200"]) == 1
    assert "NVIDIA H100 80GB HBM3, NVIDIA H200" in capsys.readouterr().err
    assert not (tmp_path / "none.json").exists()
    other = tmp_path / "other.sqlite"
    assert cli_main(["db", "import", str(out), "--db", str(other)]) == 0
    assert "1 added, 0 replaced, 0 kept, 0 conflicts" in capsys.readouterr().out
    assert len(TuningDB(other).entries()) == 1
    (tmp_path / "broken.json").write_text("{")
    assert cli_main(["db", "import", str(tmp_path / "broken.json")]) == 2
    assert "broken.json is not valid JSON" in capsys.readouterr().err
    assert cli_main(["db", "prune"]) == 2
    assert "--stale" in capsys.readouterr().err and len(db.entries()) == 5
    assert cli_main(["db", "prune", "--kernel", "_rms_norm"]) == 0
    out_text = capsys.readouterr().out
    assert "removed 1 entries" in out_text and "_rms_norm" in out_text
    assert cli_main(["db", "prune", "--stale"]) == 0  # on this CPU machine every H100/H200 entry is stale
    assert "removed 4 entries" in capsys.readouterr().out and db.entries() == []


# ------------------------------------------------------------------------------------------------ scale


def _many(n: int, kernels: int = 4, gpus: tuple[str, ...] = ("NVIDIA H200", "NVIDIA B200")) -> list[Entry]:
    """n entries over kernels x GPUs, keys 1..n/(kernels*gpus), recorded in a shuffled order."""
    per = n // (kernels * len(gpus))
    out = [make_entry(kernel=dataclasses.replace(KERNEL, name=f"_k{k}"), env=dataclasses.replace(H200, gpu_name=g),
                      key=(b, "torch.bfloat16"), tuned_at=1_790_000_000.0 + b)
           for k in range(kernels) for g in gpus for b in range(1, per + 1)]
    random.Random(3).shuffle(out)
    return out


def test_ls_streams_and_paginates(db_file, capsys, monkeypatch):
    TuningDB().record_all(_many(400))
    parsed = []
    real = gdb._summary_from_row
    monkeypatch.setattr(gdb, "_summary_from_row", lambda row: parsed.append(row[0]) or real(row))
    assert cli_main(["db", "ls"]) == 0
    out = capsys.readouterr().out
    assert "the first 100 of 400 entries (100 of them stale)" in out
    # read only as far as the rows shown (and the rest of the group of the last one), not the whole table
    assert len(parsed) <= 100 + 50 + 1
    rows = [line.split() for line in out.splitlines() if line.startswith("_k")]
    assert len(rows) == 100 and {r[0] for r in rows} == {"_k0"}  # 50 keys on each of two GPUs
    # inside one kernel identity and environment, keys in numeric order: 2 before 10
    h200 = [int(r[1].split(",")[0]) for r in rows if r[0] == "_k0" and "H200" in " ".join(r)]
    assert h200 == sorted(h200) and h200[:3] == [1, 2, 3]

    assert cli_main(["db", "ls", "--limit", "0"]) == 0
    out = capsys.readouterr().out
    assert "400 entries (400 stale)" in out and sum(line.startswith("_k") for line in out.splitlines()) == 400
    assert cli_main(["db", "ls", "--kernel", "_k3", "--device", "nvidia b200", "--limit", "7"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("_k")]
    assert len(rows) == 7 and all(r.startswith("_k3 ") and "NVIDIA B200" in r for r in rows)
    assert "the first 7 of 50 entries" in out
    assert cli_main(["db", "ls", "--stale", "--limit", "3"]) == 0
    assert "the first 3 stale entries" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli_main(["db", "ls", "--limit", "-1"])
    assert "--limit '-1': expected a whole number >= 0" in capsys.readouterr().err


def test_ls_never_cuts_a_config(db_file, capsys):
    long_config = {f"PARAMETER_{i}": 1000 + i for i in range(12)}
    entry = dataclasses.replace(make_entry(), chosen=long_config)
    TuningDB().record(entry)
    assert cli_main(["db", "ls"]) == 0
    assert ",".join(f"{k}={v}" for k, v in long_config.items()) in capsys.readouterr().out


def _peak_bytes(fn) -> int:
    import tracemalloc

    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_export_and_import_memory_does_not_grow_with_the_database(tmp_path, monkeypatch):
    # Memory holds one batch of rows, one kernel identity's entries in one environment (its buckets: 50 here,
    # whatever the database size) and one read chunk of an import file (64 KiB here, 1 MiB by default).
    monkeypatch.setattr(gdb, "_READ_CHUNK", 1 << 16)
    peaks = {}
    for n in (400, 3200):
        source, target = TuningDB(tmp_path / f"src-{n}.sqlite"), TuningDB(tmp_path / f"dst-{n}.sqlite")
        source.record_all(_many(n, kernels=n // 100))
        out = tmp_path / f"export-{n}.json"
        source.entries()  # open both before measuring
        target.entries()
        peaks[n] = (_peak_bytes(lambda: source.export(out)), _peak_bytes(lambda: target.import_file(out)))
        assert target.count() == n and target.entries() == source.entries()
        source.close()
        target.close()
    # eight times the entries: the peaks stay about the same
    for i, what in enumerate(("export", "import")):
        small, large = peaks[400][i], peaks[3200][i]
        assert large < 1.5 * small + 512 * 1024, f"{what}: {small} B at 400 entries, {large} B at 3200"


def test_export_stays_valid_for_entries_that_need_normalising(db_file, tmp_path):
    # a row written by hand with an integer median: validated, normalised to a float, written as JSON
    db = TuningDB()
    db.record(make_entry())
    conn = sqlite3.connect(db_file)
    text = conn.execute("SELECT candidates FROM entries").fetchone()[0]
    conn.execute("UPDATE entries SET candidates = ?", (text.replace('"median_ms":0.19,', '"median_ms":1,', 1),))
    conn.commit()
    conn.close()
    assert db.export(tmp_path / "out.json") == 1
    cands = json.loads((tmp_path / "out.json").read_text())["entries"][0]["candidates"]
    assert cands[0]["median_ms"] == 1.0 and isinstance(cands[0]["median_ms"], float)


def test_a_large_file_is_not_read_whole_at_open_and_deep_damage_is_reported_not_moved(db_file, tmp_path,
                                                                                       monkeypatch, capsys):
    monkeypatch.setattr(gdb, "_QUICK_CHECK_MAX_BYTES", 0)  # every file counts as large
    healthy = _healthy_bytes(tmp_path)
    damaged = healthy[:len(healthy) - 3000]  # header, schema and meta table intact, the last rows' page cut
    db_file.parent.mkdir(parents=True)
    db_file.write_bytes(damaged)
    assert TuningDB().problem is None  # opening no longer reads every page
    assert TuningDB().load_kernel(KERNEL, H200) == {}  # the serving path: a warning, nothing found
    assert cli_main(["db", "ls"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(db_file) in err[0] and "malformed" in err[0]
    assert db_file.read_bytes() == damaged and not list(db_file.parent.glob("*.damaged-*"))


def test_import_merges_duplicates_inside_one_file_and_counts_every_entry(db_file, tmp_path):
    db = TuningDB()
    db.record(make_entry(key=(3,), best_ms=0.2))
    many = [make_entry(key=(n,)) for n in range(10, 10 + 600)]  # more than one batch of new entries
    items = many[:300] + [make_entry(key=(3,), best_ms=0.1, chosen_block=64)] + many[300:] + [
        make_entry(key=(10,), best_ms=0.05, chosen_block=64)]  # a later, faster duplicate of the first new one
    report = db.import_file(write_export(tmp_path / "in.json", items))
    assert (report.added, report.replaced, report.kept) == (600, 2, 0)
    assert [(c.key, c.kept) for c in report.conflicts] == [((3,), "imported"), ((10,), "imported")]
    stored = db.load_kernel(KERNEL, H200)
    assert len(stored) == 601 and stored[(10,)].chosen == cfg(64) and stored[(3,)].chosen == cfg(64)


@pytest.mark.parametrize("chunk", [1 << 20, 97], ids=["one-chunk", "97-char-chunks"])
def test_import_stores_what_it_validated_whatever_the_layout(db_file, tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(gdb, "_READ_CHUNK", chunk)
    plain, spaced, normalised = make_entry(key=(1,)), make_entry(key=(2,)), make_entry(key=(3,))
    doc = {"format": gdb.FORMAT, "version": 1, "entries": [gdb._entry_to_dict(e) for e in (plain, spaced)]}
    text = json.dumps(doc, indent=3)  # candidates text with newlines and indentation: stored as it stands
    third = gdb._entry_to_dict(normalised)
    third["candidates"][0]["median_ms"] = 1  # an int: validated to 1.0, so re-encoded rather than copied
    third["candidates"][0] = {"extra": "ignored", **third["candidates"][0]}  # an unknown field: dropped
    text = text[:text.rindex("]")] + "," + json.dumps(third) + "]}"
    (tmp_path / "in.json").write_text(text)
    assert TuningDB().import_file(tmp_path / "in.json").added == 3
    stored = TuningDB().load_kernel(KERNEL, H200)
    assert stored[(1,)] == plain and stored[(2,)] == spaced
    assert stored[(3,)].candidates[0].median_ms == 1.0 and isinstance(stored[(3,)].candidates[0].median_ms, float)
    conn = sqlite3.connect(db_file)
    texts = [r[0] for r in conn.execute("SELECT candidates FROM entries ORDER BY key")]
    conn.close()
    assert "\n" in texts[0] and "extra" not in texts[2] and json.loads(texts[2])[0]["median_ms"] == 1.0


@pytest.mark.parametrize("path", [None, 5, ""])
def test_load_of_no_path_is_one_line_naming_it(path):
    """graphtune.load given no path (None, a number, ""): a DatabaseError naming the value, not pathlib's TypeError
    or "cannot read tuning export .: Is a directory"."""
    with pytest.raises(DatabaseError, match=re.escape(f"graphtune.load(path={path!r}): expected the path")):
        load(path)


# --------------------------------------------------------------------------- review fixes (branch fix-db)


LAUNCH_BAD = {
    "chosen-num-warps-word": ("chosen", "num_warps", "eight",
                              "entry 1: field 'chosen.num_warps' must be a power of two >= 1, got 'eight'"),
    "candidate-num-warps-negative": ("candidate", "num_warps", -1,
                                     "entry 1: field 'candidates[1].config.num_warps' must be a power of two >= 1, "
                                     "got -1"),
    "chosen-num-warps-not-power-of-two": ("chosen", "num_warps", 6,
                                          "field 'chosen.num_warps' must be a power of two"),
    "candidate-num-stages-negative": ("candidate", "num_stages", -1,
                                      "field 'candidates[1].config.num_stages' must be an int >= 0, got -1"),
    "chosen-num-ctas-bool": ("chosen", "num_ctas", True, "field 'chosen.num_ctas' must be an int >= 1, got True"),
    "chosen-maxnreg-string": ("chosen", "maxnreg", "128", "field 'chosen.maxnreg' must be an int >= 1 (or None)"),
}


@pytest.mark.parametrize("kind", list(LAUNCH_BAD), ids=list(LAUNCH_BAD))
def test_import_and_load_refuse_launch_options_triton_cannot_take(db_file, tmp_path, kind):
    """A config whose num_warps is "eight" imported fine and a later run died naming nothing: the import and
    graphtune.load now refuse the file with one line naming it, the entry and the field, and take nothing."""
    where, name, value, match = LAUNCH_BAD[kind]
    doc = {"format": gdb.FORMAT, "version": 1,
           "entries": [gdb._entry_to_dict(make_entry(key=(1,))), gdb._entry_to_dict(make_entry(key=(2,)))]}
    target = doc["entries"][1]["chosen"] if where == "chosen" else doc["entries"][1]["candidates"][1]["config"]
    target[name] = value
    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps(doc))
    db = TuningDB()
    db.record(make_entry(key=(99,)))
    with pytest.raises(DatabaseError, match=re.escape(match)) as info:
        db.import_file(path)
    message = str(info.value)
    assert str(path) in message and "nothing was imported" in message and "\n" not in message
    assert db.entries() == [make_entry(key=(99,))]
    with pytest.raises(DatabaseError, match=re.escape(match)):
        load(path)
    assert loaded_entries(KERNEL, H200) == {}


def _fail_to_open_here(monkeypatch, path: Path, message: str = "attempt to write a readonly database") -> None:
    """Every SQLite connection graphtune makes to ``path`` fails as it does in a read-only directory (where the
    -shm and -wal files of a WAL database cannot be made; tests run as root, which chmod does not stop)."""
    real = sqlite3.connect

    class Refusing(sqlite3.Connection):
        def execute(self, *args, **kwargs):
            raise sqlite3.OperationalError(message)

    def connect(database, *args, **kwargs):
        if str(path) in str(database):
            kwargs["factory"] = Refusing
        return real(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)


def test_a_database_that_cannot_be_opened_here_is_not_called_damaged(db_file, tmp_path, monkeypatch, capsys,
                                                                     caplog):
    """A healthy database in a read-only directory was reported damaged and graphtune tried to move it aside:
    not being allowed to write there says nothing about the file. One line names it and the cause, suggests
    GRAPHTUNE_DB_READONLY=1, and the file stays where it is."""
    first = TuningDB()
    first.record(make_entry())
    first.close()
    before = sorted(os.listdir(db_file.parent))
    real_connect = sqlite3.connect
    _fail_to_open_here(monkeypatch, db_file)
    caplog.set_level(logging.WARNING, logger="graphtune")
    db = TuningDB()
    assert db.load_kernel(KERNEL, H200) == {}
    problem = db.problem
    assert problem is not None and str(db_file) in problem and "readonly database" in problem
    assert "GRAPHTUNE_DB_READONLY=1" in problem and "damaged" not in problem
    warnings = graphtune_warnings(caplog)
    assert len(warnings) == 1 and "damaged" not in warnings[0] and "moved" not in warnings[0]
    assert cli_main(["db", "ls"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(db_file) in err[0] and "GRAPHTUNE_DB_READONLY=1" in err[0], err
    assert sorted(os.listdir(db_file.parent)) == before and not list(db_file.parent.glob("*.damaged-*"))
    monkeypatch.setattr(sqlite3, "connect", real_connect)
    assert TuningDB(db_file).entries() == [make_entry()]


_HOLD_WRITE_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
"""


def test_ls_does_not_wait_for_a_process_holding_the_write_lock(db_file, capsys, monkeypatch):
    """`graphtune db ls` hung ~4 minutes (8 write attempts x the busy timeout) while another process held the
    write lock, then failed: opening a current database took a write transaction. It now reads at once (WAL
    readers are not blocked by a writer). The busy timeout is cut to 2 s so that the old behaviour fails fast."""
    first = TuningDB()
    first.record(make_entry())
    first.close()
    monkeypatch.setattr(gdb, "_BUSY_TIMEOUT_S", 2.0)
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_WRITE_LOCK, str(db_file)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        start = time.monotonic()
        assert cli_main(["db", "ls"]) == 0
        elapsed = time.monotonic() - start
        assert "1 entries" in capsys.readouterr().out
        assert elapsed < 10.0
        with pytest.raises(DatabaseError, match="locked"):  # a writer still waits for the lock, and says so
            monkeypatch.setattr(gdb, "_WRITE_ATTEMPTS", 1)
            TuningDB().record_all([make_entry(key=(2,))])
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert TuningDB().entries() == [make_entry()]


def test_a_fifo_as_the_database_is_refused_and_nothing_is_made_beside_it(tmp_path, monkeypatch, capsys):
    """A FIFO (or device) as GRAPHTUNE_DB was taken for an empty database: SQLite wrote a -journal and a lock
    file beside it. A path that exists and is not a regular file is not graphtune's: one line, nothing made."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    monkeypatch.setenv("GRAPHTUNE_DB", str(fifo))
    assert cli_main(["db", "ls"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(fifo) in err[0] and "not a regular file (a FIFO)" in err[0], err
    assert "GRAPHTUNE_DB" in err[0]
    assert os.listdir(tmp_path) == ["fifo"]


def test_the_damaged_database_warning_is_one_line(db_file, tmp_path, caplog):
    """PRAGMA quick_check rows hold newlines ("*** in database main ***\\nOn tree page ..."): the warning that a
    damaged database was moved aside spanned two lines. It is one line now."""
    healthy = tmp_path / "healthy.sqlite"
    db = TuningDB(healthy)
    for n in range(1, 40):
        db.record(make_entry(key=(n, "torch.bfloat16")))
    db.close()
    data = bytearray(healthy.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[2 * page + 8:2 * page + 24] = bytes(16)  # the cell pointers of the third page
    db_file.parent.mkdir(parents=True)
    db_file.write_bytes(bytes(data))
    conn = sqlite3.connect(f"{db_file.as_uri()}?mode=ro&immutable=1", uri=True)
    rows = conn.execute("PRAGMA quick_check").fetchall()
    conn.close()
    assert any("\n" in str(r[0]) for r in rows), rows  # the damage this test is about
    caplog.set_level(logging.WARNING, logger="graphtune")
    assert TuningDB().load_kernel(KERNEL, H200) == {}
    warnings = graphtune_warnings(caplog)
    assert len(warnings) == 1 and "moved it to" in warnings[0] and "quick_check" in warnings[0]
    assert "\n" not in warnings[0]


def test_graphtune_db_naming_an_unknown_user_is_one_line(monkeypatch, capsys):
    """GRAPHTUNE_DB=~nosuchuser/x.sqlite failed with pathlib's "Could not determine home directory." naming
    nothing: the error names the variable and its value."""
    monkeypatch.setenv("GRAPHTUNE_DB", "~graphtune-no-such-user/x.sqlite")
    with pytest.raises(ValueError, match=re.escape("GRAPHTUNE_DB='~graphtune-no-such-user/x.sqlite'")):
        gdb.settings.db_path()
    assert cli_main(["db", "ls"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "GRAPHTUNE_DB='~graphtune-no-such-user/x.sqlite'" in err[0], err


def test_num_stages_zero_is_stored_and_read_back(db_file):
    """Triton takes num_stages=0 (its HIP tutorials use it): such a config tunes, so it is stored, read back and
    exported (session 31's import check first refused it, losing such results at storage)."""
    config = {"BLOCK": 64, "num_warps": 4, "num_stages": 0, "num_ctas": 1}
    entry = new_entry(KERNEL, H200, (16, ), config, [CandidateResult(config, 0.1, 0.1, 0.1, 3)])
    store = TuningDB(db_file)
    store.record_all([entry])
    (back, ) = store.entries()
    assert back.chosen["num_stages"] == 0
