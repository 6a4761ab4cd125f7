"""The autotune decorator and ``GraphtuneKernel``: run, miss -> stored result -> search or policy, install.

Data flows one way: call -> key (keys.py: buckets) -> in-memory choice -> (on a miss) stored result (store.py:
loaded export, then database; agreed across ranks, agreement.py) -> search (search.py) and agreement, or the
miss policy when tuning is not allowed (capture.py: capture, frozen) -> launch (launch.py on a tuned hit,
``JITFunction.run`` otherwise).
"""
from __future__ import annotations

import contextlib
import functools

import sys
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import triton
from torch.compiler import is_dynamo_compiling as _dynamo_compiling   # False; Dynamo folds it to True
from triton.runtime.jit import JITFunction, KernelInterface

from . import agreement, capture, settings, store
from ._log import logger
from .configs import config_label, config_to_dict, config_with, parse_force_spec
from .coverage import Coverage, KernelCoverage, MissRecord
from .errors import ConfigError, TuningError, UntunedError
from .keys import Buckets, KeyBuilder, key_to_json
from .launch import FastLaunch, Miss
from .search import Space, TuneResult, search
from .state import STATE

# ------------------------------------------------------------------------------------------------- forces

_env_get, _env_key = settings.force_probe()


def _env_forces() -> dict[str, dict[str, Any]]:
    return _parsed_forces(settings.force_spec())


_parse_cache: dict[str, dict[str, dict[str, Any]]] = {}   # spec text -> parsed (keyed by value: never stale)


def _parsed_forces(spec: str) -> dict[str, dict[str, Any]]:
    parsed = _parse_cache.get(spec)
    if parsed is None:
        parsed = parse_force_spec(spec)
        if len(_parse_cache) > 64:
            _parse_cache.clear()
        _parse_cache[spec] = parsed
    return parsed


def force(name: str, **params: Any) -> None:
    """Pin kernel ``name`` to a config (A/B runs without code edits); it never benchmarks while forced.

    Parameters not given keep the kernel's default config values. An unknown parameter is a ConfigError
    now when the kernel exists, else at its decoration or at ``check_forces()``.
    """
    _check_name(f"force({name!r})", name)
    if not params:
        raise ConfigError(f"force({name!r}): give at least one parameter, e.g. num_warps=8")
    with STATE.lock:
        for k in STATE.kernels.get(name, []):
            k._forced_from(params)  # validates
        STATE.forces[name] = dict(params)
        STATE.force_gen += 1


