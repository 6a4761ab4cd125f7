"""Static audit of autotuned Triton kernels: find them in source trees and name the capture hazards.

The audit reads Python files with ``ast`` and never imports or runs them (unless ``compile_target`` is
given, which imports each module that holds a kernel and hands the kernel to ``graphtune.resources``).
It finds kernels wrapped by ``triton.autotune`` or ``graphtune.autotune`` under any import spelling,
as decorators (stacked with ``triton.heuristics`` / ``triton.jit`` in any order) or applied by call
(``k = triton.autotune(...)(triton.jit(f))``).

Config lists are counted by a small evaluator over the syntax tree (literals, module-level constants,
``range``, comprehensions, ``+ - * // % ** << >>``, ``triton.Config(...)``); anything else is reported
as dynamic, never evaluated.

Hazard codes (stable; ``severity`` is ``"hazard"`` or ``"info"``):

==========================  ========  =================================================================
code                        severity  meaning
==========================  ========  =================================================================
tunes-at-runtime            hazard    stock triton.autotune, several (or dynamic) configs and a key: a
                                      new key value is benchmarked on its first call, inside CUDA graph
                                      capture if warm-up missed it (the capture fails).
unknown-key                 hazard    a key name that is not a kernel parameter (dropped silently by
                                      triton 3.6, a ValueError in 3.9).
in-place-without-restore    hazard    a pointer the kernel both reads and writes (``tl.load`` and
                                      ``tl.store``, or a ``tl.atomic_*``) with no restore_value /
                                      reset_to_zero covering it: benchmarking changes the data.
does-not-fit                hazard    (``compile_target`` only) configs that exceed the target's limits.
dynamic-configs             info      the config count is not statically known: the audit cannot tell
                                      one config from many (tunes-at-runtime assumes many).
single-config               info      one config: triton skips benchmarking, capture-safe.
capture-safe                info      graphtune.autotune: never tunes inside capture.
tunes-on-first-call         info      stock triton.autotune with several configs and an empty key: tunes
                                      once per tensor-dtype combination, on the first call.
compile-skipped             info      (``compile_target`` only) the kernel could not be inspected.
==========================  ========  =================================================================
"""
from __future__ import annotations

import ast
import importlib.util
import itertools
import operator
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ._log import logger

HAZARD = "hazard"
INFO = "info"

