"""A/B statistics and the V1/V3 decision on synthetic timings with known answers; the measurement loop with an
injected sampler; target and config resolution; JSON, PNG and the CLI."""
from __future__ import annotations

import json
import random
import struct
import textwrap
from dataclasses import dataclass, field
from typing import Callable

import pytest
import torch
import triton

from graphtune.ab import ABResult, ab, decide, resolve_target, select_configs
from graphtune.cli import main
from graphtune.errors import ConfigError, GraphtuneError

SIZES = [1, 8, 32, 60, 90, 128]
# Per-size best latency (ms), the shape of the MLA decode table in FACTS.md.
BASE_MS = {1: 0.037, 8: 0.038, 32: 0.069, 60: 0.130, 90: 0.190, 128: 0.254}
N_BOOT = 500  # enough for the decisions below, keeps the file fast


def trials(rng: random.Random, median: float, *, noise: float = 0.01, n_trials: int = 5, n_samples: int = 20,
           drift: list[float] | None = None) -> list[list[float]]:
    """Gaussian samples around ``median`` (relative sd ``noise``); ``drift[k]`` scales trial k as a whole."""
    drift = drift or [1.0] * n_trials
    return [[rng.gauss(median * d, noise * median) for _ in range(n_samples)] for d in drift]


def table(rng: random.Random, factors: dict[str, dict[int, float]], **kw) -> dict[str, dict[int, list]]:
    return {label: {s: trials(rng, BASE_MS.get(s, 0.1) * f, **kw) for s, f in per.items()}
            for label, per in factors.items()}


# ------------------------------------------------------------------------------------------------ statistics

def test_cell_median_and_ci_known_values():
    # trials of exactly known values: pooled median 3.0; every resample lies between 1 and 5
    result = decide({"only": {7: [[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]]}}, n_boot=N_BOOT)
    cell = result.cell("only", 7)
    assert cell.median == 3.0
    assert 1.0 <= cell.ci_low <= 3.0 <= cell.ci_high <= 5.0
    assert cell.ci_low < cell.ci_high
    assert (cell.n_trials, cell.n_samples) == (2, 6)


def test_bootstrap_is_seeded():
    samples = table(random.Random(3), {"a": {5: 1.0}, "b": {5: 1.01}})
    one, two = decide(samples, n_boot=N_BOOT, seed=11), decide(samples, n_boot=N_BOOT, seed=11)
    other = decide(samples, n_boot=N_BOOT, seed=12)
    assert one.to_dict() == two.to_dict()
    assert one.cell("a", 5).ci_low != other.cell("a", 5).ci_low


def test_ci_covers_the_true_median():
    rng = random.Random(5)
    runs, covered = 40, 0
    for seed in range(runs):
        cell = decide({"x": {3: trials(rng, 0.1, noise=0.05, n_trials=8, n_samples=12)}}, n_boot=400,
                      seed=seed).cell("x", 3)
        covered += cell.ci_low <= 0.1 <= cell.ci_high
        assert (cell.ci_high - cell.ci_low) / 0.1 < 0.05  # ~0.015 expected: not a degenerate wide interval
    assert covered >= 0.8 * runs


def test_two_level_bootstrap_widens_ci_for_trial_to_trial_shifts():
    # The same numbers as 5 trials shifted by +-4 % and as one pooled trial: shifts between trials are
    # correlated error that more samples per trial cannot average away, so the CI must be wider.
    rng = random.Random(7)
    shifted = trials(rng, 0.2, noise=0.005, drift=[0.96, 1.04, 0.98, 1.02, 1.0], n_samples=40)
    pooled = [[x for t in shifted for x in t]]
    wide = decide({"c": {1: shifted}}, n_boot=N_BOOT).cell("c", 1)
    narrow = decide({"c": {1: pooled}}, n_boot=N_BOOT).cell("c", 1)
    assert wide.median == pytest.approx(narrow.median)
    assert (wide.ci_high - wide.ci_low) > 3 * (narrow.ci_high - narrow.ci_low)


def test_flat_list_means_one_value_per_trial():
    flat = decide({"c": {2: [1.0, 2.0, 9.0]}}, n_boot=N_BOOT).cell("c", 2)
    assert (flat.n_trials, flat.n_samples, flat.median) == (3, 3, 2.0)


@pytest.mark.parametrize("slower, noise, beyond", [(1.10, 0.01, True), (1.02, 0.005, True), (1.0, 0.01, False),
                                                   (1.005, 0.05, False)],
                         ids=["10pct-1pct-noise", "2pct-halfpct-noise", "identical", "halfpct-5pct-noise"])
def test_beyond_noise(slower, noise, beyond):
    rng = random.Random(int(slower * 1000) + int(noise * 1000))
    result = decide({"fast": {33: trials(rng, 0.1, noise=noise)}, "slow": {33: trials(rng, 0.1 * slower, noise=noise)}},
                    n_boot=N_BOOT)
    verdict = result.verdict(33)
    assert verdict.beyond_noise is beyond
    ratio, lo, hi = verdict.ratios[verdict.runner_up]
    assert lo <= ratio <= hi
    assert (lo > 1.0) is beyond
    assert set(verdict.within_noise) == ({verdict.winner} if beyond else {"fast", "slow"})
    if beyond:
        assert (verdict.winner, verdict.runner_up) == ("fast", "slow")


