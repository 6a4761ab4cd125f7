"""Static audit of autotuned Triton kernels: find them in source trees and name the capture hazards.

The audit reads Python files with ``ast`` and never imports or runs them (unless ``compile_target`` is
given, which imports each module that holds a kernel and hands the kernel to ``graphtune.resources``).
It treats the audited files as one code base:

* **Kernels.** ``triton.autotune`` / ``graphtune.autotune`` under any import spelling, as decorators
  (stacked with ``triton.heuristics`` / ``triton.jit`` in any order) or applied by call
  (``k = triton.autotune(...)(triton.jit(f))``, also ``return``-ed by a function); triton imported through a
  module of the tree that re-exports it (``from engine.triton_utils import tl, triton``; a re-export module
  outside the tree is recognised by the names ``triton`` / ``tl``); wrappers defined in the tree: subclasses
  of triton's ``Autotuner`` (``k = CachingAutotuner(fn, ...)``), functions that make one or return
  ``triton.autotune(...)`` (``@lib_cache_autotune(configs=..., key=...)``, mapped onto the autotuner's
  arguments), module-level ``tuner = triton.autotune(...)``. A decorator named like an autotuner whose
  definition is not in the tree is reported with ``configs: "unknown"`` (finding ``unknown-autotuner``).
  Named alone, a file still sees the other modules of its package on disk.
* **Speed.** Under a directory only files that use an autotuner (or a wrapper found in the tree), files
  that import a kernel, and the re-export modules actually used are parsed.
* **Configs.** Counted by a small evaluator over the syntax tree (literals, module-level constants,
  ``range``, comprehensions, ``+ - * // % ** << >>``, string methods, ``triton.Config(...)``, and
  ``os.getenv`` / ``os.environ.get`` at their defaults, named in ``configs_env``); anything else is
  reported as dynamic, never evaluated.
* **Key bindings.** Each key name is classified at every launch found in the tree (``kernel[grid](...)``,
  through a local alias, or passed to a launch helper with keywords): ``batch`` when its value follows a
  batch, token or sequence dimension (``x.shape[0]``, ``x.size(0)``, ``.numel()``, ``len()``, a name like
  ``num_tokens`` / ``batch_size`` / ``seq_lens`` / ``*_bucket`` / ``B`` / ``T`` / ``M``, or a function of
  those), ``model`` (inner dimensions, attributes, literals, module constants, ``x is None`` flags,
  parameters of the launching function not so named, followed to its callers in the module), ``unknown``
  (no launch found, or passed through ``*args`` / ``**kwargs``). Each binding carries its evidence
  (``file:line: text``, the launch first).
* **In place.** A pointer parameter is in-place when a load and a store through it lie on one path of the
  kernel (through its ``if`` s; ifs on the same flag parameters agree) with no store through it before the
  load: a local pointer variable is followed statement by statement (``p_v`` for v, later for v_new, is
  two pointers), integer parameters (multiplied, compared, offsets of a block pointer, summed into an
  integer local) are never pointers. A load and a store whose regions provably do not overlap are no pair:
  the same terms but one index times the same stride, the load's rows bounded below ``T - C`` (its mask)
  and the store's from ``T - C`` on (``T - C + tl.arange(...)``), or the other way round. Still reported
  (conservatively): disjoint regions of a block pointer, or offsets with no stride.

Hazard codes (stable; ``severity`` is ``"hazard"`` or ``"info"``):

==========================  ========  =================================================================
code                        severity  meaning
==========================  ========  =================================================================
tunes-at-runtime            hazard    stock triton.autotune (or a wrapper of triton's Autotuner),
                                      several (or dynamic) configs and a key with a ``batch`` or
                                      ``unknown`` binding (or a key that is not a static list): a new
                                      key value is benchmarked on its first call, inside CUDA graph
                                      capture if warm-up missed it (the capture fails).
tunes-at-runtime            info      the same with ``model`` keys only: tuned once per model shape;
                                      any warm-up covers it.
unknown-key                 hazard    a key name that is not a kernel parameter (dropped silently by
                                      triton 3.6, a ValueError in 3.9).
in-place-without-restore    hazard    a pointer the kernel updates in place (see In place; atomics
                                      count) with no restore_value / reset_to_zero covering it:
                                      benchmarking changes the data. Names the parameter and lines.
unknown-autotuner           hazard    a decorator named like an autotuner, not defined in the audited
                                      tree: the audit cannot tell whether it benchmarks at run time.
does-not-fit                hazard    (``compile_target`` only) configs that exceed the target's limits.
dynamic-configs             info      the config count is not statically known: the audit cannot tell
                                      one config from many (tunes-at-runtime assumes many).
single-config               info      one config: triton skips benchmarking, capture-safe.
capture-safe                info      graphtune.autotune: never tunes inside capture.
tunes-on-first-call         info      stock triton.autotune with several configs and an empty key: tunes
                                      once per tensor-dtype combination, on the first call.
compile-skipped             info      (``compile_target`` only) the kernel could not be inspected.
==========================  ========  =================================================================

JSON (``AuditReport.to_dict``; ``graphtune audit --json``): every field of earlier versions is kept. Per
kernel, added: ``wrapper_name`` (the decorator as resolved, e.g. ``triton.autotune`` or
``fla.ops.utils.cache.fla_cache_autotune``), ``wrapper_defined_at`` (``file:line`` of a wrapper of the
tree, else null), ``triton_via`` (the re-export module triton came through, else null), ``configs`` may
be ``"unknown"``, ``configs_env`` (environment variables whose defaults the count assumes), ``keys``
(``[{name, binding, evidence}]``), ``call_sites`` (``file:line`` of each launch found), ``in_place``
(``[{param, loads, stores, atomic}]``, lines). In ``summary``, added: ``files_parsed`` and
``hazards_by_code`` (severity ``hazard`` only; ``by_hazard`` still counts every finding).
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

from ._loading import module_name_for
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
    "tunes-per-model": "tuned once per model shape; any warm-up covers it",
    "unknown-autotuner": "the audit cannot tell whether it benchmarks at run time (audit the tree that defines it "
                         "too)",
}


def explain(code: str) -> str:
    """The one-line explanation of a finding code (as printed once by the CLI)."""
    return _EXPLANATIONS.get(code, code)


# --------------------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Hazard:
    code: str
    severity: str  # HAZARD or INFO
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "severity": self.severity, "message": self.message}


@dataclass(frozen=True)
class KeyBinding:
    """How one key name's value is bound where the kernel is launched.

    ``binding`` is ``"batch"`` (follows a batch, token or sequence dimension: a new batch size can bring a
    new key value), ``"model"`` (a model dimension, a config attribute, a literal or a flag: fixed for a
    model) or ``"unknown"`` (no call site found, or one the audit cannot read). ``evidence`` holds
    ``file:line: text`` entries, the call site first, then the binding that decided it.
    """
    name: str
    binding: str
    evidence: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "binding": self.binding, "evidence": list(self.evidence)}


@dataclass(frozen=True)
class InPlaceFinding:
    """A pointer parameter loaded (at ``loads``) and stored (at ``stores``) by the same kernel, the load able
    to see what an earlier launch stored (lines are file lines)."""
    param: str
    loads: tuple[int, ...]
    stores: tuple[int, ...]
    atomic: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"param": self.param, "loads": list(self.loads), "stores": list(self.stores), "atomic": self.atomic}


@dataclass(frozen=True)
class KernelAudit:
    """One autotuned kernel as found in source.

    ``key`` is None when the key is not a static list of names (its text is then in ``key_expr``).
    ``n_configs`` is None when the config list is not counted (``configs`` is ``"dynamic"``, why in
    ``configs_reason``; or ``"unknown"`` for a decorator named like an autotuner that the audit cannot
    see into). ``reset_to_zero`` / ``restore_value`` / ``do_not_specialize`` are None when not given, a
    tuple when static, the expression text when not. ``num_warps`` / ``num_stages`` / ``constexprs`` are
    the distinct values seen (triton's defaults 4 / 3 where a Config leaves them out).
    """
    file: str
    line: int
    name: str
    function: str | None  # the decorated def (differs from name when applied by call: k = autotune(...)(f))
    wrapper: str  # "triton" (triton.autotune or a wrapper over triton's Autotuner), "graphtune" or "unknown"
    params: tuple[str, ...] | None
    key: tuple[str, ...] | None
    key_expr: str | None
    n_configs: int | None
    configs: str  # "static", "dynamic" or "unknown"
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
    wrapper_name: str | None = None  # the decorator as resolved: "triton.autotune", "pkg.utils.cache_autotune"
    wrapper_defined_at: str | None = None  # file:line of a wrapper defined in the audited tree
    triton_via: str | None = None  # the module of the audited tree that re-exports triton to this file
    configs_env: tuple[str, ...] = ()  # environment variables whose defaults the config count assumes
    keys: tuple[KeyBinding, ...] = ()
    call_sites: tuple[str, ...] = ()  # file:line of each launch found
    in_place: tuple[InPlaceFinding, ...] = ()

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
            "wrapper_name": self.wrapper_name, "wrapper_defined_at": self.wrapper_defined_at,
            "triton_via": self.triton_via, "configs_env": list(self.configs_env),
            "keys": [k.to_dict() for k in self.keys], "call_sites": list(self.call_sites),
            "in_place": [f.to_dict() for f in self.in_place],
        }


@dataclass(frozen=True)
class FileFailure:
    file: str
    error: str

    def to_dict(self) -> dict[str, str]:
        return {"file": self.file, "error": self.error}


@dataclass(frozen=True)
class AuditReport:
    """``files_scanned`` counts every Python file read, including those in ``files_failed``;
    ``files_parsed`` those the audit parsed (they could hold or launch a kernel, re-export triton, define a
    wrapper, or were named explicitly), including those that failed to parse."""
    kernels: tuple[KernelAudit, ...]
    files_scanned: int
    files_failed: tuple[FileFailure, ...]
    compile_target: str | None = None
    compile_errors: tuple[FileFailure, ...] = ()
    files_parsed: int | None = None

    @property
    def by_hazard(self) -> dict[str, int]:
        """Every finding by code, informational ones included."""
        counts: dict[str, int] = {}
        for kernel in self.kernels:
            for hazard in kernel.hazards:
                counts[hazard.code] = counts.get(hazard.code, 0) + 1
        return dict(sorted(counts.items()))

    @property
    def hazards_by_code(self) -> dict[str, int]:
        """Findings of severity ``hazard`` only, by code."""
        counts: dict[str, int] = {}
        for kernel in self.kernels:
            for hazard in kernel.hazards:
                if hazard.severity == HAZARD:
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
                "files_parsed": self.files_parsed,
                "files_failed": [f.to_dict() for f in self.files_failed],
                "kernels": len(self.kernels),
                "hazards": self.n_hazards,
                "by_hazard": self.by_hazard,
                "hazards_by_code": self.hazards_by_code,
                "compile_target": self.compile_target,
                "compile_errors": [f.to_dict() for f in self.compile_errors],
            },
        }


# --------------------------------------------------------------------------------------------- public API


def audit_paths(paths: Iterable[str | os.PathLike[str]], *, compile_target: str | None = None,
                inspector: Callable[..., Iterable[Any]] | None = None) -> AuditReport:
    """Audit every Python file under ``paths`` (files or directories; .gitignore respected inside git).

    Files under a directory are parsed only when they can hold an autotuned kernel (they mention an
    autotuner, or a wrapper found in the tree) or launch one; a file named explicitly is always parsed.
    Read-only unless ``compile_target`` is given: then the module of each kernel is imported (it runs
    that code) and each kernel is inspected for that target with ``inspector`` (default
    ``graphtune.resources.inspect``; same signature, rows with ``.fits``, ``.reason``, ``.config``).
    """
    paths = list(paths)
    files = collect_files(paths)
    explicit = {Path(p).resolve() for p in paths if Path(p).is_file()}
    roots = [Path(p) for p in paths if Path(p).is_dir()]
    tree = _Tree(files, explicit, roots)
    kernels = tree.audit()
    failed = tuple(FileFailure(str(path), error) for path, error in tree.failed.items())
    compile_errors: tuple[FileFailure, ...] = ()
    if compile_target is not None:
        kernels, compile_errors = _compile_check(kernels, compile_target, inspector)
    return AuditReport(tuple(kernels), len(files), failed, compile_target, compile_errors,
                       files_parsed=tree.n_parsed)


def audit_source(source: str | bytes, filename: str = "<source>") -> list[KernelAudit]:
    """The autotuned kernels of one module's source text, launches in the same text included; raises
    ValueError when it does not parse."""
    tree = _Tree([], set(), [])
    module = tree.add_source(source, filename)
    return tree.audit_modules([module])


def collect_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The ``.py`` files under ``paths``, sorted and without duplicates. A file named explicitly is taken
    whatever its suffix or ignore status; directories are listed through git when inside a work tree."""
    seen: set[Path] = set()
    out: list[Path] = []
    paths = list(paths)
    for raw in paths:
        if not str(raw).strip():
            # Path("") is ".": an empty argument (an unset shell variable) must not audit the current directory
            raise ValueError(f"audit: PATH is empty ({str(raw)!r}); name a file or directory")
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"audit: no such file or directory: {str(path)!r}")
        candidates = [path] if path.is_file() else _files_under(path)
        if len(paths) == 1:
            return candidates  # one listing has no duplicates: skip resolving every path (costly on big trees)
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
    if listed is None:  # os.walk only lists what exists
        return sorted(f for f in _walk_files(directory) if f.suffix == ".py")
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
        self.env_used: list[str] = []  # environment variables whose defaults were taken, in order

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
            try:
                container = self._eval(node.value, scope)
            except _Dynamic:
                raise _Dynamic(_snippet(node)) from None  # os.environ['X'] rather than os.environ
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
        if target in ("os.getenv", "os.environ.get"):
            # The value when the variable is unset: what a plain deployment runs; the name is reported.
            given = _call_arguments(node, ("key", "default"))
            if "key" not in given or any(isinstance(a, ast.Starred) for a in node.args):
                raise _Dynamic(_snippet(node))
            name = self._eval(given["key"], scope)
            if not isinstance(name, str):
                raise _Dynamic(_snippet(node))
            self.env_used.append(name)
            return self._eval(given["default"], scope) if "default" in given else None
        if isinstance(node.func, ast.Attribute) and node.func.attr in _STR_METHODS:
            receiver = self._eval(node.func.value, scope)
            if isinstance(receiver, str):
                args = self._args(node, scope)
                try:
                    value = getattr(receiver, node.func.attr)(*args)
                except Exception:
                    raise _Dynamic(_snippet(node)) from None
                self._check_size(value, node)
                return value
            raise _Dynamic(_snippet(node))
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
    "str": _builtin_plain(str),
    "float": _builtin_plain(float),
    "bool": _builtin_plain(bool),
}
_STR_METHODS = frozenset({"split", "rsplit", "strip", "lstrip", "rstrip", "lower", "upper", "replace", "startswith",
                          "endswith", "isdigit", "removeprefix", "removesuffix"})