# Directories never worth auditing when walking outside git (or for untracked files inside it).
_SKIP_DIRS = frozenset({".git", "__pycache__", ".venv", "venv", "env", "node_modules", "build", "dist",
                        ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", "site-packages"})

_TRITON_AUTOTUNE = frozenset({"triton.autotune", "triton.runtime.autotune", "triton.runtime.autotuner.autotune"})
_TRITON_HEURISTICS = frozenset({"triton.heuristics", "triton.runtime.heuristics",
                                "triton.runtime.autotuner.heuristics"})
_TRITON_JIT = frozenset({"triton.jit", "triton.runtime.jit.jit"})
_TRITON_CONFIG = frozenset({"triton.Config", "triton.runtime.Config", "triton.runtime.autotuner.Config"})

# Positional parameters of triton.autotune (3.6); graphtune.autotune is only trusted for the first two.
_TRITON_AUTOTUNE_ARGS = ("configs", "key", "prune_configs_by", "reset_to_zero", "restore_value")
_GRAPHTUNE_AUTOTUNE_ARGS = ("configs", "key")
_CONFIG_ARGS = ("kwargs", "num_warps", "num_stages", "num_ctas", "maxnreg")
_CONFIG_DEFAULTS = {"num_warps": 4, "num_stages": 3}  # triton.Config defaults: what runs when unset

# A pointer expression like ``x_ptr + row * stride + start`` has several parameter names in it; when
# one of them is named like a pointer, that one is the pointer.
_POINTER_NAME = re.compile(r"(ptr|Ptr|PTR|pointer|_p$)")

# Guard against ``range(10**9)`` and friends in a config list: the audit stays cheap on any input.
_MAX_ELEMENTS = 100_000

_EXPLANATIONS = {
    "tunes-at-runtime": "a new key value is benchmarked on its first call, inside CUDA graph capture if warm-up "
                        "missed it (the capture fails)",
    "unknown-key": "silently ignored by triton 3.6, an error in triton 3.9",
    "in-place-without-restore": "benchmarking runs the kernel many times on the caller's tensors and changes "
                                "the data",
    "dynamic-configs": "the audit cannot count them",
    "single-config": "triton skips benchmarking with one config: capture-safe",
    "capture-safe": "graphtune.autotune never tunes inside CUDA graph capture",
    "tunes-on-first-call": "tunes once per tensor-dtype combination on the first call; an eager warm-up covers it",
}


# --------------------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Hazard:
    code: str
    severity: str  # HAZARD or INFO
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "severity": self.severity, "message": self.message}


@dataclass(frozen=True)
class KernelAudit:
    """One autotuned kernel as found in source.

    ``key`` is None when the key is not a static list of names (its text is then in ``key_expr``).
    ``n_configs`` is None when the config list is dynamic (``configs == "dynamic"``, why in
    ``configs_reason``). ``reset_to_zero`` / ``restore_value`` / ``do_not_specialize`` are None when not
    given, a tuple when static, the expression text when not. ``num_warps`` / ``num_stages`` /
    ``constexprs`` are the distinct values seen (triton's defaults 4 / 3 where a Config leaves them out).
    """
    file: str
    line: int
    name: str
    function: str | None  # the decorated def (differs from name when applied by call: k = autotune(...)(f))
    wrapper: str  # "triton" or "graphtune"
    params: tuple[str, ...] | None
    key: tuple[str, ...] | None
    key_expr: str | None
    n_configs: int | None
    configs: str  # "static" or "dynamic"
    configs_reason: str | None
    num_warps: tuple[Any, ...]
    num_stages: tuple[Any, ...]
    constexprs: tuple[tuple[str, tuple[Any, ...]], ...]
    heuristics: tuple[str, ...]
    prune_configs_by: str | None
    reset_to_zero: tuple[str, ...] | str | None
    restore_value: tuple[str, ...] | str | None
    do_not_specialize: tuple[Any, ...] | str | None
    hazards: tuple[Hazard, ...] = ()

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(h.code for h in self.hazards)

    def to_dict(self) -> dict[str, Any]:
        def seq(value: Any) -> Any:
            return list(value) if isinstance(value, tuple) else value
        return {
            "file": self.file, "line": self.line, "name": self.name, "function": self.function,
            "wrapper": self.wrapper, "params": seq(self.params), "key": seq(self.key), "key_expr": self.key_expr,
            "n_configs": self.n_configs, "configs": self.configs, "configs_reason": self.configs_reason,
            "num_warps": list(self.num_warps), "num_stages": list(self.num_stages),
            "constexprs": {name: list(values) for name, values in self.constexprs},
            "heuristics": list(self.heuristics), "prune_configs_by": self.prune_configs_by,
            "reset_to_zero": seq(self.reset_to_zero), "restore_value": seq(self.restore_value),
            "do_not_specialize": seq(self.do_not_specialize),
            "hazards": [h.to_dict() for h in self.hazards],
        }


@dataclass(frozen=True)
class FileFailure:
    file: str
    error: str

    def to_dict(self) -> dict[str, str]:
        return {"file": self.file, "error": self.error}


@dataclass(frozen=True)
class AuditReport:
    """``files_scanned`` counts every Python file read, including those in ``files_failed``."""
    kernels: tuple[KernelAudit, ...]
    files_scanned: int
    files_failed: tuple[FileFailure, ...]
    compile_target: str | None = None
    compile_errors: tuple[FileFailure, ...] = ()

    @property
    def by_hazard(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for kernel in self.kernels:
            for hazard in kernel.hazards:
                counts[hazard.code] = counts.get(hazard.code, 0) + 1
        return dict(sorted(counts.items()))

    @property
    def n_hazards(self) -> int:
        """Findings of severity ``hazard`` (informational ones not counted)."""
        return sum(h.severity == HAZARD for k in self.kernels for h in k.hazards)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernels": [k.to_dict() for k in self.kernels],
            "summary": {
                "files_scanned": self.files_scanned,
                "files_failed": [f.to_dict() for f in self.files_failed],
                "kernels": len(self.kernels),
                "hazards": self.n_hazards,
                "by_hazard": self.by_hazard,
                "compile_target": self.compile_target,
                "compile_errors": [f.to_dict() for f in self.compile_errors],
            },
        }


# --------------------------------------------------------------------------------------------- public API


def audit_paths(paths: Iterable[str | os.PathLike[str]], *, compile_target: str | None = None,
                inspector: Callable[..., Iterable[Any]] | None = None) -> AuditReport:
    """Audit every Python file under ``paths`` (files or directories; .gitignore respected inside git).

    Read-only unless ``compile_target`` is given: then the module of each kernel is imported (it runs
    that code) and each kernel is inspected for that target with ``inspector`` (default
    ``graphtune.resources.inspect``; same signature, rows with ``.fits``, ``.reason``, ``.config``).
    """
    files = collect_files(paths)
    kernels: list[KernelAudit] = []
    failed: list[FileFailure] = []
    for path in files:
        try:
            found = audit_source(_read_source(path), str(path))
        except _Unparsable as exc:
            failed.append(FileFailure(str(path), str(exc)))
            logger.info("audit: skipped %s: %s", path, exc)
            continue
        except Exception as exc:  # an audit bug on odd input must cost one file, not the whole report
            failed.append(FileFailure(str(path), f"audit failed: {type(exc).__name__}: {exc}"))
            logger.warning("audit: %s could not be analysed", path, exc_info=True)
            continue
        kernels.extend(found)
    compile_errors: tuple[FileFailure, ...] = ()
    if compile_target is not None:
        kernels, compile_errors = _compile_check(kernels, compile_target, inspector)
    return AuditReport(tuple(kernels), len(files), tuple(failed), compile_target, compile_errors)


def audit_source(source: str | bytes, filename: str = "<source>") -> list[KernelAudit]:
    """The autotuned kernels of one module's source text; raises ValueError when it does not parse."""
    try:
        tree = ast.parse(source, filename=filename)
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError) as exc:
        raise _Unparsable(_describe_parse_error(exc)) from None
    # Every spelling of either autotune names it somewhere in the file (at least in an import): files
    # without the word are parsed, so that broken ones are still reported, but not analysed.
    marker = b"autotune" if isinstance(source, bytes) else "autotune"
    if marker not in source:  # type: ignore[operator]
        return []
    try:
        return _ModuleAudit(tree, filename).kernels()
    except RecursionError:
        raise _Unparsable("nested too deeply to analyse") from None


