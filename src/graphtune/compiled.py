"""graphtune kernels inside ``torch.compile``: a launch traced as one opaque custom op, tuned when it runs.

When Dynamo traces ``kernel[grid](*args)`` of a graphtune kernel, ``GraphtuneKernel.run`` hands the call to
``traced_launch`` (the one-line hook at its top). That puts a single ``graphtune::launch`` op in the graph:

    graphtune::launch(str kernel, str layout, Tensor(a!)[] tensors, Tensor[] inputs, SymInt[] ints,
                      float[] floats, SymInt[] grids) -> ()

``kernel`` is the kernel's name (looked up at run time; names must be unique among the kernels compiled in one
process), ``layout`` a literal describing how to rebuild the positional and keyword arguments from the three
lists plus constants (None, bools, constexpr values), ``grids`` the launch grid evaluated at trace time once per
distinct config (as Dynamo does for stock autotuners: a grid callable closes over traced values and cannot
cross the op boundary). When the op runs, with real tensors, it rebuilds the call and goes through the
kernel's ordinary ``run``: the key, buckets, capture policy, force, database and tuner all apply, exactly as
in eager; the grid of the config graphtune chose is picked by that config's parameters.

``tensors`` holds the tensors the kernel may write (declared mutated), ``inputs`` those it only reads: a
parameter counts as read-only when every use of it in the kernel's source is inside the pointer argument of a
``tl.load`` (``_written_params``; anything else, a pointer kept in a local for instance, counts as written).
Declaring a read-only input mutated would make functionalisation copy it (aot_eager) and make cudagraph trees
skip graphs whose inputs are mutated (reduce-overhead), so precision here matters.
Int arguments go through as SymInt (``dynamic=True`` keeps them symbolic); constexpr arguments are
specialised (Triton recompiles per value anyway), as Dynamo does for stock kernels.
"""
from __future__ import annotations

import ast
import functools
import inspect
import operator
import textwrap
from typing import Any, Sequence

import torch

from .state import STATE

_OP_NAME = "graphtune::launch"


# ------------------------------------------------------------------------------------------ trace time


def traced_launch(kernel, args: tuple, kwargs: dict, grid, warmup: bool = False):
    """Called (and traced by Dynamo) in place of ``GraphtuneKernel.run`` while Dynamo compiles a function."""
    if warmup:
        raise RuntimeError(f"graphtune kernel {kernel.name!r}: warmup=True inside torch.compile is not supported; "
                           f"call kernel.warmup(...) outside the compiled function")
    arg_names, constexpr, metas, written = _trace_info(kernel.name)
    tensors: list[Any] = []
    writes: list[bool] = []
    ints: list[Any] = []
    floats: list[Any] = []
    pos: list[Any] = []
    for i in range(len(args)):
        name = arg_names[i] if i < len(arg_names) else ""
        pos.append(_encode(args[i], name in constexpr, name in written, tensors, writes, ints, floats))
    kw: list[Any] = []
    for name in kwargs:
        kw.append((name, _encode(kwargs[name], name in constexpr, name in written, tensors, writes, ints, floats)))
    # written tensors go in the op's mutable list, the others in its read-only one; a token names the list
    # ("m" / "r") and the position in it
    mutated = [tensors[j] for j in range(len(tensors)) if writes[j]]
    inputs = [tensors[j] for j in range(len(tensors)) if not writes[j]]
    where = []
    for j in range(len(tensors)):
        if writes[j]:
            where.append(("m", sum(1 for i in range(j) if writes[i])))
        else:
            where.append(("r", sum(1 for i in range(j) if not writes[i])))
    pos = [_retarget(e, where) for e in pos]
    kw = [(name, _retarget(e, where)) for name, e in kw]
    grids: list[Any] = []
    grid_keys: list[Any] = []
    if callable(grid):
        named = {}
        for i in range(len(args)):
            if i < len(arg_names):
                named[arg_names[i]] = args[i]
        for name in kwargs:
            named[name] = kwargs[name]
        for meta in metas:
            full = dict(named)
            for name, value in meta:
                full[name] = value
            for values in kernel.heuristics_values:   # triton.heuristics under the autotuner feed the grid
                for name in values:
                    full[name] = values[name](full)
            g = grid(full)
            _push_grid(g, grids)
            grid_keys.append(meta)
    else:
        _push_grid(grid, grids)
    layout = repr((tuple(pos), tuple(kw), tuple(grid_keys)))
    torch.ops.graphtune.launch(kernel.name, layout, mutated, inputs, ints, floats, grids)


def _retarget(e, where: list):
    return where[e[1]] if e[0] == "t" else e


def _push_grid(g, grids: list) -> None:
    if not isinstance(g, (tuple, list)) or not 1 <= len(g) <= 3:
        raise TypeError(f"graphtune under torch.compile: a grid must be a tuple of 1 to 3 ints, got {g!r}")
    for x in g:
        grids.append(x)
    for _ in range(3 - len(g)):
        grids.append(1)


