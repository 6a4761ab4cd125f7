"""Timing candidates: statistics, early elimination, and the samplers (graph replay, plain, interpreter).

The selection logic is independent of how a sample is taken: ``select`` asks a ``sample(i, k)`` callable
for ``k`` more samples (milliseconds) of candidate ``i``. On a GPU the default sampler replays a CUDA graph
of several launches of the candidate, rotating over copies of its inputs, so that what is measured is what
runs inside a captured server step: no launch gaps, no warm L2 from the previous launch.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from statistics import median
from typing import Any, Callable, Sequence

from ._log import logger


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    n: int

    def to_dict(self) -> dict[str, float | int]:
        return {"median_ms": self.median_ms, "p20_ms": self.p20_ms, "p80_ms": self.p80_ms, "n": self.n}


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted values."""
    if not sorted_values:
        raise ValueError("quantile of no samples")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(samples: Sequence[float]) -> Timing:
    s = sorted(samples)
    return Timing(median_ms=quantile(s, 0.5), p20_ms=quantile(s, 0.2), p80_ms=quantile(s, 0.8), n=len(s))


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median from order statistics (binomial).

    With n samples, [x_(j), x_(n-j+1)] covers the median with probability 1 - 2 P(Bin(n, 1/2) < j).
    Timings are skewed (interference only ever adds time), so no normality is assumed. With too few samples
    for the requested confidence the widest interval [min, max] is returned.
    """
    s = sorted(samples)
    n = len(s)
    if n == 0:
        raise ValueError("median_ci of no samples")
    alpha = 1.0 - confidence
    j, cdf = 0, 0.0
    # largest j with P(Bin(n, 1/2) <= j - 1) <= alpha / 2
    while j < n // 2:
        nxt = cdf + math.comb(n, j) / 2.0 ** n
        if nxt > alpha / 2:
            break
        cdf = nxt
        j += 1
    lo_idx = max(j - 1, 0) if j > 0 else 0
    hi_idx = n - 1 - lo_idx
    return s[lo_idx], s[hi_idx]


@dataclass
class Selection:
    """Outcome of ``select``: the winner, every candidate's samples, and the round each was dropped in."""

    best: int
    samples: dict[int, list[float]]
    eliminated: dict[int, int] = field(default_factory=dict)  # candidate -> round it was dropped in
    rounds: int = 0

    def timing(self, i: int) -> Timing | None:
        s = self.samples.get(i)
        return summarize(s) if s else None


def select(n: int, sample: Callable[[int, int], list[float]], *, budget_samples: int | None = None,
           initial: int = 3, max_per_candidate: int = 48, order: Sequence[int] | None = None,
           confidence: float = 0.95, sample_single: bool = False) -> Selection:
    """Pick the fastest of ``n`` candidates, spending samples on the contenders only.

    Round 0 takes ``initial`` samples of every candidate (in ``order``, e.g. the neighbouring bucket's
    ranking). After each round a candidate is dropped when the lower end of its median's confidence interval
    lies above the upper end of the current best's: it is slower beyond noise, whatever the ratio. The
    survivors get twice as many new samples the next round (successive doubling); when the remaining
    sample budget cannot pay for another round of all survivors, only the better half by median goes on
    (successive halving). Ties (medians within each other's intervals at the end) go to the candidate that
    comes first in ``order``, so neighbouring buckets keep the same config unless the data says otherwise.
    """
    if n < 1:
        raise ValueError(f"select(n={n}): need at least one candidate")
    order = list(order) if order is not None else list(range(n))
    if sorted(order) != list(range(n)):
        raise ValueError(f"select: order {order} is not a permutation of range({n})")
    rank = {c: r for r, c in enumerate(order)}
    samples: dict[int, list[float]] = {i: [] for i in range(n)}
    if n == 1:
        if sample_single:   # a caller that needs the time itself (sharded tuning), not only the winner
            samples[0].extend(sample(0, initial))
        return Selection(best=0, samples=samples)
    budget = budget_samples if budget_samples is not None else n * initial * 6
    spent = 0
    alive = list(order)
    eliminated: dict[int, int] = {}
    per_round = initial
    rnd = 0
    while True:
        for i in alive:
            new = sample(i, per_round)
            samples[i].extend(new)
            spent += len(new)
        meds = {i: median(samples[i]) for i in alive}
        cis = {i: median_ci(samples[i], confidence) for i in alive}
        best = min(alive, key=lambda i: (meds[i], rank[i]))
        best_hi = cis[best][1]
        for i in list(alive):
            if i != best and cis[i][0] > best_hi:
                alive.remove(i)
                eliminated[i] = rnd
        rnd += 1
        if len(alive) == 1:
            break
        per_round *= 2
        if len(samples[alive[0]]) + per_round > max_per_candidate:
            break
        remaining = budget - spent
        if remaining < per_round * 2:
            break
        if per_round * len(alive) > remaining:
            keep = max(2, remaining // per_round)
            ranked = sorted(alive, key=lambda i: (meds[i], rank[i]))
            for i in ranked[keep:]:
                alive.remove(i)
                eliminated[i] = rnd
            if len(alive) == 1:
                break
    meds = {i: median(samples[i]) for i in alive}
    best = min(alive, key=lambda i: (meds[i], rank[i]))
    # prefer the earlier candidate in `order` when it is within the winner's noise
    lo_b, hi_b = median_ci(samples[best], confidence)
    for i in sorted(alive, key=lambda c: rank[c]):
        if rank[i] >= rank[best]:
            break
        lo_i, _ = median_ci(samples[i], confidence)
        if lo_i <= hi_b and meds[i] <= hi_b:
            best = i
            break
    return Selection(best=best, samples=samples, eliminated=eliminated, rounds=rnd)


# ---------------------------------------------------------------------------------------------- samplers


def l2_bytes() -> int:
    import torch
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)