def _check_name(call: str, name: Any) -> None:
    """A kernel name GRAPHTUNE_FORCE can refer to: a non-empty string without ``:;,=`` (the spec's separators) or
    surrounding whitespace (the spec's parser strips it), else one line."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"{call}: a kernel name must be a non-empty string")
    if name != name.strip() or any(c in name for c in ":;,="):
        raise ValueError(f"{call}: a kernel name may not contain ':', ';', ',' or '=' nor begin or end with "
                         f"whitespace (GRAPHTUNE_FORCE=\"name:param=value;...\" could not name it)")


def unforce(name: str | None = None) -> None:
    """Remove the API force for ``name`` (or all). GRAPHTUNE_FORCE stays in effect while set."""
    with STATE.lock:
        if name is None:
            STATE.forces.clear()
        else:
            STATE.forces.pop(name, None)
        STATE.force_gen += 1


def freeze() -> None:
    """From now on no kernel tunes: misses follow the policy, as inside capture. Settings and forces are checked
    first: a bad GRAPHTUNE_* value, or a force naming no kernel, fails here rather than at the first miss."""
    settings.validate_all()
    check_forces()
    capture.freeze()


def check_forces() -> None:
    """Raise ConfigError for any forced kernel name (API or GRAPHTUNE_FORCE) that matches no kernel."""
    names = set(STATE.forces) | set(_env_forces())
    unknown = sorted(n for n in names if n not in STATE.kernels)
    if unknown:
        raise ConfigError(f"forced kernel names {unknown} match no graphtune kernel; known: {sorted(STATE.kernels)}")


def kernels() -> dict[str, list[GraphtuneKernel]]:
    return {k: list(v) for k, v in STATE.kernels.items()}


def _definition(fn: Any) -> str:
    """Where a kernel function is defined (module and qualified name): re-decorating the same function (a
    re-imported module, a kernel made in a loop) keeps its name; another function may not take it."""
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"


# -------------------------------------------------------------------------------------------------- choices


@dataclass
class Choice:
    """The config a key launches and where it came from (tuned | database | loaded | forced | single | fallback).

    ``origin`` says more where there is more to say (the rank or host a stored result came from, the bucket a
    fallback borrowed); ``result`` is the search that chose it, when this process searched."""

    config: triton.Config
    source: str
    median_ms: float | None = None
    origin: str = ""
    result: TuneResult | None = None
    hits: int = 0
    label: str = ""

    def __post_init__(self) -> None:
        self.label = config_label(self.config)


class GraphtuneKernel(KernelInterface):
    """A Triton kernel tuned per key bucket, never inside CUDA graph capture. Build with ``autotune``."""

    def __init__(self, fn, arg_names: Sequence[str], configs: Sequence[triton.Config], key: Sequence[str], *,
                 buckets: dict[str, Buckets] | None = None, default: triton.Config | None = None,
                 name: str | None = None, prune_configs_by: dict | None = None,
                 reset_to_zero: Sequence[str] | None = None, restore_value: Sequence[str] | None = None,
                 pre_hook: Callable | None = None, post_hook: Callable | None = None,
                 do_bench: Callable | None = None, validate: bool = False, policy: str | None = None,
                 isolate: bool = False, followed_by: Callable | None = None):
        self.fn = fn
        base = fn
        while not callable(getattr(base, "__code__", None)) and hasattr(base, "fn"):
            base = base.fn
        self.base_fn = base
        # the value functions of triton.heuristics wrapped under this kernel (outermost first): read outside any
        # torch.compile trace, since Dynamo cannot look inside a Triton kernel object while tracing
        chain, inner = [], fn
        while hasattr(inner, "values") and hasattr(inner, "fn"):
            chain.append(dict(inner.values))
            inner = inner.fn
        self.heuristics_values = tuple(chain)
        self.name = name or getattr(base, "__name__", "kernel")
        self.arg_names = list(arg_names)
        self.configs = list(configs) if configs else [triton.Config({}, num_warps=4, num_stages=3)]
        for c in self.configs:
            if not isinstance(c, triton.Config):
                raise TypeError(f"kernel {self.name!r}: configs must be triton.Config objects, got {c!r}")
        self.keys = list(key)
        self.key_builder = KeyBuilder(self.arg_names, self.keys, buckets, self.name)
        self.buckets = dict(buckets or {})
        if default is not None and not isinstance(default, triton.Config):
            raise TypeError(f"kernel {self.name!r}: default must be a triton.Config, got {default!r}")
        if default is not None:
            every = set.intersection(*(set(c.kwargs) for c in self.configs))
            some = set().union(*(set(c.kwargs) for c in self.configs))
            missing, extra = sorted(every - set(default.kwargs)), sorted(set(default.kwargs) - some)
            if missing or extra:
                raise ValueError(f"kernel {self.name!r}: default={default} "
                                 + (f"lacks {missing}, which every config sets" if missing else "")
                                 + ("; " if missing and extra else "")
                                 + (f"sets {extra}, which no config sets" if extra else ""))
        meta = set().union(*(set(c.kwargs) for c in self.configs))
        in_key = sorted(meta & set(self.keys))
        if in_key:
            raise ValueError(f"kernel {self.name!r}: key names {in_key}, which the configs set (a key is an "
                             f"argument of the launch)")
        self.default = default
        if policy is not None and policy not in capture.POLICIES:
            raise ValueError(f"kernel {self.name!r}: policy={policy!r}; expected one of {capture.POLICIES}")
        self.policy = policy
        for label, names in (("reset_to_zero", reset_to_zero), ("restore_value", restore_value)):
            bad = [n for n in (names or []) if n not in self.arg_names]
            if bad:
                raise ValueError(f"kernel {self.name!r}: {label} names {bad} are not parameters; "
                                 f"parameters: {self.arg_names}")
        if followed_by is not None and not callable(followed_by):
            raise TypeError(f"kernel {self.name!r}: followed_by must be callable (named_args -> None), got "
                            f"{followed_by!r}")
        prune = dict(prune_configs_by or {})
        unknown = set(prune) - {"perf_model", "top_k", "early_config_prune"}
        if unknown:
            raise ValueError(f"kernel {self.name!r}: prune_configs_by has unknown entries {sorted(unknown)}")
        for entry in ("perf_model", "early_config_prune"):
            if prune.get(entry) is not None and not callable(prune[entry]):
                raise TypeError(f"kernel {self.name!r}: prune_configs_by[{entry!r}] = {prune[entry]!r}, expected a "
                                f"callable")
        top_k = prune.get("top_k", 1.0)
        if isinstance(top_k, bool) or not (isinstance(top_k, int) and top_k >= 1
                                           or isinstance(top_k, float) and 0 < top_k <= 1):
            raise ValueError(f"kernel {self.name!r}: prune_configs_by['top_k'] = {top_k!r}, expected an int >= 1 "
                             f"(that many configs) or a float in (0, 1] (that fraction)")
        self.space = Space(name=self.name, fn=fn, arg_names=tuple(self.arg_names), configs=tuple(self.configs),
                           default=default, early_config_prune=prune.get("early_config_prune"),
                           perf_model=prune.get("perf_model"), top_k=prune.get("top_k", 1.0),
                           reset_to_zero=tuple(reset_to_zero or ()), restore_value=tuple(restore_value or ()),
                           pre_hook=pre_hook, post_hook=post_hook, do_bench=do_bench, validate=bool(validate),
                           isolate=bool(isolate), followed_by=followed_by)
        self.meta_names = sorted({k for c in self.configs + ([default] if default else []) for k in c.kwargs})
        self._lock = threading.Lock()            # guards this kernel's results below; never held while tuning
        self._pending: dict[tuple, threading.Event] = {}   # keys being resolved by some thread right now
        self._cache: dict[tuple, Choice] = {}
        self._stored: dict[tuple, store.Stored] | None = None   # json key -> stored choice, read on the first miss
        self._misses: dict[tuple, MissRecord] = {}
        self._failures: dict[tuple, list[dict[str, Any]]] = {}
        self._ranking: dict[tuple, list[int]] = {}       # key -> candidate indices, best first
        self._force_gen_seen = -1          # STATE.force_gen and GRAPHTUNE_FORCE when the force was last resolved
        self._force_env_seen: Any = None
        self._forced: Choice | None = None
        self._identity = None
        # isolate.config_key -> "ok" or the failure, of this kernel's configs launched first in an isolated worker:
        # the database's (read on first need) and those learnt in this process (kept without a writable database)
        self._isolated: dict[str, str] | None = None
        self.best_config: triton.Config | None = None   # the config of the last launch through run's slow path,
        # as triton.autotune's attribute of that name
        self.tune_count = 0          # how many keys this process tuned (searched)
        self.bench_calls = 0         # timer invocations, for tests and reports
        # the fast path only when every key argument is positional
        jit = fn if isinstance(fn, JITFunction) else None
        self._fast = FastLaunch(jit, self.arg_names, self.key_builder.positions) \
            if (jit is not None and not settings.interpret() and settings.fast_launch()) else None
        with STATE.lock:
            same_name = STATE.kernels.setdefault(self.name, [])
            other = next((k for k in same_name if _definition(k.base_fn) != _definition(self.base_fn)), None)
            if other is not None:
                raise ValueError(f"two graphtune kernels are named {self.name!r}: {_definition(other.base_fn)} and "
                                 f"{_definition(self.base_fn)}; their database entries and forces would collide. "
                                 f"Give one of them another name= ")
            same_name.append(self)
            pending = STATE.forces.get(self.name) or _env_forces().get(self.name)
        if pending:
            self._forced_from(pending)  # fail at decoration for unknown parameter names
        if self.space.isolating and self.heuristics_values:
            warnings.warn(f"graphtune: kernel {self.name!r} is wrapped by triton.heuristics, which isolation does not "
                          f"cover yet: its candidates' first launches run in this process", RuntimeWarning,
                          stacklevel=3)

    # -------------------------------------------------------------------------------------- hot path

    def __getitem__(self, grid):
        # ``kernel[grid](*args)`` as Triton's, but a C-level partial rather than a lambda: one Python frame
        # fewer on every launch
        return functools.partial(self.run, grid=grid)

    def run(self, *args, grid, warmup: bool = False, **kwargs):
        if _dynamo_compiling():  # torch.compile traces this launch: one graphtune::launch op, tuned at run time
            from .compiled import traced_launch
            return traced_launch(self, args, kwargs, grid, warmup)
        if warmup:
            return self.warmup(*args, grid=grid, **kwargs)
        if self._force_gen_seen != STATE.force_gen or self._force_env_seen != _env_get(_env_key):
            self._resolve_force()
        fast = self._fast
        fast_key = None
        if fast is not None and not kwargs:
            # Hot path: one signature pass over the arguments plus the raw key values, one dict lookup,
            # and a direct launch of the cached CompiledKernel (launch.py).
            got = fast.hit(args, grid)
            if got is not None:
                if type(got) is not Miss:
                    return got
                fast_key = got.key
        choice = self._forced
        if choice is None:
            key = self.key_builder(args, kwargs)
            choice = self._cache.get(key)
            if choice is None:
                choice = self._miss(key, args, kwargs, grid)
        choice.hits += 1
        config = choice.config
        self.best_config = config
        if config.pre_hook is not None:
            config.pre_hook({**dict(zip(self.arg_names, args)), **kwargs, **config.all_kwargs()})
        ret = self.fn.run(*args, grid=grid, warmup=False, **kwargs, **config.all_kwargs())
        if fast_key is not None and choice.source != "fallback" and config.pre_hook is None and ret is not None:
            tail = fast.tail(config.kwargs, len(args), config.all_kwargs())
            if tail is not None:
                fast.remember(fast_key, choice, ret, tail)
        return ret

    # ---------------------------------------------------------------------------------------- forces

    def _resolve_force(self) -> None:
        params = STATE.forces.get(self.name) or _env_forces().get(self.name)
        forced = None if params is None else self._forced_from(params)
        why = self._isolation_failure(forced) if forced is not None else None
        if why is not None:
            # never launched here, as isolation promises; raised on every launch until the force changes
            raise ConfigError(f"force for kernel {self.name!r}: {config_label(forced)} failed its isolated first "
                              f"launch on this GPU and software stack ({why}); not launched. Force another config, "
                              f"or forget the record with `graphtune db prune --kernel {self.name}`")
        self._force_gen_seen, self._force_env_seen = STATE.force_gen, _env_get(_env_key)
        if self._fast is not None:
            self._fast.cache.clear()
        self._forced = None if forced is None else Choice(forced, "forced")

    def _forced_from(self, params: dict[str, Any]) -> triton.Config:
        base = self.default or self.configs[0]
        return config_with(base, params, allowed_meta=self.meta_names, examples=self.configs,
                           where=f"force for kernel {self.name!r}")

    # ---------------------------------------------------------------------------------------- misses

    def _miss(self, key: tuple, args: tuple, kwargs: dict, grid) -> Choice:
        """Resolve a key this kernel has no choice for. One thread resolves a key at a time (others wait for it);
        no lock is held while searching or agreeing across ranks."""
        while True:
            with self._lock:
                choice = self._cache.get(key)
                if choice is not None:
                    return choice
                event = self._pending.get(key)
                if event is None:
                    self._pending[key] = threading.Event()
                    break
            event.wait()
        try:
            choice = self._resolve(key, args, kwargs, grid)
            if choice.source != "fallback":   # a fallback is not a result: a later call outside capture tunes
                with self._lock:
                    self._cache[key] = choice
            return choice
        finally:
            with self._lock:
                self._pending.pop(key).set()

    def _resolve(self, key: tuple, args: tuple, kwargs: dict, grid) -> Choice:
        if len(self.configs) == 1:
            self._screen_single(args, kwargs, grid)
            return Choice(self.configs[0], "single")
        choice = self._agreed_stored(key, self._from_store(key))
        if choice is not None:
            return choice
        where = capture.why_no_tuning()
        if where is not None:
            return self._policy_miss(key, args, kwargs, where)
        return self._tune(key, args, kwargs, grid)

    def _policy_miss(self, key: tuple, args: tuple, kwargs: dict, where: str) -> Choice:
        policy = capture.resolve_policy(self.policy)
        with self._lock:
            tuned = [(k, ch.config) for k, ch in self._cache.items()]
            rec = self._misses.get(key)
        if policy == "raise":
            self._count_miss(key, rec, where, "raise", None, "")
            raise capture.untuned_error(self.name, key, tuple(self.keys), self.key_builder.raw_values(args, kwargs),
                                        where, [k for k, _ in tuned])
        config, origin = capture.fallback_config(key, tuned, self.key_builder.distance, self.default, self.configs,
                                                 safe=lambda c: self._isolation_failure(c) is None)
        place = "inside CUDA graph capture" if where == "capture" else "while frozen"
        if config is None:
            self._count_miss(key, rec, where, "raise", None, "")
            raise UntunedError(f"graphtune: kernel {self.name!r} has no tuned config for key "
                               f"{list(key_to_json(key))} {place}, and every config that could fall back failed its "
                               f"isolated first launch ({config_label(self.configs[0])}: "
                               f"{self._isolation_failure(self.configs[0])}): none is launched")
        self._count_miss(key, rec, where, "fallback", config_label(config), origin)
        if rec is None:
            warnings.warn(
                f"graphtune: kernel {self.name!r} has no tuned config for key {list(key_to_json(key))} {place}; "
                f"launching the fallback {config_label(config)} ({origin}). Warm this size up before capture "
                f"to tune it.", RuntimeWarning, stacklevel=6)
        return Choice(config, "fallback", origin=origin)

    def _count_miss(self, key: tuple, rec: MissRecord | None, where: str, policy: str, label: str | None,
                    origin: str) -> None:
        """Record a policy miss of ``key``: a new record the first time (``rec`` None), else one more count."""
        with self._lock:
            if rec is None:
                self._misses[key] = MissRecord(key, where, policy, label, origin)
            else:
                rec.count += 1

    # ----------------------------------------------------------------------------------- stored results

    def identity(self):
        if self._identity is None:
            from .identity import kernel_identity
            self._identity = kernel_identity(self.name, self.fn, self.configs)
        return self._identity

    def _from_store(self, key: tuple) -> Choice | None:
        """This rank's own stored choice for ``key`` (loaded export, then database), before any agreement."""
        if self._stored is None:
            self._stored = store.load_for(self.identity(), self.name)
        found = self._stored.get(key_to_json(key))
        if found is None:
            return None
        # map back onto this kernel's own Config object (keeps pre_hooks etc.)
        config = next((c for c in self.configs if config_to_dict(c) == found.chosen), None)
        if config is None:
            from .configs import config_from_dict
            config = config_from_dict(found.chosen)
        return Choice(config, found.source, median_ms=found.median_ms, origin=found.host)

    def _agreed_stored(self, key: tuple, stored: Choice | None) -> Choice | None:
        """With a process group, every rank uses a stored result only if every rank has one (else all tune)."""
        if not agreement.collective_now():
            return stored
        dicts = [config_to_dict(c) for c in self.configs]
        mine = config_to_dict(stored.config) if stored is not None else None
        index = dicts.index(mine) if mine in dicts else -1
        picked = agreement.agree_stored(self.name, key_to_json(key), dicts, index,
                                        stored.median_ms if stored is not None else None,
                                        source=self.identity().source_hash)
        if picked is None:
            return None
        idx, rank = picked
        assert stored is not None   # every rank holds an entry when one is picked
        if idx == index:
            return stored
        return Choice(self.configs[idx], stored.source, origin=f"rank {rank}")

    # ------------------------------------------------------------------------------------------ tuning

    def _tune(self, key: tuple, args: tuple, kwargs: dict, grid) -> Choice:
        known = self.isolation_outcomes() if self.space.isolating else None
        try:
            result = search(self.space, key, args, kwargs, grid, order=self._neighbour_ranking(key), isolated=known)
        except Exception:
            self._agree_on_nothing(key, args, kwargs)
            raise
        self.bench_calls += result.samples_taken
        self.remember_isolated(dict(result.isolated))
        dicts = [r["config"] for r in result.rows]
        medians = [r.get("median_ms") for r in result.rows]
        # every rank enters the agreement, also one where nothing ran (its peers then raise too, instead of
        # waiting for it until the timeout)
        best = agreement.agree(self.name, key_to_json(key), dicts, result.alive, medians, result.best,
                               source=self.identity().source_hash)
        if not result.alive:
            raise result.all_failed_error(self.name)
        failures = result.failures
        with self._lock:
            self._ranking[key] = list(result.ranking)
            if failures:
                self._failures[key] = [{"config": result.labels[i], "reason": r} for i, r in sorted(failures.items())]
        for i, r in sorted(failures.items()):
            logger.info("graphtune: %s %s excluded %s: %s", self.name, list(key_to_json(key)), result.labels[i], r)
        self.tune_count += 1
        chosen = result.candidates[best]
        logger.info("graphtune: tuned %s for %s in %.3f s (compile %.3f s, timing %.3f s, %s): %s", self.name,
                    list(key_to_json(key)), result.total_s, result.compile_s, result.timing_s, result.timer,
                    result.labels[best])
        stored = store.record(self.identity(), self.name, key, chosen, result.rows, agreement.current_rank())
        if stored is not None and self._stored is not None:
            self._stored[key_to_json(key)] = stored
        if self.default is not None and capture.cuda_available():
            # the declared default is what a capture-time miss may launch: compile and load it now, outside
            # capture (module loading during capture is reported to fail on some drivers)
            self.preload_fallbacks(args, kwargs, grid)
        return Choice(chosen, "tuned", median_ms=result.rows[best].get("median_ms"), result=result)

    def _agree_on_nothing(self, key: tuple, args: tuple, kwargs: dict) -> None:
        """The search raised here (a hook, the timer, memory): enter the key's agreement all the same with no
        candidate alive, so that every peer raises a TuningError naming this rank now, instead of pairing its
        next collective with this rank's (every later agreement of the group out of step) or waiting for it until
        the timeout. Its own error is the one this rank raises (the caller re-raises it)."""
        if agreement.active_group(sharding=False) is None:
            return
        from .search import prune
        try:
            # the list search agrees on: prune()'s, in its order (a perf_model sorts it)
            candidates = prune(self.space, self.space.nargs(args, kwargs), kwargs)
        except Exception:       # (pruning itself raised: the full list, which the peers' digest may not match)
            candidates = self.configs
        dicts = [config_to_dict(c) for c in candidates]
        with contextlib.suppress(Exception):    # this rank's TuningError / DistributedError: its own error wins
            agreement.agree(self.name, key_to_json(key), dicts, [], [None] * len(dicts), -1,
                            source=self.identity().source_hash)

    # ------------------------------------------------------------------------------------------ isolation

    def isolation_outcomes(self) -> dict[str, str]:
        """This kernel's configs launched first in an isolated worker on this GPU and software stack
        (isolate.config_key -> "ok" or the failure): the database's, read once (inside capture too: a read is
        host work), and those learnt in this process."""
        outcomes = self._isolated
        if outcomes is None:     # (a local: a reset() on another thread may set the attribute back to None)
            outcomes = self._isolated = dict(store.isolated_outcomes(self.identity()))
        return outcomes

    def remember_isolated(self, outcomes: dict[str, str]) -> None:
        """Keep outcomes learnt in isolated workers, in this process (so a later key starts no worker for them,
        even without a writable database) and in the database."""
        if outcomes:
            self.isolation_outcomes().update(outcomes)
            store.record_isolated(self.identity(), outcomes)

    def _isolation_failure(self, config: triton.Config) -> str | None:
        """Why ``config`` must not be launched here: its isolated first launch failed (None: it did not, it never
        ran in a worker, or isolation is off)."""
        if not self.space.isolating:
            return None
        from .isolate import config_key
        why = self.isolation_outcomes().get(config_key(config))
        return None if why in (None, "ok") else why

    def _screen_single(self, args: tuple, kwargs: dict, grid) -> None:
        """With isolation on, a kernel's only config is screened too (once, outside capture) before its first
        launch here; a TuningError names it when its isolated launch failed (now or in an earlier process)."""
        if not self.space.isolating:
            return
        config = self.configs[0]
        why = self._isolation_failure(config)
        if why is None and capture.why_no_tuning() is None:
            from .search import screen_first_launches
            failures, learnt = screen_first_launches(self.space, [config], args, kwargs, grid,
                                                     self.isolation_outcomes())
            self.remember_isolated(learnt)
            why = failures.get(0)
        if why is not None:
            raise TuningError(f"graphtune: kernel {self.name!r}: its only config {config_label(config)} failed its "
                              f"isolated first launch: {why}")

    def _neighbour_ranking(self, key: tuple) -> list[int]:
        """The candidate ranking of the nearest tuned bucket (ties in timing go to its better-ranked config)."""
        best, best_d = [], None
        with self._lock:
            rankings = list(self._ranking.items())
        for k, ranking in rankings:
            d = self.key_builder.distance(key, k)
            if d is not None and (best_d is None or d < best_d):
                best, best_d = ranking, d
        return list(best)

    def _neighbour_order(self, key: tuple, alive: list[int]) -> list[int]:
        """Positions in ``alive`` ordered by the neighbouring bucket's ranking."""
        pos = {c: r for r, c in enumerate(self._neighbour_ranking(key))}
        return sorted(range(len(alive)), key=lambda j: (pos.get(alive[j], len(pos)), j))

    # ------------------------------------------------------------------------- offline / sharded tuning

    def key_of(self, args: tuple, kwargs: dict | None = None) -> tuple:
        """The tuning key (bucketed) these arguments map to."""
        return self.key_builder(tuple(args), dict(kwargs or {}))

    def chosen(self, args: tuple, kwargs: dict | None = None) -> triton.Config | None:
        """The config a launch with these arguments would run now with nothing to resolve first: the forced one, else
        this process's choice for their key; None where that launch would first resolve a miss (read the store, tune
        or fall back). A launch that must set something up for its config before it runs asks it (a plan's rows
        filled for that config's grid decide how the Hopper MLA split kernel waits for the kernel ahead)."""
        if self._force_gen_seen != STATE.force_gen or self._force_env_seen != _env_get(_env_key):
            self._resolve_force()
        if self._forced is not None:
            return self._forced.config
        choice = self._cache.get(self.key_of(args, kwargs))
        return None if choice is None else choice.config

    def install(self, key: tuple, config: triton.Config, results: list[dict[str, Any]] | None = None,
                source: str = "tuned", record: bool = True) -> None:
        """Make ``config`` the choice for ``key`` (e.g. after sharded tuning) and, by default, record it."""
        with self._lock:
            self._cache[key] = Choice(config, source)
            if self._fast is not None:
                self._fast.cache.clear()
        if record:
            stored = store.record(self.identity(), self.name, key, config, list(results or []),
                                  agreement.current_rank())
            if stored is not None and self._stored is not None:
                self._stored[key_to_json(key)] = stored

    # ------------------------------------------------------------------------------------ public bits

    def warmup(self, *args, grid=None, **kwargs):
        """Compile (not launch) every config for these arguments, as ``triton.autotune``'s ``warmup`` does.
        (``graphtune.warmup(fn, sizes, make_args)`` is the process-level function that tunes every size.)"""
        return [self.space.warm(c, args, kwargs, grid)
                for c in self.configs + ([self.default] if self.default is not None else [])]

    def preload_fallbacks(self, args: tuple, kwargs: dict, grid) -> None:
        """Compile and load the declared default, which a capture-time miss may launch, so no module is loaded
        inside capture (the tuned configs were loaded when they were timed)."""
        if not isinstance(self.fn, JITFunction) or settings.interpret() or self.default is None:
            return
        try:
            ks = self.space.warm(self.default, args, kwargs, grid)
            for k in (ks if isinstance(ks, list) else [ks]):
                if hasattr(k, "_init_handles"):
                    k._init_handles()
        except Exception as exc:  # noqa: BLE001
            logger.debug("graphtune: could not preload %s for %s: %s", config_label(self.default), self.name, exc)

    def coverage(self) -> KernelCoverage:
        kc = KernelCoverage(self.name)
        if self._forced is not None:
            kc.forced = self._forced.label
        with self._lock:
            for key, ch in self._cache.items():
                kc.tuned[key] = {"config": ch.label, "source": ch.source, "hits": ch.hits}
                if ch.result is not None:
                    # the search that chose it (this process's): each candidate's timing, fastest first, so a
                    # reader sees by how much the pick won and what the racing eliminated early
                    r = ch.result
                    kc.tuned[key]["timings"] = [
                        {"config": r.labels[i], "median_ms": r.rows[i].get("median_ms"), "n": r.rows[i].get("n"),
                         **({"eliminated_round": r.rows[i]["eliminated_round"]}
                            if "eliminated_round" in r.rows[i] else {})}
                        for i in r.ranking]
            kc.misses = dict(self._misses)
            kc.excluded = {key: list(rows) for key, rows in self._failures.items()}
        return kc

    def reset(self) -> None:
        """Forget in-memory results and records (the database is untouched)."""
        with self._lock:
            self._cache.clear()
            if self._fast is not None:
                self._fast.cache.clear()
            self._stored = None
            self._isolated = None
            self._misses.clear()
            self._failures.clear()
            self._ranking.clear()
            self._force_gen_seen, self._force_env_seen = -1, None
            self.tune_count = 0
            self.bench_calls = 0

    def __repr__(self) -> str:
        return f"<graphtune kernel {self.name!r}: {len(self.configs)} configs, key={self.keys}>"


