"""The autotune decorator and the dispatch hot path.

Data flows one way: call -> key (buckets) -> in-memory choice -> (on a miss) stored result (loaded export,
then database) -> tune, or the miss policy when tuning is not allowed (capture, frozen) -> launch.

A tuned hit costs a key build, one dict lookup and, for plain ``@triton.jit`` kernels, a launch of the
cached ``CompiledKernel`` without going through ``JITFunction.run`` (whose argument binding is most of a
launch's host cost). The compiled kernel is cached per *specialisation signature* (dtype and 16-byte
alignment of each tensor, divisibility / unit value / width of each int, value of each constexpr), which is
at least as fine as what Triton specialises on, so a cached kernel is only reused where Triton would reuse it.
"""
from __future__ import annotations

import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import triton
from triton.runtime.jit import JITFunction, KernelInterface

from . import capture, settings
from ._log import logger
from .configs import config_label, config_to_dict, config_with, parse_force_spec
from .errors import ConfigError, TuningError
from .keys import Buckets, KeyBuilder, key_to_json
from .timing import GraphReplaySampler, Selection, log_selection, select, wall_clock_sampler

# ------------------------------------------------------------------------------------------ registry/force

_REGISTRY: dict[str, list["GraphtuneKernel"]] = {}
_FORCES: dict[str, dict[str, Any]] = {}
# Bumped by force()/unforce(); kernels compare it on each call (one global read) and re-resolve when it moved.
_FORCE_GEN = [0]
_env_force_cache: tuple[str, dict[str, dict[str, Any]]] = ("", {})
_lock = threading.RLock()


def _env_forces() -> dict[str, dict[str, Any]]:
    global _env_force_cache
    spec = settings.force_spec()
    if spec != _env_force_cache[0]:
        _env_force_cache = (spec, parse_force_spec(spec))
    return _env_force_cache[1]


def force(name: str, **params: Any) -> None:
    """Pin kernel ``name`` to a config (A/B runs without code edits); it never benchmarks while forced.

    Parameters not given keep the kernel's default config values. An unknown parameter is a ConfigError
    now when the kernel exists, else at its decoration or at ``check_forces()``.
    """
    if not params:
        raise ConfigError(f"force({name!r}): give at least one parameter, e.g. num_warps=8")
    with _lock:
        for k in _REGISTRY.get(name, []):
            k._forced_from(params)  # validates
        _FORCES[name] = dict(params)
        _FORCE_GEN[0] += 1


def unforce(name: str | None = None) -> None:
    """Remove the API force for ``name`` (or all). GRAPHTUNE_FORCE stays in effect while set."""
    with _lock:
        if name is None:
            _FORCES.clear()
        else:
            _FORCES.pop(name, None)
        _FORCE_GEN[0] += 1


def refresh_settings() -> None:
    """Re-read GRAPHTUNE_FORCE (kernels re-resolve their force on the next call)."""
    _FORCE_GEN[0] += 1


def check_forces() -> None:
    """Raise ConfigError for any forced kernel name (API or GRAPHTUNE_FORCE) that matches no kernel."""
    names = set(_FORCES) | set(_env_forces())
    unknown = sorted(n for n in names if n not in _REGISTRY)
    if unknown:
        raise ConfigError(f"forced kernel names {unknown} match no graphtune kernel; known: {sorted(_REGISTRY)}")


def kernels() -> dict[str, list["GraphtuneKernel"]]:
    return {k: list(v) for k, v in _REGISTRY.items()}


# -------------------------------------------------------------------------------------------- choices


@dataclass
class Choice:
    """The config a key launches, where it came from, and its launch caches."""

    config: triton.Config
    source: str                      # tuned | database | loaded | forced | single | fallback
    hits: int = 0
    timings: dict[str, Any] = field(default_factory=dict)
    label: str = ""

    def __post_init__(self) -> None:
        self.label = config_label(self.config)


_INT32_LO, _INT32_HI = -(2 ** 31), 2 ** 31

from triton import knobs as _knobs  # noqa: E402
from torch.compiler import is_dynamo_compiling as _dynamo_compiling  # noqa: E402  (False; Dynamo folds it to True)


def _get_device() -> int:
    global _get_device
    from triton.runtime.driver import driver
    _get_device = driver.active.get_current_device   # resolved once: the lazy driver proxy costs per access
    return _get_device()


def _get_stream(device: int):
    global _get_stream
    from triton.runtime.driver import driver
    _get_stream = driver.active.get_current_stream
    return _get_stream(device)


