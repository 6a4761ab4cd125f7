"""Every GRAPHTUNE_* environment variable, read in this one place.

Values are read when asked for (nothing is cached) so that a server's launcher, or a test, can set them
after ``import graphtune`` (GRAPHTUNE_FAST_LAUNCH: before a kernel is decorated, its row says why). ``override(NAME=value)`` sets them in code (it wins over the environment; as a
context manager it restores the previous values on exit); ``graphtune.state.reset()`` drops overrides.

=============================  ==========================================================================
variable                       meaning
=============================  ==========================================================================
GRAPHTUNE_POLICY               ``fallback`` (default) or ``raise``: what a miss inside capture / after
                               ``freeze()`` does.
GRAPHTUNE_FORCE                ``name:num_warps=8,num_stages=3,BLOCK_N=32;other:...`` pins configs
                               (A/B runs without code edits). Never benchmarks.
GRAPHTUNE_DB                   path of the SQLite tuning database (default: user cache directory).
GRAPHTUNE_DB_READONLY          ``1``: read the database, never write it (production). Read-only mode never
                               renames a damaged file either (that would be a write); it warns and runs
                               without the database.
GRAPHTUNE_NO_DB                ``1``: do not use a database at all (results live in memory only).
GRAPHTUNE_CHECK                ``1``: kernels run checks that cost a device synchronisation
                               (e.g. page ids in range).
GRAPHTUNE_TIMER                ``graph`` (default on CUDA: graph replay + early elimination) or ``plain``
                               (``triton.testing.do_bench`` once per candidate, as stock Triton).
GRAPHTUNE_TIMER_BUDGET_MS      total GPU time budget per key for the graph timer (default 40).
GRAPHTUNE_TIMER_MEM_MB         most memory the timer may allocate for rotating input copies (default 1024).
GRAPHTUNE_DIST_TIMEOUT_S       seconds to wait for peer ranks in a collective (default 300).
GRAPHTUNE_FAST_LAUNCH          ``0`` turns off launching the cached compiled kernel directly on a tuned hit
                               (then every launch goes through ``JITFunction.run``). Default on. Read when a
                               kernel is decorated: set it before the kernel's module is imported.
GRAPHTUNE_ISOLATE              ``1``: candidate configs that never ran on this device and software stack are
                               launched first in a worker process (isolate.py); one that faults, hangs or
                               kills the worker is recorded as failed and never launched here.
GRAPHTUNE_ISOLATE_TIMEOUT_S    seconds a candidate's launch may run in the worker before it counts as hung
                               (default 60; its compile gets 120 s more, and a hang there is not remembered).
GRAPHTUNE_PROGRESS             ``0`` hides the progress bar, ``1`` forces it (default: only on a TTY).
GRAPHTUNE_PLUGIN               ``1`` turns on the vLLM / SGLang plugins (installed with graphtune, off by
                               default): in each engine process that loads them, ``patch_triton()``, the
                               GRAPHTUNE_POLICY / GRAPHTUNE_LOAD settings, and a coverage report at the end
                               of CUDA-graph capture (docs/plugins.md).
GRAPHTUNE_LOAD                 export file(s) of ``graphtune db export`` that the plugins pass to
                               ``graphtune.load`` at start-up; several are separated by ``os.pathsep``.
GRAPHTUNE_COVERAGE_OUT         where the plugins write each process's coverage report (JSON): a directory
                               (``graphtune-coverage-<engine>[-rank<r>]-pid<pid>.json`` in it; no rank part
                               where there is no rank), or a path ending in ``.json``, used as a stem
                               (``cov.json`` -> ``cov-<engine>[-rank<r>]-pid<pid>.json``). Unset: the report
                               goes to the log only.
GRAPHTUNE_PLUGIN_AGREE         ``off`` (default), ``merge`` or ``broadcast``: whether the plugins let an
                               engine's ranks agree on configs over the default ``torch.distributed`` group
                               (``set_process_group(None, mode)``). Off by default: an engine's default group
                               also holds pipeline stages and data- / expert-parallel ranks that reach
                               different keys, which the agreement turns into a ``DistributedError``. To give
                               every rank the same configs, load one export on all of them (GRAPHTUNE_LOAD).
GRAPHTUNE_PLUGIN_FREEZE        ``1``: the plugins call ``graphtune.freeze()`` when CUDA-graph capture ends, so
                               no kernel tunes while the engine serves (a new key follows the miss policy and
                               is recorded in coverage, as inside capture). Default off: new keys tune, as
                               stock ``triton.autotune`` does.
=============================  ==========================================================================
"""
from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path
from typing import Any, Callable