def autotune(configs: Sequence[triton.Config], key: Sequence[str], *, buckets: dict[str, Buckets] | None = None,
             default: triton.Config | None = None, name: str | None = None, prune_configs_by: dict | None = None,
             reset_to_zero: Sequence[str] | None = None, restore_value: Sequence[str] | None = None,
             pre_hook: Callable | None = None, post_hook: Callable | None = None, do_bench: Callable | None = None,
             validate: bool = False, policy: str | None = None, isolate: bool = False,
             followed_by: Callable | None = None) -> Callable[[Any], GraphtuneKernel]:
    """Capture-safe drop-in for ``triton.autotune``.

    Tunes on the first call of each key bucket outside CUDA graph capture; inside capture (or after
    ``freeze()``) it never benchmarks, synchronises or allocates: a miss launches a fallback or raises
    ``UntunedError`` per ``policy``. ``buckets={"B": Buckets.explicit([1, 2, 4, 8, ...])}`` maps a key
    argument to the server's captured sizes. ``do_bench(fn) -> ms`` replaces the timer. ``validate=True``
    checks every candidate's outputs (no NaN/inf, agreement with the first good one) before timing it;
    ``isolate=True`` (or GRAPHTUNE_ISOLATE=1) launches candidates that never ran on this device and software
    stack first in a worker process, so one that faults never runs in this one (isolate.py).
    ``followed_by(named_args)``: the work that follows every launch of this kernel in the server (a split-K or
    split-KV kernel's reduction), with the launch's arguments and the candidate's values by name; it runs after
    each timed launch, inside the timed graph, so a candidate that leaves it more work (more partials from more
    programs) pays for it in the comparison. It must be capture-safe, as the kernel's launch is. The tuned kernel
    itself never calls it: the caller launches that work as before.

    ``@gluon.jit`` kernels are tuned the same way. A config's ``pre_hook`` (``triton.Config(...,
    pre_hook=fn)``, Triton's convention: ``fn(named_args)`` with the launch's arguments and the config's
    values by name) runs before every compile and launch of that config while searching and before every
    launch with the chosen config, inside CUDA graph capture too; it is where tensor descriptors whose block
    shape depends on the config are rebuilt (set ``desc.block_shape`` and, for Gluon, ``desc.layout``).
    It must therefore be capture-safe: host work only, no device allocation, no synchronisation, no
    copies. The descriptors are shared by every candidate: when configs disagree on a tile, every config
    needs the hook. A kernel whose chosen config has a pre-hook launches through ``JITFunction.run`` (no
    direct launch: launch.py).
    """
    if isinstance(key, str):
        raise TypeError(f"autotune(key={key!r}): key must be a list of parameter names, not a string")
    if not isinstance(key, Sequence) or not all(isinstance(k, str) for k in key):
        raise TypeError(f"autotune(key={key!r}): key must be a list of parameter names")
    if len(set(key)) != len(key):
        raise ValueError(f"autotune(key={list(key)}): a parameter named twice")
    for label, value in (("buckets", buckets), ("prune_configs_by", prune_configs_by)):
        if value is not None and not isinstance(value, dict):
            raise TypeError(f"autotune({label}={value!r}): expected a dict"
                            + (" such as {'B': Buckets.explicit(CAPTURE_SIZES)}" if label == "buckets" else ""))
    for label, value in (("reset_to_zero", reset_to_zero), ("restore_value", restore_value)):
        if value is not None and (isinstance(value, str) or not isinstance(value, Sequence)):
            raise TypeError(f"autotune({label}={value!r}): expected a list of parameter names")
    for label, value in (("pre_hook", pre_hook), ("post_hook", post_hook), ("do_bench", do_bench)):
        if value is not None and not callable(value):
            raise TypeError(f"autotune({label}={value!r}): expected a callable")
    for label, value in (("validate", validate), ("isolate", isolate)):
        if not isinstance(value, bool):
            raise TypeError(f"autotune({label}={value!r}): expected True or False")
    if isinstance(configs, triton.Config) or not isinstance(configs, Sequence) or isinstance(configs, str):
        raise TypeError(f"autotune(configs={configs!r}): configs must be a list of triton.Config")
    if not configs:
        raise ValueError("autotune(configs=[]): give at least one triton.Config")
    bad = [c for c in configs if not isinstance(c, triton.Config)]
    if bad:
        raise TypeError(f"autotune(configs=...): {bad[0]!r} is not a triton.Config")
    if name is not None:
        _check_name(f"autotune(name={name!r})", name)
    settings.validate_all()

    def decorator(fn) -> GraphtuneKernel:
        arg_names = getattr(fn, "arg_names", None)
        if arg_names is None:
            raise TypeError(f"graphtune.autotune must wrap a @triton.jit or @gluon.jit function (or "
                            f"triton.heuristics of one), got {fn!r}")
        return GraphtuneKernel(fn, arg_names, configs, key, buckets=buckets, default=default, name=name,
                               prune_configs_by=prune_configs_by, reset_to_zero=reset_to_zero,
                               restore_value=restore_value, pre_hook=pre_hook, post_hook=post_hook,
                               do_bench=do_bench, validate=validate, policy=policy, isolate=isolate,
                               followed_by=followed_by)
    return decorator