# --------------------------------------------------------------------------------------------- one module


_TUNING_KINDS = ("triton-autotune", "graphtune-autotune", "wrapper", "autotuner-class", "unknown-autotune")
_AUTOTUNER_CLASSES = frozenset({"triton.runtime.autotuner.Autotuner", "triton.runtime.Autotuner", "triton.Autotuner"})
# Positional parameters of triton's Autotuner.__init__ (3.6, after self) that the audit reads.
_AUTOTUNER_INIT_ARGS = ("fn", "arg_names", "configs", "key", "reset_to_zero", "restore_value", "pre_hook",
                        "post_hook", "prune_configs_by")
_ROLES = ("configs", "key", "reset_to_zero", "restore_value", "prune_configs_by")


@dataclass
class _Decorator:
    kind: str  # one of _TUNING_KINDS, "heuristics", "jit"
    call: ast.Call | None  # the call that carries its arguments (None for a bare @triton.jit)
    dotted: str | None = None  # what the decorator resolved to
    module: _ModuleAudit | None = None  # where ``call`` is written (for "value" wrappers: where it was made)


@dataclass
class _Candidate:
    line: int
    name: str
    function: ast.FunctionDef | ast.AsyncFunctionDef | None
    function_name: str | None
    decorators: list[_Decorator] = field(default_factory=list)
    top_level: bool = True  # a module-level name (its launches can be found from other modules)
    home: _ModuleAudit | None = None  # the module that defines ``function`` when it is not this one


@dataclass
class _Wrapper:
    """A callable of the audited tree that makes an autotuner: a decorator factory (``kind="factory"``), a
    subclass of triton's Autotuner (``"class"``) or a module-level ``triton.autotune(...)`` value (``"value"``)."""
    name: str
    kind: str
    module: _ModuleAudit
    node: ast.AST

    @property
    def defined_at(self) -> str:
        return f"{self.module.filename}:{getattr(self.node, 'lineno', 0)}"


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
    def __init__(self, tree: ast.Module, filename: str, *, index: _Tree | None = None,
                 qualname: str | None = None, package: list[str] | None = None):
        self.tree = tree
        self.filename = filename
        self.index = index
        self.qualname = qualname or f"<{filename}>"
        self._package = package
        self.aliases: dict[str, str] = {}
        self.constants: dict[str, ast.AST] = {}
        self.simple_functions: dict[str, ast.AST] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.top_level: dict[str, ast.AST] = {}  # module-level defs and classes, by name
        self.bound_names: set[str] = set()
        self._resolved: dict[str, str] = {}
        self.statements: list[ast.stmt] = _statements(tree.body)
        self._facts: _Facts | None = None
        self._collect_imports()
        self._collect_module_names()
        self.evaluator = _Evaluator(self)

    # -- names

    def _collect_imports(self) -> None:
        for node in self.statements:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if self.index is not None:
                        self.index.import_roots.add(alias.name.split(".")[0])
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.aliases[top] = top
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:
                    if self._package is None:
                        self._package = _package_of(self.filename)
                    package = self._package
                    keep = len(package) - (node.level - 1)
                    base = ".".join(package[:keep]) if keep > 0 else ""
                    module = ".".join(p for p in (base, module) if p) if base else "." * node.level + module
                for alias in node.names:
                    if alias.name != "*":
                        self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}" if module else alias.name
                if self.index is not None and module:
                    self.index.import_roots.add(module.split(".")[0])

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
                    if top:
                        self.top_level[stmt.name] = stmt
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
                self.top_level.setdefault(name, value)
                # ``my_autotune = triton.autotune``: an alias, resolved like an import.
                if isinstance(value, (ast.Name, ast.Attribute)):
                    dotted = self.resolve(value)
                    if dotted and dotted.split(".")[0] in ("triton", "graphtune"):
                        self.aliases[name] = dotted
                        self._resolved.clear()
        for node in self.statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, node)

    @property
    def facts(self) -> _Facts:
        """One walk over every expression of the module (only for modules that need it)."""
        if self._facts is None:
            self._facts = _Facts(self.tree)
        return self._facts

    def resolve(self, node: ast.AST) -> str | None:
        """Dotted name an expression refers to through the module's imports (``tt.autotune`` ->
        ``triton.autotune``), through re-export modules of the audited tree, and qualified by this module's
        name for its own module-level definitions; an unknown name stands for itself."""
        if isinstance(node, ast.Name):
            hit = self._resolved.get(node.id)
            if hit is None:
                local = self.aliases.get(node.id)
                if local is None:
                    local = f"{self.qualname}.{node.id}" if node.id in self.top_level else node.id
                hit = self.index.canonical(local) if self.index is not None else local
                self._resolved[node.id] = hit
            return hit
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            if not base:
                return None
            dotted = f"{base}.{node.attr}"
            return self.index.canonical(dotted) if self.index is not None and not dotted.startswith("triton.") \
                else dotted
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
        if self.index is not None:
            wrapper = self.index.wrappers.get(dotted)
            if wrapper is not None:
                return {"factory": "wrapper", "class": "autotuner-class", "value": "triton-autotune"}[wrapper.kind]
        if dotted in _AUTOTUNER_CLASSES:
            return "autotuner-class"
        if "autotun" in dotted.rsplit(".", 1)[-1].lower() and not self._defined_in_tree(dotted):
            return "unknown-autotune"
        return None

    def _defined_in_tree(self, dotted: str) -> bool:
        """Whether the audit can see the definition of ``dotted`` (then a name alone proves nothing)."""
        if dotted.startswith(self.qualname + "."):
            return True
        return self.index is not None and self.index.defines(dotted)

    def _decorator(self, node: ast.AST) -> _Decorator | None:
        if isinstance(node, ast.Call):
            dotted = self.resolve(node.func)
            kind = self._decorator_kind(dotted)
            if kind == "autotuner-class":
                return None  # Autotuner(fn, ...) is applied by call, not used as a decorator factory
            return _Decorator(kind, node, dotted, self) if kind else None
        dotted = self.resolve(node)
        kind = self._decorator_kind(dotted)
        if kind == "triton-autotune" and self.index is not None and dotted in self.index.wrappers:
            made = self.index.wrappers[dotted]  # @tuner where tuner = triton.autotune(...) at module level
            return _Decorator(kind, made.node.value, dotted, made.module)  # type: ignore[attr-defined]
        if kind in ("jit", "wrapper", "unknown-autotune"):  # usable bare
            return _Decorator(kind, None, dotted, self)
        return None

    @staticmethod
    def _jit_like(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """A decorator whose last name is ``jit`` (any import spelling, even one the audit cannot resolve)."""
        for node in function.decorator_list:
            target = node.func if isinstance(node, ast.Call) else node
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name == "jit":
                return True
        return False

    # -- discovery

    def candidates(self) -> list[_Candidate]:
        found: list[_Candidate] = []
        top = {id(stmt) for stmt in self.tree.body}
        for node in self.statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.decorator_list:
                decorators = [d for d in map(self._decorator, node.decorator_list) if d is not None]
                tuners = [d for d in decorators if d.kind in _TUNING_KINDS]
                if tuners and (tuners[0].kind != "unknown-autotune" or self._jit_like(node)):
                    found.append(_Candidate(node.lineno, node.name, node, node.name, decorators, id(node) in top))
                    continue
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
                target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                candidate = self._applied(node.value, _snippet(target), node.lineno)
                if candidate is not None:
                    candidate.top_level = id(node) in top
                    found.append(candidate)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # def make(): return triton.autotune(...)(triton.jit(body)): a function returning a kernel
                for stmt in node.body:
                    if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Call):
                        candidate = self._applied(stmt.value, f"{node.name}()", stmt.lineno)
                        # the kernel must be a def of the tree, not the parameter of a wrapper's closure
                        if candidate is not None and candidate.function is not None:
                            candidate.top_level = False
                            found.append(candidate)
        return sorted(found, key=lambda c: (c.line, c.name))

    def _applied(self, expr: ast.expr, name: str, line: int) -> _Candidate | None:
        """``autotune(...)(heuristics(...)(jit(f)))``, ``Autotuner(f, ...)`` and the like: decorators applied
        by call."""
        decorators: list[_Decorator] = []
        outer = expr.func.func if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Call) else \
            expr.func if isinstance(expr, ast.Call) else None
        leaf = _leaf(outer) if outer is not None else None
        if leaf is None or not (leaf in ("jit", "heuristics", "Autotuner") or "autotun" in leaf.lower()
                                or (self.index is not None and leaf in self.index.wrapper_leaves)):
            return None  # not a decorator applied by call: do not resolve (it could parse other modules)
        while isinstance(expr, ast.Call):
            if isinstance(expr.func, ast.Call):  # factory(...)(target)
                decorator = self._decorator(expr.func)
                if decorator is None or len(expr.args) != 1 or expr.keywords:
                    return None
                decorators.append(decorator)
                expr = expr.args[0]
                continue
            dotted = self.resolve(expr.func)
            kind = self._decorator_kind(dotted)
            if kind == "jit" and len(expr.args) == 1:
                decorators.append(_Decorator("jit", expr, dotted, self))  # triton.jit(f, do_not_specialize=[...])
                expr = expr.args[0]
            elif kind == "autotuner-class" and expr.args and not isinstance(expr.args[0], ast.Starred):
                decorators.append(_Decorator(kind, expr, dotted, self))  # Autotuner(fn, fn.arg_names, configs, ...)
                expr = expr.args[0]
            elif kind in ("wrapper", "triton-autotune") and len(expr.args) == 1 and not expr.keywords \
                    and self.index is not None and dotted in self.index.wrappers:
                decorators.append(self._decorator(expr.func) or _Decorator(kind, None, dotted, self))  # tuner(f)
                expr = expr.args[0]
            else:
                return None
        if not any(d.kind in _TUNING_KINDS and d.kind != "unknown-autotune" for d in decorators):
            return None
        function = self.functions.get(expr.id) if isinstance(expr, ast.Name) else None
        home: _ModuleAudit | None = None
        if function is None and isinstance(expr, (ast.Name, ast.Attribute)) and self.index is not None:
            home, function = self.index.function_at(self.resolve(expr))  # kernel.fn of another module
        if function is not None:
            decorators += [d for d in map((home or self)._decorator, function.decorator_list) if d is not None]
        return _Candidate(line, name, function, _snippet(expr), decorators, home=home)

    # -- one kernel

    def _tuner_arguments(self, tuner: _Decorator) -> tuple[dict[str, tuple[ast.AST, _ModuleAudit]], str | None]:
        """The autotuner's arguments, each with the module to evaluate it in, and why some could not be read."""
        module = tuner.module or self
        if tuner.kind == "triton-autotune":
            return {k: (v, module) for k, v in _call_arguments(tuner.call, _TRITON_AUTOTUNE_ARGS).items()}, None
        if tuner.kind == "graphtune-autotune":
            return {k: (v, module) for k, v in _call_arguments(tuner.call, _GRAPHTUNE_AUTOTUNE_ARGS).items()}, None
        if tuner.kind == "autotuner-class":
            names = _AUTOTUNER_INIT_ARGS
            wrapper = self.index.wrappers.get(tuner.dotted or "") if self.index is not None else None
            if wrapper is not None:
                names = _init_arguments(wrapper.node) or names  # type: ignore[arg-type]
            return {k: (v, module) for k, v in _call_arguments(tuner.call, names).items() if k in _ROLES}, None
        if tuner.kind == "wrapper" and self.index is not None:
            return self.index.wrapper_arguments(self.index.wrappers[tuner.dotted or ""], tuner.call, module)
        # A decorator named like an autotuner that the audit cannot see into: keywords only.
        return ({k: (v, module) for k, v in _call_arguments(tuner.call, ()).items() if k in _ROLES},
                f"{tuner.dotted} is not defined in the audited tree")

    def kernel(self, cand: _Candidate, sites: list[_CallSite]) -> KernelAudit:
        tuner = next(d for d in cand.decorators if d.kind in _TUNING_KINDS)
        wrapper = {"graphtune-autotune": "graphtune", "unknown-autotune": "unknown"}.get(tuner.kind, "triton")
        args, unreadable = self._tuner_arguments(tuner)

        params = _parameters(cand.function) if cand.function is not None else None
        key_arg = args.get("key")
        if key_arg is None:
            key, key_expr = ((), None) if wrapper != "unknown" else (None, unreadable)
        else:
            key, key_expr = key_arg[1].names_argument(key_arg[0])

        n_configs: int | None = None
        reason: str | None = None
        records: list[_ConfigRecord] = []
        env: tuple[str, ...] = ()
        config_keys: set[str] = set()  # constexpr names the configs set, even where their values are dynamic
        if wrapper == "unknown":
            reason = unreadable
        elif "configs" not in args:
            reason = unreadable or "no configs argument"
        else:
            node, module = args["configs"]
            module.evaluator.env_used = []
            try:
                configs = module.evaluator.eval(node)
            except _Dynamic as exc:
                reason = str(exc)
            else:
                if isinstance(configs, (list, tuple)):
                    n_configs = len(configs)
                    records = [c for c in configs if isinstance(c, _ConfigRecord)]
                    env = tuple(dict.fromkeys(module.evaluator.env_used))
                else:
                    reason = f"{_snippet(node)} is not a list"
            if n_configs is None:
                records = module.configs_in_text(node, config_keys)

        reset = _names_or_text(args.get("reset_to_zero"))
        restore = _names_or_text(args.get("restore_value"))
        prune = args.get("prune_configs_by")
        prune_text = None if prune is None or (isinstance(prune[0], ast.Constant) and prune[0].value is None) \
            else _snippet(prune[0], 200)

        do_not_specialize: tuple[Any, ...] | str | None = None
        heuristic_names: list[str] = []
        heuristic_values: dict[str, ast.AST] = {}
        for decorator in cand.decorators:
            if decorator.kind == "jit" and decorator.call is not None:
                jit_args = _call_arguments(decorator.call, ())
                if "do_not_specialize" in jit_args:
                    do_not_specialize = self._values_or_text(jit_args["do_not_specialize"])
            elif decorator.kind == "heuristics" and decorator.call is not None:
                values = _call_arguments(decorator.call, ("values",)).get("values")
                if isinstance(values, ast.Dict):
                    for k, v in zip(values.keys, values.values):
                        if isinstance(k, ast.Constant) and isinstance(k.value, str):
                            heuristic_names.append(k.value)
                            heuristic_values[k.value] = v

        warps, stages, constexprs = _distinct_fields(records)
        in_place = _InPlaceAnalysis(cand.home or self, cand.function, params).findings() \
            if cand.function is not None and params else []
        # A restore list the audit cannot read might cover anything: do not accuse the kernel then.
        covered = None if isinstance(reset, str) or isinstance(restore, str) \
            else set(reset or ()) | set(restore or ())
        config_names = {name for name, _ in constexprs} | config_keys
        bindings = _classify_keys(cand, params, key, sites, heuristic_values, config_names) if key else ()

        configs_state = "unknown" if wrapper == "unknown" else "static" if n_configs is not None else "dynamic"
        hazards = _hazards(cand, wrapper, params, key, n_configs, reason, in_place, covered, bindings, env,
                           tuner.dotted)
        return KernelAudit(
            file=self.filename, line=cand.line, name=cand.name, function=cand.function_name, wrapper=wrapper,
            params=params, key=key, key_expr=key_expr, n_configs=n_configs,
            configs=configs_state, configs_reason=reason,
            num_warps=warps, num_stages=stages, constexprs=constexprs, heuristics=tuple(heuristic_names),
            prune_configs_by=prune_text, reset_to_zero=reset, restore_value=restore,
            do_not_specialize=do_not_specialize, hazards=hazards,
            wrapper_name=tuner.dotted,
            wrapper_defined_at=self.index.wrappers[tuner.dotted].defined_at
            if self.index is not None and tuner.dotted in self.index.wrappers else None,
            triton_via=self.index.via(self) if self.index is not None else None,
            configs_env=env, keys=bindings, call_sites=tuple(s.where for s in sites),
            in_place=tuple(in_place))

    def names_argument(self, node: ast.AST | None) -> tuple[tuple[str, ...] | None, str | None]:
        if node is None or (isinstance(node, ast.Constant) and node.value is None):
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

    def _values_or_text(self, node: ast.AST) -> tuple[Any, ...] | str:
        try:
            value = self.evaluator.eval(node)
        except _Dynamic:
            return _snippet(node, 200)
        if isinstance(value, (list, tuple)) and all(isinstance(v, (int, str)) for v in value):
            return tuple(value)
        return _snippet(node, 200)

    def configs_in_text(self, node: ast.AST, names: set[str] | None = None) -> list[_ConfigRecord]:
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
                        given = _call_arguments(sub, ("kwargs",)).get("kwargs")
                        if names is not None and isinstance(given, ast.Dict):
                            names.update(k.value for k in given.keys
                                         if isinstance(k, ast.Constant) and isinstance(k.value, str))
                        continue
                if isinstance(sub, ast.Name) and sub.id not in seen:
                    seen.add(sub.id)
                    definition = self.constants.get(sub.id) or self.functions.get(sub.id)
                    # Plain helper functions (``def get_configs(): ...``), never kernels (decorated).
                    if definition is not None and not getattr(definition, "decorator_list", None):
                        pending.append(definition)
        return records