from .state import STATE

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _get(name: str) -> str | None:
    value = STATE.overrides.get(name)
    if value is None:
        value = os.environ.get(name)
    return None if value is None else value.strip()


class override(contextlib.AbstractContextManager):  # noqa: N801 - used like a function
    """``override(GRAPHTUNE_POLICY="raise", GRAPHTUNE_FORCE=None)``: set (None: unset) settings in code.

    Applied at once; used as a context manager, the previous overrides come back on exit."""

    def __init__(self, **values: Any) -> None:
        unknown = [n for n in values if not (n.startswith("GRAPHTUNE_") or n == "TRITON_INTERPRET")]
        if unknown:
            raise ValueError(f"settings.override: {unknown} are not GRAPHTUNE_* settings")
        with STATE.lock:
            self._saved = {n: STATE.overrides.get(n) for n in values}
            _apply(values)

    def __exit__(self, *exc: Any) -> None:
        with STATE.lock:
            _apply(self._saved)


def _apply(values: dict[str, Any]) -> None:
    for name, value in values.items():
        if value is None:
            STATE.overrides.pop(name, None)
        else:
            STATE.overrides[name] = str(value)
    STATE.force_gen += 1   # a force may have changed


def force_probe() -> tuple[Callable[[Any], Any], Any]:
    """``(get, key)``: ``get(key)`` changes whenever GRAPHTUNE_FORCE may have changed. The launch
    hot path calls it on every launch, so it must cost tens of nanoseconds: on CPython ``get`` is the bound
    ``get`` of the raw environment mapping behind ``os.environ`` (a C call; os.environ.get costs about 1 us).
    Overrides set in code bump ``STATE.force_gen`` instead."""
    raw = getattr(os.environ, "_data", None)
    encode = getattr(os.environ, "encodekey", None)
    if not isinstance(raw, dict) or encode is None:   # not CPython: read it the plain way
        return os.environ.get, "GRAPHTUNE_FORCE"
    return raw.get, encode("GRAPHTUNE_FORCE")


def _flag(name: str, default: bool = False) -> bool:
    value = _get(name)
    if value is None:
        return default
    low = value.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(f"{name}={value!r}: expected one of 1/0, true/false, yes/no, on/off")


def _float(name: str, default: float, minimum: float = 0.0) -> float:
    value = _get(name)
    if not value:
        return default
    try:
        out = float(value)
    except ValueError:
        raise ValueError(f"{name}={value!r}: expected a number") from None
    if not math.isfinite(out):   # nan passes every comparison below, inf is no budget or timeout
        raise ValueError(f"{name}={value!r}: expected a finite number")
    if out < minimum:
        raise ValueError(f"{name}={value!r}: must be >= {minimum}")
    return out


def policy() -> str | None:
    value = _get("GRAPHTUNE_POLICY")
    if not value:
        return None
    if value not in ("fallback", "raise"):
        raise ValueError(f"GRAPHTUNE_POLICY={value!r}: expected 'fallback' or 'raise'")
    return value


def force_spec() -> str:
    return _get("GRAPHTUNE_FORCE") or ""


def expand_path(value: str, name: str) -> Path:
    """``value`` (given by setting or option ``name``) as a Path with ``~`` expanded; a ``~user`` that names no
    user is a ValueError of one line naming ``name`` and the value, not pathlib's RuntimeError naming nothing."""
    try:
        return Path(value).expanduser()
    except RuntimeError as exc:
        raise ValueError(f"{name}={value!r}: cannot expand '~' ({exc}); give a path of an existing user's home "
                         f"or an absolute path") from None