def _encode(a, is_constexpr: bool, is_written: bool, tensors: list, writes: list, ints: list, floats: list):
    if isinstance(a, torch.Tensor):
        for j in range(len(tensors)):
            if tensors[j] is a:     # one tensor passed twice crosses the op once (written if either use writes)
                writes[j] = writes[j] or is_written
                return ("t", j)
        tensors.append(a)
        writes.append(is_written)
        return ("t", len(tensors) - 1)
    if a is None or isinstance(a, str):
        return ("c", a)
    if isinstance(a, (bool, torch.SymBool)):
        # a SymBool is specialised (branching on it guards on its value): Triton compiles per bool value
        return ("c", True) if a else ("c", False)
    if isinstance(a, (int, torch.SymInt)):
        if is_constexpr:
            # Triton compiles one kernel per constexpr value: specialise on it, as Dynamo does for stock kernels
            # (operator.index, not int(): Dynamo keeps int() of a SymInt symbolic, and the layout's repr fails)
            return ("c", operator.index(a))
        ints.append(a)
        return ("i", len(ints) - 1)
    if isinstance(a, (float, torch.SymFloat)):
        if is_constexpr:
            # (a SymFloat here, a float argument of the compiled function, stays symbolic under Dynamo, whose
            # repr of the layout then fails: docs/torch_compile.md, limits)
            return ("c", float(a))
        floats.append(a)
        return ("f", len(floats) - 1)
    return ("c", _constant(a))


def _constant(a):
    import triton.language as tl
    if isinstance(a, tl.dtype):
        return ("dtype", a.name)
    if isinstance(a, tl.constexpr):
        return _constant(a.value)
    raise TypeError(f"graphtune under torch.compile: kernel argument {a!r} of type {type(a).__name__} cannot "
                    f"cross the graphtune::launch op; supported: tensors, ints, floats, bools, None, str, "
                    f"tl.dtype")


@torch._dynamo.assume_constant_result
def _trace_info(name: str) -> tuple:
    """(parameter names, constexpr parameter names, config parameter sets, parameters it may write) of kernel
    ``name``: Dynamo calls this at trace time and keeps the result as a constant (no tracing into it)."""
    return _kernel_info(name)


def _kernel_info(name: str) -> tuple:
    # not cached: a force set between two traces adds its config (and its grid) to the next trace
    kernel = _lookup(name)
    metas: list[tuple] = []
    configs = list(kernel.configs) + ([kernel.default] if kernel.default is not None else [])
    resolve = getattr(kernel, "_resolve_force", None)
    if resolve is not None:
        resolve()   # what the next launch would do: pick up graphtune.force() / GRAPHTUNE_FORCE set since the last
    forced = getattr(kernel, "_forced", None)
    if forced is not None:
        configs.append(forced.config)
    for c in configs:
        meta = tuple(sorted(c.kwargs.items()))
        if meta not in metas:
            metas.append(meta)
    hooks = kernel.space.pre_hook or kernel.space.post_hook or any(c.pre_hook for c in configs)
    if hooks:
        written = tuple(kernel.arg_names)     # a hook may write any argument
    else:
        # what tuning zeroes or restores is written too (it is, between timed runs)
        extra = set(kernel.space.reset_to_zero) | set(kernel.space.restore_value)
        written = tuple(n for n in kernel.arg_names if n in set(_written_params(kernel)) | extra)
    return tuple(kernel.arg_names), tuple(sorted(_constexpr_names(kernel))), tuple(metas), written


_LOAD_ONLY_PARENTS = (ast.BinOp, ast.UnaryOp, ast.Subscript, ast.IfExp, ast.Tuple, ast.Starred)


def _written_params(kernel) -> tuple[str, ...]:
    """Parameters the kernel may write through: every parameter except those whose every use is inside the
    pointer expression of a ``tl.load`` (or a ``.dtype`` read). Conservative: a pointer stored in a local, passed
    to another function or used any other way counts as written. Without the source: every parameter."""
    names = tuple(kernel.arg_names)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(kernel.base_fn)))
    except (OSError, TypeError, SyntaxError):
        return names
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None)
    if fn is None:
        return names
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(fn):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    written = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id in names and not _load_only_use(node, parents):
            written.add(node.id)
        elif isinstance(node, ast.arg) and node.arg in names and parents.get(node) is not fn.args:
            written.add(node.arg)   # shadowed by an inner definition: give up on it
    return tuple(n for n in names if n in written)


def _load_only_use(node: ast.AST, parents: dict) -> bool:
    parent = parents.get(node)
    if isinstance(parent, ast.Attribute) and parent.attr == "dtype":
        return True
    child = node
    while parent is not None:
        if isinstance(parent, ast.Call):
            f = parent.func
            is_load = (isinstance(f, ast.Attribute) and f.attr == "load") or \
                (isinstance(f, ast.Name) and f.id == "load")
            first = parent.args[0] if parent.args else \
                next((k.value for k in parent.keywords if k.arg == "pointer"), None)
            return is_load and child is first
        if isinstance(parent, ast.Subscript) and child is not parent.value:
            return False
        if not isinstance(parent, _LOAD_ONLY_PARENTS):
            return False
        child, parent = parent, parents.get(parent)
    return False


