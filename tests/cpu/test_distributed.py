"""Rank agreement and sharded tuning over real torch.distributed (gloo, processes spawned here).

One run of three ranks (tests/cpu/_dist_workers.py) plays every scenario in order, each rank with its own
injected timer and its own database; the tests below read what each rank reported. The CLI runs under two
ranks the way torchrun starts it (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
"""
from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import _dist_workers as W
from graphtune import db as gdb
from graphtune import agreement, sharded
from graphtune.cli import main as cli_main
from graphtune._loading import parse_sizes
from graphtune.configs import config_to_dict
from graphtune.errors import DatabaseError

HERE = Path(__file__).resolve().parent
WORLD = 3
RUN_TIMEOUT_S = 90


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(world: int, argv: list[str], outdir: Path, env_for_rank=lambda r: {}) -> list[tuple[int, str, str]]:
    """Start one process per rank with torchrun's variables; return (exit code, stdout, stderr) per rank."""
    port = _free_port()
    procs = []
    for rank in range(world):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "TRITON_INTERPRET": "1",
               "GRAPHTUNE_DB": str(outdir / f"db-rank{rank}.sqlite"), "GRAPHTUNE_DIST_TIMEOUT_S": "30",
               "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
               **env_for_rank(rank)}
        procs.append(subprocess.Popen(argv, env=env, cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    deadline = time.monotonic() + RUN_TIMEOUT_S
    out = []
    for p in procs:
        try:
            stdout, stderr = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            stdout, stderr = p.communicate()
            pytest.fail(f"a rank did not finish within {RUN_TIMEOUT_S} s:\n{stderr[-3000:]}")
        out.append((p.returncode, stdout, stderr))
    return out


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    outdir = tmp_path_factory.mktemp("dist3")
    runs = _spawn(WORLD, [sys.executable, str(HERE / "_dist_workers.py"), str(outdir)], outdir)
    results = []
    for rank, (code, _, stderr) in enumerate(runs):
        path = outdir / f"rank{rank}.json"
        assert code == 0 and path.exists(), f"rank {rank} exited {code}:\n{stderr[-3000:]}"
        data = json.loads(path.read_text())
        assert "crash" not in data, f"rank {rank} crashed:\n{data['crash']}\n{stderr[-2000:]}"
        data["outdir"] = str(outdir)
        results.append(data)
    return results


def _bucket_labels(ranks: list[dict], mode: str) -> list[dict[str, str]]:
    return [r["modes"][mode] for r in ranks]


# ------------------------------------------------------------------------------------- online agreement


@pytest.mark.parametrize("mode, expected", [
    ("merge", W.merged_best),
    ("broadcast", lambda bucket: W.local_best(0, bucket)),
], ids=["merge-sum-of-medians", "broadcast-rank0"])
def test_every_rank_ends_with_the_same_config(ranks, mode, expected):
    per_rank = _bucket_labels(ranks, mode)
    want = {str(W.BUCKETS(s)): W.LABELS[expected(W.BUCKETS(s))] for s in W.MODE_SIZES}
    for rank, labels in enumerate(per_rank):
        assert labels == want, f"rank {rank} in mode {mode}"
    assert all(r["modes"][f"{mode}_current_mode"] == mode for r in ranks)


def test_merge_picks_a_config_no_rank_picked_alone(ranks):
    for size in W.MODE_SIZES:
        bucket = W.BUCKETS(size)
        assert W.merged_best(bucket) not in {W.local_best(r, bucket) for r in range(WORLD)}


def test_off_mode_leaves_each_rank_its_own_pick(ranks):
    # the timers really disagree: without agreement the ranks end with different configs
    for rank, labels in enumerate(_bucket_labels(ranks, "off")):
        assert labels == {str(W.BUCKETS(s)): W.LABELS[W.local_best(rank, W.BUCKETS(s))] for s in W.MODE_SIZES}
    assert len({json.dumps(labels, sort_keys=True) for labels in _bucket_labels(ranks, "off")}) == WORLD
    assert all(r["modes"]["off_current_mode"] == "off" for r in ranks)


def test_default_group_and_merge_when_nothing_was_set(ranks):
    assert [r["default_mode"] for r in ranks] == ["merge"] * WORLD


def test_key_mismatch_raises_on_every_rank_naming_each_key(ranks):
    for rank, r in enumerate(ranks):
        message = r["mismatch"]["error"]
        assert message is not None, f"rank {rank} raised nothing"
        assert "ranks disagree" in message
        assert "rank 0: stored lookup kernel 'gt_mismatch' key [2, 'torch.float32', 'torch.float32']" in message
        assert "rank 1: stored lookup kernel 'gt_mismatch' key [2, 'torch.float32', 'torch.float32']" in message
        assert "rank 2: stored lookup kernel 'gt_mismatch' key [8, 'torch.float32', 'torch.float32']" in message


def test_a_rank_whose_search_raises_fails_the_key_everywhere_and_the_group_stays_in_step(ranks):
    results = [r["search_fails"] for r in ranks]
    assert results[0]["first"] == "RuntimeError: the timer failed on this rank", results[0]
    for rank in (1, 2):
        assert results[rank]["first"].startswith("TuningError"), results[rank]
        assert "rank(s) [0]" in results[rank]["first"], results[rank]
    nexts = [r["next"] for r in results]
    assert len(set(nexts)) == 1 and not nexts[0].startswith(("DistributedError", "TuningError")), nexts


def test_a_rank_whose_sharded_share_raises_is_named_by_its_peers_at_once(ranks):
    results = [r["sharded_fails"] for r in ranks]
    assert "make_args" in results[1]["error"] and "failed on this rank" in results[1]["error"], results[1]
    for rank in (0, 2):
        error = results[rank]["error"] or ""
        assert error.startswith("DistributedError"), results[rank]
        assert "rank 1: sharded tuning of kernel 'gt_sharded_fails' failed here:" in error, error
        assert results[rank]["waited_s"] < 30, results[rank]     # not the timeout (300 s by default)


def test_ranks_running_another_build_of_a_kernel_disagree_naming_its_source(ranks):
    results = [r["source_mismatch"] for r in ranks]
    assert results[0]["source"] == results[2]["source"] != results[1]["source"]
    for rank, r in enumerate(results):
        assert r["error"] is not None and "ranks disagree" in r["error"], (rank, r)
        for other, o in enumerate(results):
            assert f"rank {other}: stored lookup kernel 'gt_source'" in r["error"], r["error"]
            assert f"source {o['source'][:8]})" in r["error"], r["error"]


def test_silent_peer_times_out_naming_kernel_key_and_missing_rank(ranks):
    assert ranks[1]["timeout"]["skipped"]
    for rank in (0, 2):
        t = ranks[rank]["timeout"]
        assert t["error"] is not None, f"rank {rank} did not time out"
        assert "kernel 'gt_timeout' key [4, 'torch.float32', 'torch.float32']" in t["error"]
        assert "no answer from rank(s) [1] of 3 within 1 s" in t["error"]
        assert "rank 1: agreement #" in t["error"]   # where the silent rank last was
        assert 0.9 <= t["waited_s"] < 10


# --------------------------------------------------------------------------------------- stored entries


def test_stored_entries_from_each_rank_database_agree(ranks):
    mine = [W.LABELS[r + 1] for r in range(WORLD)]     # each rank recorded config r + 1 for bucket 2
    for rank, r in enumerate(ranks):
        s = r["stored"]
        assert s["db_broadcast"] == mine[0], f"rank {rank}: broadcast uses rank 0's stored entry"
        # the database lookup carries no median in the tuner's Choice today: rank 0's entry is used
        assert s["db_merge"] in mine and s["db_merge"] == ranks[0]["stored"]["db_merge"]
        # with medians known (0.5, 0.3, 0.9 ms) merge takes rank 1's, broadcast still rank 0's
        assert s["medians_merge"] == mine[1]
        assert s["medians_broadcast"] == mine[0]


def test_stored_entry_on_some_ranks_only_makes_every_rank_tune(ranks):
    assert [r["stored"]["db_partial_merge_had"] for r in ranks] == [False, True, False]
    for r in ranks:
        assert r["stored"]["db_partial_merge"] is None
        assert r["stored"]["db_partial_broadcast"] is None


# --------------------------------------------------------------------------------------- sharded tuning


def _entries(path: Path) -> dict[tuple, dict]:
    data = json.loads(Path(path).read_text())
    assert data["format"] == gdb.FORMAT
    return {tuple(e["key"]): {"chosen": e["chosen"],
                              "candidates": sorted((json.dumps(c["config"], sort_keys=True), c["median_ms"])
                                                   for c in e["candidates"])}
            for e in data["entries"]}


def test_sharded_tuning_matches_single_process(ranks, tmp_path):
    W.TIMER.table = W.deterministic_ms
    W.TIMER.timed.clear()
    target = W.ScaleTarget()
    alone = sharded.tune_sharded(target, target.default_sizes, out=tmp_path / "alone.json")
    want = {str(k[0]): b.label for k, b in alone.items()}
    assert want == {str(b): W.LABELS[min(_kept(b), key=lambda i: W.deterministic_ms(b, i))]
                    for b in (1, 4, 8, 16)}
    assert {str(k[0]): list(b.sizes) for k, b in alone.items()} == {"1": [1], "4": [3, 4], "8": [5], "16": [16, 11]}
    for rank, r in enumerate(ranks):
        assert r["sharded"]["labels"] == want, f"rank {rank}"
        assert r["sharded"]["installed"] == want, f"rank {rank} did not install every bucket"
        assert r["sharded"]["medians"] == {str(k[0]): b.median_ms for k, b in alone.items()}
    assert _entries(Path(ranks[0]["outdir"]) / "sharded.json") == _entries(tmp_path / "alone.json")


def _kept(bucket: int) -> list[int]:
    return [i for i, c in enumerate(W.CONFIGS) if not (bucket <= 2 and c.kwargs["BLOCK"] == 64)]


def test_sharded_tuning_splits_the_work_without_overlap(ranks):
    shares = [{tuple(p) for p in r["sharded"]["timed"]} for r in ranks]
    every = {(b, i) for b in (1, 4, 8, 16) for i in _kept(b)}
    assert set().union(*shares) == every
    assert sum(len(s) for s in shares) == len(every), "a (bucket, config) pair was timed on two ranks"
    assert max(len(s) for s in shares) - min(len(s) for s in shares) <= 1


def test_sharded_export_is_used_by_a_fresh_kernel_without_tuning(ranks):
    gdb.load(Path(ranks[0]["outdir"]) / "sharded.json")
    try:
        W.TIMER.timed.clear()
        kernel = W.make_kernel("gt_sharded", prune=True)
        for size in W.ScaleTarget.default_sizes:
            W.launch(kernel, size)
        assert W.TIMER.timed == [] and kernel.tune_count == 0
        assert {str(b): W.chosen_label(kernel, b) for b in (1, 4, 8, 16)} == ranks[0]["sharded"]["labels"]
    finally:
        gdb.clear_loaded()


def test_cli_tune_under_two_ranks_matches_the_single_process_cli(tmp_path, capsys):
    W.TIMER.table = W.deterministic_ms
    argv = ["tune", "_dist_workers:CLI_TARGET", "--sizes", "1,3,5,16,11"]
    assert cli_main(argv + ["--out", str(tmp_path / "alone.json")]) == 0
    printed = capsys.readouterr().out
    assert "graphtune tune gt_cli" in printed and "1 rank(s)" in printed

    runs = _spawn(2, [sys.executable, "-m", "graphtune", *argv, "--out", str(tmp_path / "two.json")], tmp_path)
    for rank, (code, _, stderr) in enumerate(runs):
        assert code == 0, f"rank {rank}:\n{stderr[-3000:]}"
    table, quiet = runs[0][1], runs[1][1]
    assert "2 rank(s)" in table and quiet == ""
    for label in {e["chosen"]["BLOCK"] for e in json.loads((tmp_path / "alone.json").read_text())["entries"]}:
        assert f"BLOCK={label}" in table
    assert _entries(tmp_path / "two.json") == _entries(tmp_path / "alone.json")


# --------------------------------------------------------------------------------- without a process group


@pytest.mark.parametrize("scores, expected", [
    ([[1.0, 2.0, 3.0], [3.0, 1.5, 1.0]], 1),             # sums 4.0, 3.5, 4.0; neither rank's own pick
    ([[1.0, 2.0], [math.inf, 1.0]], 1),                   # failed on rank 1
    ([[1.0, math.inf], [math.inf, 1.0]], None),           # nothing ran everywhere
    ([[2.0, 1.0, 1.0]], 1),                               # ties to the lower index
], ids=["sum-wins", "failure-anywhere-is-inf", "none-everywhere", "tie-lower-index"])
def test_merge_choice(scores, expected):
    assert agreement.merge_choice(scores) == expected


@pytest.mark.parametrize("scores, root, expected", [
    ([[1.0, 2.0], [0.5, 0.1]], 0, 0),                     # rank 0 decides, whatever rank 1 timed
    ([[1.0, 2.0, 1.5], [math.inf, 0.0, 0.0]], 0, 2),      # rank 0's pick failed elsewhere: its next best
    ([[1.0, 2.0], [math.inf, math.inf]], 0, None),
], ids=["root-pick", "root-pick-failed-elsewhere", "none-everywhere"])
def test_broadcast_choice(scores, root, expected):
    assert agreement.broadcast_choice(scores, root) == expected


@pytest.mark.parametrize("mode, indices, medians, expected", [
    ("broadcast", [3, 1, 2], [0.9, 0.1, 0.5], (3, 0)),
    ("merge", [3, 1, 2], [0.9, 0.1, 0.5], (1, 1)),
    ("merge", [3, 1, 2], [math.inf, math.nan, math.inf], (3, 0)),
    ("merge", [3, 1, 2], [0.4, 0.4, math.inf], (3, 0)),
    ("merge", [3, -1, 2], [0.9, 0.1, 0.5], None),
], ids=["broadcast-rank0", "merge-best-median", "merge-unknown-medians-rank0", "merge-tie-lower-rank",
        "missing-on-one-rank"])
def test_stored_choice(mode, indices, medians, expected):
    assert agreement.stored_choice(mode, indices, medians) == expected


def test_without_a_group_nothing_is_collective():
    assert not torch.distributed.is_initialized()
    assert agreement.current_mode() == "off" and agreement.current_rank() == 0
    kernel = W.make_kernel("gt_local")
    dicts = [config_to_dict(c) for c in W.CONFIGS]
    assert agreement.agree(kernel.name, (1,), dicts, [0, 2], [1.0] * 6, 2) == 2
    assert agreement.agree_stored(kernel.name, (1,), dicts, -1, None) is None
    assert kernel._agreed_stored((1,), None) is None


def test_set_process_group_rejects_bad_input():
    with pytest.raises(ValueError, match="mode='bogus'"):
        agreement.set_process_group(mode="bogus")
    with pytest.raises(ValueError, match="not initialised"):
        agreement.set_process_group(group=object())
    agreement.set_process_group(mode="merge")


def test_tune_sharded_rejects_bad_targets_and_sizes():
    target = W.ScaleTarget("gt_bad")
    assert isinstance(target, sharded.TuneTarget)
    with pytest.raises(ValueError, match=r"sizes must be ints >= 1, got 0"):
        sharded.tune_sharded(target, [4, 0])
    with pytest.raises(TypeError, match="lacks"):
        sharded.tune_sharded(object(), [1])
    with pytest.raises(ValueError, match="--sizes: 'x' is not an integer"):
        parse_sizes("1,x")
    assert cli_main(["tune", "_dist_workers:NOPE"]) == 2   # a clear error, exit code 2


def test_cli_tune_records_in_the_named_database(tmp_path, capsys):
    W.TIMER.table = W.deterministic_ms
    path = tmp_path / "tuned.sqlite"
    assert cli_main(["tune", "_dist_workers:CLI_TARGET", "--sizes", "2,7", "--db", str(path)]) == 0
    assert f"recorded in {path}" in capsys.readouterr().out
    stored = gdb.TuningDB(path).entries("gt_cli")
    assert sorted(e.key[0] for e in stored) == [2, 8]
    assert all(e.chosen == config_to_dict(W.CONFIGS[min(_kept(e.key[0]), key=lambda i: W.deterministic_ms(
        e.key[0], i))]) for e in stored)


def test_read_only_database_fails_before_any_timing(monkeypatch):
    monkeypatch.setenv("GRAPHTUNE_DB_READONLY", "1")
    W.TIMER.timed.clear()
    with pytest.raises(DatabaseError, match="read-only"):
        sharded.tune_sharded(W.ScaleTarget("gt_readonly"), [1, 2], db=True)
    assert W.TIMER.timed == []


def test_cli_refuses_to_throw_results_away(monkeypatch, capsys):
    monkeypatch.setenv("GRAPHTUNE_NO_DB", "1")
    assert cli_main(["tune", "_dist_workers:CLI_TARGET", "--sizes", "2"]) == 2
    assert "GRAPHTUNE_NO_DB=1 and no --out" in capsys.readouterr().err


def test_sharded_out_that_an_export_must_not_replace_is_refused_before_timing(tmp_path):
    """tune_sharded(out=...) naming a file that is not an export: refused before any timing (the CLI checked this
    first; a library caller learnt it after the run, and the database copy was lost with it)."""
    W.TIMER.table = W.deterministic_ms
    W.TIMER.timed.clear()
    other = tmp_path / "notes.txt"
    other.write_text("not an export\n")
    with pytest.raises(DatabaseError, match=r"notes.txt \(from out\).*not a graphtune tuning export"):
        sharded.tune_sharded(W.ScaleTarget("gt_out_refused"), [1, 2], out=other)
    assert W.TIMER.timed == [] and other.read_text() == "not an export\n"
