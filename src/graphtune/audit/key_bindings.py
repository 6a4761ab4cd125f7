"""Key classification: each key name as bound at the launches found in the tree, ``batch``,
``model`` or ``unknown``, with its evidence (``file:line: text``). Modules, candidates and call sites are
``module._ModuleAudit`` / ``_Candidate`` / ``_CallSite`` (named in annotations only: built on this module)."""
from __future__ import annotations

import ast
import re

from ._syntax import _all_args, _bind_call, _nodes, _snippet
from .results import KeyBinding


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