class GraphtuneKernel(KernelInterface):
    """A Triton kernel tuned per key bucket, never inside CUDA graph capture. Build with ``autotune``."""

    def __init__(self, fn, arg_names: Sequence[str], configs: Sequence[triton.Config], key: Sequence[str], *,
                 buckets: dict[str, Buckets] | None = None, default: triton.Config | None = None,
                 name: str | None = None, prune_configs_by: dict | None = None,
                 reset_to_zero: Sequence[str] | None = None, restore_value: Sequence[str] | None = None,
                 pre_hook: Callable | None = None, post_hook: Callable | None = None,
                 do_bench: Callable | None = None, validate: bool = False, policy: str | None = None):
        self.fn = fn
        base = fn
        while not callable(getattr(base, "__code__", None)) and hasattr(base, "fn"):
            base = base.fn
        self.base_fn = base
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
        self.default = default
        if policy is not None and policy not in capture.POLICIES:
            raise ValueError(f"kernel {self.name!r}: policy={policy!r}; expected one of {capture.POLICIES}")
        self.policy = policy
        for label, names in (("reset_to_zero", reset_to_zero), ("restore_value", restore_value)):
            bad = [n for n in (names or []) if n not in self.arg_names]
            if bad:
                raise ValueError(f"kernel {self.name!r}: {label} names {bad} are not parameters; "
                                 f"parameters: {self.arg_names}")
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        self.user_pre_hook = pre_hook
        self.user_post_hook = post_hook
        prune = dict(prune_configs_by or {})
        unknown = set(prune) - {"perf_model", "top_k", "early_config_prune"}
        if unknown:
            raise ValueError(f"kernel {self.name!r}: prune_configs_by has unknown entries {sorted(unknown)}")
        self.perf_model = prune.get("perf_model")
        self.top_k = prune.get("top_k", 1.0)
        self.early_config_prune = prune.get("early_config_prune")
        self.do_bench = do_bench
        self.validate = bool(validate)
        self.meta_names = sorted({k for c in self.configs + ([default] if default else []) for k in c.kwargs})
        self._cache: dict[tuple, Choice] = {}
        # (key values, specialisation signature) -> (choice, CompiledKernel, config tail); tuned hits only
        self._fast_cache: dict[tuple, tuple[Choice, Any, tuple]] = {}
        self._stored: dict[tuple, Any] | None = None   # json key -> db Entry, loaded on the first miss
        self._misses: dict[tuple, capture.MissRecord] = {}
        self._failures: dict[tuple, list[dict[str, Any]]] = {}
        self._ranking: dict[tuple, list[int]] = {}       # key -> candidate indices, best first
        self._force_gen = -1
        self._forced: Choice | None = None
        self._identity = None
        self._resources: dict[int, dict[str, int]] = {}
        self.best_config: triton.Config | None = None
        self.tune_count = 0          # how many keys this process tuned (benchmarked)
        self.bench_calls = 0         # timer invocations, for tests and reports
        # fast path only when every key argument is positional: (position, bucket) per key name
        self._key_pos_buckets = tuple(zip(self.key_builder.positions, self.key_builder.bucket_fns))
        self._max_key_pos = max(self.key_builder.positions, default=-1)
        jit = fn if isinstance(fn, JITFunction) else None
        self._fast = jit is not None and not settings.interpret() and settings.fast_launch()
        self._constexpr_pos = frozenset(p.num for p in jit.params if p.is_constexpr) if jit is not None else frozenset()
        with _lock:
            _REGISTRY.setdefault(self.name, []).append(self)
            pending = _FORCES.get(self.name) or _env_forces().get(self.name)
        if pending:
            self._forced_from(pending)  # fail at decoration for unknown parameter names

    # -------------------------------------------------------------------------------------- hot path

    def run(self, *args, grid, warmup: bool = False, **kwargs):
        if _dynamo_compiling():  # torch.compile traces this launch: one graphtune::launch op, tuned at run time
            from .compiled import traced_launch
            return traced_launch(self, args, kwargs, grid, warmup)
        if warmup:
            return self.warmup(*args, grid=grid, **kwargs)
        if self._force_gen != _FORCE_GEN[0]:
            self._resolve_force()
        fast_key = None
        if self._fast and not kwargs and len(args) > self._max_key_pos:
            # Hot path: one signature pass over the arguments (dtype + alignment of tensors, int classes,
            # constexpr values) plus the bucketed key values, one dict lookup, and a direct launch of the
            # cached CompiledKernel.
            spec = self._spec(args)
            if spec is not None:
                fast_key = (self._key_values(args), spec)
                hit = self._fast_cache.get(fast_key)
                if hit is not None:
                    choice, ck, tail = hit
                    choice.hits += 1
                    full = args + tail
                    if callable(grid):
                        grid = grid(dict(zip(self.arg_names, full)))
                    n = len(grid)
                    stream = _get_stream(_get_device())
                    enter = _knobs.runtime.launch_enter_hook
                    exit_ = _knobs.runtime.launch_exit_hook
                    # triton 3.6 keeps hooks in (possibly empty) HookChains; older versions use None or a callable
                    if (enter is not None and getattr(enter, "calls", True)) or \
                            (exit_ is not None and getattr(exit_, "calls", True)):
                        meta = ck.launch_metadata(grid, stream, *full)
                    else:  # no profiler hooks: skip building metadata nobody reads
                        meta = enter = exit_ = None
                    ck.run(grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1, stream, ck.function,
                           ck.packed_metadata, meta, enter, exit_, *full)
                    return ck
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
        if (fast_key is not None and choice.source != "fallback" and config.pre_hook is None
                and ret is not None and hasattr(ret, "packed_metadata")):
            tail = self._tail(config, len(args))
            if tail is not None:
                self._fast_cache[fast_key] = (choice, ret, tail)
        return ret

    def _key_values(self, args: tuple) -> tuple:
        return tuple(args[p] if b is None else b(args[p]) for p, b in self._key_pos_buckets)

    def _tail(self, config: triton.Config, n: int) -> tuple | None:
        """Config values appended positionally: only when they are exactly the parameters after the args."""
        names = self.arg_names[n:]
        kw = config.kwargs
        if set(names) != set(kw):
            return None
        return tuple(kw[k] for k in names)

    def _spec(self, args: tuple) -> tuple | None:
        out = []
        cpos = self._constexpr_pos
        for i, a in enumerate(args):
            t = type(a)
            if i in cpos:
                out.append((t, a))
            elif t is int:
                out.append(4 if a == 1 else ((a % 16 == 0) | ((not _INT32_LO <= a < _INT32_HI) << 1)))
            elif hasattr(a, "data_ptr"):
                out.append((a.dtype, (a.data_ptr() & 15) == 0))
            elif a is None or t is float or t is bool:
                out.append(t)
            else:
                return None  # anything else (tuples, numpy scalars, ...) goes through Triton's own binder
        return tuple(out)

    # ---------------------------------------------------------------------------------------- misses

    def _resolve_force(self) -> None:
        self._force_gen = _FORCE_GEN[0]
        self._fast_cache.clear()
        params = _FORCES.get(self.name) or _env_forces().get(self.name)
        self._forced = None if params is None else Choice(self._forced_from(params), "forced")

    def _forced_from(self, params: dict[str, Any]) -> triton.Config:
        base = self.default or self.configs[0]
        return config_with(base, params, allowed_meta=self.meta_names,
                           where=f"force for kernel {self.name!r}")

    def _miss(self, key: tuple, args: tuple, kwargs: dict, grid) -> Choice:
        with _lock:
            choice = self._cache.get(key)
            if choice is not None:
                return choice
            if len(self.configs) == 1:
                choice = Choice(self.configs[0], "single")
                self._cache[key] = choice
                return choice
            choice = self._agree_stored(key, self._from_store(key))
            if choice is not None:
                self._cache[key] = choice
                return choice
            where = capture.why_no_tuning()
            if where is not None:
                return self._policy_miss(key, args, kwargs, where)
            choice = self._tune(key, args, kwargs, grid)
            self._cache[key] = choice
            return choice

    def _policy_miss(self, key: tuple, args: tuple, kwargs: dict, where: str) -> Choice:
        policy = capture.resolve_policy(self.policy)
        tuned = list(self._cache)
        if policy == "raise":
            rec = self._misses.get(key)
            if rec is None:
                self._misses[key] = capture.MissRecord(key, where, "raise", None, "")
            else:
                rec.count += 1
            raise capture.untuned_error(self.name, key, tuple(self.keys), self.key_builder.raw_values(args, kwargs),
                                        where, tuned)
        config, origin = self._fallback_config(key)
        rec = self._misses.get(key)
        if rec is None:
            self._misses[key] = capture.MissRecord(key, where, "fallback", config_label(config), origin)
            place = "inside CUDA graph capture" if where == "capture" else "while frozen"
            warnings.warn(
                f"graphtune: kernel {self.name!r} has no tuned config for key {list(key_to_json(key))} {place}; "
                f"launching the fallback {config_label(config)} ({origin}). Warm this size up before capture "
                f"to tune it.", RuntimeWarning, stacklevel=4)
        else:
            rec.count += 1
        # Not cached as tuned: a later call outside capture still tunes this key.
        return Choice(config, "fallback")

    def _fallback_config(self, key: tuple) -> tuple[triton.Config, str]:
        best, best_d = None, None
        for k, ch in self._cache.items():
            if ch.source == "fallback":
                continue
            d = self.key_builder.distance(key, k)
            if d is None:
                continue
            # ties go to the larger bucket: servers pad batches up, so the larger bucket's config was tuned
            # for at least this much work
            if best_d is None or d < best_d or (d == best_d and k > best[0]):
                best, best_d = (k, ch), d
        if best is not None:
            return best[1].config, f"nearest tuned bucket {list(key_to_json(best[0]))}"
        if self.default is not None:
            return self.default, "declared default"
        return self.configs[0], "first config"

    # ----------------------------------------------------------------------------------- stored results

    def identity(self):
        if self._identity is None:
            from .identity import kernel_identity
            self._identity = kernel_identity(self.name, self.fn, self.configs)
        return self._identity

    def _from_store(self, key: tuple) -> Choice | None:
        if self._stored is None:
            self._stored = self._load_stored()
        entry = self._stored.get(key_to_json(key))
        if entry is None:
            return None
        from .configs import config_from_dict
        cfg = config_from_dict(entry.chosen)
        # map back onto this kernel's own Config object (keeps pre_hooks etc.)
        for c in self.configs:
            if config_to_dict(c) == entry.chosen:
                cfg = c
                break
        choice = Choice(cfg, entry.source if entry.source in ("loaded",) else "database")
        choice.timings = {"from": getattr(entry, "host", ""), "tuned_at": getattr(entry, "tuned_at", None),
                          "median_ms": getattr(entry, "chosen_median_ms", None)}
        return choice

    def _load_stored(self) -> dict[tuple, Any]:
        try:
            from . import db as dbmod
            from .identity import current_env
        except ImportError:
            return {}
        try:
            env = current_env()
            kid = self.identity()
            out: dict[tuple, Any] = {}
            database = dbmod.get_db()
            if database is not None:
                out.update(database.load_kernel(kid, env))
            out.update(dbmod.loaded_entries(kid, env))
            return {tuple(k): v for k, v in out.items()}
        except Exception as exc:  # noqa: BLE001 - a broken store must never stop a server
            logger.warning("graphtune: could not read stored results for %s: %s", self.name, exc)
            return {}

    def _record(self, key: tuple, chosen: triton.Config, results: list[dict[str, Any]]) -> None:
        try:
            from . import db as dbmod
            from .identity import current_env
        except ImportError:
            return
        try:
            database = dbmod.get_db()
            if database is None:
                return
            import socket
            cands = tuple(dbmod.CandidateResult(
                config=r["config"], median_ms=r.get("median_ms"), p20_ms=r.get("p20_ms"), p80_ms=r.get("p80_ms"),
                n=r.get("n", 0), failure=r.get("failure"), resources=r.get("resources")) for r in results)
            entry = dbmod.Entry(kernel=self.identity(), env=current_env(), key=key_to_json(key),
                                chosen=config_to_dict(chosen), candidates=cands, tuned_at=time.time(),
                                host=socket.gethostname(), rank=_current_rank())
            database.record(entry)
            if self._stored is not None:
                self._stored[key_to_json(key)] = entry
        except Exception as exc:  # noqa: BLE001
            logger.warning("graphtune: could not record result for %s %s: %s", self.name, list(key_to_json(key)), exc)

    # ------------------------------------------------------------------------------------------ tuning

    def _prune(self, nargs: dict, kwargs: dict) -> list[triton.Config]:
        configs = self.configs
        if self.early_config_prune:
            configs = list(self.early_config_prune(self.configs, nargs, **kwargs))
            if not configs:
                raise TuningError(f"kernel {self.name!r}: early_config_prune returned no configs")
        if self.perf_model:
            top_k = self.top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(self.configs) * top_k))
            elif not isinstance(top_k, int):
                raise TypeError(f"kernel {self.name!r}: prune_configs_by top_k={top_k!r}; expected float <= 1 or int")
            if len(configs) > top_k:
                est = [self.perf_model(**nargs, **kwargs, **c.all_kwargs()) for c in configs]
                configs = [c for _, c in sorted(zip(est, configs), key=lambda t: t[0])][:top_k]
        if self.default is not None and not any(config_to_dict(self.default) == config_to_dict(c) for c in configs):
            pass  # the default is compiled for fallback below, but it is not a candidate unless listed
        return configs

    def _tune(self, key: tuple, args: tuple, kwargs: dict, grid) -> Choice:
        t_start = time.perf_counter()
        nargs = {**dict(zip(self.arg_names, args)), **kwargs}
        candidates = self._prune(nargs, kwargs)
        labels = [config_label(c) for c in candidates]
        failures: dict[int, str] = {}

        snapshot = self._snapshot(nargs)
        t_compile = time.perf_counter()
        failures.update(self._compile_all(candidates, args, kwargs, grid, skip=set(failures)))
        compile_s = time.perf_counter() - t_compile

        if self.validate:
            failures.update(self._validate(candidates, args, kwargs, grid, nargs, skip=set(failures)))

        alive = [i for i in range(len(candidates)) if i not in failures]
        if not alive:
            self._restore(nargs, snapshot)
            # let peer ranks learn of it (they raise too) instead of waiting for this rank until the timeout
            self._agree(key, candidates, [], [{"config": config_to_dict(c), "failure": failures.get(i, "")}
                                              for i, c in enumerate(candidates)], -1)
            lines = "\n".join(f"  {labels[i]}: {failures[i]}" for i in range(len(candidates)))
            raise TuningError(f"graphtune: every candidate config of kernel {self.name!r} failed for key "
                              f"{list(key_to_json(key))}:\n{lines}")

        t_time = time.perf_counter()
        sel, mode = self._time(candidates, alive, args, kwargs, grid, nargs, key)
        timing_s = time.perf_counter() - t_time
        self._restore(nargs, snapshot)
        for name in self.reset_to_zero:
            nargs[name].zero_()

        results: list[dict[str, Any]] = []
        for i, c in enumerate(candidates):
            row: dict[str, Any] = {"config": config_to_dict(c)}
            j = alive.index(i) if i in alive else None
            t = sel.timing(j) if j is not None else None
            if t is not None:
                row.update(t.to_dict())
            if i in self._resources:
                row["resources"] = self._resources[i]
            if i in failures:
                row["failure"] = failures[i]
            elif j is not None and j in sel.eliminated:
                row["eliminated_round"] = sel.eliminated[j]
            results.append(row)

        best_local = alive[sel.best]
        best = self._agree(key, candidates, alive, results, best_local)
        chosen = candidates[best]
        ranking = sorted(alive, key=lambda i: (results[i].get("median_ms") or float("inf")))
        self._ranking[key] = ranking
        if failures:
            self._failures[key] = [{"config": labels[i], "reason": r} for i, r in sorted(failures.items())]
            for i, r in sorted(failures.items()):
                logger.info("graphtune: %s %s excluded %s: %s", self.name, list(key_to_json(key)), labels[i], r)
        self.tune_count += 1
        choice = Choice(chosen, "tuned")
        choice.timings = {"compile_s": compile_s, "timing_s": timing_s, "total_s": time.perf_counter() - t_start,
                          "timer": mode, "candidates": results}
        log_selection(self.name, list(key_to_json(key)), [labels[i] for i in alive], sel)
        logger.info("graphtune: tuned %s for %s in %.3f s (compile %.3f s, timing %.3f s, %s): %s",
                    self.name, list(key_to_json(key)), choice.timings["total_s"], compile_s, timing_s, mode,
                    labels[best])
        self._record(key, chosen, results)
        if self.default is not None and capture._cuda_available():
            # the declared default is what a capture-time miss may launch: compile and load it now, outside
            # capture (module loading during capture is reported to fail on some drivers)
            self.preload_fallbacks(args, kwargs, grid)
        return choice

    def _compile_all(self, candidates, args, kwargs, grid, skip: set[int]) -> dict[int, str]:
        """Compile every candidate before timing any (in parallel where Triton allows), then load each with
        one eager launch so launch-time failures (shared memory over the limit) surface here."""
        failures: dict[int, str] = {}
        todo = [i for i in range(len(candidates)) if i not in skip]
        if isinstance(self.fn, JITFunction) and not settings.interpret() and len(todo) > 1:
            try:
                from concurrent.futures import ThreadPoolExecutor
                from triton.runtime._async_compile import AsyncCompileMode
                import os
                with ThreadPoolExecutor(max_workers=min(len(todo), os.cpu_count() or 2)) as pool:
                    with AsyncCompileMode(pool, ignore_errors=True):
                        for i in todo:
                            try:
                                self.fn.warmup(*args, grid=grid, **kwargs, **candidates[i].all_kwargs())
                            except Exception:  # noqa: BLE001 - reported by the sequential pass below
                                pass
            except ImportError:
                pass
            except Exception as exc:  # noqa: BLE001
                logger.debug("graphtune: parallel compile unavailable for %s: %s", self.name, exc)
        limits = self._device_limits()
        self._resources = {}
        for i in todo:
            try:
                if limits is not None:
                    why = self._check_compiled(candidates[i], args, kwargs, grid, limits, i)
                    if why is not None:
                        failures[i] = why
                        continue
                self._call(candidates[i], args, kwargs, grid)
            except Exception as exc:  # noqa: BLE001 - every failure is recorded with its reason
                failures[i] = _reason(exc)
        return failures

    def _device_limits(self):
        if not isinstance(self.fn, JITFunction) or settings.interpret() or not capture._cuda_available():
            return None
        try:
            from .resources import device_target
            return device_target()
        except Exception as exc:  # noqa: BLE001 - without limits, launch failures still surface below
            logger.debug("graphtune: no device limits for %s: %s", self.name, exc)
            return None

    def _check_compiled(self, config, args, kwargs, grid, limits, i: int) -> str | None:
        """Exclude, with the numbers, a compiled config the present GPU cannot launch (instead of letting it
        fail at launch, or, as stock Triton does, dropping it silently), and keep its resource usage."""
        ck = self.fn.warmup(*args, grid=grid, **kwargs, **config.all_kwargs())
        if hasattr(ck, "result"):
            ck = ck.result()
        from .resources import occupancy
        shared = int(getattr(ck.metadata, "shared", 0) or 0)
        res = {"shared_bytes": shared, "threads": config.num_warps * limits.warp_size}
        self._resources[i] = res
        # the inspector's rules, in two steps: threads and shared memory before loading (a load over the
        # shared-memory limit raises), registers once the loaded kernel reports them
        occ = occupancy(limits, 0, shared, config.num_warps)
        if not occ.fits:
            return occ.reason
        try:
            ck._init_handles()
            res["registers"] = int(ck.n_regs)
            res["spills"] = int(ck.n_spills)
        except Exception as exc:  # noqa: BLE001
            return _reason(exc)
        occ = occupancy(limits, res["registers"], shared, config.num_warps)
        return None if occ.fits else occ.reason

    def _call(self, config: triton.Config, args, kwargs, grid):
        if config.pre_hook is not None:
            config.pre_hook({**dict(zip(self.arg_names, args)), **kwargs, **config.all_kwargs()})
        return self.fn.run(*args, grid=grid, warmup=False, **kwargs, **config.all_kwargs())

    def _snapshot(self, nargs: dict) -> dict[str, Any]:
        return {n: nargs[n].clone() for n in self.restore_value}

    def _restore(self, nargs: dict, snapshot: dict[str, Any]) -> None:
        for n, saved in snapshot.items():
            nargs[n].copy_(saved)

    def _validate(self, candidates, args, kwargs, grid, nargs, skip: set[int]) -> dict[int, str]:
        """Run each candidate once from the same inputs; NaN/inf or a mismatch with the first good one fails."""
        import torch
        tensors = {n: v for n, v in nargs.items() if isinstance(v, torch.Tensor)}
        before = {n: v.clone() for n, v in tensors.items()}
        failures: dict[int, str] = {}
        reference: dict[str, Any] | None = None
        ref_label = ""
        for i, c in enumerate(candidates):
            if i in skip:
                continue
            for n, v in tensors.items():
                v.copy_(before[n])
            for n in self.reset_to_zero:
                nargs[n].zero_()
            try:
                self._call(c, args, kwargs, grid)
                if capture._cuda_available():
                    torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001
                failures[i] = _reason(exc)
                continue
            outs = {n: v.clone() for n, v in tensors.items() if not torch.equal(v, before[n])}
            bad = [n for n, v in outs.items() if v.is_floating_point() and not torch.isfinite(v).all()]
            if bad:
                failures[i] = f"validate: non-finite values in {bad}"
                continue
            if reference is None:
                reference, ref_label = outs, config_label(c)
                continue
            for n in set(reference) | set(outs):
                a = reference.get(n, before[n])
                b = outs.get(n, before[n])
                err = _rel_err(a, b)
                tol = 1e-3 if a.dtype in (torch.float32, torch.float64) else 2e-2
                if err > tol:
                    failures[i] = f"validate: {n} differs from {ref_label} (relative L2 error {err:.3g} > {tol})"
                    break
        for n, v in tensors.items():
            v.copy_(before[n])
        return failures

    def candidate_indices(self, args: tuple, kwargs: dict | None = None) -> list[int]:
        """Indices into ``self.configs`` of the candidates these arguments would tune (after pruning)."""
        kwargs = dict(kwargs or {})
        nargs = {**dict(zip(self.arg_names, args)), **kwargs}
        chosen = self._prune(nargs, kwargs)
        return [i for i, c in enumerate(self.configs) if any(c is p for p in chosen)]

    def _time(self, candidates, alive, args, kwargs, grid, nargs, key,
              sample_single: bool = False) -> tuple[Selection, str]:
        """Time the surviving candidates; returns the selection over ``alive`` (indices into it)."""
        calls = [self._bench_call(candidates[i], args, kwargs, grid, nargs) for i in alive]
        order = self._neighbour_order(key, alive)
        if self.do_bench is not None:
            def sample(j: int, k: int) -> list[float]:
                self.bench_calls += 1
                out = self.do_bench(calls[j])
                return [float(x) for x in out] if isinstance(out, (list, tuple)) else [float(out)]
            sel = select(len(alive), sample, sample_single=sample_single, order=order, initial=1, budget_samples=len(alive))
            return sel, "injected do_bench"
        if not capture._cuda_available():
            samplers = [wall_clock_sampler(c) for c in calls]

            def sample(j: int, k: int) -> list[float]:
                self.bench_calls += 1
                return samplers[j](k)
            return select(len(alive), sample, sample_single=sample_single, order=order, initial=2, budget_samples=4 * len(alive)), \
                "interpreter wall clock (not GPU time)"
        if settings.timer() == "plain" or self.user_pre_hook or self.user_post_hook:
            import triton.testing

            def sample(j: int, k: int) -> list[float]:
                self.bench_calls += 1
                return [float(triton.testing.do_bench(calls[j], return_mode="median")) for _ in range(k)]
            return select(len(alive), sample, sample_single=sample_single, order=order, initial=1, budget_samples=len(alive)), "plain do_bench"
        rotating = self._rotating_calls(candidates, alive, args, kwargs, grid, nargs)
        # one input copy: rotation cannot keep L2 cold, so flush it between launches instead
        sampler = GraphReplaySampler(rotating, flush_l2=len(rotating[0]) == 1)
        per_sample = 0.25
        budget = max(3 * len(alive), int(settings.timer_budget_ms() / per_sample))

        def sample(j: int, k: int) -> list[float]:
            self.bench_calls += 1
            try:
                return sampler(j, k)
            except Exception as exc:  # noqa: BLE001 - a candidate that cannot be replayed loses, visibly
                logger.warning("graphtune: %s %s could not be timed by graph replay: %s", self.name,
                               config_label(candidates[alive[j]]), exc)
                return [float("inf")] * k
        try:
            sel = select(len(alive), sample, sample_single=sample_single, order=order, initial=3, budget_samples=budget)
        finally:
            sampler.close()
        return sel, "graph replay"

    def _neighbour_order(self, key: tuple, alive: list[int]) -> list[int]:
        best, best_d = None, None
        for k, ranking in self._ranking.items():
            d = self.key_builder.distance(key, k)
            if d is not None and (best_d is None or d < best_d):
                best, best_d = ranking, d
        if best is None:
            return list(range(len(alive)))
        pos = {c: r for r, c in enumerate(best)}
        return sorted(range(len(alive)), key=lambda j: (pos.get(alive[j], len(pos)), j))

    def _bench_call(self, config, args, kwargs, grid, nargs) -> Callable[[], Any]:
        full = {**nargs, **config.all_kwargs()}

        def call():
            if self.user_pre_hook:
                self.user_pre_hook(full)
            for n in self.reset_to_zero:
                nargs[n].zero_()
            self._call(config, args, kwargs, grid)
            if self.user_post_hook:
                self.user_post_hook(full, None)
        return call

    def _rotating_calls(self, candidates, alive, args, kwargs, grid, nargs) -> list[list[Callable[[], Any]]]:
        """Per candidate, launches over several copies of the inputs so consecutive launches in a replayed
        graph do not hit L2 (the copies together exceed twice the L2). Memory: at most
        GRAPHTUNE_TIMER_MEM_MB of copies, freed when tuning ends."""
        import torch
        from .timing import l2_bytes
        tensors = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
        nbytes = sum(t.numel() * t.element_size() for t in tensors) or 1
        want = -(-2 * l2_bytes() // nbytes)
        cap = int(settings.timer_mem_mb() * 2**20 // nbytes)
        n_copies = int(max(1, min(want, cap, 16)))
        sets = [(args, kwargs, nargs)]
        for _ in range(n_copies - 1):
            a2 = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
            k2 = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
            sets.append((a2, k2, {**dict(zip(self.arg_names, a2)), **k2}))
        return [[self._graph_call(candidates[i], a, k, grid, n) for (a, k, n) in sets] for i in alive]

    def _graph_call(self, config, args, kwargs, grid, nargs) -> Callable[[], Any]:
        def call():
            for n in self.reset_to_zero:
                nargs[n].zero_()
            self._call(config, args, kwargs, grid)
        return call

    def _agree_stored(self, key: tuple, stored: Choice | None) -> Choice | None:
        """With a process group, every rank uses a stored result only if every rank has one (else all tune)."""
        try:
            from .distributed import agree_stored
        except ImportError:
            return stored
        return agree_stored(self, key, stored)

    def _agree(self, key, candidates, alive, results, best_local: int) -> int:
        try:
            from .distributed import agree
        except ImportError:
            return best_local
        return agree(self, key, candidates, alive, results, best_local)

    # ------------------------------------------------------------------------- offline / sharded tuning

    def key_of(self, args: tuple, kwargs: dict | None = None) -> tuple:
        """The tuning key (bucketed) these arguments map to."""
        return self.key_builder(tuple(args), dict(kwargs or {}))

    def time_candidates(self, args: tuple, kwargs: dict | None, grid, indices: Sequence[int]) -> list[dict[str, Any]]:
        """Compile and time ``self.configs[i]`` for each i in ``indices`` on these arguments (outside capture);
        one row per index: ``{"index", "config", "median_ms", "p20_ms", "p80_ms", "n"}`` or ``"failure"``.
        Used by sharded offline tuning, where each rank times its share of the configs."""
        if capture.why_no_tuning() is not None:
            raise RuntimeError(f"time_candidates({self.name!r}) inside capture or while frozen")
        kwargs = dict(kwargs or {})
        args = tuple(args)
        nargs = {**dict(zip(self.arg_names, args)), **kwargs}
        candidates = [self.configs[i] for i in indices]
        failures: dict[int, str] = {}
        snapshot = self._snapshot(nargs)
        failures.update(self._compile_all(candidates, args, kwargs, grid, skip=set(failures)))
        alive = [i for i in range(len(candidates)) if i not in failures]
        rows: list[dict[str, Any]] = []
        sel = None
        if alive:
            sel, _ = self._time(candidates, alive, args, kwargs, grid, nargs, self.key_of(args, kwargs),
                                sample_single=True)
        self._restore(nargs, snapshot)
        for j, (i, c) in enumerate(zip(indices, candidates)):
            row: dict[str, Any] = {"index": i, "config": config_to_dict(c)}
            if j in failures:
                row["failure"] = failures[j]
            else:
                t = sel.timing(alive.index(j)) if sel is not None else None
                if t is not None:
                    row.update(t.to_dict())
            rows.append(row)
        return rows

    def install(self, key: tuple, config: triton.Config, results: list[dict[str, Any]] | None = None,
                source: str = "tuned", record: bool = True) -> None:
        """Make ``config`` the choice for ``key`` (e.g. after sharded tuning) and, by default, record it."""
        with _lock:
            self._cache[key] = Choice(config, source)
            self._fast_cache.clear()
        if record:
            self._record(key, config, list(results or []))

    # ------------------------------------------------------------------------------------ public bits

    def warmup(self, *args, grid=None, **kwargs):
        """Compile (not launch) every config for these arguments, as triton.autotune's warmup does."""
        out = []
        for c in self.configs + ([self.default] if self.default is not None else []):
            out.append(self.fn.warmup(*args, grid=grid, **kwargs, **c.all_kwargs()))
        return out

    def preload_fallbacks(self, args: tuple, kwargs: dict, grid) -> None:
        """Compile and load the declared default, which a capture-time miss may launch, so no module is loaded
        inside capture (the tuned configs were loaded when they were timed)."""
        if not isinstance(self.fn, JITFunction) or settings.interpret():
            return
        seen = set()
        for c in ([self.default] if self.default is not None else []):
            d = str(config_to_dict(c))
            if d in seen:
                continue
            seen.add(d)
            try:
                ks = self.fn.warmup(*args, grid=grid, **kwargs, **c.all_kwargs())
                for k in (ks if isinstance(ks, list) else [ks]):
                    if hasattr(k, "_init_handles"):
                        k._init_handles()
            except Exception as exc:  # noqa: BLE001
                logger.debug("graphtune: could not preload %s for %s: %s", config_label(c), self.name, exc)

    def coverage(self) -> capture.KernelCoverage:
        kc = capture.KernelCoverage(self.name)
        if self._forced is not None:
            kc.forced = self._forced.label
        for key, ch in self._cache.items():
            kc.tuned[key] = {"config": ch.label, "source": ch.source, "hits": ch.hits}
        kc.misses = dict(self._misses)
        kc.excluded = {key: list(rows) for key, rows in self._failures.items()}
        return kc

    def reset(self) -> None:
        """Forget in-memory results and records (the database is untouched)."""
        with _lock:
            self._cache.clear()
            self._fast_cache.clear()
            self._stored = None
            self._misses.clear()
            self._failures.clear()
            self._ranking.clear()
            self.tune_count = 0
            self.bench_calls = 0

    def __repr__(self) -> str:
        return f"<graphtune kernel {self.name!r}: {len(self.configs)} configs, key={self.keys}>"


def _current_rank() -> int:
    try:
        import torch.distributed as dist
        return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    except Exception:  # noqa: BLE001
        return 0


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:300]


def _rel_err(a, b) -> float:
    a = a.double()
    b = b.double()
    denom = a.norm().item()
    num = (a - b).norm().item()
    return num / denom if denom > 0 else num


def autotune(configs: Sequence[triton.Config], key: Sequence[str], *, buckets: dict[str, Buckets] | None = None,
             default: triton.Config | None = None, name: str | None = None, prune_configs_by: dict | None = None,
             reset_to_zero: Sequence[str] | None = None, restore_value: Sequence[str] | None = None,
             pre_hook: Callable | None = None, post_hook: Callable | None = None, do_bench: Callable | None = None,
             validate: bool = False, policy: str | None = None) -> Callable[[Any], GraphtuneKernel]:
    """Capture-safe drop-in for ``triton.autotune``.

    Tunes on the first call of each key bucket outside CUDA graph capture; inside capture (or after
    ``freeze()``) it never benchmarks, synchronises or allocates: a miss launches a fallback or raises
    ``UntunedError`` per ``policy``. ``buckets={"B": Buckets.explicit([1, 2, 4, 8, ...])}`` maps a key
    argument to the server's captured sizes. ``do_bench(fn) -> ms`` replaces the timer.
    """
    if isinstance(key, str):
        raise TypeError(f"autotune(key={key!r}): key must be a list of parameter names, not a string")

    def decorator(fn) -> GraphtuneKernel:
        arg_names = getattr(fn, "arg_names", None)
        if arg_names is None:
            raise TypeError(f"graphtune.autotune must wrap a @triton.jit function (or triton.heuristics of one), "
                            f"got {fn!r}")
        return GraphtuneKernel(fn, arg_names, configs, key, buckets=buckets, default=default, name=name,
                               prune_configs_by=prune_configs_by, reset_to_zero=reset_to_zero,
                               restore_value=restore_value, pre_hook=pre_hook, post_hook=post_hook,
                               do_bench=do_bench, validate=validate, policy=policy)
    return decorator


# ------------------------------------------------------------------------------------------- process API


def warmup(fn: Callable[..., Any], sizes: Sequence[int], make_args: Callable[[int], Sequence[Any]]) -> None:
    """Call ``fn(*make_args(size))`` for every size outside capture, so every bucket is tuned before capture,
    then compile and load the configs a capture-time miss could fall back to."""
    if capture.is_capturing():
        raise RuntimeError("graphtune.warmup() was called inside CUDA graph capture; call it before capturing")
    check_forces()
    sizes = list(sizes)
    if not sizes:
        raise ValueError("graphtune.warmup(sizes=[]): give the batch sizes the server captures")
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
                fn(*make_args(size))
                bar.advance(task)
    else:
        for size in sizes:
            fn(*make_args(size))
    if capture._cuda_available():
        import torch
        torch.cuda.synchronize()


def coverage(names: Sequence[str] | None = None) -> capture.Coverage:
    """Per kernel: tuned keys with their configs and hits, misses (where, which fallback), exclusions."""
    out: dict[str, capture.KernelCoverage] = {}
    for name, ks in sorted(_REGISTRY.items()):
        if names is not None and name not in names:
            continue
        merged = capture.KernelCoverage(name)
        for k in ks:
            c = k.coverage()
            merged.tuned.update(c.tuned)
            merged.misses.update(c.misses)
            merged.excluded.update(c.excluded)
            merged.forced = merged.forced or c.forced
        out[name] = merged
    return capture.Coverage(out)


def assert_covered(names: Sequence[str] | None = None) -> None:
    """Raise UntunedError if any (selected) kernel recorded a miss."""
    from .errors import UntunedError
    if names is not None:
        unknown = [n for n in names if n not in _REGISTRY]
        if unknown:
            raise ValueError(f"assert_covered(names={list(names)}): unknown kernels {unknown}; "
                             f"known: {sorted(_REGISTRY)}")
    cov = coverage(names)
    misses = cov.misses
    if misses:
        lines = "; ".join(f"{n} key {list(key_to_json(m.key))} ({m.where}, {m.action} x{m.count})" for n, m in misses)
        raise UntunedError(f"graphtune: {len(misses)} untuned key(s) were hit: {lines}. Warm these sizes up "
                           f"before capture.")


def reset_all() -> None:
    for ks in _REGISTRY.values():
        for k in ks:
            k.reset()


def _isatty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