def _names_or_text(arg: tuple[ast.AST, _ModuleAudit] | None) -> tuple[str, ...] | str | None:
    if arg is None or (isinstance(arg[0], ast.Constant) and arg[0].value is None):
        return None
    names, text = arg[1].names_argument(arg[0])
    return names if names is not None else text


def _init_arguments(cls: ast.ClassDef) -> tuple[str, ...] | None:
    """Positional parameter names of a class's own ``__init__`` after ``self``."""
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            names = [a.arg for a in (*stmt.args.posonlyargs, *stmt.args.args)]
            return tuple(names[1:])
    return None


# --------------------------------------------------------------------------------------------- the tree


_MARKER = b"autotun"  # in lower case: autotune, Autotuner, my_autotune_cache, ...
# Among files that say "autotun": those that call, decorate with, assign or subclass one (not only a flag or
# a comment mentioning it); the cheap ``_MARKER`` test runs first.
_USES = re.compile(rb"(?i)(autotun\w*\s*\(|@\s*[\w.]*autotun|=\s*[\w.]*autotun|\bAutotuner\b)")
_WORDS = re.compile(rb"\w+")


@dataclass
class _CallSite:
    """A launch ``kernel[grid](...)`` found in the tree, with the function it is written in."""
    module: _ModuleAudit
    call: ast.Call
    function: ast.FunctionDef | ast.AsyncFunctionDef | None
    helper: str | None = None  # launch_autotuned(kernel, grid, **args): only keywords bind by name

    @property
    def where(self) -> str:
        return f"{self.module.filename}:{self.call.lineno}"


