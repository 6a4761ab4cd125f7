"""A/B experiments: configs x sizes timed inside CUDA graph replay, and the V1 / V3 decision.

Two halves that meet in a results table (config label -> size -> trials, each trial a list of ms):

* the measurement, ``ab(target, sizes, configs)``: for each of several independent trials, for each
  size, for each config (the order rotated from trial to trial so that drift of clocks and
  temperature spreads over all configs), the target builds rotating zero-argument launches and the
  sampler times them inside CUDA graph replay, one graph capture per cell and trial;
* the statistics and the decision, ``decide(samples)``: pure, seeded, testable on a CPU.

Statistics (the exact rules)
----------------------------
* A cell's **median** is the median of all its samples, trials pooled.
* Its **confidence interval** is a percentile bootstrap of that median (``confidence``, default
  95%, ``n_boot`` resamples, at least 100, seeded). Samples of one trial share a graph capture and a moment in
  time, so they are not independent: each resample draws trials with replacement, then samples
  with replacement inside each drawn trial (a two-level bootstrap). The trial draws are shared by
  all configs of one size (paired by trial index): configs timed side by side in a trial are
  compared under the same conditions.
* At each size, the **winner** has the lowest median and the **runner-up** the next lowest. The
  bootstrap distribution of ``median(other) / median(winner)`` gives a CI for every other config.
  A config is **within noise** of the winner when the lower end of that CI is <= ``1 + min_gain_pct / 100``
  (``min_gain_pct``, the minimum practical gain, default 0: the lower end <= 1), or when its cell or the
  winner's holds too few values to measure noise (one trial of fewer than 5 values); the winner **beats the
  runner-up beyond noise** when the runner-up is not within noise. Coverage is approximate: on synthetic data
  (session 31's review, 5 trials x 20 samples) the 95% intervals covered the true median 98% of the time without
  a trial effect and 90% with one as large as the within-trial spread (93% at 20 trials).
* A **minimum gain** above 0 (``graphtune ab --min-gain PCT``) asks for a margin worth acting on, not only a
  real one: on an H200 two configs that ran the same code (same grid) differed by 3.3% at batch 8, beyond the
  95% intervals (session 29). It is a number >= 0 and < 100. Beyond noise above, V1 / V3 and the configs kept
  below follow from the set of configs within noise, so from the minimum gain too; ``ABResult.min_gain_pct``
  and the JSON's ``statistics.min_gain_pct`` say which one decided.
* **V1** (one config for every size) when at least one config is within noise of the winner at
  every size; among those the one with the least regret, regret being the mean over sizes of
  ``median(config) / median(winner)`` (ties: the earlier config).
* Otherwise **V3** (per-bucket configs): the winner of each size, except where that winner does not beat its
  runner-up beyond noise and the config picked for the size below is within noise there: that config is kept
  (a flip on noise would add a bucket boundary a rerun would move); **crossovers** are the sizes, ascending,
  whose config differs from that of the size below.
* **gain_pct** compares the per-size winners with one config for all sizes, every size weighted
  equally: ``(mean over sizes of median(single) / median(winner) - 1) * 100``. For V3 the single
  config is the best one (least regret, reported as ``config``); for V1 it is the chosen config,
  and the gain is within noise by construction.
* A cell whose config failed (compile error, out of resources) has no samples: it never wins, is
  never within noise, and cannot be a single config for all sizes.
"""
from __future__ import annotations

import json
import math
import numbers
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

import torch
import triton

from ._log import logger
from .configs import config_label, config_to_dict, config_with, parse_params
from .errors import ConfigError, GraphtuneError

__all__ = ["ABResult", "BenchTarget", "CellStats", "Decision", "SizeVerdict", "ab", "decide", "resolve_target",
           "select_configs", "TARGET_ALIASES"]

SCHEMA = "graphtune.ab/1"

# Built-in targets by short name: the flagship kernel's bench target lives with the kernel.
TARGET_ALIASES = {"mla_decode": "graphtune.kernels.mla_decode.bench:AB_TARGET",
                  "mla_decode_hopper": "graphtune.kernels.mla_decode.bench:AB_HOPPER_TARGET",
                  "mla_decode_hopper_h128": "graphtune.kernels.mla_decode.bench:AB_HOPPER_H128_TARGET",
                  "mla_decode_hopper_h128_bf16": "graphtune.kernels.mla_decode.bench:AB_HOPPER_H128_BF16_TARGET",
                  "mla_decode_hopper_h128_e4m3": "graphtune.kernels.mla_decode.bench:AB_HOPPER_H128_E4M3_TARGET",
                  "mla_decode_hopper_h128_p8": "graphtune.kernels.mla_decode.bench:AB_HOPPER_H128_P8_TARGET"}

RULE = ("within noise: lower end of the bootstrap CI of median(config)/median(winner) <= 1 + min_gain_pct/100 "
        "(min_gain_pct: statistics.min_gain_pct); beyond noise: that lower end for the runner-up lies above it; "
        "two-level bootstrap (trials, then samples within a trial), trial draws paired across the configs of one "
        "size")
GAIN_WEIGHTING = "mean over sizes of median(single config) / median(per-size winner), sizes weighted equally"

# Largest number of float64 values one bootstrap chunk materialises (8 MB per 1M).
_CHUNK_ELEMENTS = 2_000_000