# ------------------------------------------------------------------------------------------- process API


def warmup(fn: Callable[..., Any], sizes: Sequence[int], make_args: Callable[[int], Sequence[Any]]) -> None:
    """Call ``fn(*make_args(size))`` for every size outside capture, so every bucket is tuned before capture,
    then compile and load the configs a capture-time miss could fall back to."""
    if capture.is_capturing():
        raise RuntimeError("graphtune.warmup() was called inside CUDA graph capture; call it before capturing")
    if not callable(fn):
        raise TypeError(f"graphtune.warmup(fn={fn!r}): fn must be callable (the server's step)")
    if not callable(make_args):
        raise TypeError(f"graphtune.warmup(make_args={make_args!r}): make_args must be callable: size -> args")
    if sizes is None or isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence):
        raise TypeError(f"graphtune.warmup(sizes={sizes!r}): sizes must be a list of batch sizes")
    sizes = list(sizes)
    if not sizes:
        raise ValueError("graphtune.warmup(sizes=[]): give the batch sizes the server captures")
    bad = [s for s in sizes if isinstance(s, bool) or not isinstance(s, int) or s < 1]
    if bad:
        raise ValueError(f"graphtune.warmup(sizes={sizes!r}): {bad[0]!r} is not a batch size >= 1")
    settings.validate_all()
    check_forces()
    show = settings.progress()
    if show is None:
        show = _isatty()
    if show:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
        with Progress(TextColumn("graphtune warm-up"), BarColumn(), TextColumn("{task.completed}/{task.total} sizes"),
                      TextColumn("size {task.fields[size]}"), TimeElapsedColumn(), transient=True) as bar:
            task = bar.add_task("warmup", total=len(sizes), size="")
            for size in sizes:
                bar.update(task, size=size)
                fn(*_warmup_args(make_args, size))
                bar.advance(task)
    else:
        for size in sizes:
            fn(*_warmup_args(make_args, size))
    if capture.on_gpu():
        import torch
        torch.cuda.synchronize()