def test_trials_are_paired_across_configs():
    # Both configs drift together by +-10 % from trial to trial (clocks, temperature); "slow" is always 2 %
    # slower. Pairing by trial cancels the drift; unpaired, the +-10 % would swamp the 2 %.
    rng = random.Random(9)
    drift = [0.9, 1.1, 0.95, 1.05, 1.0, 0.92]
    samples = {"fast": {17: trials(rng, 0.1, noise=0.002, drift=drift, n_trials=6)},
               "slow": {17: trials(rng, 0.102, noise=0.002, drift=drift, n_trials=6)}}
    verdict = decide(samples, n_boot=N_BOOT).verdict(17)
    assert (verdict.winner, verdict.beyond_noise) == ("fast", True)
    # the per-cell CIs overlap widely: only the paired ratio separates them
    result = decide(samples, n_boot=N_BOOT)
    assert result.cell("slow", 17).ci_low < result.cell("fast", 17).ci_high


# ------------------------------------------------------------------------------------------------ decision

def test_crossover_gives_v3_with_gain():
    # A wins small batches by 30 %, B wins from 32 up by 30 %; C is 50 % slower everywhere
    small = {s: 1.0 if s <= 8 else 1.3 for s in SIZES}
    large = {s: 1.3 if s <= 8 else 1.0 for s in SIZES}
    samples = table(random.Random(1), {"A": small, "B": large, "C": {s: 1.5 for s in SIZES}}, noise=0.002)
    result = decide(samples, n_boot=N_BOOT)
    d = result.decision
    assert d.kind == "V3"
    assert d.crossovers == (32,)
    assert d.per_size == tuple((s, "A" if s <= 8 else "B") for s in SIZES)
    assert d.config == "B"  # best single config: 1.3 at two sizes of six beats A's 1.3 at four
    assert d.gain_pct == pytest.approx((2 * 1.3 + 4 * 1.0) / 6 * 100 - 100, abs=0.3)  # +10 %
    assert all(v.beyond_noise for v in result.per_size)


def test_alternating_winner_has_two_crossovers():
    sizes = [3, 17, 100]
    samples = table(random.Random(2), {"A": {3: 1.0, 17: 1.2, 100: 1.0}, "B": {3: 1.2, 17: 1.0, 100: 1.2}})
    d = decide({k: {s: v[s] for s in sizes} for k, v in samples.items()}, n_boot=N_BOOT).decision
    assert (d.kind, d.crossovers, d.config) == ("V3", (17, 100), "A")
    assert d.gain_pct == pytest.approx(20 / 3, abs=0.5)


def test_all_within_noise_gives_v1():
    samples = table(random.Random(4), {"X": {s: 1.0 for s in SIZES}, "Y": {s: 1.0 for s in SIZES},
                                       "Z": {s: 1.0 for s in SIZES}}, noise=0.03)
    result = decide(samples, n_boot=N_BOOT)
    d = result.decision
    assert d.kind == "V1" and d.crossovers == ()
    assert all(c == d.config for _, c in d.per_size)
    mean_ratio = {c: sum(v.ratios[c][0] for v in result.per_size) / len(SIZES) for c in "XYZ"}
    assert d.config == min(mean_ratio, key=mean_ratio.get)  # least regret among the candidates
    assert d.gain_pct == pytest.approx((mean_ratio[d.config] - 1) * 100)
    assert not any(v.beyond_noise for v in result.per_size)


def test_v1_picks_the_config_within_noise_everywhere_even_if_it_never_wins():
    # A wins small, B wins large, each loses by 25 % elsewhere; C is 0.2 % behind the winner everywhere,
    # well inside 3 % noise: one config suffices (V1 with C), though per-size winners exist.
    factors = {"A": {s: 1.0 if s <= 32 else 1.25 for s in SIZES}, "B": {s: 1.25 if s <= 32 else 1.0 for s in SIZES},
               "C": {s: 1.002 for s in SIZES}}
    result = decide(table(random.Random(6), factors, noise=0.03), n_boot=N_BOOT)
    assert (result.decision.kind, result.decision.config) == ("V1", "C")


def test_single_config_is_v1():
    result = decide({"only": {s: [[BASE_MS[s]]] for s in SIZES}}, n_boot=N_BOOT)
    assert (result.decision.kind, result.decision.config, result.decision.gain_pct) == ("V1", "only", 0.0)
    assert all(v.runner_up is None and not v.beyond_noise for v in result.per_size)


def test_failed_cell_never_wins_and_excludes_its_config_from_v1():
    # "fast" wins everywhere it ran, but failed at 90: it cannot be the single config
    rng = random.Random(8)
    samples = table(rng, {"fast": {s: 1.0 for s in SIZES}, "slow": {s: 1.2 for s in SIZES}})
    samples["fast"][90] = []
    result = decide(samples, n_boot=N_BOOT, errors={("fast", 90): "OutOfResources: shared memory"})
    cell = result.cell("fast", 90)
    assert (cell.ok, cell.median, cell.error) == (False, None, "OutOfResources: shared memory")
    assert result.verdict(90).winner == "slow" and result.verdict(90).runner_up is None
    d = result.decision
    assert d.kind == "V3" and d.crossovers == (90, 128) and d.config == "slow"
    assert d.gain_pct == pytest.approx((5 * 1.2 + 1.0) / 6 * 100 - 100, abs=1.0)