def collect_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The ``.py`` files under ``paths``, sorted and without duplicates. A file named explicitly is taken
    whatever its suffix or ignore status; directories are listed through git when inside a work tree."""
    seen: set[Path] = set()
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"audit: no such file or directory: {str(path)!r}")
        candidates = [path] if path.is_file() else _files_under(path)
        for file in candidates:
            resolved = file.resolve()
            if resolved not in seen:
                seen.add(resolved)
                out.append(file)
    return out


# --------------------------------------------------------------------------------------------- files


class _Unparsable(ValueError):
    pass


def _read_source(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _Unparsable(f"cannot read: {exc.strerror or exc}") from None
    if b"\x00" in data:
        raise _Unparsable("contains null bytes")
    return data


def _describe_parse_error(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        where = f" (line {exc.lineno})" if exc.lineno else ""
        return f"{type(exc).__name__}: {exc.msg}{where}"
    return f"{type(exc).__name__}: {exc}"


def _files_under(directory: Path) -> list[Path]:
    listed = _git_files(directory)
    if listed is None:
        listed = _walk_files(directory)
    return sorted(f for f in listed if f.suffix == ".py" and f.is_file())


def _git(directory: Path, *args: str) -> str | None:
    try:
        # surrogateescape: a file name that is not valid UTF-8 must not stop the listing
        done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True,
                              errors="surrogateescape", timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _git_files(directory: Path) -> list[Path] | None:
    """Files under ``directory`` that git tracks or would track (``.gitignore`` applied), or None outside
    a work tree or without git."""
    inside = _git(directory, "rev-parse", "--is-inside-work-tree")
    if inside is None or inside.strip() != "true":
        return None
    if _git(directory, "check-ignore", "-q", ".") is not None:
        return None  # the user named an ignored directory (a virtualenv, a vendored tree): audit it all
    tracked = _git(directory, "ls-files", "-z", "--cached")
    untracked = _git(directory, "ls-files", "-z", "--others", "--exclude-standard")
    if tracked is None or untracked is None:
        return None
    files = [directory / rel for rel in tracked.split("\0") if rel]
    # A repository that does not ignore its virtualenv would otherwise hand us all of site-packages.
    files += [directory / rel for rel in untracked.split("\0")
              if rel and not any(part in _SKIP_DIRS for part in Path(rel).parts[:-1])]
    return files


def _walk_files(directory: Path) -> list[Path]:
    out: list[Path] = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.endswith(".egg-info")
                         and not d.startswith("."))
        out.extend(Path(root) / n for n in names if n.endswith(".py"))
    return out


# --------------------------------------------------------------------------------------------- evaluator


class _Dynamic(Exception):
    """An expression the static evaluator does not handle; the message is the offending source text."""


@dataclass(frozen=True)
class _ConfigRecord:
    """A ``triton.Config(...)`` seen statically: the fields it was possible to evaluate."""
    kwargs: tuple[tuple[str, Any], ...]
    options: tuple[tuple[str, Any], ...]


def _snippet(node: ast.AST, limit: int = 80) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # unparse of odd trees is best effort: the text is only for messages
        text = type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
    ast.Div: operator.truediv, ast.BitOr: operator.or_, ast.BitAnd: operator.and_,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_, ast.IsNot: operator.is_not,
}
_SAFE_VALUE = (int, float, str, bool, type(None), list, tuple, dict, set, frozenset, _ConfigRecord)


class _Evaluator:
    """Evaluates a small, side-effect-free subset of Python over the syntax tree; raises _Dynamic on the rest."""

    def __init__(self, module: _ModuleAudit):
        self.module = module
        self._active: set[str] = set()  # module names being evaluated (guards A = B; B = A)

    def eval(self, node: ast.AST, scope: dict[str, Any] | None = None) -> Any:
        try:
            value = self._eval(node, scope or {})
        except RecursionError:
            raise _Dynamic(f"{_snippet(node)} (nested too deeply)") from None
        self._check_size(value, node)
        return value

    def _check_size(self, value: Any, node: ast.AST) -> None:
        if isinstance(value, (list, tuple, set, frozenset, dict, str)) and len(value) > _MAX_ELEMENTS:
            raise _Dynamic(f"{_snippet(node)} (more than {_MAX_ELEMENTS} elements)")
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**64:
            raise _Dynamic(f"{_snippet(node)} (integer too large)")

    def _eval(self, node: ast.AST, scope: dict[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items: list[Any] = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    items.extend(self._iterable(elt.value, scope))
                else:
                    items.append(self._eval(elt, scope))
            return tuple(items) if isinstance(node, ast.Tuple) else items
        if isinstance(node, ast.Dict):
            out: dict[Any, Any] = {}
            for k, v in zip(node.keys, node.values):
                if k is None:  # {**other}
                    other = self._eval(v, scope)
                    if not isinstance(other, dict):
                        raise _Dynamic(_snippet(v))
                    out.update(other)
                else:
                    out[self._hashable(self._eval(k, scope), k)] = self._eval(v, scope)
            return out
        if isinstance(node, ast.Name):
            return self._name(node, scope)
        if isinstance(node, ast.BinOp):
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise _Dynamic(_snippet(node))
            left, right = self._eval(node.left, scope), self._eval(node.right, scope)
            self._guard_binop(node, left, right)
            try:
                value = op(left, right)
            except Exception:
                raise _Dynamic(_snippet(node)) from None
            self._check_size(value, node)
            return value
        if isinstance(node, ast.UnaryOp):
            operand = self._eval(node.operand, scope)
            try:
                if isinstance(node.op, ast.USub):
                    return -operand
                if isinstance(node.op, ast.UAdd):
                    return +operand
                if isinstance(node.op, ast.Not):
                    return not operand
                if isinstance(node.op, ast.Invert):
                    return ~operand
            except Exception:
                raise _Dynamic(_snippet(node)) from None
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                result: Any = True
                for value_node in node.values:
                    result = self._eval(value_node, scope)
                    if not result:
                        return result
                return result
            result = False
            for value_node in node.values:
                result = self._eval(value_node, scope)
                if result:
                    return result
            return result
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, scope)
            for op_node, right_node in zip(node.ops, node.comparators):
                right = self._eval(right_node, scope)
                try:
                    if not _CMPOPS[type(op_node)](left, right):
                        return False
                except Exception:
                    raise _Dynamic(_snippet(node)) from None
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self._eval(node.body if self._eval(node.test, scope) else node.orelse, scope)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return [value for value in self._comprehension(node.generators, node.elt, scope)]
        if isinstance(node, ast.DictComp):
            pairs = self._comprehension(node.generators, ast.Tuple([node.key, node.value], ast.Load()), scope)
            return {self._hashable(k, node.key): v for k, v in pairs}
        if isinstance(node, ast.Subscript):
            container = self._eval(node.value, scope)
            index = self._slice(node.slice, scope)
            try:
                return container[index]
            except Exception:
                raise _Dynamic(_snippet(node)) from None
        if isinstance(node, ast.Call):
            return self._call(node, scope)
        raise _Dynamic(_snippet(node))

    def _guard_binop(self, node: ast.BinOp, left: Any, right: Any) -> None:
        # Refuse operations whose result could be huge before computing it ([x] * 10**9, 2 ** 10**6).
        if isinstance(node.op, ast.Mult):
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, (list, tuple, str)) and isinstance(count, int) \
                        and len(seq) * max(count, 0) > _MAX_ELEMENTS:
                    raise _Dynamic(f"{_snippet(node)} (more than {_MAX_ELEMENTS} elements)")
        if isinstance(node.op, (ast.Pow, ast.LShift)) and isinstance(right, int) and right > 256:
            raise _Dynamic(f"{_snippet(node)} (integer too large)")

    def _slice(self, node: ast.AST, scope: dict[str, Any]) -> Any:
        if isinstance(node, ast.Slice):
            return slice(*(None if part is None else self._eval(part, scope)
                           for part in (node.lower, node.upper, node.step)))
        return self._eval(node, scope)

    def _hashable(self, value: Any, node: ast.AST) -> Any:
        try:
            hash(value)
        except TypeError:
            raise _Dynamic(_snippet(node)) from None
        return value

    def _iterable(self, node: ast.AST, scope: dict[str, Any]) -> list[Any]:
        value = self._eval(node, scope)
        if isinstance(value, dict):
            return list(value)
        if isinstance(value, (list, tuple, set, frozenset, str)):
            return list(value)
        raise _Dynamic(f"{_snippet(node)} (not a list)")

    def _comprehension(self, generators: list[ast.comprehension], elt: ast.AST,
                       scope: dict[str, Any]) -> list[Any]:
        out: list[Any] = []

        def walk(level: int, inner: dict[str, Any]) -> None:
            if level == len(generators):
                out.append(self._eval(elt, inner))
                if len(out) > _MAX_ELEMENTS:
                    raise _Dynamic(f"comprehension over more than {_MAX_ELEMENTS} elements")
                return
            gen = generators[level]
            if gen.is_async:
                raise _Dynamic("async comprehension")
            for item in self._iterable(gen.iter, inner):
                bound = dict(inner)
                self._bind(gen.target, item, bound)
                if all(self._eval(cond, bound) for cond in gen.ifs):
                    walk(level + 1, bound)

        walk(0, dict(scope))
        return out

    def _bind(self, target: ast.AST, value: Any, scope: dict[str, Any]) -> None:
        if isinstance(target, ast.Name):
            scope[target.id] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in target.elts):
            try:
                values = list(value)
            except TypeError:
                raise _Dynamic(_snippet(target)) from None
            if len(values) != len(target.elts):
                raise _Dynamic(f"{_snippet(target)} (cannot unpack {len(values)} values)")
            for sub, sub_value in zip(target.elts, values):
                self._bind(sub, sub_value, scope)
            return
        raise _Dynamic(_snippet(target))

    def _name(self, node: ast.Name, scope: dict[str, Any]) -> Any:
        if node.id in scope:
            return scope[node.id]
        definition = self.module.constants.get(node.id)
        if definition is None:
            raise _Dynamic(node.id)
        if node.id in self._active:
            raise _Dynamic(f"{node.id} (defined in terms of itself)")
        self._active.add(node.id)
        try:
            return self._eval(definition, {})
        except _Dynamic as exc:
            raise _Dynamic(f"{node.id}: {exc}") from None
        finally:
            self._active.discard(node.id)

    def _call(self, node: ast.Call, scope: dict[str, Any]) -> Any:
        if isinstance(node.func, ast.Name) and node.func.id in scope:
            raise _Dynamic(_snippet(node))
        target = self.module.resolve(node.func)
        if target is not None and self.module.is_config(target):
            return self.config(node, scope, lenient=False)
        # A zero-argument module function that only returns an expression: ``def configs(): return [...]``.
        if isinstance(node.func, ast.Name) and not node.args and not node.keywords \
                and node.func.id in self.module.simple_functions:
            name = node.func.id
            if name in self._active:
                raise _Dynamic(f"{name}() (recursive)")
            self._active.add(name)
            try:
                return self._eval(self.module.simple_functions[name], {})
            except _Dynamic as exc:
                raise _Dynamic(f"{name}(): {exc}") from None
            finally:
                self._active.discard(name)
        if isinstance(node.func, ast.Name) and node.func.id not in self.module.bound_names:
            builtin = _BUILTINS.get(node.func.id)
            if builtin is not None:
                return builtin(self, node, scope)
        if target == "itertools.product":
            if node.keywords and any(k.arg != "repeat" for k in node.keywords):
                raise _Dynamic(_snippet(node))
            repeat = self._eval(node.keywords[0].value, scope) if node.keywords else 1
            pools = [self._iterable(arg, scope) for arg in node.args]
            total = 1
            for pool in pools:
                total *= len(pool)
            if not isinstance(repeat, int) or total ** max(repeat, 0) > _MAX_ELEMENTS:
                raise _Dynamic(f"{_snippet(node)} (more than {_MAX_ELEMENTS} elements)")
            return [tuple(p) for p in itertools.product(*pools, repeat=repeat)]
        raise _Dynamic(_snippet(node))

    def _args(self, node: ast.Call, scope: dict[str, Any]) -> list[Any]:
        if node.keywords:
            raise _Dynamic(_snippet(node))
        values: list[Any] = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                values.extend(self._iterable(arg.value, scope))
            else:
                values.append(self._eval(arg, scope))
        return values

    def config(self, node: ast.Call, scope: dict[str, Any], *, lenient: bool) -> _ConfigRecord:
        """A Config call as a record; ``lenient`` skips fields it cannot evaluate instead of raising."""
        given: dict[str, ast.AST] = {}
        for name, arg in zip(_CONFIG_ARGS, node.args):
            if isinstance(arg, ast.Starred):
                if lenient:
                    break
                raise _Dynamic(_snippet(node))
            given[name] = arg
        for kw in node.keywords:
            if kw.arg is None:
                if not lenient:
                    raise _Dynamic(_snippet(node))
                continue
            given[kw.arg] = kw.value

        def value_of(arg: ast.AST) -> tuple[bool, Any]:
            try:
                return True, self._eval(arg, scope)
            except _Dynamic:
                if lenient:
                    return False, None
                raise

        kwargs: list[tuple[str, Any]] = []
        if "kwargs" in given:
            arg = given["kwargs"]
            if isinstance(arg, ast.Dict) and lenient:
                # Evaluate entry by entry so that one unknown value does not hide the others.
                for k, v in zip(arg.keys, arg.values):
                    if k is None:
                        continue
                    ok_key, key = value_of(k)
                    ok_value, value = value_of(v)
                    if ok_key and ok_value and isinstance(key, str):
                        kwargs.append((key, value))
            else:
                ok, value = value_of(arg)
                if ok and isinstance(value, dict):
                    kwargs = [(str(k), v) for k, v in value.items()]
                elif ok and not lenient:
                    raise _Dynamic(_snippet(arg))
        options: list[tuple[str, Any]] = []
        for name in _CONFIG_ARGS[1:]:
            if name in given:
                ok, value = value_of(given[name])
                if ok:
                    options.append((name, value))
            elif name in _CONFIG_DEFAULTS:
                options.append((name, _CONFIG_DEFAULTS[name]))
        return _ConfigRecord(tuple(kwargs), tuple(options))


def _builtin_range(ev: _Evaluator, node: ast.Call, scope: dict[str, Any]) -> list[int]:
    args = ev._args(node, scope)
    if not 1 <= len(args) <= 3 or not all(isinstance(a, int) for a in args):
        raise _Dynamic(_snippet(node))
    values = range(*args)
    if len(values) > _MAX_ELEMENTS:
        raise _Dynamic(f"{_snippet(node)} (more than {_MAX_ELEMENTS} elements)")
    return list(values)


def _builtin_sequence(kind: type) -> Callable[[_Evaluator, ast.Call, dict[str, Any]], Any]:
    def build(ev: _Evaluator, node: ast.Call, scope: dict[str, Any]) -> Any:
        if node.keywords or len(node.args) > 1:
            raise _Dynamic(_snippet(node))
        return kind(ev._iterable(node.args[0], scope)) if node.args else kind()
    return build


def _builtin_dict(ev: _Evaluator, node: ast.Call, scope: dict[str, Any]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    if len(node.args) > 1:
        raise _Dynamic(_snippet(node))
    if node.args:
        base = ev._eval(node.args[0], scope)
        if not isinstance(base, dict):
            raise _Dynamic(_snippet(node))
        out.update(base)
    for kw in node.keywords:
        if kw.arg is None:
            raise _Dynamic(_snippet(node))
        out[kw.arg] = ev._eval(kw.value, scope)
    return out


def _builtin_plain(fn: Callable[..., Any]) -> Callable[[_Evaluator, ast.Call, dict[str, Any]], Any]:
    def call(ev: _Evaluator, node: ast.Call, scope: dict[str, Any]) -> Any:
        try:
            value = fn(*ev._args(node, scope))
        except _Dynamic:
            raise
        except Exception:
            raise _Dynamic(_snippet(node)) from None
        if not isinstance(value, _SAFE_VALUE):
            raise _Dynamic(_snippet(node))
        return list(value) if isinstance(value, (set, frozenset)) else value
    return call


_BUILTINS: dict[str, Callable[[_Evaluator, ast.Call, dict[str, Any]], Any]] = {
    "range": _builtin_range,
    "list": _builtin_sequence(list),
    "tuple": _builtin_sequence(tuple),
    "dict": _builtin_dict,
    "len": _builtin_plain(len),
    "min": _builtin_plain(min),
    "max": _builtin_plain(max),
    "abs": _builtin_plain(abs),
    "int": _builtin_plain(int),
    "sorted": _builtin_plain(sorted),
}


# --------------------------------------------------------------------------------------------- one module


@dataclass
class _Decorator:
    kind: str  # "triton-autotune", "graphtune-autotune", "heuristics", "jit"
    call: ast.Call | None  # the call that carries its arguments (None for a bare @triton.jit)


@dataclass
class _Candidate:
    line: int
    name: str
    function: ast.FunctionDef | ast.AsyncFunctionDef | None
    function_name: str | None
    decorators: list[_Decorator] = field(default_factory=list)


def _package_of(filename: str) -> list[str]:
    """Dotted package of a file on disk, found by walking up through ``__init__.py`` files."""
    parts: list[str] = []
    try:
        directory = Path(filename).resolve().parent
    except (OSError, RuntimeError):
        return parts
    while (directory / "__init__.py").is_file() and directory.name:
        parts.insert(0, directory.name)
        directory = directory.parent
    return parts


class _ModuleAudit:
    def __init__(self, tree: ast.Module, filename: str):
        self.tree = tree
        self.filename = filename
        self.aliases: dict[str, str] = {}
        self.constants: dict[str, ast.AST] = {}
        self.simple_functions: dict[str, ast.AST] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.bound_names: set[str] = set()
        self._collect_imports()
        self._collect_module_names()
        self.evaluator = _Evaluator(self)

    # -- names

    def _collect_imports(self) -> None:
        package: list[str] | None = None
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.aliases[top] = top
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:
                    if package is None:
                        package = _package_of(self.filename)
                    keep = len(package) - (node.level - 1)
                    base = ".".join(package[:keep]) if keep > 0 else ""
                    module = ".".join(p for p in (base, module) if p) if base else "." * node.level + module
                for alias in node.names:
                    if alias.name != "*":
                        self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}" if module else alias.name

    def _collect_module_names(self) -> None:
        bindings: dict[str, list[ast.AST]] = {}

        def bind(name: str, value: ast.AST | None) -> None:
            bindings.setdefault(name, []).append(value if value is not None else ast.Pass())

        def targets(target: ast.AST, value: ast.AST | None) -> None:
            if isinstance(target, ast.Name):
                bind(target.id, value)
            elif isinstance(target, (ast.Tuple, ast.List)):
                for elt in target.elts:
                    targets(elt.value if isinstance(elt, ast.Starred) else elt, None)

        def visit(statements: list[ast.stmt], top: bool) -> None:
            for stmt in statements:
                if isinstance(stmt, ast.Assign):
                    for target in stmt.targets:
                        targets(target, stmt.value if top and len(stmt.targets) == 1 else None)
                elif isinstance(stmt, ast.AnnAssign):
                    targets(stmt.target, stmt.value if top else None)
                elif isinstance(stmt, ast.AugAssign):
                    targets(stmt.target, None)
                elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    bind(stmt.name, stmt if top else None)
                elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    for alias in stmt.names:
                        bind(alias.asname or alias.name.split(".")[0], None)
                elif isinstance(stmt, (ast.For, ast.AsyncFor)):
                    targets(stmt.target, None)
                    visit(stmt.body + stmt.orelse, False)
                elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                    for item in stmt.items:
                        if item.optional_vars is not None:
                            targets(item.optional_vars, None)
                    visit(stmt.body, False)
                elif isinstance(stmt, (ast.If, ast.While)):
                    visit(stmt.body + stmt.orelse, False)
                elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
                    visit(stmt.body + stmt.orelse + stmt.finalbody, False)  # type: ignore[attr-defined]
                    for handler in stmt.handlers:  # type: ignore[attr-defined]
                        if handler.name:
                            bind(handler.name, None)
                        visit(handler.body, False)

        visit(self.tree.body, True)
        self.bound_names = set(bindings)
        for name, values in bindings.items():
            if len(values) != 1:
                continue  # rebound somewhere: its value at the kernel's definition is not static
            value = values[0]
            if isinstance(value, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = [s for s in value.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                                      and isinstance(s.value.value, str))]
                args = value.args
                no_args = not (args.posonlyargs or args.args or args.kwonlyargs or args.vararg or args.kwarg)
                if no_args and not value.decorator_list and len(body) == 1 and isinstance(body[0], ast.Return) \
                        and body[0].value is not None:
                    self.simple_functions[name] = body[0].value
            elif isinstance(value, ast.expr):
                self.constants[name] = value
                # ``my_autotune = triton.autotune``: an alias, resolved like an import.
                if isinstance(value, (ast.Name, ast.Attribute)):
                    dotted = self.resolve(value)
                    if dotted and dotted.split(".")[0] in ("triton", "graphtune"):
                        self.aliases[name] = dotted
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, node)

    def resolve(self, node: ast.AST) -> str | None:
        """Dotted name an expression refers to through the module's imports (``tt.autotune`` ->
        ``triton.autotune``); an unimported name stands for itself."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    @staticmethod
    def is_config(dotted: str) -> bool:
        return dotted in _TRITON_CONFIG or (dotted.startswith("graphtune.") and dotted.endswith(".Config"))

    def _decorator_kind(self, dotted: str | None) -> str | None:
        if dotted is None:
            return None
        if dotted in _TRITON_AUTOTUNE:
            return "triton-autotune"
        if dotted.startswith("graphtune.") and dotted.endswith(".autotune"):
            return "graphtune-autotune"
        if dotted in _TRITON_HEURISTICS:
            return "heuristics"
        if dotted in _TRITON_JIT:
            return "jit"
        return None

    def _decorator(self, node: ast.AST) -> _Decorator | None:
        if isinstance(node, ast.Call):
            kind = self._decorator_kind(self.resolve(node.func))
            return _Decorator(kind, node) if kind else None
        kind = self._decorator_kind(self.resolve(node))
        return _Decorator(kind, None) if kind == "jit" else None  # only jit is usable bare

    # -- discovery

    def _candidates(self) -> list[_Candidate]:
        found: list[_Candidate] = []
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.decorator_list:
                decorators = [d for d in map(self._decorator, node.decorator_list) if d is not None]
                if any(d.kind.endswith("autotune") for d in decorators):
                    found.append(_Candidate(node.lineno, node.name, node, node.name, decorators))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
                target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                candidate = self._applied(node.value, _snippet(target), node.lineno)
                if candidate is not None:
                    found.append(candidate)
        return sorted(found, key=lambda c: (c.line, c.name))

    def _applied(self, expr: ast.expr, name: str, line: int) -> _Candidate | None:
        """``autotune(...)(heuristics(...)(jit(f)))`` and the like: the decorators applied by call."""
        decorators: list[_Decorator] = []
        while isinstance(expr, ast.Call):
            if isinstance(expr.func, ast.Call):  # factory(...)(target)
                decorator = self._decorator(expr.func)
                if decorator is None or len(expr.args) != 1 or expr.keywords:
                    return None
                decorators.append(decorator)
                expr = expr.args[0]
            elif self._decorator_kind(self.resolve(expr.func)) == "jit" and len(expr.args) == 1:
                decorators.append(_Decorator("jit", expr))  # triton.jit(f, do_not_specialize=[...])
                expr = expr.args[0]
            else:
                return None
        if not any(d.kind.endswith("autotune") for d in decorators):
            return None
        function = self.functions.get(expr.id) if isinstance(expr, ast.Name) else None
        if function is not None:
            decorators += [d for d in map(self._decorator, function.decorator_list) if d is not None]
        return _Candidate(line, name, function, _snippet(expr), decorators)

    def kernels(self) -> list[KernelAudit]:
        return [self._kernel(candidate) for candidate in self._candidates()]

    # -- one kernel

    def _kernel(self, cand: _Candidate) -> KernelAudit:
        tuner = next(d for d in cand.decorators if d.kind.endswith("autotune"))
        wrapper = "triton" if tuner.kind == "triton-autotune" else "graphtune"
        names = _TRITON_AUTOTUNE_ARGS if wrapper == "triton" else _GRAPHTUNE_AUTOTUNE_ARGS
        args = _call_arguments(tuner.call, names)

        params = _parameters(cand.function) if cand.function is not None else None
        key, key_expr = self._names_argument(args.get("key"))

        n_configs: int | None = None
        reason: str | None = None
        records: list[_ConfigRecord] = []
        if "configs" not in args:
            reason = "no configs argument"
        else:
            try:
                configs = self.evaluator.eval(args["configs"])
            except _Dynamic as exc:
                reason = str(exc)
            else:
                if isinstance(configs, (list, tuple)):
                    n_configs = len(configs)
                    records = [c for c in configs if isinstance(c, _ConfigRecord)]
                else:
                    reason = f"{_snippet(args['configs'])} is not a list"
            if n_configs is None:
                records = self._configs_in_text(args["configs"])

        reset = self._names_or_text(args.get("reset_to_zero"))
        restore = self._names_or_text(args.get("restore_value"))
        prune = args.get("prune_configs_by")
        prune_text = None if prune is None or (isinstance(prune, ast.Constant) and prune.value is None) \
            else _snippet(prune, 200)

        do_not_specialize: tuple[Any, ...] | str | None = None
        heuristic_names: list[str] = []
        for decorator in cand.decorators:
            if decorator.kind == "jit" and decorator.call is not None:
                jit_args = _call_arguments(decorator.call, ())
                if "do_not_specialize" in jit_args:
                    do_not_specialize = self._values_or_text(jit_args["do_not_specialize"])
            elif decorator.kind == "heuristics" and decorator.call is not None:
                values = _call_arguments(decorator.call, ("values",)).get("values")
                if isinstance(values, ast.Dict):
                    heuristic_names += [k.value for k in values.keys
                                        if isinstance(k, ast.Constant) and isinstance(k.value, str)]

        warps, stages, constexprs = _distinct_fields(records)
        in_place = self._in_place(cand.function, params) if cand.function is not None else []
        # A restore list the audit cannot read might cover anything: do not accuse the kernel then.
        covered = None if isinstance(reset, str) or isinstance(restore, str) \
            else set(reset or ()) | set(restore or ())

        hazards = _hazards(cand, wrapper, params, key, n_configs, reason, in_place, covered)
        return KernelAudit(
            file=self.filename, line=cand.line, name=cand.name, function=cand.function_name, wrapper=wrapper,
            params=params, key=key, key_expr=key_expr, n_configs=n_configs,
            configs="static" if n_configs is not None else "dynamic", configs_reason=reason,
            num_warps=warps, num_stages=stages, constexprs=constexprs, heuristics=tuple(heuristic_names),
            prune_configs_by=prune_text, reset_to_zero=reset, restore_value=restore,
            do_not_specialize=do_not_specialize, hazards=hazards)

    def _names_argument(self, node: ast.AST | None) -> tuple[tuple[str, ...] | None, str | None]:
        if node is None:
            return (), None
        try:
            value = self.evaluator.eval(node)
        except _Dynamic:
            return None, _snippet(node, 200)
        if isinstance(value, str):
            value = [value]
        if isinstance(value, dict):  # a graphtune key may map names to bucket specs
            value = list(value)
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return tuple(value), None
        return None, _snippet(node, 200)

    def _names_or_text(self, node: ast.AST | None) -> tuple[str, ...] | str | None:
        if node is None or (isinstance(node, ast.Constant) and node.value is None):
            return None
        names, text = self._names_argument(node)
        return names if names is not None else text

    def _values_or_text(self, node: ast.AST) -> tuple[Any, ...] | str:
        try:
            value = self.evaluator.eval(node)
        except _Dynamic:
            return _snippet(node, 200)
        if isinstance(value, (list, tuple)) and all(isinstance(v, (int, str)) for v in value):
            return tuple(value)
        return _snippet(node, 200)

    def _configs_in_text(self, node: ast.AST) -> list[_ConfigRecord]:
        """Config calls written inside a dynamic config expression (following module names it uses),
        with whatever fields are literal: the values are still worth showing when the count is not."""
        records: list[_ConfigRecord] = []
        seen: set[str] = set()
        pending: list[ast.AST] = [node]
        while pending:
            current = pending.pop()
            for sub in ast.walk(current):
                if isinstance(sub, ast.Call):
                    dotted = self.resolve(sub.func)
                    if dotted is not None and self.is_config(dotted):
                        records.append(self.evaluator.config(sub, {}, lenient=True))
                        continue
                if isinstance(sub, ast.Name) and sub.id not in seen:
                    seen.add(sub.id)
                    definition = self.constants.get(sub.id) or self.functions.get(sub.id)
                    # Plain helper functions (``def get_configs(): ...``), never kernels (decorated).
                    if definition is not None and not getattr(definition, "decorator_list", None):
                        pending.append(definition)
        return records

    def _in_place(self, function: ast.FunctionDef | ast.AsyncFunctionDef, params: tuple[str, ...] | None
                  ) -> list[str]:
        """Pointer parameters that the kernel body both loads from and stores to (atomics count as both)."""
        if not params:
            return []
        constexpr = {a.arg for a in _all_args(function) if a.annotation is not None
                     and _snippet(a.annotation).split(".")[-1] in ("constexpr", "int", "float", "bool")}
        pointers = set(params) - constexpr
        assigned: dict[str, list[ast.AST]] = {}
        for node in ast.walk(function):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        assigned.setdefault(target.id, []).append(node.value)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name) \
                    and node.value is not None:
                assigned.setdefault(node.target.id, []).append(node.value)

        def bases(expr: ast.AST, visiting: frozenset[str]) -> set[str]:
            if isinstance(expr, ast.Name):
                found = {expr.id} if expr.id in pointers else set()
                if expr.id in assigned and expr.id not in visiting:
                    for value in assigned[expr.id]:
                        found |= bases(value, visiting | {expr.id})
                return found
            if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
                return bases(expr.left, visiting) | bases(expr.right, visiting)
            if isinstance(expr, ast.Subscript):  # ptr[:, None]
                return bases(expr.value, visiting)
            if isinstance(expr, ast.IfExp):
                return bases(expr.body, visiting) | bases(expr.orelse, visiting)
            if isinstance(expr, ast.Call):
                dotted = self.resolve(expr.func) or ""
                leaf = dotted.rsplit(".", 1)[-1]
                if leaf == "make_block_ptr" or leaf == "make_tensor_descriptor":
                    base = _call_arguments(expr, ("base",)).get("base")
                    return bases(base, visiting) if base is not None else set()
                if leaf in ("advance", "multiple_of", "max_contiguous", "max_constancy") and expr.args:
                    return bases(expr.args[0], visiting)
            return set()

        def pointer_of(expr: ast.AST) -> set[str]:
            found = bases(expr, frozenset())
            named = {n for n in found if _POINTER_NAME.search(n)}
            return named or found

        loads: set[str] = set()
        stores: set[str] = set()
        for node in ast.walk(function):
            if not isinstance(node, ast.Call):
                continue
            dotted = self.resolve(node.func) or ""
            if not (dotted.startswith("triton.language.") or dotted.startswith("tl.")):
                continue
            op = dotted.rsplit(".", 1)[-1]
            pointer = _call_arguments(node, ("pointer",)).get("pointer")
            if pointer is None:
                continue
            if op == "load":
                loads |= pointer_of(pointer)
            elif op == "store":
                stores |= pointer_of(pointer)
            elif op.startswith("atomic_"):  # read-modify-write: accumulates across benchmark runs
                loads |= pointer_of(pointer)
                stores |= pointer_of(pointer)
        return [p for p in params if p in loads and p in stores]


