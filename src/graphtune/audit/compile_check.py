"""``compile_target``: import each kernel's module and inspect its configs for a target
(``does-not-fit`` / ``compile-skipped``)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

from .._loading import module_name_for
from .._log import logger
from .files import _package_of
from .results import FileFailure, HAZARD, Hazard, INFO, KernelAudit


def _compile_check(kernels: list[KernelAudit], target: str, inspect: Callable[..., Iterable[Any]] | None
                   ) -> tuple[list[KernelAudit], tuple[FileFailure, ...]]:
    """Import each kernel's module and inspect the kernel for ``target``; adds does-not-fit / compile-skipped."""
    if inspect is None:
        try:
            from .. import resources
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
    from ..configs import config_label
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
