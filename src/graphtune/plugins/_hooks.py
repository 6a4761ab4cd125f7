"""Finding an engine's capture function and wrapping it, without importing the engine early.

An engine loads its plugins long before it imports the module that captures CUDA graphs (vLLM loads general
plugins in ``init_worker``, then imports its model runner when it builds the worker), and in processes that
never capture at all (vLLM's API server and engine core). Importing the model runner from the plugin would
cost those processes start-up time and could initialise things in the wrong order, so a target that is not
imported yet is wrapped the moment its module finishes importing (a post-import hook on ``sys.meta_path``).
"""
from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

from .._log import logger

_MARK = "_graphtune_capture_hook"


@dataclass(frozen=True)
class Target:
    """A method to wrap: ``module`` and ``qualname`` (``Class.method``) inside it."""

    module: str
    qualname: str

    @property
    def dotted(self) -> str:
        return f"{self.module}.{self.qualname}"


def module_exists(name: str) -> tuple[bool, str]:
    """Whether ``name`` can be imported, without importing it (its parent packages are imported).
    Returns (found, why not)."""
    if sys.modules.get(name) is not None:
        return True, ""
    try:
        spec = importlib.util.find_spec(name)
    except Exception as exc:  # a parent package that fails to import, or is not a package
        return False, f"{type(exc).__name__}: {exc}"
    return (True, "") if spec is not None else (False, "no such module")


def resolve(target: Target, module: ModuleType) -> tuple[Any, str, Any] | None:
    """(owner, attribute name, raw attribute) of ``target`` in an imported module, or None."""
    *owner_path, attr = target.qualname.split(".")
    owner: Any = module
    for part in owner_path:
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    raw = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr, None)
    if raw is None:
        raw = getattr(owner, attr, None)  # inherited: wrap it on this class
    if raw is None:
        return None
    return owner, attr, raw


def wrap(target: Target, module: ModuleType, around: Callable[..., Any]) -> bool:
    """Replace ``target`` in ``module`` by ``lambda *a, **k: around(original, *a, **k)``.

    Idempotent (a wrapped method is left alone). False, with one warning line, when the module does not
    have the target (an engine version whose layout differs from the ones read)."""
    found = resolve(target, module)
    if found is None:
        logger.warning("graphtune plugin: %s not found (module %s is imported but has no %s); "
                       "the coverage report will not be written when it captures", target.dotted,
                       target.module, target.qualname)
        return False
    owner, attr, raw = found
    kind = type(raw) if isinstance(raw, (staticmethod, classmethod)) else None
    original = raw.__func__ if kind is not None else raw
    if not callable(original):
        logger.warning("graphtune plugin: %s is a %s, not a function; not wrapped", target.dotted,
                       type(original).__name__)
        return False
    if getattr(original, _MARK, False):
        return True

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return around(original, *args, **kwargs)

    setattr(wrapper, _MARK, True)
    setattr(owner, attr, kind(wrapper) if kind is not None else wrapper)
    logger.debug("graphtune plugin: wrapped %s", target.dotted)
    return True


def is_wrapped(fn: Any) -> bool:
    return bool(getattr(fn, _MARK, False))


# ------------------------------------------------------------------------------------ post-import hooks


class _Loader(importlib.abc.Loader):
    """Runs the real loader, then the callbacks. The module keeps the real loader as ``__loader__``."""

    def __init__(self, inner: importlib.abc.Loader, finder: _PostImportFinder, name: str) -> None:
        self._inner = inner
        self._finder = finder
        self._name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        create = getattr(self._inner, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        # put the real loader back first, so that the module (and inspect / linecache later) see the
        # module exactly as a normal import would have left it
        module.__loader__ = self._inner
        if module.__spec__ is not None:
            module.__spec__.loader = self._inner
        self._inner.exec_module(module)
        self._finder.fire(self._name, module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callable[[ModuleType], None]]] = {}
        self.lock = threading.Lock()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.callbacks:
            return None
        spec = None
        for finder in list(sys.meta_path):
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, self, fullname)
        return spec

    def fire(self, name: str, module: ModuleType) -> None:
        with self.lock:
            callbacks = self.callbacks.pop(name, [])
            if not self.callbacks and self in sys.meta_path:
                sys.meta_path.remove(self)   # nothing left to wait for: imports go back to the stock path
        for callback in callbacks:
            run_callback(callback, name, module)


def run_callback(callback: Callable[[ModuleType], None], name: str, module: ModuleType) -> None:
    # a plugin must never break the engine's import
    try:
        callback(module)
    except Exception:
        logger.exception("graphtune plugin: hook on import of %s failed; the engine continues without it", name)


_finder = _PostImportFinder()


def when_imported(name: str, callback: Callable[[ModuleType], None]) -> None:
    """Call ``callback(module)`` now if ``name`` is imported, else as soon as its import finishes."""
    module = sys.modules.get(name)
    if module is not None:
        run_callback(callback, name, module)
        return
    with _finder.lock:
        _finder.callbacks.setdefault(name, []).append(callback)
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)


def pending() -> list[str]:
    """Modules whose import is still awaited."""
    with _finder.lock:
        return sorted(_finder.callbacks)


def clear_pending() -> None:
    """Forget awaited imports and leave ``sys.meta_path`` as it was (tests)."""
    with _finder.lock:
        _finder.callbacks.clear()
        if _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