Sampler = Callable[..., Sequence[float]]


@runtime_checkable
class BenchTarget(Protocol):
    """What ``ab`` times. ``make(size, config)`` returns rotating zero-argument launches, each bound to its
    own input set (together larger than L2, so no launch finds its inputs cached by the one before);
    building them stays outside the timed region. Optionally ``bytes_moved(size) -> int`` (the fewest bytes a
    launch must move) turns medians into effective bandwidth."""

    name: str
    default_sizes: Sequence[int]
    configs: Sequence[triton.Config]

    def make(self, size: int, config: triton.Config) -> list[Callable[[], None]]: ...


# ---------------------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class CellStats:
    """One config at one size. Times in ms per launch; ``median`` and the CI are None for a failed cell."""

    config: str
    size: int
    median: float | None
    ci_low: float | None
    ci_high: float | None
    trials_ms: tuple[tuple[float, ...], ...]
    error: str | None = None
    bytes_moved: int | None = None

    @property
    def ok(self) -> bool:
        return self.median is not None

    @property
    def n_samples(self) -> int:
        return sum(len(t) for t in self.trials_ms)

    @property
    def n_trials(self) -> int:
        return len(self.trials_ms)

    @property
    def tb_per_s(self) -> float | None:
        if self.bytes_moved is None or self.median is None:
            return None
        return self.bytes_moved / (self.median * 1e-3) / 1e12

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"config": self.config, "size": self.size, "median": self.median,
                               "ci_low": self.ci_low, "ci_high": self.ci_high, "n_samples": self.n_samples,
                               "n_trials": self.n_trials}
        if self.bytes_moved is not None:
            out["bytes_moved"] = self.bytes_moved
            out["tb_per_s"] = self.tb_per_s
        out["error"] = self.error
        out["trials_ms"] = [list(t) for t in self.trials_ms]
        return out


@dataclass(frozen=True)
class SizeVerdict:
    """The comparison at one size. ``ratios`` maps every config that ran to (median ratio to the winner,
    CI low, CI high); the winner's own entry is (1, 1, 1)."""

    size: int
    winner: str
    runner_up: str | None
    beyond_noise: bool
    within_noise: tuple[str, ...]
    ratios: Mapping[str, tuple[float, float, float]]

    def to_dict(self) -> dict[str, Any]:
        runner = self.ratios.get(self.runner_up) if self.runner_up else None
        return {
            "size": self.size, "winner": self.winner, "runner_up": self.runner_up,
            "runner_up_ratio": runner[0] if runner else None,
            "runner_up_ratio_ci": [runner[1], runner[2]] if runner else None,
            "beyond_noise": self.beyond_noise, "within_noise": list(self.within_noise),
            "ratios": [{"config": k, "ratio": v[0], "ci_low": v[1], "ci_high": v[2]} for k, v in self.ratios.items()],
        }


@dataclass(frozen=True)
class Decision:
    """``kind`` "V1": ``config`` for every size. "V3": ``per_size`` the config each size runs (its winner, or the
    size below's where the winner is within noise of it), ``config`` the best single config that ``gain_pct``
    (measured against the per-size winners) is measured against (None when no config ran at every size)."""

    kind: str
    config: str | None
    per_size: tuple[tuple[int, str], ...]
    crossovers: tuple[int, ...]
    gain_pct: float | None

    def summary(self) -> str:
        gain = "n/a" if self.gain_pct is None else f"{self.gain_pct:+.1f}%"
        if self.kind == "V1":
            return (f"V1: one config is within noise of the best at every size: {self.config} "
                    f"(per-size winners would gain {gain}, within noise)")
        runs: list[list[Any]] = []  # [first size, last size, config] of consecutive sizes sharing a winner
        for size, config in self.per_size:
            if runs and runs[-1][2] == config:
                runs[-1][1] = size
            else:
                runs.append([size, size, config])
        buckets = "; ".join(f"{a}: {c}" if a == b else f"{a}-{b}: {c}" for a, b, c in runs)
        against = f"the best single config ({self.config})" if self.config else "no single config (none ran everywhere)"
        crossings = ", ".join(str(s) for s in self.crossovers) or "none"
        return (f"V3: per-bucket configs; the config changes at size {crossings}; gain over {against}: {gain} "
                f"(mean of per-size ratios). Buckets: {buckets}")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "config": self.config,
                "per_size": [{"size": s, "config": c} for s, c in self.per_size],
                "crossovers": list(self.crossovers), "gain_pct": self.gain_pct}