@pytest.mark.parametrize("samples, message", [
    ({"a": {1: [[0.1]], 2: [[0.1]]}, "b": {1: [[0.1]]}}, r"config 'b' has no samples at sizes \[2\]"),
    ({"a": {1: [[0.1, -0.2]]}}, "times must be finite and > 0 ms"),
    ({"a": {1: [[0.1, float("nan")]]}}, "times must be finite"),
    ({"a": {1: [[0.1], []]}}, "trial 1 must be a non-empty list"),
    ({"a": {4: []}, "b": {4: []}}, "no config has samples at size 4"),
    ({}, "no configs"),
], ids=["missing-size", "negative-time", "nan-time", "empty-trial", "all-failed", "empty"])
def test_decide_rejects_bad_tables(samples, message):
    with pytest.raises(ValueError, match=message):
        decide(samples, n_boot=N_BOOT)


@pytest.mark.parametrize("kwargs", [dict(confidence=1.0), dict(confidence=0), dict(n_boot=0)],
                         ids=["confidence-1", "confidence-0", "n_boot-0"])
def test_decide_rejects_bad_statistics(kwargs):
    with pytest.raises(ValueError):
        decide({"a": {1: [[0.1]]}}, **kwargs)


# ------------------------------------------------------------------------------------------------ JSON and PNG

@pytest.fixture
def crossover_result() -> ABResult:
    factors = {"num_warps=4": {s: 1.3 if s <= 8 else 1.0 for s in SIZES},
               "num_warps=8": {s: 1.0 if s <= 8 else 1.3 for s in SIZES}}
    return decide(table(random.Random(10), factors, noise=0.01), target="synthetic", n_boot=N_BOOT,
                  bytes_moved={s: s * 4096 * 580 for s in SIZES})


def test_json_schema(crossover_result):
    data = json.loads(json.dumps(crossover_result.to_dict(), allow_nan=False))
    assert data["schema"] == "graphtune.ab/1"
    assert {"target", "sizes", "configs", "environment", "statistics", "cells", "per_size", "decision"} <= set(data)
    assert len(data["cells"]) == 2 * len(SIZES)
    cell = data["cells"][0]
    assert {"config", "size", "median", "ci_low", "ci_high", "n_samples", "n_trials", "trials_ms",
            "tb_per_s"} <= set(cell)
    assert cell["n_samples"] == 100 and cell["ci_low"] <= cell["median"] <= cell["ci_high"]
    assert cell["tb_per_s"] == pytest.approx(cell["size"] * 4096 * 580 / (cell["median"] * 1e-3) / 1e12)
    size_row = data["per_size"][2]
    assert {"size", "winner", "runner_up", "beyond_noise", "within_noise"} <= set(size_row)
    assert (size_row["size"], size_row["winner"], size_row["beyond_noise"]) == (32, "num_warps=4", True)
    assert data["decision"] == {"kind": "V3", "config": "num_warps=4",
                                "per_size": [{"size": s, "config": "num_warps=8" if s <= 8 else "num_warps=4"}
                                             for s in SIZES],
                                "crossovers": [32], "gain_pct": pytest.approx(10, abs=0.5)}


def test_json_round_trip_reanalyses_to_the_same_result(crossover_result):
    again = ABResult.from_dict(json.loads(crossover_result.to_json()))
    assert again.to_dict() == crossover_result.to_dict()
    stricter = ABResult.from_dict(crossover_result.to_dict(), confidence=0.99)
    assert stricter.confidence == 0.99
    lo95, lo99 = crossover_result.cell("num_warps=4", 60).ci_low, stricter.cell("num_warps=4", 60).ci_low
    assert lo99 < lo95


def test_from_dict_rejects_other_files():
    with pytest.raises(ValueError, match="not a graphtune A/B result"):
        ABResult.from_dict({"baseline": []})


def _png_size(path) -> tuple[int, int]:
    blob = path.read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n" and blob[12:16] == b"IHDR"
    return struct.unpack(">II", blob[16:24])


def test_save_writes_json_and_png(tmp_path, crossover_result):
    written = crossover_result.save(tmp_path / "out")
    assert [p.name for p in written] == ["ab.json", "ab.png"]
    assert json.loads(written[0].read_text())["decision"]["kind"] == "V3"
    width, height = _png_size(written[1])
    assert width > 300 and height > 300


def test_png_with_a_failed_cell_and_one_size(tmp_path):
    result = decide({"a": {5: [[0.1, 0.11]]}, "b": {5: []}}, n_boot=N_BOOT, errors={("b", 5): "compile error"})
    assert _png_size(result.plot(tmp_path / "one.png"))[0] > 0


def test_render_table_marks_winner_and_decision(crossover_result):
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(crossover_result.render_table())
    text = console.export_text()
    assert "★" in text and "TB/s" in text and "V3" in text and "winner beyond noise" in text


# ------------------------------------------------------------------------------------------------ measurement

