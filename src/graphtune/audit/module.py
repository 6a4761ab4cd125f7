"""One module's audit: its names (imports, constants, module-level definitions) resolved to dotted
names, decorator recognition (triton / graphtune autotune, heuristics, jit, wrappers of the tree), kernels
decorated or applied by call, and one kernel's audit assembled from the config evaluator, the key bindings, the
in-place analysis and the hazards. ``index`` is the ``tree._Tree`` the module belongs to (named in annotations
only: the tree is built on this module)."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from ._syntax import _branch_returns, _call_arguments, _leaf, _parameters, _snippet, _statements
from .evaluate import _ConfigRecord, _distinct_fields, _Dynamic, _Evaluator
from .files import _package_of
from .hazards import _hazards
from .in_place import _InPlaceAnalysis
from .key_bindings import _classify_keys
from .results import _EXPLANATIONS, INFO, Hazard, KernelAudit


_TRITON_AUTOTUNE = frozenset({"triton.autotune", "triton.runtime.autotune", "triton.runtime.autotuner.autotune"})
_TRITON_HEURISTICS = frozenset({"triton.heuristics", "triton.runtime.heuristics",
                                "triton.runtime.autotuner.heuristics"})
_TRITON_JIT = frozenset({"triton.jit", "triton.runtime.jit.jit"})
_TRITON_CONFIG = frozenset({"triton.Config", "triton.runtime.Config", "triton.runtime.autotuner.Config"})

# Positional parameters of triton.autotune (3.6); graphtune.autotune is only trusted for the first two.
_TRITON_AUTOTUNE_ARGS = ("configs", "key", "prune_configs_by", "reset_to_zero", "restore_value")
_GRAPHTUNE_AUTOTUNE_ARGS = ("configs", "key")


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
        # zero-argument module functions that only return: the expression each branch returns (one without a branch)
        self.simple_functions: dict[str, tuple[ast.AST, ...]] = {}
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
                # ``configs, keys = helper()``: each name the value's element at its place, evaluated when asked
                starred = any(isinstance(elt, ast.Starred) for elt in target.elts)
                for i, elt in enumerate(target.elts):
                    item = None if value is None or starred else ast.copy_location(
                        ast.Subscript(value=value, slice=ast.Constant(i), ctx=ast.Load()), elt)
                    targets(elt.value if isinstance(elt, ast.Starred) else elt, item)

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
                returned = _branch_returns(body) if no_args and not value.decorator_list else None
                if returned:
                    self.simple_functions[name] = returned
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
        splats = [_snippet(kw.value) for kw in (tuner.call.keywords if tuner.call is not None else ())
                  if kw.arg is None]
        if splats:
            hazards += (Hazard("splatted-arguments", INFO, f"**{', **'.join(splats)}: "
                                                           f"{_EXPLANATIONS['splatted-arguments']}"), )
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
