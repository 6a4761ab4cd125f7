"""A command never reports a write that did not happen: each command that writes (tune, db import / prune /
export, ab --out, demo --out) exits non-zero with one line naming the path and the cause, and JSON output
never holds NaN or Infinity (issue 17, items 1, 3 and 9 of its Why)."""
from __future__ import annotations

import builtins
import errno
import json
import os
import sqlite3
from pathlib import Path

import pytest

import _dist_workers as W
from graphtune import db as gdb
from graphtune.cli import main as cli_main
from graphtune.db import TuningDB

TUNE = ["tune", "_dist_workers:CLI_TARGET", "--sizes", "2,7"]


def _err_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "recorded in" not in captured.out and "wrote" not in captured.out
    return lines[0]


def _healthy(path: Path) -> bytes:
    db = TuningDB(path)
    db.record_all([gdb.new_entry(gdb.KernelIdentity("k", "s", "c"), W_ENV, (1,), {"BLOCK": 16}, [])])
    db.close()
    return path.read_bytes()


W_ENV = gdb.EnvIdentity("NVIDIA H200", "9.0", "3.6.0", "2.11.0", "13.0")


@pytest.fixture
def read_only_files(monkeypatch):
    """SQLite opens a file it may not write read-only and fails at the first write. Tests run as root in CI,
    where chmod does not stop a write, so the connection itself is made read-only: the same failure."""
    real = TuningDB._connect

    def patch(path: Path):
        def connect(self):
            if self.path != path:
                return real(self)
            return sqlite3.connect(self.path.resolve().as_uri() + "?mode=ro", uri=True, timeout=1.0,
                                   isolation_level=None, check_same_thread=False)
        monkeypatch.setattr(TuningDB, "_connect", connect)
    return patch


@pytest.fixture
def deterministic_timer():
    W.TIMER.table = W.deterministic_ms
    W.TIMER.timed.clear()
    yield


# ---------------------------------------------------------------------------------------------- tune


def test_tune_into_a_directory_fails_before_timing_and_names_it(tmp_path, capsys, deterministic_timer):
    target = tmp_path / "a-directory"
    target.mkdir()
    assert cli_main(TUNE + ["--db", str(target)]) == 2
    line = _err_line(capsys)
    assert str(target) in line and "--db" in line and "directory" in line
    assert W.TIMER.timed == [] and os.listdir(target) == []


def test_tune_into_a_read_only_database_fails_and_claims_nothing(tmp_path, capsys, deterministic_timer,
                                                                 read_only_files):
    path = tmp_path / "ro.sqlite"
    before = _healthy(path)
    read_only_files(path)
    assert cli_main(TUNE + ["--db", str(path)]) == 2
    line = _err_line(capsys)
    assert str(path) in line and "readonly database" in line
    assert W.TIMER.timed == [] and path.read_bytes() == before


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes read-only files")
def test_tune_into_a_chmod_read_only_file_fails(tmp_path, capsys, deterministic_timer):
    path = tmp_path / "ro.sqlite"
    _healthy(path)
    path.chmod(0o444)
    assert cli_main(TUNE + ["--db", str(path)]) == 2
    assert str(path) in _err_line(capsys)


def test_tune_into_another_programs_database_leaves_it_alone(tmp_path, capsys, deterministic_timer):
    other = tmp_path / "app.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.commit()
    conn.close()
    before = other.read_bytes()
    assert cli_main(TUNE + ["--db", str(other)]) == 2
    line = _err_line(capsys)
    assert f"{other} (from --db) is not a graphtune tuning database" in line and "users" in line
    assert other.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["app.sqlite"]