@dataclass(frozen=True)
class ABResult:
    """Everything an A/B run measured and concluded. ``to_dict`` keeps the raw samples so that
    ``ABResult.from_dict`` (and ``graphtune ab --from-json``) can re-analyse them."""

    target: str
    sizes: tuple[int, ...]
    configs: tuple[str, ...]
    cells: Mapping[tuple[str, int], CellStats]
    per_size: tuple[SizeVerdict, ...]
    decision: Decision
    confidence: float
    n_boot: int
    seed: int
    min_gain_pct: float = 0.0
    config_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    environment: Mapping[str, Any] = field(default_factory=dict)
    measurement: Mapping[str, Any] = field(default_factory=dict)

    def cell(self, config: str, size: int) -> CellStats:
        try:
            return self.cells[(config, size)]
        except KeyError:
            raise KeyError(f"no cell for config {config!r} at size {size}; configs {list(self.configs)}, "
                           f"sizes {list(self.sizes)}") from None

    def verdict(self, size: int) -> SizeVerdict:
        for v in self.per_size:
            if v.size == size:
                return v
        raise KeyError(f"no size {size}; sizes {list(self.sizes)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "target": self.target,
            "sizes": list(self.sizes),
            "configs": [{"label": c, "params": dict(self.config_params[c]) if c in self.config_params else None}
                        for c in self.configs],
            "environment": dict(self.environment),
            "measurement": dict(self.measurement),
            "statistics": {"confidence": self.confidence, "n_boot": self.n_boot, "seed": self.seed,
                           "min_gain_pct": self.min_gain_pct, "rule": RULE, "gain_weighting": GAIN_WEIGHTING},
            "cells": [self.cells[(c, s)].to_dict() for c in self.configs for s in self.sizes],
            "per_size": [v.to_dict() for v in self.per_size],
            "decision": self.decision.to_dict(),
        }

    def to_json(self) -> str:
        # derived ratios can overflow (1e308 / 1e-300): null plus a "not_finite" note, never Infinity
        from ._outputs import report_json
        return report_json(self.to_dict(), indent=1)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, confidence: float | None = None, n_boot: int | None = None,
                  seed: int | None = None, min_gain_pct: float | None = None) -> ABResult:
        """Re-analyse the samples of a saved result (same statistics unless overridden; same seed, same answer).
        A missing or malformed field is a ValueError naming it (``cells[3].size: 'big' is not an integer``); a file
        without ``statistics.min_gain_pct`` (written before it existed) was decided at 0."""
        if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
            found = data.get("schema") if isinstance(data, Mapping) else type(data).__name__
            raise ValueError(f"not a graphtune A/B result: schema {found!r}, expected {SCHEMA!r}")
        stats = _saved_object(_saved_field(data, "statistics", "statistics"), "statistics")
        samples: dict[str, dict[int, Any]] = {}
        params: dict[str, Mapping[str, Any]] = {}
        for i, config in enumerate(_saved_list(_saved_field(data, "configs", "configs"), "configs")):
            config = _saved_object(config, f"configs[{i}]")
            label = _saved_field(config, "label", f"configs[{i}].label")
            if not isinstance(label, str):
                raise ValueError(f"configs[{i}].label: {label!r} is not a string")
            samples[label] = {}
            if config.get("params") is not None:
                params[label] = _saved_object(config["params"], f"configs[{i}].params")
        errors: dict[tuple[str, int], str] = {}
        bytes_moved: dict[int, int] = {}
        for i, cell in enumerate(_saved_list(_saved_field(data, "cells", "cells"), "cells")):
            where = f"cells[{i}]"
            cell = _saved_object(cell, where)
            label = _saved_field(cell, "config", f"{where}.config")
            if not isinstance(label, str) or label not in samples:
                raise ValueError(f"{where}.config: {label!r} is not the label of one of the configs")
            size = _saved_int(_saved_field(cell, "size", f"{where}.size"), f"{where}.size")
            samples[label][size] = _saved_field(cell, "trials_ms", f"{where}.trials_ms")
            if cell.get("error"):
                errors[(label, size)] = str(cell["error"])
            if cell.get("bytes_moved") is not None:
                bytes_moved[size] = _saved_int(cell["bytes_moved"], f"{where}.bytes_moved")
        if confidence is None:
            confidence = _saved_number(_saved_field(stats, "confidence", "statistics.confidence"),
                                       "statistics.confidence")
        if n_boot is None:
            n_boot = _saved_int(_saved_field(stats, "n_boot", "statistics.n_boot"), "statistics.n_boot")
            if n_boot < MIN_BOOT:   # (a file of before session 31, when 1 was the least)
                raise ValueError(f"statistics.n_boot {n_boot} is below the {MIN_BOOT} resamples a decision needs "
                                 f"now; re-analyse with --n-boot {MIN_BOOT} or more (n_boot= from Python)")
        if seed is None:
            seed = _saved_int(_saved_field(stats, "seed", "statistics.seed"), "statistics.seed")
        if min_gain_pct is None:
            saved = stats.get("min_gain_pct", 0.0)
            min_gain_pct = _saved_number(saved, "statistics.min_gain_pct")
            if not _valid_min_gain(min_gain_pct):
                raise ValueError(f"statistics.min_gain_pct: {saved!r} is not a finite number >= 0 and < 100")
        return decide(samples, target=str(data.get("target", "")), confidence=confidence, n_boot=n_boot, seed=seed,
                      min_gain_pct=min_gain_pct, config_params=params, errors=errors, bytes_moved=bytes_moved,
                      environment=_saved_object(data.get("environment") or {}, "environment"),
                      measurement=_saved_object(data.get("measurement") or {}, "measurement"))

    @classmethod
    def load(cls, path: str | Path, *, option: str | None = None, **overrides: Any) -> ABResult:
        """Re-analyse a saved ab.json (``from_dict``). Any problem with the file is a ValueError of one line naming
        it, after ``option`` when given: ``--from-json ab.json: cells[3].size: 'big' is not an integer``."""
        where = f"{option} {path}" if option else str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{where}: not a text file (not UTF-8); give the ab.json of graphtune ab --out") from None
        except OSError as exc:
            raise ValueError(f"{where}: cannot read: {exc.strerror or exc}") from None
        try:
            return cls.from_dict(json.loads(text), **overrides)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: not JSON ({exc})") from None
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None

    def render_table(self) -> Any:
        """A rich Table: rows are configs, columns sizes; the winner bold with a star, configs within noise
        plain, the rest dim with their excess over the winner. The caption states the decision; the title and the
        last row's label, a minimum gain above 0."""
        from rich.table import Table

        title = f"A/B {self.target}: median ms per launch ({self.confidence:.0%} CIs in the JSON)"
        if self.min_gain_pct:
            title += (f"; min gain {self.min_gain_pct:g}%: within noise where the lower end of the ratio's CI is "
                      f"<= {1 + self.min_gain_pct / 100:g}")
        table = Table(title=title, caption=self.decision.summary(), caption_justify="left")
        table.add_column("config", overflow="fold")
        for size in self.sizes:
            table.add_column(str(size), justify="right")
        for label in self.configs:
            row = [label]
            for verdict in self.per_size:
                cell = self.cells[(label, verdict.size)]
                if not cell.ok:
                    row.append("[red]failed[/red]")
                    continue
                text = f"{cell.median:.4f}"
                if cell.tb_per_s is not None:
                    text += f"\n{cell.tb_per_s:.2f} TB/s"
                if label == verdict.winner:
                    row.append(f"[bold green]★ {text}[/bold green]")
                elif label in verdict.within_noise:
                    row.append(text)
                else:
                    row.append(f"[dim]{text} (+{(verdict.ratios[label][0] - 1) * 100:.0f}%)[/dim]")
            table.add_row(*row)
        margins = ["runner-up slower by"]
        noise = [f"winner beyond noise\nand min gain {self.min_gain_pct:g}%" if self.min_gain_pct
                 else "winner beyond noise"]
        for verdict in self.per_size:
            if verdict.runner_up is None:
                margins.append("-")
                noise.append("-")
                continue
            r, lo, hi = verdict.ratios[verdict.runner_up]
            margins.append(f"{(r - 1) * 100:+.1f}%\n[{(lo - 1) * 100:+.1f}, {(hi - 1) * 100:+.1f}]")
            noise.append("[green]yes[/green]" if verdict.beyond_noise else "[yellow]no[/yellow]")
        table.add_section()
        table.add_row(*margins)
        table.add_row(*noise)
        return table

    def plot(self, path: str | Path) -> Path:
        """Two panels over size: latency per config (CI as a band) and the ratio to the per-size winner (its
        CI as a band); the background is coloured by the winner of each size, crossovers dashed. Needs matplotlib
        (``pip install graphtune[plot]``): without it, one ImportError saying so."""
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ImportError("ABResult.plot needs matplotlib: pip install graphtune[plot]") from None
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import FormatStrFormatter

        path = Path(path)
        fig = Figure(figsize=(9, 8), layout="constrained")
        FigureCanvasAgg(fig)  # draws to a file without touching pyplot's global backend
        top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2])
        sizes = list(self.sizes)
        log_x = len(sizes) > 1 and sizes[-1] / sizes[0] >= 8
        nan = float("nan")
        colors: dict[str, Any] = {}
        for label in self.configs:
            cells = [self.cells[(label, s)] for s in sizes]
            (line,) = top.plot(sizes, [c.median if c.ok else nan for c in cells], marker="o", markersize=3,
                               linewidth=1.2, label=label)
            colors[label] = color = line.get_color()
            top.fill_between(sizes, [c.ci_low if c.ok else nan for c in cells],
                             [c.ci_high if c.ok else nan for c in cells], color=color, alpha=0.25, linewidth=0)
            ratios = [v.ratios.get(label, (nan, nan, nan)) for v in self.per_size]
            bottom.plot(sizes, [r[0] for r in ratios], marker="o", markersize=3, linewidth=1.2, color=color)
            bottom.fill_between(sizes, [r[1] for r in ratios], [r[2] for r in ratios], color=color, alpha=0.25,
                                linewidth=0)
        medians = [c.median for c in self.cells.values() if c.ok]
        if max(medians) / min(medians) >= 8:
            top.set_yscale("log")
            top.yaxis.set_major_formatter(FormatStrFormatter("%g"))
            top.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
            top.tick_params(axis="y", which="minor", labelsize=7)
        # Winner bands reach halfway (geometrically on a log axis) to the neighbouring sizes.
        mid = [(math.sqrt(a * b) if log_x else (a + b) / 2) for a, b in zip(sizes, sizes[1:])]
        lefts = [sizes[0] / 1.15 if log_x else sizes[0] - 0.5] + mid
        rights = mid + [sizes[-1] * 1.15 if log_x else sizes[-1] + 0.5]
        # the band of each size is the config the decision runs there (its winner, or the size below's where the
        # winner is within noise of it), so that the crossovers drawn below separate bands
        picked = dict(self.decision.per_size)
        for ax in (top, bottom):
            for verdict, left, right in zip(self.per_size, lefts, rights):
                ax.axvspan(left, right, color=colors[picked.get(verdict.size, verdict.winner)],
                           alpha=0.12 if verdict.beyond_noise else 0.04, linewidth=0)
            for size in self.decision.crossovers:
                ax.axvline(lefts[sizes.index(size)], color="0.3", linestyle="--", linewidth=0.8)
            ax.grid(True, alpha=0.3)
        if log_x:
            bottom.set_xscale("log", base=2)
        bottom.set_xticks(sizes, [str(s) for s in sizes])
        bottom.set_xlim(lefts[0], rights[-1])
        bottom.set_xlabel("size (batch)")
        bottom.axhline(1.0, color="0.2", linewidth=0.8)
        bottom.set_ylabel("median / winner's median")
        top.set_ylabel("ms per launch (median, CI band)")
        decision = self.decision
        head = f"V1: {decision.config}" if decision.kind == "V1" else \
            f"V3, crossovers at {list(decision.crossovers)}, gain {decision.gain_pct or 0:+.1f}% over one config"
        beyond = "beyond noise" + (f" and min gain {self.min_gain_pct:g}%" if self.min_gain_pct else "")
        top.set_title(f"{self.target}: {head}\nbackground: winner per size (darker: beats runner-up {beyond})",
                      fontsize=9)
        top.legend(fontsize=6 if len(self.configs) > 6 else 8, loc="upper left")
        fig.savefig(path, dpi=110)
        return path

    def save(self, directory: str | Path) -> list[Path]:
        """Write ``ab.json`` and, when matplotlib is installed, ``ab.png``; returns the paths written."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        written = [directory / "ab.json"]
        written[0].write_text(self.to_json())
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            logger.warning("matplotlib is not installed (pip install graphtune[plot]): ab.png not written")
            return written
        written.append(self.plot(directory / "ab.png"))
        return written


# ---------------------------------------------------------------------------------------------------------
# Reading a saved result: each field checked where it is read, a bad one named (``cells[3].size``)


def _saved_field(obj: Mapping[str, Any], key: str, where: str) -> Any:
    """``obj[key]``; a missing key is a ValueError naming the field ``where``."""
    if key not in obj:
        raise ValueError(f"{where}: missing")
    return obj[key]


def _saved_object(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` when it is a JSON object; anything else is a ValueError naming the field ``where``."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected an object, got {type(value).__name__} {value!r:.60}")
    return value


def _saved_list(value: Any, where: str) -> list:
    """``value`` when it is a JSON array; anything else is a ValueError naming the field ``where``."""
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected a list, got {type(value).__name__} {value!r:.60}")
    return value


def _saved_int(value: Any, where: str) -> int:
    """``value`` when it is a whole number (not a bool); anything else is a ValueError naming ``where``."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{where}: {value!r:.60} is not an integer")
    return int(value)