class _Tree:
    """The audited files as one code base: module names, lazy parsing, re-exports of triton, wrappers of
    triton's autotuner, and launches of kernels across modules."""

    def __init__(self, files: list[Path], explicit: set[Path], roots: list[Path]):
        self.files = files
        self.explicit = explicit
        self.roots = [Path(os.path.abspath(r)) for r in roots]
        self.failed: dict[str, str] = {}
        self.data: dict[Path, bytes] = {}
        self.modules: dict[Path, _ModuleAudit | None] = {}
        self.by_name: dict[str, Path] = {}
        self.name_of: dict[Path, str] = {}
        self._packages: dict[str, list[str]] = {}
        self._canonical: dict[str, tuple[str, str | None]] = {}
        self.wrappers: dict[str, _Wrapper] = {}
        self.import_roots: set[str] = set()  # first names of every module imported by a parsed module
        self.n_parsed = 0

    # -- files and names

    def _package(self, directory: str) -> list[str]:
        cached = self._packages.get(directory)
        if cached is None:
            parent, name = os.path.split(directory)
            cached = self._package(parent) + [name] \
                if name and parent != directory and os.path.isfile(os.path.join(directory, "__init__.py")) else []
            self._packages[directory] = cached
        return cached

    def _index(self, path: Path) -> None:
        absolute = os.path.abspath(path)
        directory, base = os.path.split(absolute)
        stem = base[:-3] if base.endswith(".py") else base
        package = self._package(directory)
        names = [".".join(package if stem == "__init__" else [*package, stem])] if package else []
        for root in self.roots:  # namespace packages (no __init__.py) by their path under the audited root
            try:
                rel = Path(absolute).relative_to(root).with_suffix("").parts
            except ValueError:
                continue
            rel = rel[:-1] if rel and rel[-1] == "__init__" else rel
            if rel:
                names.append(".".join(rel))
        for name in names:
            if name and name not in self.by_name:
                self.by_name[name] = path
        self.name_of[path] = names[0] if names else stem

    def add_source(self, source: str | bytes, filename: str) -> _ModuleAudit:
        """Parse one text outside any tree (``audit_source``); raises _Unparsable."""
        return self._parse(source, filename, None, None)

    def _parse(self, source: str | bytes, filename: str, qualname: str | None, package: list[str] | None
               ) -> _ModuleAudit:
        self.n_parsed += 1  # attempts: a file that fails is also counted (and listed in files_failed)
        try:
            tree = ast.parse(source, filename=filename)
        except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError) as exc:
            raise _Unparsable(_describe_parse_error(exc)) from None
        return _ModuleAudit(tree, filename, index=self, qualname=qualname, package=package)

    def module_at(self, path: Path) -> _ModuleAudit | None:
        """The parsed module of a file of the tree (parsed on first use); None when it cannot be parsed."""
        if path in self.modules:
            return self.modules[path]
        self.modules[path] = None  # also guards re-entry while this module resolves its own names
        data = self.data.get(path)
        try:
            if data is None:
                data = _read_source(path)
            elif b"\x00" in data:
                self.n_parsed += 1
                raise _Unparsable("contains null bytes")
            qualname = self.name_of.get(path)
            package = self._package(os.path.dirname(os.path.abspath(path))) if qualname else None
            module = self._parse(data, str(path), qualname, package)
        except _Unparsable as exc:
            self.failed[str(path)] = str(exc)
            logger.info("audit: skipped %s: %s", path, exc)
            return None
        except RecursionError:
            self.failed[str(path)] = "nested too deeply to analyse"
            return None
        self.modules[path] = module
        return module

    def _imported(self, path: Path) -> set[bytes]:
        """Words of a file's import statements, read from its bytes (cheap: no parsing)."""
        cache = self.__dict__.setdefault("_imported_words", {})
        words = cache.get(path)
        if words is None:
            words = cache[path] = _import_words(self.data.get(path, b""))
        return words

    def canonical(self, dotted: str) -> str:
        return self._resolve(dotted)[0]

    def via(self, module: _ModuleAudit) -> str | None:
        """The re-export module (of the tree, or outside it) through which ``module`` imports triton, if any."""
        for name, target in sorted(module.aliases.items()):
            resolved, through = self._resolve(target)
            if through is not None and (resolved == "triton" or resolved.startswith("triton.")):
                return through
        return None

    def _resolve(self, dotted: str, depth: int = 0) -> tuple[str, str | None]:
        cached = self._canonical.get(dotted)
        if cached is not None:
            return cached
        result: tuple[str, str | None] = (dotted, None)
        parts = dotted.split(".")
        if depth < 12 and parts[0] not in ("triton", "graphtune") and len(parts) > 1:
            for i in range(len(parts) - 1, 0, -1):
                module_name = ".".join(parts[:i])
                path = self.by_name.get(module_name) or self._locate(module_name)
                if path is None:
                    continue
                if path not in self.modules and parts[i].encode() not in self._imported(path):
                    break  # defined there, not re-exported: no need to parse that module
                module = self.module_at(path)
                target = module.aliases.get(parts[i]) if module is not None else None
                if target is not None and target != ".".join(parts[:i + 1]):
                    resolved, via = self._resolve(".".join([target, *parts[i + 1:]]), depth + 1)
                    result = (resolved, via or (module_name if resolved.startswith("triton") else None))
                break
            else:
                # ``from outside_pkg import triton, tl``: a re-export module that is not in the audited tree
                # (only for names that come from an import: ``self.tl`` is not triton.language)
                for i in range(1, len(parts) if parts[0] in self.import_roots else 1):
                    if parts[i] in ("triton", "tl"):
                        base = "triton" if parts[i] == "triton" else "triton.language"
                        result = (".".join([base, *parts[i + 1:]]), ".".join(parts[:i]))
                        break
        self._canonical[dotted] = result
        return result

    def _locate(self, module_name: str) -> Path | None:
        """A module of the package an audited file belongs to, found on disk though not audited itself (so that
        ``graphtune audit pkg/kernels.py`` still sees ``pkg/triton_utils.py`` and ``pkg/cache.py``)."""
        cache = self.__dict__.setdefault("_located", {})
        if module_name in cache:
            return cache[module_name]
        found: Path | None = None
        roots = self.__dict__.get("_package_roots")
        if roots is None:
            roots = self._package_roots = {}
            for path, name in self.name_of.items():
                depth = name.count(".") + (1 if os.path.basename(path) == "__init__.py" else 0)
                if depth and self._package(os.path.dirname(os.path.abspath(path))):
                    roots[str(Path(os.path.abspath(path)).parents[depth])] = None
        rel = module_name.replace(".", os.sep)
        for root in roots:
            for candidate in (os.path.join(root, rel + ".py"), os.path.join(root, rel, "__init__.py")):
                if os.path.isfile(candidate):
                    found = Path(candidate)
                    try:
                        self.data[found] = found.read_bytes()
                    except OSError:
                        found = None
                        continue
                    self._index(found)
                    break
            if found is not None:
                break
        cache[module_name] = found
        return found

    def function_at(self, dotted: str | None) -> tuple[_ModuleAudit | None, ast.FunctionDef | ast.AsyncFunctionDef | None]:
        """The module-level def that ``dotted`` names in a module of the tree, with its module."""
        if not dotted or "." not in dotted:
            return None, None
        module_name, _, leaf = dotted.rpartition(".")
        path = self.by_name.get(module_name) or self._locate(module_name)
        module = self.module_at(path) if path is not None else None
        node = module.top_level.get(leaf) if module is not None else None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return module, node
        return None, None

    def defines(self, dotted: str) -> bool:
        module_name, _, leaf = dotted.rpartition(".")
        path = self.by_name.get(module_name) or self._locate(module_name)
        if path is None:
            return False
        module = self.module_at(path)
        return module is not None and (leaf in module.top_level or leaf in module.bound_names)

    # -- wrappers

    def _find_wrappers(self, modules: list[_ModuleAudit]) -> None:
        for _ in range(8):  # a wrapper of a wrapper is found on the next round
            before = len(self.wrappers)
            for module in modules:
                for name, node in module.top_level.items():
                    dotted = f"{module.qualname}.{name}"
                    if dotted in self.wrappers:
                        continue
                    kind = self._wrapper_kind(module, node)
                    if kind is not None:
                        self.wrappers[dotted] = _Wrapper(dotted, kind, module, node)
            if len(self.wrappers) == before:
                return

    def _makes_autotuner(self, module: _ModuleAudit, dotted: str | None) -> bool:
        if dotted is None:
            return False
        return dotted in _TRITON_AUTOTUNE or dotted in _AUTOTUNER_CLASSES or dotted in self.wrappers

    def _wrapper_kind(self, module: _ModuleAudit, node: ast.AST) -> str | None:
        if isinstance(node, ast.ClassDef):
            if any(self._is_autotuner_class(module.resolve(base)) for base in node.bases):
                return "class"
            return None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(module.resolve(d.func if isinstance(d, ast.Call) else d) in _TRITON_JIT
                   for d in node.decorator_list):
                return None  # a kernel, not a wrapper
            if node.name not in module.facts.returns:
                return None
            leaves = self._wrapper_leaves()
            for sub in module.facts.top_calls.get(node.name, ()):
                if _leaf(sub.func) in leaves and self._makes_autotuner(module, module.resolve(sub.func)):
                    return "factory"
            return None
        if isinstance(node, ast.Call) and module.resolve(node.func) in _TRITON_AUTOTUNE:
            return "value"  # NAME = triton.autotune(configs=..., key=...): a ready decorator
        return None

    def _wrapper_leaves(self) -> set[str]:
        return {"autotune", "Autotuner"} | self.wrapper_leaves

    @property
    def wrapper_leaves(self) -> set[str]:
        return {w.name.rsplit(".", 1)[-1] for w in self.wrappers.values()}

    def _is_autotuner_class(self, dotted: str | None) -> bool:
        return dotted is not None and (dotted in _AUTOTUNER_CLASSES
                                       or (dotted in self.wrappers and self.wrappers[dotted].kind == "class"))

    def wrapper_arguments(self, wrapper: _Wrapper, call: ast.Call | None, caller: _ModuleAudit, depth: int = 0
                          ) -> tuple[dict[str, tuple[ast.AST, _ModuleAudit]], str | None]:
        """Map a use of a decorator factory (``@lib_autotune(configs=..., key=...)``) onto the autotuner it
        makes inside: each role (configs, key, ...) as the expression that provides it, in its module."""
        function = wrapper.node
        module = wrapper.module
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or depth > 4:
            return {}, f"{wrapper.name} cannot be read"
        inner = next((sub for sub in module.facts.top_calls.get(function.name, ()) if isinstance(sub, ast.Call)
                      and self._makes_autotuner(module, module.resolve(sub.func))), None)
        if inner is None:
            return {}, f"{wrapper.name} cannot be read"
        bound, passthrough = _bind_call(function, call, caller, module)
        local = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        params = {a.arg for a in _all_args(function)}
        dotted = module.resolve(inner.func) or ""
        if dotted in _TRITON_AUTOTUNE:
            raw = {k: (v, module) for k, v in _call_arguments(inner, _TRITON_AUTOTUNE_ARGS).items()}
        elif self._is_autotuner_class(dotted):
            names = _AUTOTUNER_INIT_ARGS
            if dotted in self.wrappers:
                names = _init_arguments(self.wrappers[dotted].node) or names  # type: ignore[arg-type]
            raw = {k: (v, module) for k, v in _call_arguments(inner, names).items()}
        else:
            raw, _ = self.wrapper_arguments(self.wrappers[dotted], inner, module, depth + 1)
        out: dict[str, tuple[ast.AST, _ModuleAudit]] = {}
        missing: list[str] = []
        for role in _ROLES:
            if role not in raw:
                continue
            expr, where = raw[role]
            if where is module and isinstance(expr, ast.Name) and expr.id in params:
                if expr.id in bound:
                    out[role] = bound[expr.id]
                elif passthrough:
                    missing.append(role)
            elif where is module and any(isinstance(n, ast.Name) and (n.id in local or n.id in params)
                                         for n in ast.walk(expr)):
                missing.append(role)  # computed inside the wrapper from its own variables
            else:
                out[role] = (expr, where)
        reason = f"{', '.join(missing)} set inside {wrapper.name}" if missing else None
        return out, reason

    # -- the audit

    def audit(self) -> list[KernelAudit]:
        for path in self.files:
            try:
                self.data[path] = path.read_bytes()
            except OSError as exc:
                self.failed[str(path)] = f"cannot read: {exc.strerror or exc}"
                continue
            self._index(path)
        # Only a file that names an autotuner (or a wrapper, below) can hold an autotuned kernel.
        # (A kernel also needs jit: the file names triton, jit or an Autotuner; flags and context managers
        # named autotune in files without any of those, common in engines, are not parsed.)
        wanted = [p for p, d in self.data.items()
                  if (_MARKER in d.lower() and _USES.search(d) and (b"triton" in d or b"jit" in d or b"Autotuner" in d))
                  or (self.explicit and p.resolve() in self.explicit)]
        modules = [m for m in map(self.module_at, wanted) if m is not None]
        self._find_wrappers(modules + self._imported_wrapper_sources(modules))
        plain = [w.name.rsplit(".", 1)[-1].encode() for w in self.wrappers.values()
                 if _MARKER not in w.name.rsplit(".", 1)[-1].lower().encode()]
        if plain:  # wrappers not named like an autotuner: their users do not say "autotune"
            extra = [p for p, d in self.data.items() if p not in self.modules and any(n in d for n in plain)]
            modules += [m for m in map(self.module_at, extra) if m is not None]
            self._find_wrappers(modules)
        return self.audit_modules(modules)

    def _imported_wrapper_sources(self, modules: list[_ModuleAudit]) -> list[_ModuleAudit]:
        """Modules outside the audited files (same package on disk) that the audited ones import from and that
        mention an autotuner: where their wrappers are defined, when only some files of a package are named."""
        out: list[_ModuleAudit] = []
        seen = {id(m) for m in modules}
        for module in modules:
            for target in module.aliases.values():
                parts = target.split(".")
                for i in range(len(parts) - 1, 0, -1):
                    name = ".".join(parts[:i])
                    if name in self.by_name and name not in self.__dict__.get("_located", {}):
                        break  # an audited file: already a candidate if it could define a wrapper
                    path = self._locate(name)
                    if path is None:
                        continue
                    if _MARKER in self.data.get(path, b"").lower():
                        other = self.module_at(path)
                        if other is not None and id(other) not in seen:
                            seen.add(id(other))
                            out.append(other)
                    break
        return out

    def _guarded(self, module: _ModuleAudit, work: Callable[[], Any]) -> Any:
        """Run one module's analysis; an audit bug on odd input costs that file, not the whole report."""
        try:
            return work()
        except RecursionError:
            self.failed[module.filename] = "nested too deeply to analyse"
        except Exception as exc:
            self.failed[module.filename] = f"audit failed: {type(exc).__name__}: {exc}"
            logger.warning("audit: %s could not be analysed", module.filename, exc_info=True)
        return None

    def audit_modules(self, modules: list[_ModuleAudit]) -> list[KernelAudit]:
        found: list[tuple[_ModuleAudit, _Candidate]] = []
        for module in modules:
            candidates = self._guarded(module, module.candidates)
            found += [(module, c) for c in candidates or ()]
        sites = self._call_sites(modules, found)
        out: list[KernelAudit] = []
        for module, cand in found:
            if module.filename in self.failed:
                continue
            kernel = self._guarded(module, lambda: module.kernel(cand, sites.get((id(module), cand.name), [])))
            if kernel is not None:
                out.append(kernel)
        return out

    def _call_sites(self, modules: list[_ModuleAudit], found: list[tuple[_ModuleAudit, _Candidate]]
                    ) -> dict[tuple[int, str], list[_CallSite]]:
        """Launches ``kernel[grid](...)`` of the found kernels: in their own modules and in files that import
        them (a file that launches a kernel of another module names it or its module in an import)."""
        qualified: dict[str, tuple[int, str]] = {}
        local: dict[tuple[int, str], tuple[int, str]] = {}
        names: set[bytes] = set()
        by_stem: dict[bytes, set[bytes]] = {}
        for module, cand in found:
            ident = (id(module), cand.name)
            local[(id(module), cand.name)] = ident
            if cand.top_level and cand.name.isidentifier():
                qualified[f"{module.qualname}.{cand.name}"] = ident
                names.add(cand.name.encode())
                by_stem.setdefault(module.qualname.rsplit(".", 1)[-1].encode(), set()).add(cand.name.encode())
        scan = list(modules)
        if qualified and self.data:
            for path, data in self.data.items():
                if path in self.modules:
                    continue
                imported = self._imported(path)
                # ``from m import kernel`` names the kernel; ``import pkg.m as x`` then ``x.kernel[...]`` names
                # its module in the import and the kernel in the launch.
                if imported & names or any(n in data for stem in imported & by_stem.keys() for n in by_stem[stem]):
                    module = self.module_at(path)
                    if module is not None:
                        scan.append(module)
        params = {(id(m), c.name): set(_parameters(c.function)) for m, c in found if c.function is not None}

        leaves = {name.rsplit(".", 1)[-1] for name in qualified} | {name for _, name in local}

        def match(module: _ModuleAudit, expr: ast.AST) -> tuple[int, str] | None:
            if _leaf(expr) not in leaves:
                return None  # cheap: resolving every name could parse the modules they come from
            if isinstance(expr, ast.Name) and (id(module), expr.id) in local:
                return local[(id(module), expr.id)]
            if isinstance(expr, (ast.Name, ast.Attribute)):
                return qualified.get(module.resolve(expr) or "")
            return None

        out: dict[tuple[int, str], list[_CallSite]] = {}

        def scan_module(module: _ModuleAudit) -> bool:
            for call, function in module.facts.launches:
                target = call.func.value  # type: ignore[attr-defined]
                ident = match(module, target)
                if ident is not None:
                    out.setdefault(ident, []).append(_CallSite(module, call, function))
                elif isinstance(target, ast.Name) and function is not None:
                    # fn = kernel_a if ... else kernel_b; fn[grid](...): each kernel assigned to the local name
                    values = [v for v, *_ in _binder(module, function).assigned.get(target.id, ())]
                    for value in values:
                        for option in (value.body, value.orelse) if isinstance(value, ast.IfExp) else (value,):
                            ident = match(module, option)
                            if ident is not None:
                                out.setdefault(ident, []).append(_CallSite(module, call, function))
            # launch_autotuned(kernel, grid, x_ptr=x, n=n): a helper that launches the kernel it is given
            for calls in module.facts.calls.values():
                for call, function in calls:
                    if call.func.__class__ is ast.Subscript or not call.keywords:
                        continue
                    for arg in call.args:
                        ident = match(module, arg)
                        if ident is not None and any(kw.arg in params.get(ident, ()) for kw in call.keywords):
                            out.setdefault(ident, []).append(
                                _CallSite(module, call, function, _snippet(call.func)))
            return True

        for module in scan:
            self._guarded(module, lambda: scan_module(module))
        return out