def test_a_write_that_fails_after_tuning_is_an_error_and_the_export_is_kept(tmp_path, capsys, monkeypatch,
                                                                            deterministic_timer, read_only_files):
    path = tmp_path / "ro.sqlite"
    _healthy(path)
    read_only_files(path)
    monkeypatch.setattr(TuningDB, "check_writable", lambda self: None)  # the failure comes at the end
    out = tmp_path / "tuned.json"
    assert cli_main(TUNE + ["--db", str(path), "--out", str(out)]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert str(path) in line and "nothing was recorded" in line
    assert len(json.loads(out.read_text())["entries"]) == 2  # the export, written first, keeps the results


def test_tune_out_into_a_directory_fails_before_timing(tmp_path, capsys, deterministic_timer):
    assert cli_main(TUNE + ["--out", str(tmp_path)]) == 2
    line = _err_line(capsys)
    assert str(tmp_path) in line and "--out" in line and "directory" in line
    assert W.TIMER.timed == []


@pytest.fixture
def read_only_dir(tmp_path, monkeypatch):
    """A directory no file can be created in, as one the user may not write. Tests run as root, whom chmod does
    not stop, so the calls that create files refuse it: os.open (tempfile's) and open (the export's)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    real_os_open, real_open = os.open, builtins.open

    def refused(path) -> bool:
        if isinstance(path, int):
            return False
        absolute = os.path.abspath(os.fsdecode(path))
        return absolute == str(ro) or os.path.dirname(absolute) == str(ro)

    def os_open(path, flags, mode=0o777, *, dir_fd=None):
        if refused(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise PermissionError(errno.EACCES, "Permission denied", os.fsdecode(path))
        return real_os_open(path, flags, mode, dir_fd=dir_fd)

    def open_(file, mode="r", *args, **kwargs):
        if refused(file) and any(c in mode for c in "wax+"):
            raise PermissionError(errno.EACCES, "Permission denied", os.fsdecode(file))
        return real_open(file, mode, *args, **kwargs)
    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(builtins, "open", open_)
    return ro


def test_tune_out_into_a_read_only_directory_fails_before_timing(read_only_dir, capsys, deterministic_timer):
    """Only the directory's existence was checked: the buckets were tuned, then the export could not be
    written and the results were lost."""
    out = read_only_dir / "x.json"
    assert cli_main(TUNE + ["--out", str(out)]) == 2
    line = _err_line(capsys)
    assert f"--out {out}: cannot write there: Permission denied" in line
    assert W.TIMER.timed == [] and os.listdir(read_only_dir) == []


def test_tune_records_and_says_so_when_it_did(tmp_path, capsys, deterministic_timer):
    path = tmp_path / "fine.sqlite"
    assert cli_main(TUNE + ["--db", str(path)]) == 0
    assert f"recorded in {path}" in capsys.readouterr().out
    assert len(TuningDB(path).entries("gt_cli")) == 2


# ------------------------------------------------------------------------------------------------ db


def test_db_import_and_prune_into_a_read_only_database_fail_with_one_line(tmp_path, capsys, read_only_files):
    path = tmp_path / "ro.sqlite"
    before = _healthy(path)
    read_only_files(path)
    export = tmp_path / "in.json"
    export.write_text(json.dumps({"format": gdb.FORMAT, "version": 1, "entries": [gdb._entry_to_dict(
        gdb.new_entry(gdb.KernelIdentity("k2", "s", "c"), W_ENV, (8,), {"BLOCK": 32}, []))]}))
    assert cli_main(["db", "import", str(export), "--db", str(path)]) == 2
    line = _err_line(capsys)
    assert str(path) in line and "readonly database" in line and "nothing was imported" in line
    assert cli_main(["db", "prune", "--kernel", "k", "--db", str(path)]) == 2
    assert str(path) in _err_line(capsys)
    assert path.read_bytes() == before


def test_db_import_and_export_into_a_directory_fail_with_one_line(tmp_path, capsys):
    directory = tmp_path / "d"
    directory.mkdir()
    assert cli_main(["db", "import", str(tmp_path / "missing.json"), "--db", str(directory)]) == 2
    assert str(directory) in _err_line(capsys)
    _healthy(tmp_path / "fine.sqlite")
    assert cli_main(["db", "export", "-o", str(directory), "--db", str(tmp_path / "fine.sqlite")]) == 2
    line = _err_line(capsys)
    assert str(directory) in line and "cannot write tuning export" in line
    assert os.listdir(directory) == [] and not list(tmp_path.glob(".*.tmp"))


# -------------------------------------------------------------------------------------- ab, demo, model


def test_demo_out_naming_an_existing_file_is_one_line(tmp_path, capsys):
    existing = tmp_path / "notes.txt"
    existing.write_text("mine")
    assert cli_main(["demo", "--cpu", "--out", str(existing)]) == 2
    line = _err_line(capsys)
    assert str(existing) in line and "--out" in line and "not a directory" in line
    assert existing.read_text() == "mine"


def test_ab_json_and_ab_out_never_hold_infinity(tmp_path, capsys):
    from graphtune.ab import decide

    # a runner-up 1e308 / 1e-300 times slower: the ratio overflows to inf
    result = decide({"a": {8: [[1e-300] * 3] * 3}, "b": {8: [[1e308] * 3] * 3}}, target="t")
    saved = tmp_path / "in"
    result.save(saved)

    def refuse(name):
        raise AssertionError(f"{name} in JSON output")
    doc = json.loads((saved / "ab.json").read_text(), parse_constant=refuse)
    assert doc["per_size"][0]["runner_up_ratio"] is None
    assert "per_size[0].runner_up_ratio was inf" in doc["not_finite"]
    assert cli_main(["ab", "--from-json", str(saved / "ab.json"), "--json", "--out", str(tmp_path / "out")]) == 0
    printed = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert printed["decision"] == doc["decision"]
    json.loads((tmp_path / "out" / "ab.json").read_text(), parse_constant=refuse)


def test_ab_out_naming_an_existing_file_is_one_line(tmp_path, capsys):
    from graphtune.ab import decide

    result = decide({"a": {8: [[0.10, 0.11, 0.10]] * 3}, "b": {8: [[0.20, 0.21, 0.20]] * 3}}, target="t")
    saved = tmp_path / "ab"
    result.save(saved)
    existing = tmp_path / "notes.txt"
    existing.write_text("mine")
    assert cli_main(["ab", "--from-json", str(saved / "ab.json"), "--out", str(existing)]) == 2
    line = _err_line(capsys)
    assert str(existing) in line and "not a directory" in line and existing.read_text() == "mine"


def test_model_json_never_holds_infinity(capsys):
    argv = ["model", "--fixed-ms", "1e308", "--per-request-ms", "1e308", "--concurrency", "90", "--json"]
    assert cli_main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Infinity" not in captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "overflows" in lines[0] and "--fixed-ms 1e+308" in lines[0]
    assert cli_main(argv[:-1]) == 2  # the tables refuse it the same way


def test_model_json_is_strict_json(capsys):
    argv = ["model", "--fixed-ms", "18", "--per-request-ms", "1.05", "--component", "attention=0.79",
            "--speedup", "1.25", "--concurrency", "90", "--json"]
    assert cli_main(argv) == 0

    def refuse(name):
        raise AssertionError(f"{name} in JSON output")
    report = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert report["scenarios"][0]["step_ms"] == pytest.approx(98.28)


def test_report_json_replaces_non_finite_numbers_with_null_and_says_so():
    from graphtune._outputs import report_json, strict_json

    text = report_json({"a": [1.0, float("nan")], "b": {"c": float("inf")}})
    assert json.loads(text) == {"a": [1.0, None], "b": {"c": None}, "not_finite": ["a[1] was nan", "b.c was inf"]}
    with pytest.raises(ValueError, match=r"b\.c = inf is not a finite number"):
        strict_json({"b": {"c": float("inf")}}, "x")


# ------------------------------------------------------------------ export targets (review fixes, branch fix-db)


def _entries(path: Path) -> int:
    return len(TuningDB(path).entries())


def test_export_onto_the_database_in_use_is_refused_and_keeps_it(tmp_path, capsys, monkeypatch):
    """`graphtune db export -o db.sqlite` with GRAPHTUNE_DB=db.sqlite replaced the database with JSON: every
    tuned entry lost. The database in use, under any spelling, is refused with one line and left as it was."""
    path = tmp_path / "db.sqlite"
    _healthy(path)
    monkeypatch.setenv("GRAPHTUNE_DB", str(path))
    monkeypatch.chdir(tmp_path)
    link = tmp_path / "alias.sqlite"
    link.symlink_to(path)
    for target in ("db.sqlite", str(path), "./db.sqlite", str(link)):
        assert cli_main(["db", "export", "-o", target]) == 2, target
        line = _err_line(capsys)
        assert target in line and "-o" in line and "tuning database" in line and "nothing was written" in line
        assert _entries(path) == 1 and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("db.sqlite")) == ["alias.sqlite"]


def test_export_onto_the_database_side_files_is_refused(tmp_path, capsys, monkeypatch):
    """The database's lock file (empty, so it passed as "an empty file an export may replace") and SQLite's WAL /
    index files: refused with one line, left as they were."""
    path = tmp_path / "db.sqlite"
    _healthy(path)
    monkeypatch.setenv("GRAPHTUNE_DB", str(path))
    for suffix in (".lock", "-wal", "-shm"):
        side = tmp_path / f"db.sqlite{suffix}"
        side.touch()
        before = side.read_bytes()
        assert cli_main(["db", "export", "-o", str(side)]) == 2, suffix
        line = _err_line(capsys)
        assert str(side) in line and "tuning database's" in line and "nothing was written" in line, line
        assert side.read_bytes() == before and _entries(path) == 1


def test_tune_out_onto_the_database_fails_before_timing_and_keeps_it(tmp_path, capsys, monkeypatch,
                                                                    deterministic_timer):
    """`tune --out db.sqlite --db` wrote the export over the database, reported "wrote" and "recorded in", and
    exited 0 with the earlier entries gone. It is now refused before any tuning."""
    path = tmp_path / "db.sqlite"
    _healthy(path)
    monkeypatch.setenv("GRAPHTUNE_DB", str(path))
    monkeypatch.chdir(tmp_path)
    for argv in (["--out", "db.sqlite", "--db"], ["--out", "db.sqlite"], ["--out", "new.sqlite", "--db", "new.sqlite"]):
        assert cli_main(TUNE + argv) == 2, argv
        line = _err_line(capsys)
        assert "--out" in line and argv[1] in line, line
        assert W.TIMER.timed == [] and _entries(path) == 1
    assert not (tmp_path / "new.sqlite").exists()


def test_export_replaces_only_an_export_or_an_empty_file(tmp_path, capsys):
    """An existing file that is not a graphtune export (another program's SQLite database, notes) is never
    replaced; an earlier export or an empty file is."""
    source = tmp_path / "db.sqlite"
    _healthy(source)
    other = tmp_path / "app.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.commit()
    conn.close()
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": true}')
    for victim, kind in ((other, "an SQLite database"), (notes, "not a graphtune tuning export")):
        before = victim.read_bytes()
        assert cli_main(["db", "export", "-o", str(victim), "--db", str(source)]) == 2
        line = _err_line(capsys)
        assert str(victim) in line and kind in line and victim.read_bytes() == before
    for replaceable in (tmp_path / "earlier.json", tmp_path / "empty.json"):
        replaceable.write_text(json.dumps({"format": gdb.FORMAT, "version": 1, "entries": []})
                               if replaceable.name == "earlier.json" else "")
        assert cli_main(["db", "export", "-o", str(replaceable), "--db", str(source)]) == 0
        assert len(json.loads(replaceable.read_text())["entries"]) == 1
    capsys.readouterr()


def test_export_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path, capsys):
    source = tmp_path / "db.sqlite"
    _healthy(source)
    real = tmp_path / "real" / "target.json"
    real.parent.mkdir()
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert cli_main(["db", "export", "-o", str(link), "--db", str(source)]) == 0  # a dangling link: made there
    assert link.is_symlink() and len(json.loads(real.read_text())["entries"]) == 1
    assert cli_main(["db", "export", "-o", str(link), "--db", str(source)]) == 0  # and replaced there
    assert link.is_symlink() and os.readlink(link) == str(real) and json.loads(real.read_text())["entries"]
    assert sorted(os.listdir(real.parent)) == ["target.json"]
    capsys.readouterr()


def test_export_to_a_fifo_is_refused_and_left_alone(tmp_path, capsys, deterministic_timer):
    source = tmp_path / "db.sqlite"
    _healthy(source)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert cli_main(["db", "export", "-o", str(fifo), "--db", str(source)]) == 2
    line = _err_line(capsys)
    assert str(fifo) in line and "a FIFO, not a regular file" in line
    assert cli_main(TUNE + ["--out", str(fifo), "--db", str(source)]) == 2
    assert "a FIFO" in _err_line(capsys) and W.TIMER.timed == []
    assert fifo.is_fifo() and not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("make", ["directory", "foreign"])
def test_tune_into_an_unusable_database_says_why_once(tmp_path, capsys, caplog, deterministic_timer, make):
    """`tune --db <another program's file or a directory>` printed the reason twice: a WARNING, then the error."""
    import logging
    target = tmp_path / "target"
    if make == "directory":
        target.mkdir()
    else:
        target.write_text("not a database\n" * 20)
    caplog.set_level(logging.WARNING, logger="graphtune")
    assert cli_main(TUNE + ["--db", str(target)]) == 2
    assert str(target) in _err_line(capsys)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize("argv, option", [
    (["db", "export", "-o", ""], "-o"),
    (["db", "ls", "--db", ""], "--db"),
    (["db", "import", "x.json", "--db", " "], "--db"),
    (TUNE + ["--db", ""], "--db"),
    (TUNE + ["--out", ""], "--out"),
], ids=["export-o", "ls-db", "import-db-blank", "tune-db", "tune-out"])
def test_an_empty_path_argument_is_one_line_naming_it(tmp_path, capsys, monkeypatch, deterministic_timer, argv,
                                                       option):
    """An empty path was read as '.', or as "not given": "PosixPath('.') has an empty name", the database of
    GRAPHTUNE_DB used silently, "'.' is a directory" twice."""
    monkeypatch.setenv("GRAPHTUNE_DB", str(tmp_path / "default.sqlite"))
    monkeypatch.chdir(tmp_path)
    assert cli_main(argv) == 2
    line = _err_line(capsys)
    assert f"{option} '" in line and "give a file path" in line, line
    assert os.listdir(tmp_path) == [] and W.TIMER.timed == []
