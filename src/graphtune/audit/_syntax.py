"""Syntax-tree helpers every analysis of the audit shares: walks, snippets for messages, a call's
arguments by parameter name. ``caller`` / ``module`` of ``_bind_call`` are ``module._ModuleAudit`` (named in
annotations only: that module is built on this one)."""
from __future__ import annotations

import ast


def _snippet(node: ast.AST, limit: int = 80) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # unparse of odd trees is best effort: the text is only for messages
        text = type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _branch_returns(body: list[ast.stmt]) -> tuple[ast.AST, ...] | None:
    """The expressions a function body made only of returns and ifs can return, one a branch (``if cond: return a``
    / ``else: return b``, chains of them, a final return after an if that returns): what a helper that picks configs
    or keys by platform returns. None when the body does anything else, or a path ends without a value."""
    out: list[ast.AST] = []
    for i, stmt in enumerate(body):
        last = i == len(body) - 1
        if isinstance(stmt, ast.Return):
            if stmt.value is None or not last:
                return None
            return (*out, stmt.value)
        if not isinstance(stmt, ast.If):
            return None
        taken = _branch_returns(stmt.body)
        if taken is None:
            return None
        out.extend(taken)
        if stmt.orelse:
            other = _branch_returns(stmt.orelse)
            if other is None:
                return None
            out.extend(other)
            if last:
                return tuple(out)
        elif last:
            return None     # falls through: returns None on that path
    return None


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