def _statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Every statement, nested ones included (bodies of defs, classes, if, for, while, with, try), in order."""
    out: list[ast.stmt] = []
    pending = list(reversed(body))
    while pending:
        stmt = pending.pop()
        out.append(stmt)
        inner: list[ast.stmt] = []
        for name in ("body", "orelse", "finalbody"):
            value = getattr(stmt, name, None)
            if isinstance(value, list):
                inner.extend(v for v in value if isinstance(v, ast.stmt))
        for handler in getattr(stmt, "handlers", ()) or ():
            inner.extend(handler.body)
        for case in getattr(stmt, "cases", ()) or ():
            inner.extend(case.body)
        pending.extend(reversed(inner))
    return out


def _import_words(data: bytes) -> set[bytes]:
    """The words of every line that says ``import`` (a parenthesised list followed to its end): a superset of
    the names a module imports, found with bytes.find (a regular expression over every file costs more)."""
    lines: list[bytes] = []
    find, rfind = data.find, data.rfind
    at = find(b"import")
    while at != -1:
        start = rfind(b"\n", 0, at) + 1
        end = find(b"\n", at)
        if end == -1:
            end = len(data)
        if data[start:end].rstrip().endswith(b"("):
            close = find(b")", end)
            end = close if close != -1 else end
        lines.append(data[start:end])
        at = find(b"import", end)
    return set(_WORDS.findall(b"\n".join(lines)))


def _nodes(root: ast.AST) -> list[ast.AST]:
    """``list(ast.walk(root))`` without the generator overhead (and without expression contexts)."""
    out = [root]
    node_type = ast.AST
    index = 0
    while index < len(out):
        node = out[index]
        index += 1
        for field_name in node._fields:
            if field_name == "ctx":
                continue
            value = getattr(node, field_name, None)
            if value.__class__ is list:
                out.extend(item for item in value if isinstance(item, node_type))
            elif isinstance(value, node_type):
                out.append(value)
    return out


def _leaf(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class _Facts:
    """What the audit needs from every expression of a module, gathered in one walk: launches
    ``x[grid](...)`` and calls by callee name (each with the innermost function it is written in), calls
    inside each module-level function, and which module-level functions return a value."""

    def __init__(self, tree: ast.Module):
        self.launches: list[tuple[ast.Call, ast.FunctionDef | ast.AsyncFunctionDef | None]] = []
        self.calls: dict[str, list[tuple[ast.Call, ast.FunctionDef | ast.AsyncFunctionDef | None]]] = {}
        self.top_calls: dict[str, list[ast.Call]] = {}
        self.returns: set[str] = set()
        functions = (ast.FunctionDef, ast.AsyncFunctionDef)
        node_type = ast.AST
        for stmt in tree.body:
            top = stmt.name if isinstance(stmt, (*functions, ast.ClassDef)) else None
            stack: list[tuple[ast.AST, Any]] = [(stmt, stmt if isinstance(stmt, functions) else None)]
            push, pop = stack.append, stack.pop
            while stack:
                node, function = pop()
                cls = node.__class__
                if cls is ast.Call:
                    func = node.func  # type: ignore[attr-defined]
                    if func.__class__ is ast.Subscript:
                        self.launches.append((node, function))  # type: ignore[arg-type]
                    callee = _leaf(func)
                    if callee:
                        self.calls.setdefault(callee, []).append((node, function))  # type: ignore[arg-type]
                    if top is not None:
                        self.top_calls.setdefault(top, []).append(node)  # type: ignore[arg-type]
                elif cls is ast.Return and top is not None and node.value is not None:  # type: ignore[attr-defined]
                    self.returns.add(top)
                elif cls is ast.FunctionDef or cls is ast.AsyncFunctionDef:
                    function = node
                for field_name in node._fields:
                    if field_name == "ctx":
                        continue
                    value = getattr(node, field_name, None)
                    if value.__class__ is list:
                        for item in value:
                            if isinstance(item, node_type):
                                push((item, function))
                    elif isinstance(value, node_type) and value.__class__ is not ast.Constant:
                        push((value, function))


def _bind_call(function: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call | None, caller: _ModuleAudit,
               module: _ModuleAudit) -> tuple[dict[str, tuple[ast.AST, _ModuleAudit]], bool]:
    """Parameters of ``function`` bound by ``call`` (then defaults); True when ``*args``/``**kw`` hid some."""
    args = function.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    bound: dict[str, tuple[ast.AST, _ModuleAudit]] = {}
    for name, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
        bound[name] = (default, module)
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        if default is not None:
            bound[arg.arg] = (default, module)
    passthrough = False
    if call is not None:
        for name, value in zip(positional, call.args):
            if isinstance(value, ast.Starred):
                passthrough = True
                break
            bound[name] = (value, caller)
        for kw in call.keywords:
            if kw.arg is None:
                passthrough = True
            else:
                bound[kw.arg] = (kw.value, caller)
    return bound, passthrough


# --------------------------------------------------------------------------------------------- key bindings


# Names that follow the batch: tokens, batch size, sequence lengths, request counts and their buckets.
_BATCH_NAME = re.compile(r"(?i)(^|_)(num_?|n_?|max_?|total_?|cu_?)?(tokens?|toks?|ntok|batch(es)?|seqs?|seq_?lens?|"
                         r"seqlens?|buckets?|reqs?|requests?)(_|$)")
# Abbreviations that name a batch only in lower case (upper-case BS is a block size in kernel code).
_BATCH_ABBREV = re.compile(r"(^|_)(bs|bsz)(_|$)")
# Tensors whose dimension 0 is a model dimension: weights, biases and other parameters.
_WEIGHT_NAME = re.compile(r"(?i)(weight|bias|^w$|^w_|_w$|^a_log$|^dt_bias$)")
# Single letters used for those dimensions by convention: B (batch), T (tokens / time), M (rows of the
# activation matrix of a linear layer, i.e. tokens).
_BATCH_LETTERS = frozenset({"B", "T", "M", "N_CTX"})
# Functions whose result is a function of their arguments only (a bucket of a batch size is batch).
_MAX_DEPTH = 14


def _batch_named(name: str) -> bool:
    return name in _BATCH_LETTERS or bool(_BATCH_NAME.search(name)) or bool(_BATCH_ABBREV.search(name))


def _combine(results: list[tuple[str, list[str]]]) -> tuple[str, list[str]]:
    """batch wins over unknown, unknown over model (a key is only as fixed as its least fixed part)."""
    for wanted in ("batch", "unknown"):
        for binding, trail in results:
            if binding == wanted:
                return binding, trail
    return "model", (results[0][1] if results else [])


class _Binder:
    """Classifies the value of an expression inside the function that launches a kernel."""

    def __init__(self, module: _ModuleAudit, function: ast.FunctionDef | ast.AsyncFunctionDef | None):
        self.module = module
        self.function = function
        self.params = {a.arg for a in _all_args(function)} if function is not None else set()
        if function is not None:
            if function.args.vararg:
                self.params.add(function.args.vararg.arg)
            if function.args.kwarg:
                self.params.add(function.args.kwarg.arg)
        self.assigned: dict[str, list[tuple[ast.AST, int, int | None, ast.AST]]] = {}
        self.items: dict[str, dict[str, ast.AST]] = {}  # kwargs['X'] = value, by dictionary name
        self.loop_vars: set[str] = set()
        self._comprehension: dict[str, ast.AST] = {}  # names bound by the comprehension being classified
        if function is not None:
            for node in _nodes(function):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        self._collect(target, node.value, node)
                        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                                and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):
                            self.items.setdefault(target.value.id, {})[target.slice.value] = node.value
                elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
                    self._collect(node.target, node.value, node)
                elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                    self.loop_vars |= {n.id for n in _nodes(node.target) if isinstance(n, ast.Name)}

    def _collect(self, target: ast.AST, value: ast.AST, stmt: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.assigned.setdefault(target.id, []).append((value, getattr(stmt, "lineno", 0), None, stmt))
        elif isinstance(target, (ast.Tuple, ast.List)):
            stars = [i for i, e in enumerate(getattr(value, "elts", ())) if isinstance(e, ast.Starred)]
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) and not stars:
                for sub, sub_value in zip(target.elts, value.elts):
                    self._collect(sub, sub_value, stmt)
            elif isinstance(value, (ast.Tuple, ast.List)) and len(stars) == 1 \
                    and not any(isinstance(e, ast.Starred) for e in target.elts):
                # B, T, H, K, V = *k.shape, v.shape[-1]: the starred part covers the targets in between
                star = stars[0]
                width = len(target.elts) - (len(value.elts) - 1)
                spread = value.elts[star].value  # type: ignore[attr-defined]
                for position, sub in enumerate(target.elts):
                    if position < star:
                        self._collect(sub, value.elts[position], stmt)
                    elif position < star + width and isinstance(sub, ast.Name):
                        self.assigned.setdefault(sub.id, []).append(
                            (spread, getattr(stmt, "lineno", 0), position - star, stmt))
                    elif position >= star + width:
                        self._collect(sub, value.elts[position - width + 1], stmt)
            else:
                for index, sub in enumerate(target.elts):
                    if isinstance(sub, ast.Name):
                        self.assigned.setdefault(sub.id, []).append((value, getattr(stmt, "lineno", 0), index, stmt))

    def where(self, line: int, text: str) -> str:
        return f"{self.module.filename}:{line}: {text}"

    def classify(self, expr: ast.AST, depth: int = 0) -> tuple[str, list[str]]:
        if depth > _MAX_DEPTH:
            return "unknown", [self.where(getattr(expr, "lineno", 0), f"{_snippet(expr)} (traced too deep)")]
        line = getattr(expr, "lineno", 0)
        if isinstance(expr, ast.Constant):
            return "model", []
        if isinstance(expr, ast.Name):
            return self._name(expr.id, line, depth)
        if isinstance(expr, ast.Attribute):
            if expr.attr in ("shape", "size"):
                return "unknown", [self.where(line, _snippet(expr))]
            if _batch_named(expr.attr):
                return "batch", [self.where(line, f"{_snippet(expr)} (named for a batch dimension)")]
            if expr.attr in ("ndim", "dtype", "device", "is_cuda"):
                return "model", []
            return "model", [self.where(line, f"{_snippet(expr)} (an attribute: configuration)")]
        if isinstance(expr, ast.Subscript):
            shape = self._shape(expr.value)
            dim = self._dimension(shape, expr.slice) if shape is not None else None
            if dim is not None:
                return self._by_dimension(dim, ast.Subscript(shape, expr.slice, ast.Load()), line)
            return self.classify(expr.value, depth + 1)
        if isinstance(expr, ast.Call):
            return self._call(expr, line, depth)
        if isinstance(expr, ast.Compare) and any(isinstance(c, ast.Constant) and c.value is None
                                                 for c in [expr.left, *expr.comparators]):
            return "model", []  # x is None / x is not None: a presence flag, fixed for a code path
        if isinstance(expr, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
            # all(x.element_size() == 2 for x in (q, k)): the element, with x standing for what it iterates
            saved = dict(self._comprehension)
            parts = []
            for generator in expr.generators:
                parts.append(self.classify(generator.iter, depth + 1))
                for target in _nodes(generator.target):
                    if isinstance(target, ast.Name):
                        self._comprehension[target.id] = generator.iter
            try:
                parts.append(self.classify(expr.elt, depth + 1))
            finally:
                self._comprehension = saved
            return _combine(parts)
        if isinstance(expr, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Tuple, ast.List,
                             ast.JoinedStr, ast.FormattedValue)):
            parts = [self.classify(child, depth + 1) for child in ast.iter_child_nodes(expr)
                     if isinstance(child, ast.expr)]
            return _combine(parts) if parts else ("model", [])
        return "unknown", [self.where(line, _snippet(expr))]

    def _shape(self, expr: ast.AST, depth: int = 0) -> ast.Attribute | None:
        """``x.shape``, ``x.size()`` or a local name bound only to one of them, as an ``x.shape`` node."""
        if isinstance(expr, ast.Attribute) and expr.attr == "shape":
            return expr
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "size" \
                and not expr.args and not expr.keywords:
            return ast.Attribute(expr.func.value, "shape", ast.Load())
        if isinstance(expr, ast.Name) and depth < 3:
            values = self.assigned.get(expr.id, ())
            if len(values) == 1 and values[0][2] is None:
                return self._shape(values[0][0], depth + 1)
        return None

    @staticmethod
    def _dimension(value: ast.AST, index: ast.AST) -> int | None:
        """``x.shape[i]``: the literal dimension i, else None."""
        if isinstance(value, ast.Attribute) and value.attr == "shape":
            if isinstance(index, ast.Constant) and isinstance(index.value, int):
                return index.value
            if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub) \
                    and isinstance(index.operand, ast.Constant) and isinstance(index.operand.value, int):
                return -index.operand.value
        return None

    def _by_dimension(self, dim: int, expr: ast.AST, line: int, name: str | None = None) -> tuple[str, list[str]]:
        """Dimension 0 of an activation is its batch / token dimension; inner ones are model dimensions; a
        negative one other than -1 depends on the rank, so the variable's name decides."""
        text = _snippet(expr) if name is None else f"{name} = {_snippet(expr)}" + (f"[{dim}]" if isinstance(
            expr, ast.Attribute) else "")
        tensor = expr.value if isinstance(expr, (ast.Subscript, ast.Attribute)) else None
        if isinstance(tensor, ast.Attribute) and tensor.attr == "shape":
            tensor = tensor.value
        if isinstance(tensor, ast.Call) and isinstance(tensor.func, ast.Attribute):
            tensor = tensor.func.value  # x.size(0)
        if dim == 0:
            if isinstance(tensor, ast.Attribute) or (isinstance(tensor, ast.Name) and _WEIGHT_NAME.search(tensor.id)):
                return "model", [self.where(line, f"{text} (dimension 0 of a weight or attribute)")]
            return "batch", [self.where(line, f"{text} (dimension 0: the batch / token dimension)")]
        if name is not None and _batch_named(name):
            return "batch", [self.where(line, f"{text} (named for a batch dimension)")]
        if dim > 0 or dim == -1 or name is not None:
            return "model", [self.where(line, f"{text} (an inner dimension)")]
        return "unknown", [self.where(line, f"{text} (dimension {dim}: depends on the rank)")]

    def keyword_from(self, mapping: ast.AST, key: str) -> ast.AST | None:
        """``f(**kwargs)`` with ``kwargs = dict(X=...)`` / ``{"X": ...}`` / ``kwargs["X"] = ...`` in the function."""
        if not isinstance(mapping, ast.Name):
            return None
        if key in self.items.get(mapping.id, {}):
            return self.items[mapping.id][key]
        bound = self.assigned.get(mapping.id, ())
        if len(bound) != 1 or bound[0][2] is not None:
            return None
        value = bound[0][0]
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
            return next((kw.value for kw in value.keywords if kw.arg == key), None)
        if isinstance(value, ast.Dict):
            return next((v for k, v in zip(value.keys, value.values)
                         if isinstance(k, ast.Constant) and k.value == key), None)
        return None

    def _name(self, name: str, line: int, depth: int) -> tuple[str, list[str]]:
        if name in self._comprehension:
            return self.classify(self._comprehension[name], depth + 1)
        if _batch_named(name):
            return "batch", [self.where(line, f"{name} (named for a batch dimension)")]
        if name in self.assigned:
            results = []
            for value, at, index, _ in self.assigned[name]:
                shape = self._shape(value)
                if index is not None and shape is not None:
                    results.append(self._by_dimension(index, shape, at, name))
                    continue
                if index is not None and isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice) \
                        and self._shape(value.value) is not None:
                    # HV, V = u.shape[2:]: dimension start + position
                    lower = value.slice.lower
                    start = 0 if lower is None else self._dimension(ast.Attribute(ast.Name("_", ast.Load()), "shape",
                                                                                  ast.Load()), lower)
                    if start is not None:
                        dim = start + index
                        results.append(self._by_dimension(dim, self._shape(value.value), at, name))  # type: ignore
                        continue
                if isinstance(value, ast.Subscript) and self._shape(value.value) is not None:
                    dim = self._dimension(self._shape(value.value), value.slice)  # type: ignore[arg-type]
                    if dim is not None:
                        results.append(self._by_dimension(dim, self._shape(value.value), at, name))  # type: ignore
                        continue
                binding, trail = self.classify(value, depth + 1)
                results.append((binding, [self.where(at, f"{name} = {_snippet(value)}"), *trail]))
            return _combine(results)
        if name in self.loop_vars:
            return "unknown", [self.where(line, f"{name} (a loop variable)")]
        if name in self.params:
            return self._parameter(name, line, depth)
        return "model", [self.where(line, f"{name} (a module-level name)")]

    def _parameter(self, name: str, line: int, depth: int) -> tuple[str, list[str]]:
        """A parameter of the launching function: follow the callers of that function in its module."""
        function = self.function
        assert function is not None
        results: list[tuple[str, list[str]]] = []
        if depth < _MAX_DEPTH - 1:
            method = bool(function.args.args) and function.args.args[0].arg in ("self", "cls")
            for call, caller in _calls_of(self.module, function.name):
                if method != isinstance(call.func, ast.Attribute):
                    continue  # f(...) for a method, or obj.f(...) for a plain function: another callable
                if method:  # obj.f(a, b) binds a, b after self
                    line = call.lineno
                    call = ast.Call(call.func, [ast.Name("self", ast.Load()), *call.args], call.keywords)
                    call.lineno = line
                bound, passthrough = _bind_call(function, call, self.module, self.module)
                if name in bound and bound[name][1] is self.module and bound[name][0] is not None:
                    binder = _binder(self.module, caller)
                    binding, trail = binder.classify(bound[name][0], depth + 1)
                    results.append((binding, [binder.where(call.lineno, f"{function.name}({name}="
                                                           f"{_snippet(bound[name][0])})"), *trail]))
                elif passthrough:
                    results.append(("unknown", [self.where(call.lineno, f"{function.name}(*args/**kwargs)")]))
        if results:
            return _combine(results)
        return "model", [self.where(function.lineno, f"{name}: a parameter of {function.name}, not named for a "
                                                     f"batch dimension")]

    def _call(self, expr: ast.Call, line: int, depth: int) -> tuple[str, list[str]]:
        func = expr.func
        text = _snippet(expr)
        if isinstance(func, ast.Name) and func.id == "len":
            return "batch", [self.where(line, f"{text} (a length)")]
        if isinstance(func, ast.Attribute):
            if func.attr == "numel":
                return "batch", [self.where(line, f"{text} (an element count)")]
            if func.attr == "size" and expr.args:
                arg = expr.args[0]
                dim = self._dimension(ast.Attribute(func.value, "shape", ast.Load()), arg)
                if dim is not None:
                    return self._by_dimension(dim, expr, line)
            if func.attr in ("stride", "dim", "element_size", "get_device_capability"):
                return "model", []
        parts = [self.classify(arg.value if isinstance(arg, ast.Starred) else arg, depth + 1) for arg in expr.args]
        parts += [self.classify(kw.value, depth + 1) for kw in expr.keywords]
        if isinstance(func, ast.Attribute) and self.module.resolve(func) is not None \
                and not (self.module.resolve(func) or "").split(".")[0] in ("triton", "torch", "math", "os"):
            receiver = func.value
            if not (isinstance(receiver, ast.Name) and receiver.id in self.module.aliases):
                parts.append(self.classify(receiver, depth + 1))  # x.max().item(): follows x
        if not parts:
            return "model", [self.where(line, f"{text} (a call without arguments: fixed for the process)")]
        return _combine(parts)


