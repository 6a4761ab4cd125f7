"""The search for one key: prune -> compile all -> device-limit check -> validate -> time -> a frozen result.

Nothing here keeps state between calls: ``search(space, key, ...)`` returns a ``TuneResult`` value that the
tuner installs (and agrees on across ranks). ``Space`` is what a search needs to know about a kernel, taken
once from its decorator arguments. Runs outside capture only (the tuner checks before calling).
"""
from __future__ import annotations

import math
import numbers
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import triton
from triton.runtime.jit import JITFunction

from . import capture, settings
from ._log import logger
from .configs import config_label, config_to_dict
from .descriptors import ROTATION_SHARED, copy_nbytes, footprint_nbytes, rotation_copy, tensor_of, tensors_of
from .errors import TuningError, one_line
from .keys import key_to_json
from .validate import check_outputs
from .timing import GraphReplaySampler, Selection, log_selection, plain_sampler, select, wall_clock_sampler


@dataclass(frozen=True)
class Space:
    """A kernel as the search sees it: the function, its candidates and the hooks around a launch."""

    name: str
    fn: Any
    arg_names: tuple[str, ...]
    configs: tuple[triton.Config, ...]
    default: triton.Config | None = None
    early_config_prune: Callable | None = None
    perf_model: Callable | None = None
    top_k: int | float = 1.0
    reset_to_zero: tuple[str, ...] = ()
    restore_value: tuple[str, ...] = ()
    pre_hook: Callable | None = None
    post_hook: Callable | None = None
    do_bench: Callable | None = None
    validate: bool = False
    isolate: bool = False   # first launches of unproven candidates in a worker process (isolate.py)
    # the work every launch is followed by (``autotune(followed_by=...)``): timed with each candidate
    followed_by: Callable | None = None

    @property
    def compiled(self) -> bool:
        """A plain ``@triton.jit`` or ``@gluon.jit`` kernel compiled for the GPU here (not interpreted, not wrapped
        by heuristics): its candidates can be compiled in parallel and checked against the device's limits."""
        return isinstance(self.fn, JITFunction) and capture.on_gpu()

    @property
    def isolating(self) -> bool:
        """First launches of unproven candidates go to a worker process (isolate.py)."""
        return self.isolate or settings.isolate()

    def nargs(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        return {**dict(zip(self.arg_names, args)), **kwargs}

    def call(self, config: triton.Config, args: tuple, kwargs: dict, grid) -> Any:
        """One launch of ``config`` through Triton's own launch path (config pre-hook included)."""
        if config.pre_hook is not None:
            config.pre_hook({**self.nargs(args, kwargs), **config.all_kwargs()})
        return self.fn.run(*args, grid=grid, warmup=False, **kwargs, **config.all_kwargs())

    def warm(self, config: triton.Config, args: tuple, kwargs: dict, grid) -> Any:
        """Compile (not launch) ``config`` for these arguments. The config's pre-hook runs first: it may rebuild
        arguments the compile specialises on (a tensor descriptor's block shape)."""
        if config.pre_hook is not None:
            config.pre_hook({**self.nargs(args, kwargs), **config.all_kwargs()})
        return self.fn.warmup(*args, grid=grid, **kwargs, **config.all_kwargs())


@dataclass(frozen=True)
class TuneResult:
    """What searching one key found. ``rows[i]`` describes ``candidates[i]``: ``config`` (dict), timing
    (``median_ms``, ``p20_ms``, ``p80_ms``, ``n``) when timed, ``resources`` when known, ``failure`` (reason)
    or ``eliminated_round``. ``best`` indexes ``candidates`` (-1: every candidate failed)."""

    key: tuple
    candidates: tuple[triton.Config, ...]
    rows: tuple[dict[str, Any], ...]
    alive: tuple[int, ...]
    best: int
    ranking: tuple[int, ...]          # alive candidates, fastest first
    timer: str
    compile_s: float
    timing_s: float
    total_s: float
    samples_taken: int = 0
    labels: tuple[str, ...] = field(default=())
    isolated: tuple[tuple[str, str], ...] = ()   # (isolate.config_key, "ok" or failure) learnt in a worker now

    @property
    def failures(self) -> dict[int, str]:
        return {i: r["failure"] for i, r in enumerate(self.rows) if "failure" in r}

    def all_failed_error(self, name: str) -> TuningError:
        return all_failed_error(name, self.key, self.rows)


def all_failed_error(name: str, key: tuple, rows: Sequence[dict[str, Any]]) -> TuningError:
    """The error when no candidate of kernel ``name`` could run for ``key`` (one line per candidate)."""
    lines = "".join(f"\n  {config_label(r['config'])}: {r.get('failure', 'not timed')}" for r in rows)
    return TuningError(f"graphtune: every candidate config of kernel {name!r} failed for key "
                       f"{list(key_to_json(key))}:{lines}")


def prune(space: Space, nargs: dict, kwargs: dict) -> list[triton.Config]:
    """The candidates for these arguments after the user's ``prune_configs_by`` hooks."""
    configs = list(space.configs)
    if space.early_config_prune:
        configs = list(space.early_config_prune(configs, nargs, **kwargs))
        if not configs:
            raise TuningError(f"kernel {space.name!r}: early_config_prune returned no configs")
    if space.perf_model:
        top_k = space.top_k
        if isinstance(top_k, float) and top_k <= 1.0:
            top_k = max(1, int(len(space.configs) * top_k))
        elif not isinstance(top_k, int):
            raise TypeError(f"kernel {space.name!r}: prune_configs_by top_k={top_k!r}; expected float <= 1 or int")
        if len(configs) > top_k:
            est = [space.perf_model(**nargs, **kwargs, **c.all_kwargs()) for c in configs]
            configs = [c for _, c in sorted(zip(est, configs), key=lambda t: t[0])][:top_k]
    return configs


def candidate_indices(space: Space, args: tuple, kwargs: dict) -> list[int]:
    """Indices into ``space.configs`` that pruning keeps for these arguments, so offline tuning never times a
    config that online tuning would have excluded for this shape."""
    if space.early_config_prune is None and space.perf_model is None:
        return list(range(len(space.configs)))
    kept = prune(space, space.nargs(args, kwargs), kwargs)
    return [i for i, c in enumerate(space.configs) if any(c is p for p in kept)]


def search(space: Space, key: tuple, args: tuple, kwargs: dict, grid, *, order: Sequence[int] | None = None,
           isolated: dict[str, str] | None = None) -> TuneResult:
    """Prune, compile, check, validate and time the candidates for ``key`` on these arguments. Arguments named
    in ``restore_value`` are restored and those in ``reset_to_zero`` zeroed afterwards. ``order``: candidate
    ranking of a neighbouring bucket (ties go to the better-ranked candidate there)."""
    t_start = time.perf_counter()
    nargs = space.nargs(args, kwargs)
    candidates = prune(space, nargs, kwargs)
    snapshot = {n: tensor_of(nargs[n]).clone() for n in space.restore_value}
    t_compile = time.perf_counter()
    screened, learnt = screen_first_launches(space, candidates, args, kwargs, grid, isolated)
    failures, resources = _compile_all(space, candidates, args, kwargs, grid, skip=set(screened))
    failures.update(screened)
    compile_s = time.perf_counter() - t_compile
    if space.validate:
        failures.update(_validate(space, candidates, args, kwargs, grid, nargs, skip=set(failures)))
    alive = [i for i in range(len(candidates)) if i not in failures]
    sel, timer, timing_s, samples = None, "", 0.0, 0
    if alive:
        t_time = time.perf_counter()
        pos = {c: r for r, c in enumerate(order or ())}
        local_order = sorted(range(len(alive)), key=lambda j: (pos.get(alive[j], len(pos)), j))
        sel, timer, samples = _time(space, candidates, alive, args, kwargs, grid, nargs, local_order)
        timing_s = time.perf_counter() - t_time
    for n, saved in snapshot.items():
        tensor_of(nargs[n]).copy_(saved)
    if alive:
        for n in space.reset_to_zero:
            tensor_of(nargs[n]).zero_()
    rows = _rows(candidates, alive, sel, failures, resources)
    ranking = sorted(alive, key=lambda i: rows[i].get("median_ms") or float("inf"))
    if sel is not None:
        log_selection(space.name, list(key_to_json(key)), [config_label(candidates[i]) for i in alive], sel)
    return TuneResult(key=key, candidates=tuple(candidates), rows=tuple(rows), alive=tuple(alive),
                      best=alive[sel.best] if sel is not None else -1, ranking=tuple(ranking), timer=timer,
                      compile_s=compile_s, timing_s=timing_s, total_s=time.perf_counter() - t_start,
                      samples_taken=samples, labels=tuple(config_label(c) for c in candidates),
                      isolated=tuple(learnt.items()))


def time_candidates(space: Space, args: tuple, kwargs: dict, grid, indices: Sequence[int],
                    isolated: dict[str, str] | None = None) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Compile and time ``space.configs[i]`` for each i in ``indices`` (sharded offline tuning: each rank times
    its share). Returns one row per index, as ``TuneResult.rows`` plus ``index`` (a single survivor is timed
    too), and the outcomes learnt in isolated workers (as ``TuneResult.isolated``)."""
    if capture.why_no_tuning() is not None:
        raise RuntimeError(f"time_candidates({space.name!r}) inside capture or while frozen")
    nargs = space.nargs(args, kwargs)
    candidates = [space.configs[i] for i in indices]
    snapshot = {n: tensor_of(nargs[n]).clone() for n in space.restore_value}
    screened, learnt = screen_first_launches(space, candidates, args, kwargs, grid, isolated)
    failures, resources = _compile_all(space, candidates, args, kwargs, grid, skip=set(screened))
    failures.update(screened)
    alive = [i for i in range(len(candidates)) if i not in failures]
    sel = None
    if alive:
        sel, _, _ = _time(space, candidates, alive, args, kwargs, grid, nargs, list(range(len(alive))),
                          sample_single=True)
    for n, saved in snapshot.items():
        tensor_of(nargs[n]).copy_(saved)
    rows = _rows(candidates, alive, sel, failures, resources)
    return [{"index": i, **row} for i, row in zip(indices, rows)], learnt


def _rows(candidates, alive, sel: Selection | None, failures: dict[int, str],
          resources: dict[int, dict[str, int]]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for i, c in enumerate(candidates):
        row: dict[str, Any] = {"config": config_to_dict(c)}
        j = alive.index(i) if i in alive else None
        t = sel.timing(j) if (sel is not None and j is not None) else None
        if t is not None:
            row.update(t.to_dict())
        if i in resources:
            row["resources"] = resources[i]
        if i in failures:
            row["failure"] = failures[i]
        elif sel is not None and j is not None and j in sel.eliminated:
            row["eliminated_round"] = sel.eliminated[j]
        rows.append(row)
    return rows


# ------------------------------------------------------------------------------------------ compile, check


def screen_first_launches(space: Space, candidates, args, kwargs, grid, known: dict[str, str] | None
                          ) -> tuple[dict[int, str], dict[str, str]]:
    """With isolation on (and a kernel isolation covers: ``_screenable``): first launches of unproven candidates
    in worker processes (isolate.screen). ``known``: outcomes remembered from earlier isolated launches
    (config_key -> "ok" or the failure). Returns the failures by index and the outcomes to remember."""
    if not space.isolating or not _screenable(space):
        return {}, {}
    from .isolate import screen
    return screen(space, candidates, args, kwargs, grid, known=known)


def _screenable(space: Space) -> bool:
    """Whether isolation screens this kernel here: a plain JIT kernel compiled for the GPU (a kernel wrapped by
    triton.heuristics is not covered yet: the tuner says so once, at decoration)."""
    return space.compiled


def _compile_all(space: Space, candidates, args, kwargs, grid, skip: set[int] = frozenset()
                 ) -> tuple[dict[int, str], dict[int, dict[str, int]]]:
    """Compile every candidate before timing any (in parallel where Triton allows), then load each with one
    eager launch so launch-time failures (shared memory over the limit) surface here. ``skip``: candidates
    already known to fail (never compiled or launched here)."""
    failures: dict[int, str] = {}
    resources: dict[int, dict[str, int]] = {}
    todo = [i for i in range(len(candidates)) if i not in skip]
    if space.compiled and len(todo) > 1:
        try:
            from concurrent.futures import ThreadPoolExecutor

            from triton.runtime._async_compile import AsyncCompileMode
            with ThreadPoolExecutor(max_workers=min(len(todo), os.cpu_count() or 2)) as pool:
                with AsyncCompileMode(pool, ignore_errors=True):
                    for i in todo:
                        try:
                            # the binder reads the arguments (a descriptor's block shape set by the pre-hook)
                            # here, before the compile is handed to the pool
                            space.warm(candidates[i], args, kwargs, grid)
                        except Exception:  # noqa: BLE001 - reported by the sequential pass below
                            pass
        except ImportError:
            pass
        except Exception as exc:  # noqa: BLE001
            logger.debug("graphtune: parallel compile unavailable for %s: %s", space.name, exc)
    limits = _device_limits(space)
    for i in todo:
        try:
            if limits is not None:
                why = _check_compiled(space, candidates[i], args, kwargs, grid, limits, resources, i)
                if why is not None:
                    failures[i] = why
                    continue
            space.call(candidates[i], args, kwargs, grid)
            _follow(space, {**space.nargs(args, kwargs), **candidates[i].all_kwargs()})
        except Exception as exc:  # noqa: BLE001 - every failure is recorded with its reason
            failures[i] = one_line(exc)
    return failures, resources


def _follow(space: Space, full: dict[str, Any]) -> None:
    """The work that follows every launch (``Space.followed_by``), on the launch's arguments and the candidate's
    values by name (``full``): after every launch of the search, the timed ones (so candidates are timed on what a
    server runs: a split kernel with its reduction) and its own untimed ones (the eager load, validation: state a
    launch and its follow-up keep between them, such as the MLA decode's streamed-reduction counts, stays as the
    server leaves it)."""
    if space.followed_by is not None:
        space.followed_by(full)


def _device_limits(space: Space):
    if not space.compiled:
        return None
    try:
        from .resources import device_target
        return device_target()
    except Exception as exc:  # noqa: BLE001 - without limits, launch failures still surface below
        logger.debug("graphtune: no device limits for %s: %s", space.name, exc)
        return None


def _check_compiled(space: Space, config, args, kwargs, grid, limits, resources: dict, i: int) -> str | None:
    """Exclude, with the numbers, a compiled config the present GPU cannot launch (instead of letting it fail
    at launch, or, as stock Triton does, dropping it silently), and keep its resource usage."""
    ck = space.warm(config, args, kwargs, grid)
    if hasattr(ck, "result"):
        ck = ck.result()
    from .resources import occupancy
    shared = int(getattr(ck.metadata, "shared", 0) or 0)
    # every warp the block launches with: a warp-specialised (Gluon) kernel's worker partitions are added to
    # config.num_warps (the default partition) in metadata.num_warps
    warps = int(getattr(ck.metadata, "num_warps", 0) or config.num_warps)
    res = {"shared_bytes": shared, "threads": warps * limits.warp_size}
    resources[i] = res
    # the inspector's rules, in two steps: threads and shared memory before loading (a load over the
    # shared-memory limit raises), registers once the loaded kernel reports them
    occ = occupancy(limits, 0, shared, warps)
    if not occ.fits:
        return occ.reason
    # a wgmma whose operand descriptor ptxas left unset on some path, or whose registers it gave to other values
    # while the wgmma runs (graphtune.sass), reads wrong operands or an illegal shared address (which ends the CUDA
    # context): never launched
    hazard = _wgmma_hazard(ck)
    if hazard:
        return hazard
    try:
        ck._init_handles()
        res["registers"] = int(ck.n_regs)
        res["spills"] = int(ck.n_spills)
    except Exception as exc:  # noqa: BLE001
        return one_line(exc)
    occ = occupancy(limits, res["registers"], shared, warps)
    return None if occ.fits else occ.reason


def _wgmma_hazard(ck) -> str | None:
    from .resources import wgmma_hazards
    try:
        found = wgmma_hazards(ck)
    except Exception as exc:  # noqa: BLE001 - without cuobjdump the check is skipped, not the config
        logger.debug("graphtune: SASS of %s not read: %s", getattr(ck, "name", "?"), exc)
        return None
    return f"miscompiled: {found[0]}" if found else None


def _validate(space: Space, candidates, args, kwargs, grid, nargs, skip: set[int]) -> dict[int, str]:
    """Run each candidate once from the same inputs; NaN/inf or a mismatch with the first good one fails."""
    import torch
    tensors = tensors_of(nargs)   # tensors, and the tensors under descriptors (a TMA store writes there)
    before = {n: v.clone() for n, v in tensors.items()}
    failures: dict[int, str] = {}
    reference: dict[str, Any] | None = None
    ref_label = ""
    for i, c in enumerate(candidates):
        if i in skip:
            continue
        for n, v in tensors.items():
            v.copy_(before[n])
        for n in space.reset_to_zero:
            tensor_of(nargs[n]).zero_()
        try:
            space.call(c, args, kwargs, grid)
            _follow(space, {**nargs, **c.all_kwargs()})
            if capture.on_gpu():
                torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001
            failures[i] = one_line(exc)
            continue
        outs = {n: v.clone() for n, v in tensors.items() if not torch.equal(v, before[n])}
        why = check_outputs(outs, reference, before, ref_label)
        if why is not None:
            failures[i] = why
        elif reference is None:
            reference, ref_label = outs, config_label(c)
    for n, v in tensors.items():
        v.copy_(before[n])
    return failures


# --------------------------------------------------------------------------------------------------- time


def _injected_times(space: Space, out: Any) -> list[float]:
    """What an injected ``do_bench`` returned, as times: a finite number >= 0 (ms) or a list of them, else one line
    naming it (a NaN would have ranked candidates arbitrarily and then failed the database write)."""
    values = list(out) if isinstance(out, (list, tuple)) else [out]
    if not values or any(isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v < 0
                         for v in values):
        raise ValueError(f"kernel {space.name!r}: do_bench returned {out!r}; expected a time in ms (a finite number "
                         f">= 0) or a list of them")
    return [float(v) for v in values]


def _time(space: Space, candidates, alive, args, kwargs, grid, nargs, order: list[int],
          sample_single: bool = False) -> tuple[Selection, str, int]:
    """Time the surviving candidates; the selection is over ``alive`` (indices into it)."""
    calls = [_bench_call(space, candidates[i], args, kwargs, grid, nargs) for i in alive]
    taken = [0]
    n = len(alive)
    if space.do_bench is not None:
        def sample(j: int, k: int) -> list[float]:
            taken[0] += 1
            return _injected_times(space, space.do_bench(calls[j]))
        sel = select(n, sample, sample_single=sample_single, order=order, initial=1, budget_samples=n)
        return sel, "injected do_bench", taken[0]
    if not capture.on_gpu():
        samplers = [wall_clock_sampler(c) for c in calls]

        def sample(j: int, k: int) -> list[float]:
            taken[0] += 1
            return samplers[j](k)
        sel = select(n, sample, sample_single=sample_single, order=order, initial=2, budget_samples=4 * n)
        return sel, "interpreter wall clock (not GPU time)", taken[0]
    if settings.timer() == "plain" or space.pre_hook or space.post_hook:
        samplers = [plain_sampler(c) for c in calls]

        def sample(j: int, k: int) -> list[float]:
            taken[0] += 1
            return samplers[j](k)
        sel = select(n, sample, sample_single=sample_single, order=order, initial=1, budget_samples=n)
        return sel, "plain do_bench", taken[0]
    rotating, cold = _rotating_calls(space, candidates, alive, args, kwargs, grid, nargs)
    # too few input copies to keep the L2 cold (memory allows fewer than twice the L2 of touched bytes, or one):
    # flush it between launches instead
    sampler = GraphReplaySampler(rotating, flush_l2=not cold)
    per_sample = 0.25
    budget = max(3 * n, int(settings.timer_budget_ms() / per_sample))

    def sample(j: int, k: int) -> list[float]:
        taken[0] += 1
        try:
            return sampler(j, k)
        except Exception as exc:  # noqa: BLE001 - a candidate that cannot be replayed loses, visibly
            logger.warning("graphtune: %s %s could not be timed by graph replay: %s", space.name,
                           config_label(candidates[alive[j]]), exc)
            return [float("inf")] * k
    try:
        sel = select(n, sample, sample_single=sample_single, order=order, initial=3, budget_samples=budget)
    finally:
        sampler.close()
    return sel, "graph replay", taken[0]


def _bench_call(space: Space, config, args, kwargs, grid, nargs) -> Callable[[], Any]:
    full = {**nargs, **config.all_kwargs()}

    def call():
        if space.pre_hook:
            space.pre_hook(full)
        for n in space.reset_to_zero:
            tensor_of(nargs[n]).zero_()
        space.call(config, args, kwargs, grid)
        _follow(space, full)
        if space.post_hook:
            space.post_hook(full, None)
    return call


def _rotating_calls(space: Space, candidates, alive, args, kwargs, grid, nargs) -> tuple[list[list[Callable[[], Any]]],
                                                                                        bool]:
    """Per candidate, launches over several copies of the inputs so consecutive launches in a replayed graph do
    not hit L2 (the bytes they touch together exceed twice the L2: ``rotation_copies``). Memory: at most
    GRAPHTUNE_TIMER_MEM_MB of copies, freed when tuning ends. A tensor descriptor is rebuilt over a copy of its base
    (same strides), a tensor marked ``descriptors.share_across_rotations`` is the same object in every set, and each
    candidate's pre-hook runs on each copy's arguments when its launches are captured. Also whether the copies keep
    the L2 cold (else the timer flushes it)."""
    from .timing import l2_bytes
    n_copies, cold = rotation_copies(list(args) + list(kwargs.values()), l2_bytes(), settings.timer_mem_mb() * 2**20)
    sets = [(args, kwargs, nargs)]
    for _ in range(n_copies - 1):
        a2 = tuple(rotation_copy(a) for a in args)
        k2 = {k: rotation_copy(v) for k, v in kwargs.items()}
        sets.append((a2, k2, space.nargs(a2, k2)))
    return [[_graph_call(space, candidates[i], a, k, grid, n) for (a, k, n) in sets] for i in alive], cold


def rotation_copies(values: list[Any], l2: int, mem_bytes: float) -> tuple[int, bool]:
    """How many sets of a launch's arguments ``values`` the timer rotates (the first set is the arguments
    themselves): enough that the storage one launch can touch (``footprint_nbytes``: a tensor and descriptors over it
    once) times the sets exceeds twice the L2 of ``l2`` bytes, at most 16, within ``mem_bytes`` of what the copies
    allocate (``copy_nbytes``: a descriptor's copy is a storage of its own). Sized by what they allocate instead, an
    MLA decode bucket (its cache passed as a pointer and two descriptors: three copies a set) got 2 sets at batch 8
    on an H200, about 56 MB of touched bytes cycling through 50 MB of L2: the tuner timed two configs ~2 us faster
    than the decode runs them and picked them (session 20, benchmarks/probes/pick_check.py). Also whether that many
    keep the L2 cold (False: memory allowed fewer, or one set; the timer then flushes the L2 before each launch; the
    limit of 16 sets leaves small arguments rotating, as before)."""
    alloc = sum(copy_nbytes(v) for v in values if not getattr(v, ROTATION_SHARED, False)) or 1
    touched = footprint_nbytes(values) or 1
    want = -(-2 * l2 // touched)
    cap = int(mem_bytes // alloc)
    n = int(max(1, min(want, cap, 16)))
    return n, n > 1 and (n >= want or n < cap)


def _graph_call(space: Space, config, args, kwargs, grid, nargs) -> Callable[[], Any]:
    full = {**nargs, **config.all_kwargs()}      # (for the follow-up: _follow)

    def call():
        for n in space.reset_to_zero:
            tensor_of(nargs[n]).zero_()
        space.call(config, args, kwargs, grid)
        _follow(space, full)
    return call
