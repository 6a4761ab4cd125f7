"""A decode throughput model: what a faster kernel is worth to a serving engine.

One decode step serves ``C`` concurrent requests, one new token each, and takes

    step_ms(C) = fixed_ms + C * per_request_ms

``fixed_ms`` is what a step costs whatever the batch (weights streamed once, launch and sampling
overhead); ``per_request_ms`` grows with every request in the batch (attention over its KV cache,
its share of the MLP). ``components`` names parts of ``per_request_ms`` (say ``attention=0.79``) so
that a kernel speed-up can be turned into a throughput gain: making a component ``factor`` times
faster replaces its cost ``x`` by ``x / factor``, and

    tokens_per_s(C) = C / (step_ms(C) / 1000)

Worked example (the numbers of the issue): fixed 18 ms, 1.05 ms per request of which attention is
0.79 ms. At C=90 a step takes 18 + 90 * 1.05 = 112.5 ms. Attention 1.25x faster saves
0.79 - 0.79/1.25 = 0.158 ms per request, so a step takes 112.5 - 90 * 0.158 = 98.28 ms: +14.5%
tokens/s. At 1.8x a step takes 80.9 ms: +39.1%.

``fit_points`` estimates ``fixed_ms`` and ``per_request_ms`` by least squares from measured
(concurrency, step ms) points and reports the residuals, so that a model that does not describe the
engine shows itself.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .configs import parse_list

__all__ = ["LinearFit", "Scenario", "ThroughputModel", "fit_points", "parse_points"]

# A component may exceed the per-request total by float rounding of user input only.
_REL_TOL = 1e-9


def _check_time(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite time >= 0 ms, got {value!r}")
    return value


def _check_concurrency(c: float) -> float:
    if isinstance(c, bool) or not isinstance(c, numbers.Real) or not math.isfinite(c) or c <= 0:
        raise ValueError(f"concurrency must be a number > 0, got {c!r}")
    return c


@dataclass(frozen=True)
class LinearFit:
    """Least-squares fit of ``step_ms = fixed_ms + c * per_request_ms`` to measured points."""

    fixed_ms: float
    per_request_ms: float
    points: tuple[tuple[float, float], ...]
    residuals_ms: tuple[float, ...]  # measured - fitted, one per point, in the order given

    @property
    def rms_ms(self) -> float:
        return math.sqrt(sum(r * r for r in self.residuals_ms) / len(self.residuals_ms))

    def to_dict(self) -> dict[str, Any]:
        return {
            "fixed_ms": self.fixed_ms,
            "per_request_ms": self.per_request_ms,
            "rms_ms": self.rms_ms,
            "points": [{"c": c, "step_ms": s, "fitted_ms": s - r, "residual_ms": r}
                       for (c, s), r in zip(self.points, self.residuals_ms)],
        }


def fit_points(points: Iterable[tuple[float, float]]) -> LinearFit:
    """Fit ``fixed_ms`` and ``per_request_ms`` to (concurrency, step ms) points by least squares.

    Needs at least two distinct concurrencies. A negative fixed cost within two standard errors of 0 (the points'
    noise) is fitted as 0, the line through the origin; beyond that, or a negative per-request cost, is an error:
    the points do not follow the model (or are mislabelled).
    """
    pts = tuple((_check_concurrency(c), _check_time(f"step time at C={c}", s)) for c, s in points)
    if len(pts) < 2:
        raise ValueError(f"fitting needs at least two (concurrency, step ms) points, got {len(pts)}: {list(pts)}")
    n = len(pts)
    mean_c = sum(c for c, _ in pts) / n
    mean_s = sum(s for _, s in pts) / n
    sxx = sum((c - mean_c) ** 2 for c, _ in pts)
    if sxx == 0:
        raise ValueError(f"fitting needs at least two different concurrencies, got only C={pts[0][0]}")
    per_request = sum((c - mean_c) * (s - mean_s) for c, s in pts) / sxx
    fixed = mean_s - per_request * mean_c
    if fixed < 0 and per_request > 0 and -fixed <= 2 * _intercept_se(pts, fixed, per_request, sxx, mean_c):
        # a negative fixed cost within two standard errors of 0 is the points' noise: the least-squares line
        # through the origin (fixed = 0), the model's own bound
        fixed, per_request = 0.0, sum(c * s for c, s in pts) / sum(c * c for c, _ in pts)
    if per_request < 0 or fixed < 0:
        raise ValueError(
            f"the fit of {list(pts)} gives fixed={fixed:.4g} ms, per_request={per_request:.4g} ms: a negative "
            "cost beyond the points' noise, so these points do not follow step = fixed + C * per_request")
    residuals = tuple(s - (fixed + c * per_request) for c, s in pts)
    return LinearFit(fixed_ms=fixed, per_request_ms=per_request, points=pts, residuals_ms=residuals)


def _intercept_se(pts: tuple[tuple[float, float], ...], fixed: float, per_request: float, sxx: float,
                  mean_c: float) -> float:
    """The standard error of the least-squares intercept (ordinary least squares, n - 2 degrees of freedom); 0
    with two points, which fit exactly and say nothing of their noise."""
    n = len(pts)
    if n <= 2:
        return 0.0
    sse = sum((s - (fixed + c * per_request)) ** 2 for c, s in pts)
    return math.sqrt(sse / (n - 2) * (1 / n + mean_c ** 2 / sxx))


def parse_points(text: str) -> list[tuple[float, float]]:
    """``"60:81.0,90:112.5"`` -> ``[(60, 81.0), (90, 112.5)]``."""
    return parse_list(text, _point, what="point", nothing=None)


def _point(item: str) -> tuple[float, float]:
    c_text, sep, s_text = item.partition(":")
    try:
        if not sep:
            raise ValueError
        c = float(c_text)
        return int(c) if c.is_integer() else c, float(s_text)
    except ValueError:
        raise ValueError(f"{item!r} is not CONCURRENCY:STEP_MS") from None


@dataclass(frozen=True)
class Scenario:
    """One projection: ``component`` made ``factor`` times faster, at concurrency ``c``."""

    component: str
    factor: float
    c: float
    step_ms: float
    tokens_per_s: float
    baseline_step_ms: float
    baseline_tokens_per_s: float

    @property
    def gain_pct(self) -> float:
        """Throughput gain over the baseline, percent (equal to the step-time ratio minus one)."""
        return (self.tokens_per_s / self.baseline_tokens_per_s - 1.0) * 100.0

    def to_dict(self) -> dict[str, Any]:
        return {"component": self.component, "factor": self.factor, "c": self.c, "step_ms": self.step_ms,
                "tokens_per_s": self.tokens_per_s, "gain_pct": self.gain_pct}


@dataclass(frozen=True)
class ThroughputModel:
    """``step_ms(C) = fixed_ms + C * per_request_ms``; ``components`` name parts of ``per_request_ms``."""

    fixed_ms: float
    per_request_ms: float
    components: Mapping[str, float] = field(default_factory=dict)
    fit_info: LinearFit | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fixed_ms", _check_time("fixed_ms", self.fixed_ms))
        object.__setattr__(self, "per_request_ms", _check_time("per_request_ms", self.per_request_ms))
        if self.fixed_ms == 0 and self.per_request_ms == 0:
            raise ValueError("fixed_ms and per_request_ms are both 0: a step would take no time")
        components = {}
        for name, value in dict(self.components).items():
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"component names must be non-empty text, got {name!r}")
            components[name.strip()] = _check_time(f"component {name!r}", value)
        for name, value in components.items():
            if value > self.per_request_ms * (1 + _REL_TOL):
                raise ValueError(f"component {name}={value} ms is larger than the per-request total "
                                 f"{self.per_request_ms} ms")
        total = sum(components.values())
        if total > self.per_request_ms * (1 + _REL_TOL):
            raise ValueError(f"components {components} add up to {total:.6g} ms, more than the per-request total "
                             f"{self.per_request_ms} ms")
        object.__setattr__(self, "components", components)

    @classmethod
    def fit(cls, points: Iterable[tuple[float, float]],
            components: Mapping[str, float] | None = None) -> ThroughputModel:
        """Fit ``fixed_ms`` and ``per_request_ms`` to measured points; the fit is kept in ``fit_info``."""
        fit = fit_points(points)
        return cls(fixed_ms=fit.fixed_ms, per_request_ms=fit.per_request_ms, components=dict(components or {}),
                   fit_info=fit)

    def step_ms(self, c: float) -> float:
        return self.fixed_ms + _check_concurrency(c) * self.per_request_ms

    def tokens_per_s(self, c: float) -> float:
        # One token per request per step.
        return c / (self.step_ms(c) / 1000.0)

    def with_speedup(self, component: str, factor: float) -> ThroughputModel:
        """The model after making ``component`` ``factor`` times faster (factor < 1 models a slow-down)."""
        if component not in self.components:
            raise ValueError(f"unknown component {component!r}; known: {sorted(self.components)}")
        factor = float(factor)
        if not math.isfinite(factor) or factor <= 0:
            raise ValueError(f"speed-up factor for {component!r} must be a finite number > 0, got {factor!r}")
        old = self.components[component]
        new = old / factor
        components = dict(self.components)
        components[component] = new
        return ThroughputModel(fixed_ms=self.fixed_ms, per_request_ms=self.per_request_ms - old + new,
                               components=components)

    def scenario(self, component: str, factor: float, c: float) -> Scenario:
        faster = self.with_speedup(component, factor)
        return Scenario(component=component, factor=float(factor), c=c, step_ms=faster.step_ms(c),
                        tokens_per_s=faster.tokens_per_s(c), baseline_step_ms=self.step_ms(c),
                        baseline_tokens_per_s=self.tokens_per_s(c))

    def baseline(self, c: float) -> dict[str, float]:
        return {"c": c, "step_ms": self.step_ms(c), "tokens_per_s": self.tokens_per_s(c)}

    def project(self, concurrency: Iterable[float], speedups: Iterable[float] = (),
                components: Iterable[str] | None = None) -> dict[str, Any]:
        """The JSON report: ``{"baseline": [...], "scenarios": [...], "model": {...}}``.

        Scenarios cover every named component (or those in ``components``) x every factor x every
        concurrency, in that nesting order.
        """
        levels = list(concurrency)
        factors = [float(f) for f in speedups]
        names = list(self.components) if components is None else list(components)
        return {
            "baseline": [self.baseline(c) for c in levels],
            "scenarios": [self.scenario(name, f, c).to_dict() for name in names for f in factors for c in levels],
            "model": self.to_dict(),
        }

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fixed_ms": self.fixed_ms, "per_request_ms": self.per_request_ms,
                               "components": dict(self.components)}
        if self.fit_info is not None:
            out["fit"] = self.fit_info.to_dict()
        return out
