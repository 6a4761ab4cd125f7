"""In-place analysis of a kernel body: which pointer parameters it loads and stores so that a load can
see what an earlier launch stored, and which load/store pairs touch regions that provably do not overlap. The
module it reads names through is a ``module._ModuleAudit`` (named in annotations only)."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from ._syntax import _all_args, _call_arguments, _nodes, _snippet, _statements
from .results import InPlaceFinding


# A pointer expression like ``x_ptr + row * stride + start`` has several parameter names in it; when
# one of them is named like a pointer, that one is the pointer.
_POINTER_NAME = re.compile(r"(ptr|Ptr|PTR|pointer|_p$)")


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