def _binder(module: _ModuleAudit, function: ast.FunctionDef | ast.AsyncFunctionDef | None) -> _Binder:
    cache = module.__dict__.setdefault("_binders", {})
    binder = cache.get(id(function))
    if binder is None:
        binder = cache[id(function)] = _Binder(module, function)
    return binder


def _calls_of(module: _ModuleAudit, name: str) -> list[tuple[ast.Call, ast.FunctionDef | ast.AsyncFunctionDef | None]]:
    """Calls ``name(...)`` / ``x.name(...)`` in the module, with the function each is written in."""
    return module.facts.calls.get(name, [])


def _static_length(expr: ast.AST, binder: _Binder | None) -> int | None:
    """How many values ``*expr`` spreads, when the source says: a tuple or list literal, both branches of a
    conditional with the same length, or a local name bound once to one of those."""
    if isinstance(expr, (ast.Tuple, ast.List)):
        if any(isinstance(e, ast.Starred) for e in expr.elts):
            return None
        return len(expr.elts)
    if isinstance(expr, ast.IfExp):
        body, orelse = _static_length(expr.body, binder), _static_length(expr.orelse, binder)
        return body if body is not None and body == orelse else None
    if isinstance(expr, ast.Name) and binder is not None:
        bound = binder.assigned.get(expr.id, ())
        if len(bound) == 1 and bound[0][2] is None and not isinstance(bound[0][3], ast.AugAssign):
            return _static_length(bound[0][0], None)
    return None


def _argument_for(call: ast.Call, params: tuple[str, ...], name: str, helper: str | None = None,
                  binder: _Binder | None = None) -> tuple[ast.AST | None, str]:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value, ""
    for kw in call.keywords:
        if kw.arg is None and binder is not None:
            value = binder.keyword_from(kw.value, name)
            if value is not None:
                return value, ""
    if helper is not None:
        return None, f"not passed by keyword to {helper}()"
    if name in params:
        index = params.index(name)
        position = 0
        for arg in call.args:
            if isinstance(arg, ast.Starred):
                spread = _static_length(arg.value, binder)
                if spread is None:
                    return None, f"passed through *{_snippet(arg.value, 40)}"
                if position <= index < position + spread:
                    return None, f"inside *{_snippet(arg.value, 40)}"
                position += spread
                continue
            if position == index:
                return arg, ""
            position += 1
    if any(kw.arg is None for kw in call.keywords):
        return None, "passed through **kwargs"
    return None, "not passed"


def _heuristic_inputs(value: ast.AST) -> list[str] | None:
    """The argument names a ``triton.heuristics`` lambda reads (``args['X']``); None when it is not a lambda."""
    if not isinstance(value, ast.Lambda) or not value.args.args:
        return None
    mapping = value.args.args[0].arg
    names = []
    for node in _nodes(value.body):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == mapping \
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            names.append(node.slice.value)
    if any(isinstance(n, ast.Compare) and any(isinstance(c, ast.Constant) and c.value is None
                                              for c in [n.left, *n.comparators]) for n in _nodes(value.body)) \
            and all(isinstance(n, (ast.Compare, ast.Subscript, ast.Name, ast.Constant, ast.Load, ast.IsNot, ast.Is,
                                   ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not)) for n in _nodes(value.body)):
        return []  # args['x'] is not None: a presence flag
    return names


def _classify_keys(cand: _Candidate, params: tuple[str, ...] | None, key: tuple[str, ...],
                   sites: list[_CallSite], heuristics: dict[str, ast.AST], config_names: set[str]
                   ) -> tuple[KeyBinding, ...]:
    params = params or ()
    defaults: dict[str, ast.AST] = {}
    if cand.function is not None:
        args = cand.function.args
        positional = [a.arg for a in (*args.posonlyargs, *args.args)]
        defaults.update(zip(positional[len(positional) - len(args.defaults):], args.defaults))

    def at_site(site: _CallSite, name: str, depth: int) -> tuple[str, list[str]]:
        binder = _binder(site.module, site.function)
        expr, why = _argument_for(site.call, params, name, site.helper, binder)
        if expr is not None:
            binding, trail = binder.classify(expr)
            return binding, [binder.where(site.call.lineno, f"{name}={_snippet(expr)}"), *trail]
        if name in heuristics and depth < 3:
            inputs = _heuristic_inputs(heuristics[name])
            if inputs is not None:
                parts = [at_site(site, n, depth + 1) for n in inputs if n != name]
                binding, trail = _combine(parts) if parts else ("model", [])
                return binding, [binder.where(site.call.lineno, f"{name} set by triton.heuristics"), *trail]
        if name in defaults and why == "not passed":
            return "model", [binder.where(site.call.lineno, f"{name} not passed: default "
                                                            f"{_snippet(defaults[name])}")]
        if name in config_names and why == "not passed":
            return "model", [binder.where(site.call.lineno, f"{name} set by the configs")]
        return "unknown", [binder.where(site.call.lineno, f"{name} {why}")]

    out: list[KeyBinding] = []
    for name in key:
        if name not in params and cand.function is not None:
            out.append(KeyBinding(name, "unknown", (f"{name} is not a parameter of {cand.function_name}",)))
            continue
        if sites:
            results = [at_site(site, name, 0) for site in sites]
            binding, trail = _combine(results)
            if binding == "unknown" and _batch_named(name):
                binding, trail = "batch", [f"{name}: named for a batch dimension", *trail]
        elif _batch_named(name):
            binding, trail = "batch", [f"{name}: named for a batch dimension (no launch found in the audited tree)"]
        else:
            binding, trail = "unknown", ["no launch found in the audited tree"]
        out.append(KeyBinding(name, binding, tuple(trail[:4])))
    return tuple(out)


# --------------------------------------------------------------------------------------------- in place


_POINTER_PASS = frozenset({"advance", "multiple_of", "max_contiguous", "max_constancy", "broadcast_to", "reshape",
                           "expand_dims", "view", "permute", "trans"})
_INT_ARGS = frozenset({"arange", "range", "static_range", "cdiv", "full", "zeros", "program_id"})
_INT_BINOPS = (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift, ast.BitAnd, ast.BitOr,
               ast.BitXor)


@dataclass
class _Event:
    kind: str  # "load", "store", "atomic"
    roots: frozenset[str]
    line: int
    path: frozenset[tuple[Any, int]]  # the if-branches it is in: (the if, 0 body / 1 else)
    order: int
    pointer: ast.AST | None = None  # the pointer and mask as written, and the bindings in force there
    mask: ast.AST | None = None
    env: dict[str, tuple[frozenset[str], frozenset[int]]] = field(default_factory=dict)


