"""Config lists counted without running them: a small evaluator over the syntax tree (literals, module
constants, ``range``, comprehensions, arithmetic, string methods, ``triton.Config(...)``, ``os.getenv`` /
``os.environ.get`` at their defaults); anything else raises ``_Dynamic``. The module it evaluates in is a
``module._ModuleAudit`` (named in annotations only: that module is built on this one)."""
from __future__ import annotations

import ast
import itertools
import operator
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ._syntax import _call_arguments, _snippet


_CONFIG_ARGS = ("kwargs", "num_warps", "num_stages", "num_ctas", "maxnreg")
_CONFIG_DEFAULTS = {"num_warps": 4, "num_stages": 3}  # triton.Config defaults: what runs when unset

# Guard against ``range(10**9)`` and friends in a config list: the audit stays cheap on any input.
_MAX_ELEMENTS = 100_000


class _Dynamic(Exception):
    """An expression the static evaluator does not handle; the message is the offending source text."""


@dataclass(frozen=True)
class _ConfigRecord:
    """A ``triton.Config(...)`` seen statically: the fields it was possible to evaluate."""
    kwargs: tuple[tuple[str, Any], ...]
    options: tuple[tuple[str, Any], ...]


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
            # ``helper()[i]`` (``configs, keys = helper()``): static where every branch agrees on element i, though
            # the branches differ elsewhere (the configs by platform, the key the same)
            returned = self._branch_values(node.value) if isinstance(node.value, ast.Call) else None
            if returned is not None:
                index = self._slice(node.slice, scope)
                try:
                    items = [value[index] for value in returned]
                except Exception:
                    raise _Dynamic(_snippet(node)) from None
                if any(item != items[0] for item in items[1:]):
                    raise _Dynamic(f"{_snippet(node)}: its branches return different values")
                return items[0]
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

    def _branch_values(self, node: ast.Call) -> list[Any] | None:
        """The value each branch of a zero-argument module function that only returns (``simple_functions``)
        gives; None when ``node`` calls no such function."""
        if not (isinstance(node.func, ast.Name) and not node.args and not node.keywords
                and node.func.id in self.module.simple_functions):
            return None
        name = node.func.id
        if name in self._active:
            raise _Dynamic(f"{name}() (recursive)")
        self._active.add(name)
        try:
            return [self._eval(expr, {}) for expr in self.module.simple_functions[name]]
        except _Dynamic as exc:
            raise _Dynamic(f"{name}(): {exc}") from None
        finally:
            self._active.discard(name)

    def _call(self, node: ast.Call, scope: dict[str, Any]) -> Any:
        if isinstance(node.func, ast.Name) and node.func.id in scope:
            raise _Dynamic(_snippet(node))
        target = self.module.resolve(node.func)
        if target is not None and self.module.is_config(target):
            return self.config(node, scope, lenient=False)
        # A zero-argument module function that only returns: ``def configs(): return [...]``, or one expression a
        # branch (``if is_hip(): return a`` / ``return b``), static when every branch returns the same value.
        returned = self._branch_values(node)
        if returned is not None:
            if any(value != returned[0] for value in returned[1:]):
                raise _Dynamic(f"{_snippet(node)}: its branches return different values")
            return returned[0]
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
