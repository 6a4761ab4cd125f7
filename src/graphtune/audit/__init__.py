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
compile-skipped             info      (``compile_target`` only) the kernel could not be inspected (its
                                      module did not import, or its argument types are unknown: a stock
                                      kernel without ``graphtune_signature``; the summary's
                                      ``compile_checked`` counts those inspected).
splatted-arguments          info      the autotuner also takes ``**mapping``, which the audit does not read
                                      (a key, restore_value / reset_to_zero or configs there are not seen).
==========================  ========  =================================================================

JSON (``AuditReport.to_dict``; ``graphtune audit --json``): every field of earlier versions is kept. Per
kernel, added: ``wrapper_name`` (the decorator as resolved, e.g. ``triton.autotune`` or
``fla.ops.utils.cache.fla_cache_autotune``), ``wrapper_defined_at`` (``file:line`` of a wrapper of the
tree, else null), ``triton_via`` (the re-export module triton came through, else null), ``configs`` may
be ``"unknown"``, ``configs_env`` (environment variables whose defaults the count assumes), ``keys``
(``[{name, binding, evidence}]``), ``call_sites`` (``file:line`` of each launch found), ``in_place``
(``[{param, loads, stores, atomic}]``, lines). In ``summary``, added: ``files_parsed`` and
``hazards_by_code`` (severity ``hazard`` only; ``by_hazard`` still counts every finding).

Modules (each one mechanism; imports point down this list): ``results`` (what is reported), ``_syntax``
(shared syntax-tree helpers), ``files`` (which files are read), ``evaluate`` (config lists counted statically),
``in_place`` (the in-place analysis), ``key_bindings`` (key classification), ``hazards`` (findings as hazards),
``module`` (one module: name resolution, decorator recognition, one kernel's audit), ``tree`` (the files as
one code base: re-exports, wrappers, launches across modules), ``compile_check`` (``compile_target``), and
this package's ``audit_paths`` / ``audit_source``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterable

from .compile_check import _compile_check
from .files import collect_files
from .results import (HAZARD, INFO, AuditReport, FileFailure, Hazard, InPlaceFinding, KernelAudit, KeyBinding,
                      explain)
from .tree import _Tree

__all__ = ["HAZARD", "INFO", "AuditReport", "FileFailure", "Hazard", "InPlaceFinding", "KernelAudit", "KeyBinding",
           "audit_paths", "audit_source", "collect_files", "explain"]


def audit_paths(paths: Iterable[str | os.PathLike[str]], *, compile_target: str | None = None,
                inspector: Callable[..., Iterable[Any]] | None = None) -> AuditReport:
    """Audit every Python file under ``paths`` (files or directories; .gitignore respected inside git).

    Files under a directory are parsed only when they can hold an autotuned kernel (they mention an
    autotuner, or a wrapper found in the tree) or launch one; a file named explicitly is always parsed. A file
    or directory that cannot be read is in ``files_failed``, never skipped in silence.
    Read-only unless ``compile_target`` is given: then the module of each kernel is imported (it runs
    that code) and each kernel is inspected for that target with ``inspector`` (default
    ``graphtune.resources.inspect``; same signature, rows with ``.fits``, ``.reason``, ``.config``).
    """
    paths = list(paths)
    unreadable: dict[str, str] = {}   # directories that could not be listed: failures, never silently skipped
    files = collect_files(paths, unreadable)
    explicit = {Path(p).resolve() for p in paths if Path(p).is_file()}
    roots = [Path(p) for p in paths if Path(p).is_dir()]
    tree = _Tree(files, explicit, roots)
    kernels = tree.audit()
    failed = tuple(FileFailure(str(path), error) for path, error in {**unreadable, **tree.failed}.items())
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