def _sum_terms(expr: ast.AST) -> list[ast.AST]:
    """The terms of ``a + b - c`` (one level of sums, through parentheses and subscripts)."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        return _sum_terms(expr.left) + _sum_terms(expr.right)
    if isinstance(expr, ast.Subscript):
        return _sum_terms(expr.value)
    return [expr]


def _compatible(a: frozenset[tuple[int, int]], b: frozenset[tuple[int, int]]) -> bool:
    """Whether two sets of if-branches can be taken together (no if taken both ways)."""
    taken = dict(a)
    return all(taken.get(branch_of, side) == side for branch_of, side in b)


class _InPlaceAnalysis:
    """Which pointer parameters a kernel loads and stores so that a load can see an earlier launch's store.

    Flow-sensitive over the kernel body: a local pointer variable is bound to the parameters it is computed
    from at each point (``p_v`` for v, later for v_new, is two pointers), and integer parameters are never
    pointers. A load that comes after a store through the same parameter on every path to it (the store
    not in an ``if`` the load is outside of) reads this launch's own output, not an earlier launch's: only
    a load before any such store makes the kernel an in-place update. A load and a store whose regions
    provably do not overlap (``_Regions``) are no in-place pair either.
    """

    def __init__(self, module: _ModuleAudit, function: ast.FunctionDef | ast.AsyncFunctionDef,
                 params: tuple[str, ...]):
        self.module = module
        self.function = function
        self.params = params
        self.int_locals: set[str] = set()
        self.positive: set[str] = set()  # parameters that end a tl.arange(0, P): at least 1
        self.integers = self._integer_params()
        self.pointers = set(params) - self.integers
        self.events: list[_Event] = []
        self.path: frozenset[tuple[int, int]] = frozenset()
        # (statement, name) -> (the value assigned, the bindings it was computed under): what a local held
        self.values: dict[tuple[int, str], tuple[ast.AST, dict]] = {}

    def _tl_op(self, call: ast.Call) -> str | None:
        dotted = self.module.resolve(call.func) or ""
        if dotted.startswith("triton.language.") or dotted.startswith("tl."):
            return dotted.rsplit(".", 1)[-1]
        return None

    def _integer_params(self) -> set[str]:
        """Parameters that are integers, not pointers: annotated so, or used as integers (multiplied,
        compared, passed to tl.arange / range / a block pointer's shape), or added into a local that is."""
        params = set(self.params)
        out = {a.arg for a in _all_args(self.function) if a.annotation is not None
               and _snippet(a.annotation).split(".")[-1] in ("constexpr", "int", "float", "bool")}
        out |= {p for p in params if "stride" in p.lower()}
        nodes = list(_nodes(self.function))
        used: set[str] = set()  # names (parameters or locals) used as integers
        for node in nodes:
            if isinstance(node, ast.BinOp) and isinstance(node.op, _INT_BINOPS):
                used |= {side.id for side in (node.left, node.right) if isinstance(side, ast.Name)}
            elif isinstance(node, ast.Compare) and not any(isinstance(c, ast.Constant) and c.value is None
                                                           for c in [node.left, *node.comparators]):
                used |= {side.id for side in [node.left, *node.comparators] if isinstance(side, ast.Name)}
            elif isinstance(node, ast.Call):
                op = self._tl_op(node) or (node.func.id if isinstance(node.func, ast.Name) else None)
                if op in _INT_ARGS:
                    used |= {n.id for arg in node.args for n in _nodes(arg) if isinstance(n, ast.Name)}
                    if op == "arange" and len(node.args) == 2 and isinstance(node.args[1], ast.Name) \
                            and isinstance(node.args[0], ast.Constant) and type(node.args[0].value) is int \
                            and node.args[0].value >= 0 and node.args[1].id in params:
                        self.positive.add(node.args[1].id)
                elif op in ("make_block_ptr", "make_tensor_descriptor"):
                    fields = _call_arguments(node, ("base", "shape", "strides", "offsets", "block_shape", "order"))
                    for name, value in fields.items():
                        if name != "base":
                            used |= {n.id for n in _nodes(value) if isinstance(n, ast.Name)}
        out |= used & params
        # o = start + tl.arange(...); mask = o < n: o is an integer, so is every parameter summed into it
        self.int_locals = used - params
        for node in nodes:
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id in self.int_locals for t in targets):
                    out |= {n.id for n in _sum_terms(node.value) if isinstance(n, ast.Name) and n.id in params}
        # A parameter added to a named pointer (x_ptr + start) is an offset.
        for node in nodes:
            if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
                sides = [s for s in (node.left, node.right) if isinstance(s, ast.Name) and s.id in params]
                if len(sides) == 2 and any(_POINTER_NAME.search(s.id) for s in sides):
                    out |= {s.id for s in sides if not _POINTER_NAME.search(s.id)}
        # A parameter used as a whole pointer (tl.load(x)) is a pointer whatever else it does.
        for node in nodes:
            if isinstance(node, ast.Call) and self._tl_op(node) in ("load", "store") and node.args \
                    and isinstance(node.args[0], ast.Name) and node.args[0].id in params:
                out.discard(node.args[0].id)
        return out

    # -- roots and signatures

    def roots(self, expr: ast.AST | None, env: dict[str, tuple[frozenset[str], frozenset[int]]]) -> frozenset[str]:
        if expr is None:
            return frozenset()
        if isinstance(expr, ast.Name):
            return env[expr.id][0] if expr.id in env else frozenset()
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
            found = self.roots(expr.left, env) | self.roots(expr.right, env)
            named = frozenset(n for n in found if _POINTER_NAME.search(n))
            return named or found
        if isinstance(expr, ast.Subscript):
            return self.roots(expr.value, env)
        if isinstance(expr, ast.IfExp):
            return self.roots(expr.body, env) | self.roots(expr.orelse, env)
        if isinstance(expr, ast.Call):
            op = self._tl_op(expr)
            if op in ("make_block_ptr", "make_tensor_descriptor"):
                return self.roots(_call_arguments(expr, ("base",)).get("base"), env)
            if op in _POINTER_PASS and expr.args:
                return self.roots(expr.args[0], env)
            if op == "where" and len(expr.args) == 3:
                return self.roots(expr.args[1], env) | self.roots(expr.args[2], env)
            if op is None and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("to", "advance"):
                return self.roots(expr.func.value, env)  # p.to(tl.pointer_type(...)), desc.advance(...)
        return frozenset()

    # -- the walk

    def findings(self) -> list[InPlaceFinding]:
        env = {p: (frozenset({p}) if p in self.pointers else frozenset(), frozenset({-1})) for p in self.params}
        try:
            self._block(self.function.body, env)
        except RecursionError:
            return []
        out: list[InPlaceFinding] = []
        regions = _Regions(self)
        for param in self.params:
            if param not in self.pointers:
                continue
            loads = [e for e in self.events if e.kind == "load" and param in e.roots]
            stores = [e for e in self.events if e.kind == "store" and param in e.roots]
            atomics = [e for e in self.events if e.kind == "atomic" and param in e.roots]
            # A load and a store on one path through the ifs, with no store on that path before the load.
            pairs = [(load, store) for load in loads for store in stores
                     if _compatible(load.path, store.path)
                     and not any(other.order < load.order and other.path <= (load.path | store.path)
                                 for other in stores)
                     and not regions.disjoint(load, store)]
            if atomics or pairs:
                out.append(InPlaceFinding(param, tuple(sorted({p[0].line for p in pairs} | {e.line for e in atomics})),
                                          tuple(sorted({p[1].line for p in pairs} | {e.line for e in atomics})),
                                          bool(atomics)))
        return out

    def _block(self, statements: list[ast.stmt], env: dict) -> dict:
        for stmt in statements:
            env = self._stmt(stmt, env)
        return env

    @staticmethod
    def _merge(a: dict, b: dict) -> dict:
        out = dict(a)
        for name, (roots, defs) in b.items():
            if name in out:
                out[name] = (out[name][0] | roots, out[name][1] | defs)
            else:
                out[name] = (roots, defs)
        return out

    def _stmt(self, stmt: ast.stmt, env: dict) -> dict:
        if isinstance(stmt, ast.Assign):
            self._expr(stmt.value, env)
            before = dict(env)
            for target in stmt.targets:
                self._assign(target, stmt.value, env, id(stmt), before)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self._expr(stmt.value, env)
                self._assign(stmt.target, stmt.value, env, id(stmt), dict(env))
        elif isinstance(stmt, ast.AugAssign):
            self._expr(stmt.value, env)
            if isinstance(stmt.target, ast.Name):
                name = stmt.target.id
                old = env.get(name, (frozenset(), frozenset()))
                extra = self.roots(stmt.value, env) if isinstance(stmt.op, (ast.Add, ast.Sub)) else frozenset()
                self.values[(id(stmt), name)] = (ast.BinOp(ast.Name(name, ast.Load()), stmt.op, stmt.value),
                                                 dict(env))
                env = dict(env)
                env[name] = (old[0] | extra, frozenset({id(stmt)}))
        elif isinstance(stmt, (ast.Expr, ast.Return)):
            if stmt.value is not None:
                self._expr(stmt.value, env)
        elif isinstance(stmt, ast.If):
            self._expr(stmt.test, env)
            outer = self.path
            # Ifs on the same parameters only (constexpr flags) take the same branch all through the kernel.
            names = {n.id for n in _nodes(stmt.test) if isinstance(n, ast.Name)}
            which: Any = ast.dump(stmt.test) if names and names <= set(self.params) else id(stmt)
            self.path = outer | {(which, 0)}
            body = self._block(stmt.body, dict(env))
            self.path = outer | {(which, 1)}
            orelse = self._block(stmt.orelse, dict(env))
            self.path = outer
            env = self._merge(body, orelse)
        elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            if isinstance(stmt, ast.While):
                self._expr(stmt.test, env)
            else:
                self._expr(stmt.iter, env)
            entry = dict(env)
            if not isinstance(stmt, ast.While):
                for name in (n.id for n in _nodes(stmt.target) if isinstance(n, ast.Name)):
                    entry[name] = (frozenset(), frozenset({id(stmt)}))
            # One pass (two would be exponential in the nesting depth): a variable the body assigns may hold
            # its value from the previous iteration at the top, so its definition is marked as loop-carried;
            # its pointer roots only grow through ``p += step``, which keeps them.
            for sub in _statements(stmt.body):
                targets = sub.targets if isinstance(sub, ast.Assign) else \
                    [sub.target] if isinstance(sub, (ast.AugAssign, ast.AnnAssign)) else []
                for target in targets:
                    for name in (n.id for n in _nodes(target) if isinstance(n, ast.Name)):
                        if name in entry:
                            entry[name] = (entry[name][0], entry[name][1] | {id(stmt)})
            after = self._block(stmt.body, dict(entry))
            env = self._block(stmt.orelse, self._merge(entry, after))
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self._expr(item.context_expr, env)
            env = self._block(stmt.body, env)
        elif isinstance(stmt, ast.Try):
            env = self._block(stmt.body, env)
            for handler in stmt.handlers:
                env = self._merge(env, self._block(handler.body, dict(env)))
            env = self._block(stmt.orelse + stmt.finalbody, env)
        return env

    def _assign(self, target: ast.AST, value: ast.AST | None, env: dict, sid: int, before: dict) -> None:
        if isinstance(target, ast.Name):
            roots = frozenset() if target.id in self.int_locals else self.roots(value, env)
            env[target.id] = (roots, frozenset({sid}))
            if value is not None:
                self.values[(sid, target.id)] = (value, before)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                values = [self.roots(v, env) for v in value.elts]
                for sub, roots, sub_value in zip(target.elts, values, value.elts):
                    if isinstance(sub, ast.Name):
                        env[sub.id] = (roots, frozenset({sid}))
                        self.values[(sid, sub.id)] = (sub_value, before)
            else:
                for sub in _nodes(target):
                    if isinstance(sub, ast.Name):
                        env[sub.id] = (frozenset(), frozenset({sid}))

    def _expr(self, node: ast.AST, env: dict) -> None:
        """Record loads, stores and atomics in evaluation order (arguments before the call)."""
        for field_name in node._fields:
            value = getattr(node, field_name, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, ast.expr) and item.__class__ is not ast.Lambda:
                        self._expr(item, env)
            elif isinstance(value, ast.expr) and value.__class__ is not ast.Lambda \
                    and value.__class__ is not ast.Constant:
                self._expr(value, env)
        if node.__class__ is not ast.Call:
            return
        op = self._tl_op(node)
        mask = None
        if op in ("load", "store") or (op or "").startswith("atomic_"):
            arguments = _call_arguments(node, ("pointer", "value", "mask") if op == "store" else ("pointer", "mask"))
            pointer, mask = arguments.get("pointer"), arguments.get("mask")
        elif op is None and isinstance(node.func, ast.Attribute) and node.func.attr in ("load", "store") \
                and self.roots(node.func.value, env):
            op, pointer = node.func.attr, node.func.value  # desc.load([...]) on a tensor descriptor
        else:
            return
        roots = self.roots(pointer, env)
        if roots:
            kind = op if op in ("load", "store") else "atomic"
            self.events.append(_Event(kind, roots, node.lineno, self.path, len(self.events), pointer, mask,
                                      dict(env)))


# --------------------------------------------------------------------------------------------- disjoint regions


# A bound of an integer expression: a sum of atoms (parameters as passed, module names) times coefficients,
# the constant under "". ``{"T": 1, "C": -1, "": -1}`` is T - C - 1.
_Linear = dict


class _Expansion(Exception):
    """An expression too large to expand (the comparison gives up: the pair stays an in-place finding)."""


_EXPANSION_BUDGET = 2_000  # nodes per pointer or mask: far above any kernel's, small enough to stay cheap