# --------------------------------------------------------------------------------------------- helpers


def _call_arguments(call: ast.Call | None, positional: tuple[str, ...]) -> dict[str, ast.AST]:
    if call is None:
        return {}
    out: dict[str, ast.AST] = {}
    for name, arg in zip(positional, call.args):
        if isinstance(arg, ast.Starred):
            break
        out[name] = arg
    for kw in call.keywords:
        if kw.arg is not None:
            out[kw.arg] = kw.value
    return out


def _all_args(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    args = function.args
    return [*args.posonlyargs, *args.args, *args.kwonlyargs]


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    return tuple(a.arg for a in _all_args(function))


def _sort_key(value: Any) -> tuple[int, Any]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value)
    return (1, repr(value))


def _distinct(values: Iterable[Any]) -> tuple[Any, ...]:
    unique: dict[str, Any] = {}
    for value in values:
        unique.setdefault(repr(value), value)
    return tuple(sorted(unique.values(), key=_sort_key))


def _distinct_fields(records: list[_ConfigRecord]
                     ) -> tuple[tuple[Any, ...], tuple[Any, ...], tuple[tuple[str, tuple[Any, ...]], ...]]:
    warps = _distinct(v for r in records for k, v in r.options if k == "num_warps")
    stages = _distinct(v for r in records for k, v in r.options if k == "num_stages")
    by_name: dict[str, list[Any]] = {}
    for record in records:
        for name, value in record.kwargs:
            by_name.setdefault(name, []).append(value)
    constexprs = tuple((name, _distinct(values)) for name, values in sorted(by_name.items()))
    return warps, stages, constexprs