def _warmup_args(make_args: Callable[[int], Sequence[Any]], size: int) -> Sequence[Any]:
    """``make_args(size)``, which must be the step's positional arguments (a tuple or list), else one line."""
    args = make_args(size)
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"graphtune.warmup: make_args({size}) returned {type(args).__name__} {args!r:.80}; expected "
                        f"the step's positional arguments as a tuple or list")
    return args


def coverage(names: Sequence[str] | None = None) -> Coverage:
    """Per kernel: tuned keys with their configs and hits, misses (where, which fallback), exclusions."""
    _check_names("coverage", names)
    out: dict[str, KernelCoverage] = {}
    for name, ks in sorted(kernels().items()):
        if names is not None and name not in names:
            continue
        merged = KernelCoverage(name)
        for k in ks:
            c = k.coverage()
            merged.tuned.update(c.tuned)
            merged.misses.update(c.misses)
            merged.excluded.update(c.excluded)
            merged.forced = merged.forced or c.forced
        out[name] = merged
    return Coverage(out)


def _check_names(call: str, names: Any) -> None:
    """``names`` of :func:`coverage` / :func:`assert_covered`: None or a list of known kernel names, else one line."""
    if names is None:
        return
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise TypeError(f"{call}(names={names!r}): expected a list of kernel names (or None: every kernel)")
    unknown = [n for n in names if n not in STATE.kernels]
    if unknown:
        raise ValueError(f"{call}(names={list(names)}): unknown kernels {unknown}; known: {sorted(STATE.kernels)}")


def assert_covered(names: Sequence[str] | None = None) -> None:
    """Raise UntunedError if any (selected) kernel recorded a miss."""
    _check_names("assert_covered", names)
    cov = coverage(names)
    misses = cov.misses
    if misses:
        lines = "; ".join(f"{n} key {list(key_to_json(m.key))} ({m.where}, {m.action} x{m.count})" for n, m in misses)
        raise UntunedError(f"graphtune: {len(misses)} untuned key(s) were hit: {lines}. Warm these sizes up "
                           f"before capture.")


def _isatty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