def db_path() -> Path:
    value = _get("GRAPHTUNE_DB")
    if value:
        return expand_path(value, "GRAPHTUNE_DB")
    base = _get("XDG_CACHE_HOME")
    root = expand_path(base, "XDG_CACHE_HOME") if base else Path.home() / ".cache"
    return root / "graphtune" / "tuning.sqlite"


def db_readonly() -> bool:
    return _flag("GRAPHTUNE_DB_READONLY")


def db_disabled() -> bool:
    return _flag("GRAPHTUNE_NO_DB")


def check() -> bool:
    return _flag("GRAPHTUNE_CHECK")


def timer() -> str:
    value = _get("GRAPHTUNE_TIMER") or "graph"
    if value not in ("graph", "plain"):
        raise ValueError(f"GRAPHTUNE_TIMER={value!r}: expected 'graph' or 'plain'")
    return value


def timer_budget_ms() -> float:
    return _float("GRAPHTUNE_TIMER_BUDGET_MS", 40.0, minimum=0.1)


def timer_mem_mb() -> float:
    return _float("GRAPHTUNE_TIMER_MEM_MB", 1024.0)


def dist_timeout_s() -> float:
    return _float("GRAPHTUNE_DIST_TIMEOUT_S", 300.0, minimum=0.1)


def fast_launch() -> bool:
    return _flag("GRAPHTUNE_FAST_LAUNCH", default=True)


def isolate() -> bool:
    return _flag("GRAPHTUNE_ISOLATE")


def isolate_timeout_s() -> float:
    return _float("GRAPHTUNE_ISOLATE_TIMEOUT_S", 60.0, minimum=1.0)


def progress() -> bool | None:
    value = _get("GRAPHTUNE_PROGRESS")
    if value is None or value == "":
        return None
    return _flag("GRAPHTUNE_PROGRESS")


def plugin() -> bool:
    return _flag("GRAPHTUNE_PLUGIN")


def load_paths() -> list[Path]:
    value = _get("GRAPHTUNE_LOAD")
    if not value:
        return []
    return [expand_path(part.strip(), "GRAPHTUNE_LOAD") for part in value.split(os.pathsep) if part.strip()]


def coverage_out() -> Path | None:
    value = _get("GRAPHTUNE_COVERAGE_OUT")
    return expand_path(value, "GRAPHTUNE_COVERAGE_OUT") if value else None


def plugin_agree() -> str:
    value = _get("GRAPHTUNE_PLUGIN_AGREE") or "off"
    if value not in ("off", "merge", "broadcast"):
        raise ValueError(f"GRAPHTUNE_PLUGIN_AGREE={value!r}: expected 'off', 'merge' or 'broadcast'")
    return value


def plugin_freeze() -> bool:
    return _flag("GRAPHTUNE_PLUGIN_FREEZE")


def interpret() -> bool:
    """Triton's own interpreter switch (not a graphtune variable; read here so it is read in one place)."""
    return _flag("TRITON_INTERPRET")


def validate_all() -> None:
    """Read every tuning setting once, so a bad value fails where graphtune is first used (``autotune``, ``warmup``,
    ``freeze``, the command line) with a ValueError naming the variable and value, not at the first miss inside
    a serving loop (the plugin's settings are read when a plugin activates). GRAPHTUNE_FORCE is parsed here when set
    (its parser imports triton, which commands that need none, ``graphtune audit`` and the database's, then never
    do); its parameters are checked against each kernel."""
    for read in (policy, db_readonly, db_disabled, check, timer, timer_budget_ms, timer_mem_mb, dist_timeout_s,
                 fast_launch, progress, interpret, isolate, isolate_timeout_s):
        read()
    spec = force_spec()
    if spec:
        from .configs import parse_force_spec
        parse_force_spec(spec)