def _constexpr_names(kernel) -> set[str]:
    fn = kernel.fn
    while not hasattr(fn, "params") and hasattr(fn, "fn") and not callable(getattr(fn, "__code__", None)):
        fn = fn.fn
    params = getattr(fn, "params", None)
    if params is not None:
        return {p.name for p in params if p.is_constexpr}
    # the interpreter's function keeps no params: read the annotations
    out = set()
    for p in inspect.signature(kernel.base_fn).parameters.values():
        ann = p.annotation
        if ann is inspect.Parameter.empty:
            continue
        if "constexpr" in (ann if isinstance(ann, str) else getattr(ann, "__name__", repr(ann))):
            out.add(p.name)
    return out


def _lookup(name: str):
    found = STATE.kernels.get(name, ())
    if len(found) != 1:
        if not found:
            raise RuntimeError(f"graphtune::launch: no graphtune kernel named {name!r} in this process; "
                               f"known: {sorted(STATE.kernels)}")
        raise RuntimeError(f"graphtune::launch: {len(found)} graphtune kernels are named {name!r}; torch.compile "
                           f"finds kernels by name, so give each a unique name= in graphtune.autotune")
    return found[0]


# -------------------------------------------------------------------------------------------- run time


# Defined with torch.library.Library rather than torch.library.custom_op: the same schema, fake and
# functionalisation, but custom_op's Python wrapper costs several times more host time per call for this
# schema (benchmarks/bench_compile.py: 109 us against 15 us on the 2-core CPU box, loaded), once per launch.
_lib = torch.library.Library("graphtune", "FRAGMENT")
_lib.define("launch(str kernel, str layout, Tensor(a!)[] tensors, Tensor[] inputs, SymInt[] ints, float[] floats, "
            "SymInt[] grids) -> ()")


def _launch_impl(kernel: str, layout: str, tensors: list[torch.Tensor], inputs: list[torch.Tensor],
                 ints: Sequence[int], floats: Sequence[float], grids: Sequence[int]) -> None:
    k = _lookup(kernel)
    pos, kw, grid_keys = _plan(layout)
    values = (tensors, inputs, ints, floats)
    args = tuple(v if kind < 0 else values[kind][v] for kind, v in pos)
    if kw:
        kwargs = {name: (v if kind < 0 else values[kind][v]) for name, kind, v in kw}
    else:
        kwargs = {}
    if grid_keys:
        grid: Any = _GridTable(k.name, grid_keys, grids)
    else:
        grid = tuple(grids[:3])
    k.run(*args, grid=grid, **kwargs)


def _launch_fake(kernel, layout, tensors, inputs, ints, floats, grids) -> None:
    return None   # the kernel writes tensors it was given (declared mutated): nothing to allocate


_lib.impl("launch", _launch_impl, "CompositeExplicitAutograd")
torch.library.register_fake(_OP_NAME, _launch_fake, lib=_lib)


@functools.lru_cache(maxsize=4096)
def _plan(layout: str) -> tuple:
    """(positional, keyword, grid keys) with each value as (list index, position) or (-1, constant)."""
    pos, kw, grid_keys = ast.literal_eval(layout)
    # tokens ("t", j) index the written list, then the read-only one; the layout does not record where the
    # written list ends, so "t" is resolved at trace time into ("m", j) / ("r", j)
    return (tuple(_slot(e) for e in pos), tuple((name, *_slot(e)) for name, e in kw), grid_keys)


def _slot(e: tuple) -> tuple[int, Any]:
    kind, v = e
    if kind in ("m", "r", "i", "f"):
        return {"m": 0, "r": 1, "i": 2, "f": 3}[kind], v
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "dtype":
        import triton.language as tl
        return -1, (getattr(tl, v[1]) if hasattr(tl, v[1]) else tl.dtype(v[1]))
    return -1, v


class _GridTable:
    """The grids traced per config; called by the launch with the chosen config's parameters."""

    __slots__ = ("name", "keys", "grids")

    def __init__(self, name: str, keys: tuple, grids: list[int]):
        self.name = name
        self.keys = keys
        self.grids = grids

    def __call__(self, meta: dict) -> tuple[int, int, int]:
        for i, key in enumerate(self.keys):
            if all(meta.get(n, _MISSING) == v for n, v in key):
                g = self.grids
                return (g[3 * i], g[3 * i + 1], g[3 * i + 2])
        raise RuntimeError(
            f"graphtune::launch: kernel {self.name!r} launched a config {_meta_label(meta, self.keys)} whose grid "
            f"was not traced (traced: {[dict(k) for k in self.keys]}); force configs before torch.compile "
            f"traces the function, or call torch._dynamo.reset() after graphtune.force()")


_MISSING = object()


def _meta_label(meta: dict, keys: tuple) -> str:
    names = sorted({n for k in keys for n, _ in k})
    return str({n: meta.get(n) for n in names})