class GraphReplaySampler:
    """Times candidates by CUDA graph replay; ``sampler(i, k)`` returns ``k`` samples (ms per launch) of
    candidate ``i``.

    Candidate ``i`` is given as a list of zero-argument calls, each bound to its own copy of the inputs; its
    graph holds enough launches cycling through them that one replay takes about ``target_sample_ms``, so
    launch gaps and a warm L2 from the previous launch are not measured. Every call runs once eagerly before
    capture, so compilation and module loading never happen inside it. Graphs are captured once per
    candidate on first use and kept until ``close()``. Allocates nothing but the graphs (kernel nodes only).
    """

    def __init__(self, candidates: Sequence[Sequence[Callable[[], Any]]], *, target_sample_ms: float = 0.25,
                 max_launches: int = 512, launches_per_sample: int | None = None, flush_l2: bool = False):
        import torch
        if not candidates or any(not c for c in candidates):
            raise ValueError("GraphReplaySampler: every candidate needs at least one call")
        self.candidates = [list(c) for c in candidates]
        self.target_sample_ms = target_sample_ms
        self.max_launches = max_launches
        self.launches_per_sample = launches_per_sample
        self.stream = torch.cuda.Stream()
        self.graphs: dict[int, tuple[Any, int]] = {}
        # When inputs cannot be rotated (one copy is all memory allows, or the inputs are a large pool of
        # which a launch touches little), each launch is preceded by a write over an L2-sized buffer, and
        # the flush's own time, measured by a graph of flushes alone, is subtracted.
        self.flush_ms = 0.0
        self._flush_buf = None
        if flush_l2:
            self._flush_buf = torch.empty(l2_bytes(), dtype=torch.uint8, device="cuda")
            flush = self._flush
            g = self._capture_raw([flush], 32)
            g.replay()
            self.flush_ms = median(self._replay_ms(g, 9)) / 32
            del g

    def _flush(self) -> None:
        self._flush_buf.zero_()

    def _capture_raw(self, calls: Sequence[Callable[[], Any]], n_launch: int):
        import torch
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=self.stream):
            for j in range(n_launch):
                calls[j % len(calls)]()
        return g

    def _capture(self, calls: Sequence[Callable[[], Any]], n_launch: int):
        import torch
        from .capture import timer_capture
        g = torch.cuda.CUDAGraph()
        with timer_capture(), torch.cuda.graph(g, stream=self.stream):
            for j in range(n_launch):
                if self._flush_buf is not None:
                    self._flush()
                calls[j % len(calls)]()
        return g

    def _replay_ms(self, g, n: int) -> list[float]:
        import torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for s, e in zip(starts, ends):
            s.record()
            g.replay()
            e.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    def _graph(self, i: int):
        import torch
        if i in self.graphs:
            return self.graphs[i]
        calls = self.candidates[i]
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for c in calls:
                c()
        torch.cuda.current_stream().wait_stream(self.stream)
        n_launch = self.launches_per_sample
        if n_launch is None:
            probe_n = max(len(calls), 4)
            g = self._capture(calls, probe_n)
            g.replay()
            per = max(min(self._replay_ms(g, 3)) / probe_n - self.flush_ms, 1e-4)
            del g
            n_launch = int(min(self.max_launches,
                               max(len(calls), math.ceil(self.target_sample_ms / max(per, 1e-4)))))
        g = self._capture(calls, n_launch)
        g.replay()  # the first replay uploads the graph; not a sample
        self.graphs[i] = (g, n_launch)
        return self.graphs[i]

    def __call__(self, i: int, k: int) -> list[float]:
        g, n_launch = self._graph(i)
        return [max(t / n_launch - self.flush_ms, 0.0) for t in self._replay_ms(g, k)]

    def close(self) -> None:
        self.graphs.clear()
        self._flush_buf = None


def graph_replay_samples(calls: Sequence[Callable[[], Any]], *, samples: int,
                         launches_per_sample: int | None = None, target_sample_ms: float = 0.25,
                         max_launches: int = 512) -> list[float]:
    """Time one set of rotating ``calls`` by CUDA graph replay; ``samples`` values in ms per launch."""
    if samples < 1:
        raise ValueError(f"graph_replay_samples(samples={samples}): need at least one sample")
    sampler = GraphReplaySampler([calls], target_sample_ms=target_sample_ms, max_launches=max_launches,
                                 launches_per_sample=launches_per_sample)
    try:
        return sampler(0, samples)
    finally:
        sampler.close()


def plain_sampler(fn: Callable[[], Any]) -> Callable[[int], list[float]]:
    """Stock Triton's way (``GRAPHTUNE_TIMER=plain``, and kernels with user hooks): ``triton.testing.do_bench``
    with its default budget (eager launches, L2 flush); one median per sample."""
    def take(k: int) -> list[float]:
        import triton.testing
        return [float(triton.testing.do_bench(fn, return_mode="median")) for _ in range(k)]
    return take


def wall_clock_sampler(fn: Callable[[], Any]) -> Callable[[int], list[float]]:
    """For the Triton interpreter on CPU: host wall clock. Not GPU time; reported as such."""
    def take(k: int) -> list[float]:
        out = []
        for _ in range(k):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
        return out
    return take


def log_selection(name: str, key: Any, labels: Sequence[str], sel: Selection) -> None:
    if not logger.isEnabledFor(10):
        return
    for i, label in enumerate(labels):
        t = sel.timing(i)
        dropped = f" dropped in round {sel.eliminated[i]}" if i in sel.eliminated else ""
        logger.debug("%s %s %s: %s%s%s", name, key, label, t, " <- best" if i == sel.best else "", dropped)