def _hazards(cand: _Candidate, wrapper: str, params: tuple[str, ...] | None, key: tuple[str, ...] | None,
             n_configs: int | None, reason: str | None, in_place: list[str], covered: set[str] | None
             ) -> tuple[Hazard, ...]:
    out: list[Hazard] = []
    several = n_configs is None or n_configs > 1
    count = "a dynamic number of" if n_configs is None else str(n_configs)
    key_text = "a dynamic key" if key is None else f"key {list(key)}"
    if wrapper == "triton" and several and (key is None or key):
        out.append(Hazard("tunes-at-runtime", HAZARD,
                          f"{count} configs and {key_text}: {_EXPLANATIONS['tunes-at-runtime']}"))
    if wrapper == "triton" and several and key == ():
        out.append(Hazard("tunes-on-first-call", INFO,
                          f"{count} configs and an empty key: {_EXPLANATIONS['tunes-on-first-call']}"))
    if wrapper == "graphtune":
        out.append(Hazard("capture-safe", INFO, _EXPLANATIONS["capture-safe"]))
    if key and params is not None:
        unknown = [k for k in key if k not in params]
        if unknown:
            out.append(Hazard("unknown-key", HAZARD,
                              f"key name(s) {unknown} are not parameters of {cand.function_name}: "
                              f"{_EXPLANATIONS['unknown-key']}"))
    # With one config nothing is benchmarked, so an in-place kernel runs exactly once per call.
    if several and covered is not None:
        exposed = [p for p in in_place if p not in covered]
        if exposed:
            out.append(Hazard("in-place-without-restore", HAZARD,
                              f"{exposed} loaded and stored with no restore_value/reset_to_zero: "
                              f"{_EXPLANATIONS['in-place-without-restore']}"))
    if n_configs is None:
        out.append(Hazard("dynamic-configs", INFO,
                          f"configs not statically known ({reason}): {_EXPLANATIONS['dynamic-configs']}"))
    elif n_configs <= 1:
        out.append(Hazard("single-config", INFO,
                          f"{n_configs} config{'s' if n_configs != 1 else ''}: {_EXPLANATIONS['single-config']}"))
    return tuple(out)