def _saved_number(value: Any, where: str) -> float:
    """``value`` when it is a number (not a bool); anything else is a ValueError naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{where}: {value!r:.60} is not a number")
    return float(value)


# ---------------------------------------------------------------------------------------------------------
# Statistics


def _as_trials(value: Any, label: str, size: int) -> tuple[tuple[float, ...], ...]:
    """A cell's samples as trials. A flat list of numbers means one value per trial."""
    where = f"samples of config {label!r} at size {size}"
    if hasattr(value, "tolist"):  # numpy arrays and tensors are not Sequences
        value = value.tolist()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"{where}: expected a list of trials (lists of ms), got {type(value).__name__}")
    if all(isinstance(v, numbers.Real) for v in value):
        trials = [[v] for v in value]
    else:
        trials = value
    out = []
    for i, trial in enumerate(trials):
        if hasattr(trial, "tolist"):
            trial = trial.tolist()
        if isinstance(trial, (str, bytes)) or not isinstance(trial, Sequence) or len(trial) == 0:
            raise ValueError(f"{where}: trial {i} must be a non-empty list of ms, got {trial!r}")
        for x in trial:
            if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x) or x <= 0:
                raise ValueError(f"{where}: trial {i} holds {x!r}; times must be finite and > 0 ms")
        out.append(tuple(float(x) for x in trial))
    return tuple(out)