def _broadcast_of(expr: ast.AST) -> ast.AST:
    """``x[:, None]``, ``x[None, :]``, ``x[None]``: the values of x, broadcast; anything else unchanged."""
    while isinstance(expr, ast.Subscript):
        parts = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
        if not all((isinstance(p, ast.Constant) and p.value is None)
                   or (isinstance(p, ast.Slice) and p.lower is None and p.upper is None and p.step is None)
                   for p in parts):
            break
        expr = expr.value
    return expr


def _signed_terms(expr: ast.AST, sign: int = 1) -> list[tuple[int, ast.AST]]:
    expr = _broadcast_of(expr)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        return _signed_terms(expr.left, sign) + _signed_terms(expr.right, -sign if isinstance(expr.op, ast.Sub)
                                                              else sign)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        return _signed_terms(expr.operand, -sign)
    return [(sign, expr)]


def _factors(expr: ast.AST) -> list[ast.AST]:
    expr = _broadcast_of(expr)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
        return _factors(expr.left) + _factors(expr.right)
    return [expr]


def _conjuncts(expr: ast.AST) -> list[ast.AST]:
    expr = _broadcast_of(expr)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitAnd):
        return _conjuncts(expr.left) + _conjuncts(expr.right)
    if isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.And):
        return [c for value in expr.values for c in _conjuncts(value)]
    return [expr]


def _plus(a: _Linear, b: _Linear, scale: int = 1) -> _Linear:
    out = dict(a)
    for atom, coefficient in b.items():
        out[atom] = out.get(atom, 0) + scale * coefficient
    return {atom: c for atom, c in out.items() if c or atom == ""}


def _separated(upper: _Linear, lower: _Linear) -> bool:
    """Whether every value at most ``upper`` is below every value at least ``lower``, whatever the atoms."""
    gap = _plus(lower, upper, -1)
    return set(gap) <= {""} and gap.get("", 0) >= 1


_MIRROR = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}


class _Regions:
    """Whether a load and a store through the same pointer parameter provably touch different elements.

    Both pointers are expanded through the locals they are computed from, as bound where each access is
    (a local assigned more than once on the way, a loop variable, stays opaque). They must be the same sum of
    terms but one, ``i * S`` in the load and ``j * S`` in the store with the same stride factors ``S`` (a
    dimension of a strided tensor), and the index ranges must be separated: bounds of ``i`` and ``j`` come
    from the access's mask (``i < T - C`` in ``mask=``, through ``&``) and from the index itself
    (``T - C + tl.arange(0, B) + tl.program_id(0) * B`` is at least ``T - C``; a parameter that ends a
    ``tl.arange(0, P)`` is positive), and one range must end below the start of the other, as a difference
    of sums of parameters that is a positive constant (``T - C`` against ``T - C - 1``). The other terms are
    taken to stay within one step of that dimension, as in-bounds accesses to a strided tensor do.
    Anything else (block pointers, a stride of 1, bounds that depend on a loop variable) is not disjoint.
    """

    def __init__(self, analysis: _InPlaceAnalysis):
        self.analysis = analysis
        self.positive = analysis.positive

    def disjoint(self, load: _Event, store: _Event) -> bool:
        if load.pointer is None or store.pointer is None:
            return False
        try:
            budget = [_EXPANSION_BUDGET]
            pointers = [self._expand(e.pointer, e.env, budget) for e in (load, store)]
            masks = [None if e.mask is None else self._expand(e.mask, e.env, budget) for e in (load, store)]
        except (_Expansion, RecursionError):
            return False
        differing = self._differing_terms(*pointers)
        if differing is None:
            return False
        indices = self._index_pair(*differing)
        if indices is None:
            return False
        (low_l, up_l), (low_s, up_s) = (self._bounds(index, mask) for index, mask in zip(indices, masks))
        return any(_separated(u, lo) for u in up_l for lo in low_s) or \
            any(_separated(u, lo) for u in up_s for lo in low_l)

    @staticmethod
    def _differing_terms(a: ast.AST, b: ast.AST) -> tuple[ast.AST, ast.AST] | None:
        """The one term of ``a`` and the one of ``b`` (same sign) left when the terms they share are taken out."""
        ta, tb = _signed_terms(a), _signed_terms(b)
        ka = [(sign, ast.dump(term)) for sign, term in ta]
        kb = [(sign, ast.dump(term)) for sign, term in tb]
        rest_a = [(k[0], term) for (_, term), k in zip(ta, ka) if ka.count(k) > kb.count(k)]
        rest_b = [(k[0], term) for (_, term), k in zip(tb, kb) if kb.count(k) > ka.count(k)]
        if len(rest_a) != 1 or len(rest_b) != 1 or rest_a[0][0] != rest_b[0][0]:
            return None
        return rest_a[0][1], rest_b[0][1]

    @staticmethod
    def _index_pair(a: ast.AST, b: ast.AST) -> tuple[ast.AST, ast.AST] | None:
        """The differing index of ``i * S`` and ``j * S`` (factors in any order), S not empty."""
        fa, fb = _factors(a), _factors(b)
        da, db = [ast.dump(f) for f in fa], [ast.dump(f) for f in fb]
        common = [d for d in da if d in db]
        rest_a = [f for f, d in zip(fa, da) if da.count(d) > db.count(d)]
        rest_b = [f for f, d in zip(fb, db) if db.count(d) > da.count(d)]
        if not common or len(rest_a) != 1 or len(rest_b) != 1 or len(fa) != len(fb):
            return None
        return rest_a[0], rest_b[0]

    def _expand(self, expr: ast.AST, env: dict, budget: list[int]) -> ast.AST:
        budget[0] -= 1
        if budget[0] < 0:
            raise _Expansion
        if isinstance(expr, ast.Name):
            entry = env.get(expr.id)
            if entry is None or entry[1] == frozenset({-1}):
                return expr  # a parameter as passed, or a module-level name: the same all through the kernel
            if len(entry[1]) == 1:
                held = self.analysis.values.get((next(iter(entry[1])), expr.id))
                if held is not None:
                    return self._expand(held[0], held[1], budget)
            return ast.Name(f"{expr.id}#{sorted(entry[1])}", ast.Load())  # opaque: differs from any atom
        if isinstance(expr, ast.keyword):
            return ast.keyword(expr.arg, self._expand(expr.value, env, budget))
        if not isinstance(expr, ast.expr) or isinstance(expr, (ast.Constant, ast.Lambda)):
            return expr
        fields = {}
        for name in expr._fields:
            value = getattr(expr, name, None)
            if value.__class__ is list:
                fields[name] = [self._expand(v, env, budget) if isinstance(v, (ast.expr, ast.keyword)) else v
                                for v in value]
            elif isinstance(value, ast.expr):
                fields[name] = self._expand(value, env, budget)
            else:
                fields[name] = value
        return type(expr)(**fields)

    def _bounds(self, index: ast.AST, mask: ast.AST | None) -> tuple[list[_Linear], list[_Linear]]:
        """Lower and upper bounds (inclusive) of an index on the lanes the access touches."""
        lows = [b for b in (self._bound(index, upper=False),) if b is not None]
        ups = [b for b in (self._bound(index, upper=True),) if b is not None]
        key = ast.dump(_broadcast_of(index))
        for test in _conjuncts(mask) if mask is not None else []:
            if not isinstance(test, ast.Compare) or len(test.ops) != 1 or type(test.ops[0]) not in _MIRROR:
                continue
            side, other, op = _broadcast_of(test.left), _broadcast_of(test.comparators[0]), type(test.ops[0])
            if ast.dump(other) == key:
                side, other, op = other, side, _MIRROR[op]
            if ast.dump(side) != key:
                continue
            bound = self._bound(other, upper=op in (ast.Lt, ast.LtE))
            if bound is None:
                continue
            if op is ast.Lt:
                ups.append(_plus(bound, {"": -1}))
            elif op is ast.LtE:
                ups.append(bound)
            elif op is ast.Gt:
                lows.append(_plus(bound, {"": 1}))
            else:
                lows.append(bound)
        return lows, ups

    def _bound(self, expr: ast.AST, upper: bool) -> _Linear | None:
        expr = _broadcast_of(expr)
        if isinstance(expr, ast.Constant):
            return {"": expr.value} if type(expr.value) is int else None
        if isinstance(expr, ast.Name):
            return None if "#" in expr.id else {expr.id: 1, "": 0}
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
            inner = self._bound(expr.operand, not upper)
            return None if inner is None else _plus({"": 0}, inner, -1)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
            left = self._bound(expr.left, upper)
            right = self._bound(expr.right, upper if isinstance(expr.op, ast.Add) else not upper)
            if left is None or right is None:
                return None
            return _plus(left, right, 1 if isinstance(expr.op, ast.Add) else -1)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
            for constant, other in ((expr.left, expr.right), (expr.right, expr.left)):
                if isinstance(constant, ast.Constant) and type(constant.value) is int:
                    inner = self._bound(other, upper if constant.value >= 0 else not upper)
                    return None if inner is None else _plus({"": 0}, inner, constant.value)
            if not upper and self._nonnegative(expr.left) and self._nonnegative(expr.right):
                return {"": 0}
            return None
        if isinstance(expr, ast.Call):
            op = self.analysis._tl_op(expr)
            if op == "arange" and len(expr.args) == 2:
                if upper:
                    end = self._bound(expr.args[1], upper=True)
                    return None if end is None else _plus(end, {"": -1})
                return self._bound(expr.args[0], upper=False)
            if op == "program_id":
                return None if upper else {"": 0}
            if op in ("multiple_of", "max_contiguous", "max_constancy") and expr.args:
                return self._bound(expr.args[0], upper)
            if op is None and isinstance(expr.func, ast.Attribute) and expr.func.attr == "to":
                return self._bound(expr.func.value, upper)
        return None

    def _nonnegative(self, expr: ast.AST) -> bool:
        expr = _broadcast_of(expr)
        if isinstance(expr, ast.Name) and expr.id in self.positive:
            return True
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Mult)):
            return self._nonnegative(expr.left) and self._nonnegative(expr.right)
        low = self._bound(expr, upper=False)
        return low is not None and set(low) <= {""} and low[""] >= 0


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
             n_configs: int | None, reason: str | None, in_place: list[InPlaceFinding], covered: set[str] | None,
             bindings: tuple[KeyBinding, ...], env: tuple[str, ...], wrapper_name: str | None
             ) -> tuple[Hazard, ...]:
    out: list[Hazard] = []
    several = n_configs is None or n_configs > 1
    count = "a dynamic number of" if n_configs is None else str(n_configs)
    key_text = "a dynamic key" if key is None else f"key {list(key)}"
    if wrapper == "unknown":
        out.append(Hazard("unknown-autotuner", HAZARD,
                          f"{wrapper_name} is named like an autotuner but is not defined in the audited tree: "
                          f"{_EXPLANATIONS['unknown-autotuner']}"))
    if wrapper == "triton" and several and (key is None or key):
        varying = [b.name for b in bindings if b.binding == "batch"]
        unknown = [b.name for b in bindings if b.binding == "unknown"]
        if key is None or varying or unknown:
            detail = "; ".join(part for part in (
                f"follows the batch: {varying}" if varying else "",
                f"binding unknown: {unknown}" if unknown else "") if part)
            detail = f" ({detail})" if detail else ""
            out.append(Hazard("tunes-at-runtime", HAZARD,
                              f"{count} configs and {key_text}{detail}: {_EXPLANATIONS['tunes-at-runtime']}"))
        else:
            out.append(Hazard("tunes-at-runtime", INFO,
                              f"{count} configs and {key_text}, model dimensions only: "
                              f"{_EXPLANATIONS['tunes-per-model']}"))
    if wrapper == "triton" and several and key == ():
        out.append(Hazard("tunes-on-first-call", INFO,
                          f"{count} configs and an empty key: {_EXPLANATIONS['tunes-on-first-call']}"))
    if wrapper == "graphtune":
        out.append(Hazard("capture-safe", INFO, _EXPLANATIONS["capture-safe"]))
    if key and params is not None:
        missing = [k for k in key if k not in params]
        if missing:
            out.append(Hazard("unknown-key", HAZARD,
                              f"key name(s) {missing} are not parameters of {cand.function_name}: "
                              f"{_EXPLANATIONS['unknown-key']}"))
    # With one config nothing is benchmarked, so an in-place kernel runs exactly once per call.
    if several and covered is not None:
        exposed = [f for f in in_place if f.param not in covered]
        if exposed:
            where = "; ".join(f"{f.param}: {'atomic at' if f.atomic else 'loaded at'} line(s) "
                              f"{', '.join(map(str, f.loads))}, stored at {', '.join(map(str, f.stores))}"
                              for f in exposed)
            out.append(Hazard("in-place-without-restore", HAZARD,
                              f"{[f.param for f in exposed]} loaded and stored with no restore_value/reset_to_zero "
                              f"({where}): {_EXPLANATIONS['in-place-without-restore']}"))
    if n_configs is None and wrapper != "unknown":
        out.append(Hazard("dynamic-configs", INFO,
                          f"configs not statically known ({reason}): {_EXPLANATIONS['dynamic-configs']}"))
    elif n_configs is not None and n_configs <= 1:
        assumed = f" (with the defaults of {', '.join(env)})" if env else ""
        out.append(Hazard("single-config", INFO,
                          f"{n_configs} config{'s' if n_configs != 1 else ''}{assumed}: "
                          f"{_EXPLANATIONS['single-config']}"))
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
        dotted = module_name_for(str(path), "_graphtune_audit")
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