@dataclass
class FakeTarget:
    """A bench target over CPU tensors: each launch really runs; the injected sampler decides the times."""

    name: str = "fake"
    default_sizes: tuple[int, ...] = (3, 50)
    configs: list = field(default_factory=lambda: [triton.Config({"BLOCK_N": 32}, num_warps=4),
                                                   triton.Config({"BLOCK_N": 64}, num_warps=8),
                                                   triton.Config({"BLOCK_N": 16}, num_warps=4)])
    made: list = field(default_factory=list)

    def make(self, size: int, config: triton.Config) -> list[Callable[[], None]]:
        if config.kwargs["BLOCK_N"] == 16 and size > 10:
            raise RuntimeError("out of resources: shared memory 262144 > 232448")
        self.made.append((size, config.kwargs["BLOCK_N"]))
        copies = [torch.full((size,), float(i)) for i in range(3)]  # rotating input sets
        return [lambda x=x, c=config: x.mul_(1.0).add_(c.num_warps * 0.0) for x in copies]

    def bytes_moved(self, size: int) -> int:
        return size * 1000


def fake_sampler(latency: Callable[[int, int], float]):
    def sample(calls, *, samples, launches_per_sample=None):
        for call in calls:
            call()
        size = calls[0].__defaults__[0].numel()
        block = calls[0].__defaults__[1].kwargs["BLOCK_N"]
        sample.seen.append((len(calls), samples, launches_per_sample))
        rng = random.Random(size * 1000 + block + len(sample.seen))
        return [latency(size, block) * rng.gauss(1.0, 0.01) for _ in range(samples)]

    sample.seen = []
    return sample


def test_ab_measures_every_cell_each_trial_and_decides():
    # BLOCK_N=64 wins at size 3, BLOCK_N=32 at 50; BLOCK_N=16 cannot launch at 50
    target = FakeTarget()
    sampler = fake_sampler(lambda size, block: {(3, 32): 1.0, (3, 64): 0.7, (3, 16): 1.5,
                                                (50, 32): 2.0, (50, 64): 3.0}[(size, block)])
    result = ab(target, trials=3, samples=7, launches_per_sample=4, sampler=sampler, n_boot=N_BOOT)
    assert result.sizes == (3, 50) and result.target == "fake"
    assert len(target.made) == 3 * 5  # 3 configs at size 3, 2 at size 50 (one fails there, tried once)
    assert all(seen == (3, 7, 4) for seen in sampler.seen)
    # configs interleave within a trial and the order rotates between trials
    at3 = [block for size, block in target.made if size == 3]
    assert at3 == [32, 64, 16, 64, 16, 32, 16, 32, 64]
    labels = {c.kwargs["BLOCK_N"]: label for c, label in zip(target.configs, result.configs)}
    assert result.cell(labels[64], 3).n_trials == 3 and result.cell(labels[64], 3).n_samples == 21
    failed = result.cell(labels[16], 50)
    assert not failed.ok and "out of resources" in failed.error
    assert result.decision.kind == "V3" and result.decision.crossovers == (50,)
    assert result.decision.per_size == ((3, labels[64]), (50, labels[32]))
    assert result.cell(labels[32], 50).tb_per_s == pytest.approx(50_000 / (result.cell(labels[32], 50).median * 1e-3)
                                                                  / 1e12)
    data = result.to_dict()
    assert data["configs"][1]["params"] == {"BLOCK_N": 64, "num_warps": 8, "num_stages": 3, "num_ctas": 1}
    assert data["measurement"]["trials"] == 3


def test_ab_with_config_spec_and_sizes():
    target = FakeTarget()
    sampler = fake_sampler(lambda size, block: 1.0 + block / 100)
    result = ab(target, [7], "BLOCK_N=64;num_warps=8", trials=2, samples=3, sampler=sampler, n_boot=N_BOOT)
    assert result.configs == ("BLOCK_N=64,num_warps=4,num_stages=3", "BLOCK_N=32,num_warps=8,num_stages=3")
    assert result.decision.per_size == ((7, "BLOCK_N=32,num_warps=8,num_stages=3"),)


def test_select_configs():
    target = FakeTarget()
    assert select_configs(target, "all") == target.configs
    (only,) = select_configs(target, " num_stages=2 ; ")
    assert (only.kwargs, only.num_warps, only.num_stages) == ({"BLOCK_N": 32}, 4, 2)
    with pytest.raises(ConfigError, match="unknown parameter 'BLOCK_M'"):
        select_configs(target, "num_warps=8;BLOCK_M=64")
    with pytest.raises(ConfigError, match="not NAME=VALUE"):
        select_configs(target, "num_warps")


