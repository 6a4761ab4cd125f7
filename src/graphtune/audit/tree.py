"""The audited files as one code base: module names, which files to parse (cheap byte tests first), lazy
parsing, re-exports of triton, wrappers of triton's autotuner, launches of kernels across modules."""
from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import Any, Callable

from .._log import logger
from ._syntax import _all_args, _bind_call, _call_arguments, _leaf, _parameters, _snippet
from .files import _describe_parse_error, _read_source, _Unparsable
from .key_bindings import _binder
from .module import (_AUTOTUNER_CLASSES, _AUTOTUNER_INIT_ARGS, _CallSite, _Candidate, _init_arguments,
                     _ModuleAudit, _ROLES, _TRITON_AUTOTUNE, _TRITON_AUTOTUNE_ARGS, _TRITON_JIT, _Wrapper)
from .results import KernelAudit


_MARKER = b"autotun"  # in lower case: autotune, Autotuner, my_autotune_cache, ...
# Among files that say "autotun": those that call, decorate with, assign or subclass one (not only a flag or
# a comment mentioning it); the cheap ``_MARKER`` test runs first.
_USES = re.compile(rb"(?i)(autotun\w*\s*\(|@\s*[\w.]*autotun|=\s*[\w.]*autotun|\bAutotuner\b)")
_WORDS = re.compile(rb"\w+")


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

    @property
    def n_parsed(self) -> int:
        """Files parsed and analysed. A file that could not be read, parsed or analysed is in ``failed`` instead:
        each file counts once."""
        return sum(1 for path, module in self.modules.items() if module is not None and str(path) not in self.failed)

    def add_source(self, source: str | bytes, filename: str) -> _ModuleAudit:
        """Parse one text outside any tree (``audit_source``); raises _Unparsable."""
        return self._parse(source, filename, None, None)

    def _parse(self, source: str | bytes, filename: str, qualname: str | None, package: list[str] | None
               ) -> _ModuleAudit:
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