# --------------------------------------------------------------------------------------------- --compile


def _compile_check(kernels: list[KernelAudit], target: str, inspect: Callable[..., Iterable[Any]] | None
                   ) -> tuple[list[KernelAudit], tuple[FileFailure, ...]]:
    """Import each kernel's module and inspect the kernel for ``target``; adds does-not-fit / compile-skipped."""
    if inspect is None:
        try:
            from . import resources
            inspect = resources.inspect
        except Exception as exc:  # resources is optional here: the static audit still stands without it
            message = f"graphtune.resources is not available ({type(exc).__name__}: {exc})"
            return [_with(k, Hazard("compile-skipped", INFO, message)) for k in kernels], ()
        resources.get_target(target)  # an unknown target is the caller's mistake: say so once, not per kernel

    modules: dict[str, Any] = {}
    errors: dict[str, str] = {}
    out: list[KernelAudit] = []
    for kernel in kernels:
        if kernel.file not in modules and kernel.file not in errors:
            try:
                modules[kernel.file] = _import_file(kernel.file)
            except BaseException as exc:  # audited code may raise anything, SystemExit included
                if isinstance(exc, KeyboardInterrupt):
                    raise
                errors[kernel.file] = f"import failed: {type(exc).__name__}: {exc}"
                logger.warning("audit: %s: %s", kernel.file, errors[kernel.file])
        if kernel.file in errors:
            out.append(_with(kernel, Hazard("compile-skipped", INFO, errors[kernel.file])))
            continue
        out.append(_inspect_kernel(kernel, modules[kernel.file], inspect, target))
    return out, tuple(FileFailure(f, e) for f, e in sorted(errors.items()))