def _padded(trials: tuple[tuple[float, ...], ...]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(t) for t in trials)
    values = torch.full((len(trials), width), float("nan"), dtype=torch.float64)
    for i, t in enumerate(trials):
        values[i, : len(t)] = torch.tensor(t, dtype=torch.float64)
    return values, torch.tensor([len(t) for t in trials])


def _bootstrap_medians(values: torch.Tensor, lengths: torch.Tensor, trial_idx: torch.Tensor,
                       gen: torch.Generator) -> torch.Tensor:
    """Medians of ``len(trial_idx)`` two-level resamples: the trials ``trial_idx[b]``, each re-drawn inside."""
    n_boot, n_trials = trial_idx.shape
    width = values.shape[1]
    out = torch.empty(n_boot, dtype=torch.float64)
    rows = max(1, _CHUNK_ELEMENTS // (n_trials * width))
    pos = torch.arange(width)
    for start in range(0, n_boot, rows):
        idx = trial_idx[start:start + rows]
        length = lengths[idx].unsqueeze(-1)                                     # [b, T, 1]
        u = torch.rand((*idx.shape, width), generator=gen, dtype=torch.float64)
        j = torch.minimum((u * length).long(), length - 1)
        picked = values[idx.unsqueeze(-1), j]                                   # [b, T, width]
        picked = torch.where(pos < length, picked, float("nan"))               # a trial keeps its own count
        out[start:start + rows] = torch.nanquantile(picked.reshape(len(idx), -1), 0.5, dim=1)
    return out


MIN_BOOT = 100          # fewer resamples cannot place a 95% interval's ends (one gave an interval that missed its
                        # own estimate, and counted as beyond noise)
MIN_CELL_SAMPLES = 5    # fewer values in a cell (and fewer than 2 trials) say nothing of its noise


def _valid_min_gain(value: Any) -> bool:
    return (not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
            and 0 <= value < 100)


def check_statistics(confidence: Any, n_boot: Any, min_gain_pct: Any = 0.0) -> None:
    """The statistics options, one line naming a bad one (``ab`` checks them before any timing)."""
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < MIN_BOOT:
        raise ValueError(f"n_boot must be an int >= {MIN_BOOT}, got {n_boot!r}")
    if not _valid_min_gain(min_gain_pct):
        raise ValueError(f"min_gain_pct must be a finite number >= 0 and < 100 (a percentage), got {min_gain_pct!r}")


def _size_key(size: Any, label: str) -> int:
    """A size of the samples table as an int (a JSON file's keys are strings: "8" is size 8), else one line."""
    try:
        value = int(size)
    except (TypeError, ValueError):
        raise ValueError(f"config {label!r}: size {size!r} is not an integer") from None
    if isinstance(size, bool) or value != size and str(value) != str(size).strip():
        raise ValueError(f"config {label!r}: size {size!r} is not an integer")
    return value


def _measured_noise(trials: tuple[tuple[float, ...], ...]) -> bool:
    """Whether a cell holds enough values for its bootstrap to say anything of its noise: two trials, or a single
    trial of MIN_CELL_SAMPLES values. Below that a percentile interval is about [min, max] of two or three values
    (a 75% interval at best) and would call any difference beyond noise."""
    return len(trials) >= 2 or sum(len(t) for t in trials) >= MIN_CELL_SAMPLES


def _size_seed(seed: int, size: int) -> int:
    # One stream per size: a size's answer does not depend on which other sizes were measured.
    return (seed * 1_000_003 + size) % (2**63)


def decide(samples: Mapping[str, Mapping[int, Sequence[Any]]], *, target: str = "", confidence: float = 0.95,
           n_boot: int = 2000, seed: int = 0, min_gain_pct: float = 0.0,
           config_params: Mapping[str, Mapping[str, Any]] | None = None,
           errors: Mapping[tuple[str, int], str] | None = None, bytes_moved: Mapping[int, int] | None = None,
           environment: Mapping[str, Any] | None = None, measurement: Mapping[str, Any] | None = None) -> ABResult:
    """Statistics and the V1 / V3 decision over a results table (rules in the module docstring).

    ``samples[config_label][size]`` is a list of trials, each a list of ms per launch (or a flat list of
    numbers, one per trial). An empty list marks a config that failed at that size (``errors`` says why).
    Every config must have every size; configs keep their order, which breaks ties. ``min_gain_pct`` (percent,
    0 <= it < 100) is the minimum practical gain: a config whose ratio to the winner may be as low as
    ``1 + min_gain_pct / 100`` (the lower end of its CI) counts as within noise.
    """
    check_statistics(confidence, n_boot, min_gain_pct)
    if not samples:
        raise ValueError("no configs in the samples")
    samples = {label: {_size_key(s, label): v for s, v in per.items()} for label, per in samples.items()}
    labels = list(samples)
    sizes = sorted({s for per in samples.values() for s in per})
    if not sizes:
        raise ValueError(f"no sizes in the samples of configs {labels}")
    for label in labels:
        missing = sorted(set(sizes) - {int(s) for s in samples[label]})
        if missing:
            raise ValueError(f"config {label!r} has no samples at sizes {missing} (every config needs every size)")
    errors = dict(errors or {})
    bytes_moved = dict(bytes_moved or {})
    q_lo = (1 - confidence) / 2
    threshold = 1.0 + min_gain_pct / 100.0
    quantiles = torch.tensor([q_lo, 1 - q_lo], dtype=torch.float64)

    cells: dict[tuple[str, int], CellStats] = {}
    verdicts: list[SizeVerdict] = []
    for size in sizes:
        trials = {label: _as_trials(samples[label][size], label, size) for label in labels}
        ok = [label for label in labels if trials[label]]
        if not ok:
            why = "; ".join(f"{label}: {errors.get((label, size), 'no samples')}" for label in labels)
            raise ValueError(f"no config has samples at size {size} ({why})")
        gen = torch.Generator().manual_seed(_size_seed(seed, size))
        trial_draws: dict[int, torch.Tensor] = {}
        boots: dict[str, torch.Tensor] = {}
        medians: dict[str, float] = {}
        for label in ok:
            values, lengths = _padded(trials[label])
            n_trials = len(trials[label])
            if n_trials not in trial_draws:
                trial_draws[n_trials] = torch.randint(n_trials, (n_boot, n_trials), generator=gen)
            boots[label] = _bootstrap_medians(values, lengths, trial_draws[n_trials], gen)
            medians[label] = float(torch.quantile(values[~values.isnan()], 0.5))
        for label in labels:
            if label in medians:
                lo, hi = torch.quantile(boots[label], quantiles).tolist()
                cells[(label, size)] = CellStats(label, size, medians[label], lo, hi, trials[label],
                                                 bytes_moved=bytes_moved.get(size))
            else:
                cells[(label, size)] = CellStats(label, size, None, None, None, (),
                                                 error=errors.get((label, size), "no samples"))
        ranked = sorted(ok, key=lambda c: (medians[c], labels.index(c)))
        winner = ranked[0]
        ratios: dict[str, tuple[float, float, float]] = {}
        for label in ok:
            if label == winner:
                ratios[label] = (1.0, 1.0, 1.0)
                continue
            lo, hi = torch.quantile(boots[label] / boots[winner], quantiles).tolist()
            ratios[label] = (medians[label] / medians[winner], lo, hi)
        # a config whose cell (or the winner's) holds too few values to measure noise counts as within it
        measured = {c: _measured_noise(trials[c]) for c in ok}
        within = tuple(c for c in ranked if ratios[c][1] <= threshold or not (measured[c] and measured[winner]))
        runner_up = ranked[1] if len(ranked) > 1 else None
        verdicts.append(SizeVerdict(size=size, winner=winner, runner_up=runner_up,
                                    beyond_noise=runner_up is not None and runner_up not in within,
                                    within_noise=within, ratios=ratios))

    decision = _decision(labels, verdicts)
    return ABResult(target=target, sizes=tuple(sizes), configs=tuple(labels), cells=cells, per_size=tuple(verdicts),
                    decision=decision, confidence=confidence, n_boot=n_boot, seed=seed,
                    min_gain_pct=float(min_gain_pct),
                    config_params={k: dict(v) for k, v in (config_params or {}).items()},
                    environment=dict(environment or {}), measurement=dict(measurement or {}))


def _decision(labels: list[str], verdicts: list[SizeVerdict]) -> Decision:
    everywhere = [c for c in labels if all(c in v.ratios for v in verdicts)]
    # Regret: how much slower than the per-size winner, every size weighted equally.
    mean_ratio = {c: sum(v.ratios[c][0] for v in verdicts) / len(verdicts) for c in everywhere}

    def least_regret(candidates: list[str]) -> str:
        return min(candidates, key=lambda c: (mean_ratio[c], labels.index(c)))

    def gain(single: str) -> float:
        return (mean_ratio[single] - 1.0) * 100.0

    v1 = [c for c in everywhere if all(c in v.within_noise for v in verdicts)]
    if v1:
        choice = least_regret(v1)
        return Decision(kind="V1", config=choice, per_size=tuple((v.size, choice) for v in verdicts),
                        crossovers=(), gain_pct=gain(choice))
    # each size's config: its winner, except where the winner does not beat the runner-up beyond noise and the
    # config of the size below is within noise here too (a flip on noise would add a crossover, a bucket
    # boundary that a rerun would move)
    picks: list[str] = []
    for v in verdicts:
        keep = picks[-1] if picks and not v.beyond_noise and picks[-1] in v.within_noise else None
        picks.append(keep or v.winner)
    crossovers = tuple(b.size for a, b, pa, pb in zip(verdicts, verdicts[1:], picks, picks[1:]) if pa != pb)
    single = least_regret(everywhere) if everywhere else None
    return Decision(kind="V3", config=single, per_size=tuple((v.size, p) for v, p in zip(verdicts, picks)),
                    crossovers=crossovers, gain_pct=gain(single) if single else None)


# ---------------------------------------------------------------------------------------------------------
# Targets and configs


def _is_target(obj: Any) -> bool:
    return all(hasattr(obj, a) for a in ("name", "default_sizes", "configs")) and callable(getattr(obj, "make", None))


def resolve_target(spec: str) -> BenchTarget:
    """``MODULE:ATTR`` (MODULE dotted or a ``.py`` path; ATTR defaults to ``AB_TARGET``) or a built-in alias
    (``mla_decode``) -> the bench target object."""
    from ._loading import load_object
    obj: Any = load_object(TARGET_ALIASES.get(spec, spec), f"A/B target {spec!r}", default_attr="AB_TARGET")
    if not _is_target(obj):
        raise ValueError(f"A/B target {spec!r}: {obj!r} is not a bench target (it needs name, default_sizes, configs "
                        "and make(size, config) -> list of zero-argument launches)")
    return obj


def select_configs(target: BenchTarget, text: str) -> list[triton.Config]:
    """``"all"`` -> the target's configs; ``"num_warps=4,BLOCK_N=32;num_warps=8"`` -> one config per ``;``-part,
    each applied over the target's first config. A name that is no parameter of the target is a ConfigError."""
    if text.strip().lower() == "all":
        return list(target.configs)
    if not target.configs:
        raise ConfigError(f"target {target.name!r} has no configs to apply {text!r} over")
    base = target.configs[0]
    meta = {name for c in target.configs for name in c.kwargs}
    out = []
    for part in text.split(";"):
        if not part.strip():
            continue
        params = parse_params(part, where=f"--configs {part.strip()!r}")
        out.append(config_with(base, params, allowed_meta=meta, where=f"--configs {part.strip()!r}"))
    if not out:
        raise ConfigError(f"--configs {text!r}: no configs (use 'all' or 'NAME=VALUE,...;NAME=VALUE,...')")
    return out


# ---------------------------------------------------------------------------------------------------------
# Measurement


def _graph_replay_sampler() -> Sampler:
    if not torch.cuda.is_available():
        raise GraphtuneError("A/B timing needs a CUDA GPU (torch.cuda.is_available() is False); saved samples can "
                             "be re-analysed without one: graphtune ab --from-json FILE")
    try:
        from .timing import graph_replay_samples
    except ImportError as exc:
        raise GraphtuneError(f"graphtune.timing.graph_replay_samples is not available ({exc})") from None
    return graph_replay_samples


def _environment() -> dict[str, Any]:
    from ._version import __version__

    env: dict[str, Any] = {"graphtune": __version__, "torch": torch.__version__, "triton": triton.__version__,
                           "python": platform.python_version()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.update(gpu=props.name, capability=f"sm_{props.major}{props.minor}", sms=props.multi_processor_count,
                   l2_bytes=getattr(props, "L2_cache_size", None), cuda=torch.version.cuda)
    return env


def _check_sizes(sizes: Sequence[int]) -> list[int]:
    out = []
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 1:
            raise ValueError(f"sizes must be ints >= 1, got {s!r} in {list(sizes)}")
        out.append(int(s))
    if not out:
        raise ValueError("no sizes to time")
    if len(set(out)) != len(out):
        raise ValueError(f"sizes repeat: {list(sizes)}")
    return sorted(out)


def ab(target: BenchTarget | str, sizes: Sequence[int] | None = None,
       configs: Sequence[triton.Config] | str | None = None, *, trials: int = 5, samples: int = 20,
       launches_per_sample: int | None = None, sampler: Sampler | None = None, confidence: float = 0.95,
       n_boot: int = 2000, seed: int = 0, min_gain_pct: float = 0.0) -> ABResult:
    """Time every config at every size inside CUDA graph replay and decide V1 or V3.

    ``target`` is a bench target or its spec (``MODULE:ATTR``, ``mla_decode``); ``sizes`` default to the
    target's; ``configs`` are the target's (None or ``"all"``), a ``;``-separated spec, or a list.
    Each of ``trials`` independent trials takes ``samples`` graph replays per cell, one capture per cell.
    ``sampler(calls, samples=..., launches_per_sample=...)`` returns ms per launch, one value per replay;
    the default is ``graphtune.timing.graph_replay_samples`` (needs CUDA). A config that raises (does not
    compile, out of resources) becomes a failed cell, logged, not an abort. ``confidence``, ``n_boot``, ``seed``
    and ``min_gain_pct`` are ``decide``'s.
    """
    if isinstance(target, str):
        target = resolve_target(target)
    elif not _is_target(target):
        raise TypeError(f"{target!r} is not a bench target (needs name, default_sizes, configs, make)")
    if configs is None or isinstance(configs, str):
        configs = select_configs(target, configs or "all")
    configs = list(configs)
    if not configs:
        raise ValueError(f"no configs to compare for target {target.name!r}")
    labels = [config_label(c) for c in configs]
    if len(set(labels)) != len(labels):
        raise ValueError(f"configs repeat: {labels}")
    sizes = _check_sizes(list(target.default_sizes) if sizes is None else sizes)
    for name, value in (("trials", trials), ("samples", samples), ("launches_per_sample", launches_per_sample)):
        if value is None and name == "launches_per_sample":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    check_statistics(confidence, n_boot, min_gain_pct)     # before the timing, which a bad value would otherwise waste
    if sampler is None:
        sampler = _graph_replay_sampler()
    kwargs: dict[str, Any] = {"samples": samples}
    if launches_per_sample is not None:
        kwargs["launches_per_sample"] = launches_per_sample

    table: dict[str, dict[int, list[list[float]]]] = {label: {s: [] for s in sizes} for label in labels}
    errors: dict[tuple[str, int], str] = {}
    for trial in range(trials):
        logger.info("A/B %s: trial %d of %d", target.name, trial + 1, trials)
        for size in sizes:
            shift = trial % len(configs)
            for i in list(range(shift, len(configs))) + list(range(shift)):
                label = labels[i]
                if (label, size) in errors:
                    continue
                try:
                    calls = list(target.make(size, configs[i]))
                    if not calls:
                        raise ValueError(f"{target.name}.make({size}, ...) returned no launches")
                    times = [float(t) for t in sampler(calls, **kwargs)]
                    del calls  # free this cell's input copies before the next config allocates its own
                    bad = [t for t in times if not math.isfinite(t) or t <= 0]
                    if not times or bad:
                        raise ValueError(f"sampler returned {len(times)} times, bad values {bad[:3]}")
                except Exception as exc:  # one config failing must not end the experiment
                    errors[(label, size)] = f"{type(exc).__name__}: {exc}"
                    table[label][size] = []
                    logger.warning("A/B %s: config %s at size %d failed: %s", target.name, label, size,
                                   errors[(label, size)])
                    continue
                table[label][size].append(times)

    bytes_fn = getattr(target, "bytes_moved", None)
    bytes_moved = {s: int(bytes_fn(s)) for s in sizes} if callable(bytes_fn) else {}
    measurement = {"trials": trials, "samples": samples, "launches_per_sample": launches_per_sample,
                   "sampler": getattr(sampler, "__qualname__", type(sampler).__name__)}
    return decide(table, target=target.name, confidence=confidence, n_boot=n_boot, seed=seed,
                  min_gain_pct=min_gain_pct,
                  config_params={label: config_to_dict(c) for label, c in zip(labels, configs)}, errors=errors,
                  bytes_moved=bytes_moved, environment=_environment(), measurement=measurement)