@pytest.mark.parametrize("kwargs, message", [
    (dict(sizes=[8, 8]), "sizes repeat"), (dict(sizes=[0]), "sizes must be ints >= 1"),
    (dict(trials=0), "trials must be an int >= 1"),
    (dict(configs=[triton.Config({"BLOCK_N": 32}), triton.Config({"BLOCK_N": 32})]), "configs repeat"),
], ids=["repeated-size", "zero-size", "zero-trials", "repeated-config"])
def test_ab_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ab(FakeTarget(), sampler=fake_sampler(lambda s, b: 1.0), **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given without CUDA")
def test_ab_without_cuda_says_so():
    with pytest.raises(GraphtuneError, match="needs a CUDA GPU"):
        ab(FakeTarget(), trials=1)


# ------------------------------------------------------------------------------------------------ targets

TARGET_FILE = textwrap.dedent("""
    import triton

    class _Target:
        name = "from-file"
        default_sizes = (2, 4)
        configs = [triton.Config({"BLOCK": 16}, num_warps=4)]
        def make(self, size, config):
            return [lambda: None]

    AB_TARGET = _Target()
    OTHER = _Target()
    NOT_A_TARGET = 42
""")


def test_resolve_target_from_a_file(tmp_path):
    path = tmp_path / "bench_mine.py"
    path.write_text(TARGET_FILE)
    assert resolve_target(f"{path}:OTHER").name == "from-file"
    assert resolve_target(str(path)).name == "from-file"  # ATTR defaults to AB_TARGET
    with pytest.raises(ValueError, match="is not a bench target"):
        resolve_target(f"{path}:NOT_A_TARGET")
    with pytest.raises(ValueError, match="has no attribute 'MISSING'"):
        resolve_target(f"{path}:MISSING")
    with pytest.raises(FileNotFoundError):
        resolve_target(str(tmp_path / "absent.py"))
    with pytest.raises(ValueError, match="cannot import module 'graphtune_no_such_module'"):
        resolve_target("graphtune_no_such_module:T")


# ------------------------------------------------------------------------------------------------ CLI

def test_cli_from_json_prints_json_and_saves(tmp_path, capsys, crossover_result):
    saved = tmp_path / "ab.json"
    saved.write_text(crossover_result.to_json())
    assert main(["ab", "--from-json", str(saved), "--json", "--out", str(tmp_path / "again")]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == crossover_result.to_dict()
    assert "ab.png" in captured.err
    assert _png_size(tmp_path / "again" / "ab.png")[0] > 0


def test_cli_from_json_table_with_other_seed(tmp_path, capsys, crossover_result):
    saved = tmp_path / "ab.json"
    saved.write_text(crossover_result.to_json())
    assert main(["ab", "--from-json", str(saved), "--seed", "5", "--n-boot", "300"]) == 0
    out = capsys.readouterr().out
    assert "V3" in out and "config changes at size 32" in out.replace("\n", " ")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given without CUDA")
def test_cli_without_cuda_exits_2(capsys):
    assert main(["ab", "mla_decode", "--sizes", "1,8"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


@pytest.mark.parametrize("argv, needles", [
    (["nosuchkernel", "--sizes", "abc", "--configs", "num_warps=abc"], ["--sizes", "'abc'"]),
    (["nosuchkernel"], ["A/B target 'nosuchkernel'"]),
    (["{file}", "--configs", "num_warps=abc"], ["--configs", "num_warps='abc'"]),
    (["{file}", "--sizes", "2"], ["needs a CUDA GPU", "--from-json"]),
], ids=["sizes", "target", "configs", "no-gpu"])
def test_cli_checks_arguments_before_the_gpu_and_leaves_no_empty_out(tmp_path, capsys, monkeypatch, argv,
                                                                      needles):
    """Without a GPU, ab said so in two lines before looking at its arguments, and a failed run left the
    --out directory it had just created: now one line, the arguments first, and no directory."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    (tmp_path / "bench_mine.py").write_text(TARGET_FILE)
    out = tmp_path / "out"
    argv = [a.format(file=tmp_path / "bench_mine.py") for a in argv]
    assert main(["ab", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("graphtune: error:"), err
    assert all(needle in err for needle in needles), err
    assert not out.exists()


@pytest.mark.parametrize("argv, message", [
    ([], "give a target"),
    (["mla_decode", "--from-json", "x.json"], "give no target"),
    (["--from-json", "/nonexistent/ab.json"], "No such file"),
], ids=["no-target", "target-and-json", "missing-json"])
def test_cli_bad_input(capsys, argv, message):
    assert main(["ab", *argv]) == 2
    assert message in capsys.readouterr().err


def _broken(doc: dict, field: str, value) -> dict:
    """``doc`` with one field (``cells[0].size``, ``statistics.seed``) set to ``value``."""
    import copy
    import re
    doc = copy.deepcopy(doc)
    *parents, last = [int(p) if p.isdigit() else p for p in re.findall(r"\w+", field)]
    obj = doc
    for part in parents:
        obj = obj[part]
    obj[last] = value
    return doc


@pytest.mark.parametrize("field, value, problem", [
    ("cells[0].size", "big", "'big' is not an integer"),
    ("statistics.confidence", "high", "'high' is not a number"),
    ("statistics.seed", "s", "'s' is not an integer"),
    ("configs[0].params", [1], "expected an object, got list [1]"),
    ("environment", [1, 2], "expected an object, got list [1, 2]"),
    ("cells[1].config", "nope", "'nope' is not the label of one of the configs"),
], ids=["size", "confidence", "seed", "params", "environment", "cell-config"])
def test_cli_from_json_names_the_file_and_the_bad_field(tmp_path, capsys, crossover_result, field, value,
                                                        problem):
    """A bad field was an int() ValueError or a bare TypeError naming neither the file nor the field."""
    path = tmp_path / "ab.json"
    path.write_text(json.dumps(_broken(crossover_result.to_dict(), field, value)))
    assert main(["ab", "--from-json", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"graphtune: error: --from-json {path}: {field}: {problem}"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("make, problem", [
    (lambda p: p.mkdir(), "cannot read: Is a directory"),
    (lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe"), "not a text file (not UTF-8)"),
    (lambda p: None, "cannot read: No such file or directory"),
], ids=["directory", "binary", "missing"])
def test_cli_from_json_that_cannot_be_read_names_it(tmp_path, capsys, make, problem):
    path = tmp_path / "ab.json"
    make(path)
    assert main(["ab", "--from-json", str(path)]) == 2
    assert capsys.readouterr().err.strip().startswith(f"graphtune: error: --from-json {path}: {problem}")


@pytest.mark.skipif(not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() == 0,
                    reason="root reads a chmod 000 file")
def test_cli_from_json_without_read_permission_names_it(tmp_path, capsys, crossover_result):
    path = tmp_path / "ab.json"
    path.write_text(crossover_result.to_json())
    path.chmod(0)
    assert main(["ab", "--from-json", str(path)]) == 2
    assert capsys.readouterr().err.strip() == f"graphtune: error: --from-json {path}: cannot read: Permission denied"


def test_cli_rejects_a_json_that_is_not_an_ab_result(tmp_path, capsys):
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"baseline": [], "scenarios": []}))
    assert main(["ab", "--from-json", str(path)]) == 2
    assert "not a graphtune A/B result" in capsys.readouterr().err


# ------------------------------------------------------------------------------------- session 31's review


def test_a_cell_too_small_to_measure_noise_is_never_beyond_it():
    """One value per cell: the percentile interval had zero width and any difference (0.1%) was "beyond noise", a
    V3 decided from one sample a cell; such cells now count as within noise of each other (V1)."""
    result = decide({"A": {1: [1.000], 2: [2.001]}, "B": {1: [1.001], 2: [2.0]}}, n_boot=N_BOOT)
    assert result.decision.kind == "V1"
    assert not any(v.beyond_noise for v in result.per_size)
    # five values in one trial are enough to measure it
    rng = random.Random(31)
    many = decide({"A": {1: [[rng.gauss(1.0, 0.001) for _ in range(20)]]},
                   "B": {1: [[rng.gauss(1.5, 0.001) for _ in range(20)]]}}, n_boot=N_BOOT)
    assert many.per_size[0].beyond_noise


def test_v3_keeps_the_bucket_below_where_a_size_is_won_within_noise():
    """Winners A, B (within noise of A), A, B (beyond noise): one crossover (at 128), not three."""
    rng = random.Random(4)
    factors = {"A": {1: 0.95, 8: 1.0, 32: 0.95, 128: 1.0}, "B": {1: 1.0, 8: 0.998, 32: 1.0, 128: 0.95}}
    result = decide(table(rng, factors, noise=0.01), n_boot=N_BOOT)
    assert result.verdict(8).winner == "B" and not result.verdict(8).beyond_noise
    assert result.decision.kind == "V3"
    assert result.decision.per_size == ((1, "A"), (8, "A"), (32, "A"), (128, "B"))
    assert result.decision.crossovers == (128, )


def test_sizes_read_from_json_as_strings_are_sizes():
    """A table read by json.load has string sizes: "8" is size 8 (a KeyError before); 1.5 is not a size."""
    rng = random.Random(5)
    as_ints = decide({"A": {8: trials(rng, 1.0)}, "B": {8: trials(rng, 1.2)}}, n_boot=N_BOOT, seed=3)
    rng = random.Random(5)
    as_text = decide({"A": {"8": trials(rng, 1.0)}, "B": {8: trials(rng, 1.2)}}, n_boot=N_BOOT, seed=3)
    assert as_text.sizes == (8, ) and as_text.to_dict() == as_ints.to_dict()
    with pytest.raises(ValueError, match=r"config 'A': size 1.5 is not an integer"):
        decide({"A": {1.5: [1.0]}}, n_boot=N_BOOT)


@pytest.mark.parametrize("kwargs,message", [(dict(confidence=2.0), r"confidence must be between 0 and 1, got 2.0"),
                                            (dict(n_boot=1), r"n_boot must be an int >= 100, got 1"),
                                            (dict(launches_per_sample=0), r"launches_per_sample must be an int >= 1")],
                         ids=["confidence", "n-boot", "launches"])
def test_ab_checks_its_statistics_before_any_timing(kwargs, message):
    """A bad confidence or n_boot was refused after every cell had been timed (a GPU run lost); now before."""
    sampler = fake_sampler(lambda size, block: 1.0)
    with pytest.raises(ValueError, match=message):
        ab(FakeTarget(), trials=3, samples=7, sampler=sampler, **kwargs)
    assert sampler.seen == []


# ------------------------------------------------------------------------------------- minimum practical gain

def _same_code_3pct(rng: random.Random) -> dict[str, dict[int, list]]:
    """Session 29 on an H200: T8 with and without SPLIT_MAX 32 ran the same code, yet one was 3% faster at batch 8
    and the other at 16, each beyond the 95% intervals (0.5% noise, 5 trials x 20 samples)."""
    return {"T8": {8: trials(rng, 0.0380, noise=0.005), 16: trials(rng, 0.0575 * 1.03, noise=0.005)},
            "T8,SPLIT_MAX=32": {8: trials(rng, 0.0380 * 1.03, noise=0.005), 16: trials(rng, 0.0575, noise=0.005)}}


def test_min_gain_makes_a_real_3pct_difference_within_noise():
    samples = _same_code_3pct(random.Random(29))
    strict, practical = decide(samples, n_boot=N_BOOT), decide(samples, n_boot=N_BOOT, min_gain_pct=5)
    # the premise: at each size the loser's ratio CI lies above 1 (real) and starts below 1.05 (small)
    for verdict in strict.per_size:
        _, lo, _ = verdict.ratios[verdict.runner_up]
        assert 1.0 < lo < 1.05, (verdict.size, lo)
    assert all(v.beyond_noise for v in strict.per_size)
    assert (strict.decision.kind, strict.decision.crossovers) == ("V3", (16,))
    assert strict.decision.per_size == ((8, "T8"), (16, "T8,SPLIT_MAX=32"))
    assert not any(v.beyond_noise for v in practical.per_size)
    assert all(set(v.within_noise) == {"T8", "T8,SPLIT_MAX=32"} for v in practical.per_size)
    assert practical.decision.kind == "V1" and practical.decision.crossovers == ()
    # the medians and intervals do not depend on the setting; only what counts as within noise does
    assert [v.ratios for v in practical.per_size] == [v.ratios for v in strict.per_size]
    assert (strict.min_gain_pct, practical.min_gain_pct) == (0.0, 5.0)
    assert practical.to_dict()["statistics"]["min_gain_pct"] == 5.0
    # 0, the default, is the rule as it was
    assert decide(samples, n_boot=N_BOOT, min_gain_pct=0).to_dict() == strict.to_dict()


def test_min_gain_keeps_the_bucket_below_where_a_size_is_won_by_less():
    """A wins at 1 by 10%, B at 8 by 3% and at 128 by 10%: no V1 either way, but at a 5% minimum gain the 3% flip at
    8 keeps A there, so the bucket boundary moves to 128 (one crossover, where the gain is worth one)."""
    factors = {"A": {1: 1.0, 8: 1.03, 128: 1.10}, "B": {1: 1.10, 8: 1.0, 128: 1.0}}
    samples = table(random.Random(8), factors, noise=0.005)
    strict, practical = decide(samples, n_boot=N_BOOT), decide(samples, n_boot=N_BOOT, min_gain_pct=5)
    assert strict.decision.per_size == ((1, "A"), (8, "B"), (128, "B")) and strict.decision.crossovers == (8,)
    assert practical.verdict(8).winner == "B" and not practical.verdict(8).beyond_noise
    assert practical.verdict(1).beyond_noise and practical.verdict(128).beyond_noise
    assert practical.decision.kind == "V3"
    assert practical.decision.per_size == ((1, "A"), (8, "A"), (128, "B")) and practical.decision.crossovers == (128,)


@pytest.mark.parametrize("min_gain, within", [(3, True), (2.999999, False), (3.000001, True)],
                         ids=["at-3", "just-below", "just-above"])
def test_min_gain_boundary_is_inclusive(min_gain, within):
    # cells of one repeated value: every resample's ratio is exactly 0.515 / 0.5 = 1.03 = 1 + 3 / 100
    samples = {"A": {4: [[0.5] * 5, [0.5] * 5]}, "B": {4: [[0.515] * 5, [0.515] * 5]}}
    verdict = decide(samples, n_boot=N_BOOT, min_gain_pct=min_gain).verdict(4)
    assert verdict.ratios["B"] == (1.0 + 3 / 100,) * 3
    assert ("B" in verdict.within_noise) is within
    assert verdict.beyond_noise is not within


def test_min_gain_boundary_on_noisy_samples():
    samples = _same_code_3pct(random.Random(29))
    lo = decide(samples, n_boot=N_BOOT, seed=4).verdict(8).ratios["T8,SPLIT_MAX=32"][1]
    at = (lo - 1) * 100      # the minimum gain at which the slower config's CI just reaches the threshold
    below = decide(samples, n_boot=N_BOOT, seed=4, min_gain_pct=at * (1 - 1e-6)).verdict(8)
    above = decide(samples, n_boot=N_BOOT, seed=4, min_gain_pct=at * (1 + 1e-6)).verdict(8)
    assert (below.within_noise, below.beyond_noise) == (("T8",), True)
    assert (above.within_noise, above.beyond_noise) == (("T8", "T8,SPLIT_MAX=32"), False)


def test_min_gain_is_stated_in_the_table():
    from rich.console import Console

    samples = _same_code_3pct(random.Random(29))
    texts = []
    for min_gain in (0, 5):
        console = Console(record=True, width=200)
        console.print(decide(samples, n_boot=N_BOOT, min_gain_pct=min_gain).render_table())
        texts.append(" ".join(console.export_text().split()))      # the title wraps to the table's width
    assert "min gain" not in texts[0] and "winner beyond noise" in texts[0]
    assert "min gain 5%: within noise where the lower end of the ratio's CI is <= 1.05" in texts[1]
    assert "and min gain 5%" in texts[1] and "V1" in texts[1]


def test_min_gain_round_trips_through_json():
    saved = decide(_same_code_3pct(random.Random(29)), n_boot=N_BOOT, min_gain_pct=5).to_dict()
    again = ABResult.from_dict(json.loads(json.dumps(saved)))
    assert again.min_gain_pct == 5.0 and again.to_dict() == saved      # the saved setting decides again
    strict = ABResult.from_dict(saved, min_gain_pct=0)
    assert (strict.min_gain_pct, strict.decision.kind) == (0.0, "V3")
    # a file from before the setting was decided at 0
    del saved["statistics"]["min_gain_pct"]
    assert ABResult.from_dict(saved).to_dict() == strict.to_dict()


def test_cli_from_json_redecides_with_another_min_gain(tmp_path, capsys):
    saved = tmp_path / "ab.json"
    saved.write_text(decide(_same_code_3pct(random.Random(29)), target="same-code", n_boot=N_BOOT).to_json())
    assert main(["ab", "--from-json", str(saved), "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert (before["statistics"]["min_gain_pct"], before["decision"]["kind"]) == (0.0, "V3")
    assert main(["ab", "--from-json", str(saved), "--min-gain", "5", "--json"]) == 0
    after = json.loads(capsys.readouterr().out)
    assert (after["statistics"]["min_gain_pct"], after["decision"]["kind"]) == (5.0, "V1")
    assert [v["beyond_noise"] for v in before["per_size"]] == [True, True]
    assert [v["beyond_noise"] for v in after["per_size"]] == [False, False]
    assert after["cells"] == before["cells"]
    assert main(["ab", "--from-json", str(saved), "--min-gain", "5", "--out", str(tmp_path / "again")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "min gain 5%" in out and "V1: one config" in out
    assert json.loads((tmp_path / "again" / "ab.json").read_text())["statistics"]["min_gain_pct"] == 5.0
    assert _png_size(tmp_path / "again" / "ab.png")[0] > 0


BAD_MIN_GAINS = [(-1, "-1"), (float("nan"), "nan"), (float("inf"), "inf"), (100, "100"), (True, "True"),
                 ("5", "'5'")]


@pytest.mark.parametrize("value, shown", BAD_MIN_GAINS, ids=["negative", "nan", "inf", "100", "bool", "string"])
def test_decide_and_ab_refuse_a_bad_min_gain(value, shown):
    message = f"min_gain_pct must be a finite number >= 0 and < 100 (a percentage), got {shown}"
    with pytest.raises(ValueError) as error:
        decide({"a": {1: [[0.1]]}}, n_boot=N_BOOT, min_gain_pct=value)
    assert str(error.value) == message
    sampler = fake_sampler(lambda size, block: 1.0)
    with pytest.raises(ValueError) as error:
        ab(FakeTarget(), trials=3, samples=7, sampler=sampler, n_boot=N_BOOT, min_gain_pct=value)
    assert str(error.value) == message
    assert sampler.seen == []       # refused before any timing


@pytest.mark.parametrize("text, shown", [("-1", "-1.0"), ("nan", "nan"), ("inf", "inf"), ("1e400", "inf"),
                                         ("100", "100.0")],
                         ids=["negative", "nan", "inf", "overflow", "100"])
@pytest.mark.parametrize("source", ["from-json", "target"])
def test_cli_refuses_a_bad_min_gain_in_one_line(tmp_path, capsys, monkeypatch, crossover_result, source, text, shown):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    saved = tmp_path / "ab.json"
    saved.write_text(crossover_result.to_json())
    head = ["--from-json", str(saved)] if source == "from-json" else ["mla_decode", "--sizes", "8,16"]
    out = tmp_path / "out"
    assert main(["ab", *head, "--min-gain", text, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"graphtune: error: --min-gain must be a finite number >= 0 and < 100 (a percentage), got {shown}"
    assert not out.exists()


@pytest.mark.parametrize("flag, value, message", [("--confidence", "2", "--confidence must be between 0 and 1, got 2.0"),
                                                  ("--n-boot", "10", "--n-boot must be an int >= 100, got 10")])
def test_cli_names_a_bad_statistics_option_by_its_flag(tmp_path, capsys, crossover_result, flag, value, message):
    saved = tmp_path / "ab.json"
    saved.write_text(crossover_result.to_json())
    assert main(["ab", "--from-json", str(saved), flag, value]) == 2
    assert capsys.readouterr().err.strip() == f"graphtune: error: {message}"


@pytest.mark.parametrize("text", ["abc", "True", ""], ids=["word", "bool", "empty"])
def test_cli_refuses_a_min_gain_that_is_no_number(tmp_path, capsys, crossover_result, text):
    saved = tmp_path / "ab.json"
    saved.write_text(crossover_result.to_json())
    with pytest.raises(SystemExit) as exit_:
        main(["ab", "--from-json", str(saved), "--min-gain", text])
    assert exit_.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert errors == [f"graphtune ab: error: argument --min-gain: invalid float value: {text!r}"]


@pytest.mark.parametrize("value, problem", [("x", "'x' is not a number"), (True, "True is not a number"),
                                            (100, "100 is not a finite number >= 0 and < 100"),
                                            (-0.5, "-0.5 is not a finite number >= 0 and < 100")],
                         ids=["string", "bool", "100", "negative"])
def test_cli_from_json_names_a_bad_saved_min_gain(tmp_path, capsys, crossover_result, value, problem):
    path = tmp_path / "ab.json"
    path.write_text(json.dumps(_broken(crossover_result.to_dict(), "statistics.min_gain_pct", value)))
    assert main(["ab", "--from-json", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"graphtune: error: --from-json {path}: statistics.min_gain_pct: {problem}"
    # --min-gain decides instead of the saved value, as --confidence does for the saved confidence
    assert main(["ab", "--from-json", str(path), "--min-gain", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["statistics"]["min_gain_pct"] == 0.0