def _inspect_kernel(kernel: KernelAudit, module: Any, inspect: Callable[..., Any], target: str) -> KernelAudit:
    obj = getattr(module, kernel.name, None) if kernel.name.isidentifier() else None
    if obj is None:
        return _with(kernel, Hazard("compile-skipped", INFO, f"{kernel.name} is not a module-level name"))
    signature = _attribute_down(obj, "graphtune_signature")
    if signature is None:
        return _with(kernel, Hazard("compile-skipped", INFO, "needs a signature, skipped"))
    constexprs = _attribute_down(obj, "graphtune_constexprs")
    try:
        rows = list(inspect(obj, target=target, signature=signature, constexprs=constexprs))
    except Exception as exc:
        return _with(kernel, Hazard("compile-skipped", INFO, f"inspect failed: {type(exc).__name__}: {exc}"))
    misfits = [row for row in rows if not getattr(row, "fits", True)]
    if not misfits:
        return kernel
    listed = "; ".join(f"{getattr(row, 'label', None) or _label(getattr(row, 'config', None))}: "
                       f"{getattr(row, 'reason', '') or 'does not fit'}" for row in misfits)
    return _with(kernel, Hazard("does-not-fit", HAZARD,
                                f"{len(misfits)} of {len(rows)} configs do not fit {target}: {listed}"))


def _attribute_down(obj: Any, name: str) -> Any:
    """``name`` on the kernel object or on any wrapper below it (autotuner -> heuristics -> jit, via ``.fn``)."""
    for _ in range(32):
        value = getattr(obj, name, None)
        if value is not None or not hasattr(obj, "fn"):
            return value
        obj = obj.fn
    return None


def _label(config: Any) -> str:
    from .configs import config_label
    try:
        return config_label(config)
    except Exception:  # a row type we do not know: its text is still useful
        return str(config)


def _with(kernel: KernelAudit, hazard: Hazard) -> KernelAudit:
    from dataclasses import replace
    return replace(kernel, hazards=kernel.hazards + (hazard,))


def _import_file(filename: str) -> Any:
    """Import a file by path. A file inside a package is imported under its dotted name (so that relative
    imports work), with the package root put on sys.path for the duration."""
    path = Path(filename).resolve()
    package = _package_of(str(path))
    if package:
        dotted = ".".join([*package, path.stem]) if path.stem != "__init__" else ".".join(package)
        existing = sys.modules.get(dotted)
        if existing is not None and Path(getattr(existing, "__file__", "") or "").resolve() == path:
            return existing
        root = path.parents[len(package)]
    else:
        dotted = f"_graphtune_audit_{abs(hash(str(path))):x}_{path.stem}"
        root = path.parent
    spec = importlib.util.spec_from_file_location(dotted, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {str(path)!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[dotted] = module
    sys.path.insert(0, str(root))
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(dotted, None)
        raise
    finally:
        try:
            sys.path.remove(str(root))
        except ValueError:
            pass
    return module
