"""``graphtune.custom_op``: register a launcher of graphtune kernels as a torch custom op in one line.

A launcher (validate, allocate, launch) registered as a custom op is one opaque node to ``torch.compile``:
Dynamo does not trace into it, Inductor does not re-emit its kernels, and when the graph runs the launcher runs
with real tensors, so graphtune's per-bucket tuning, capture policy and database apply as in eager. This is how
the shipped kernels are exposed (``graphtune::mla_decode``, ``graphtune::fused_add_rmsnorm``).

    @graphtune.custom_op("mylib::scale_", mutates_args=("out",))
    def scale_(x: torch.Tensor, out: torch.Tensor, alpha: float) -> None:
        scale_kernel[grid](x, out, x.numel(), alpha)

A launcher that returns nothing (it only writes tensors named in ``mutates_args``) gets a fake implementation
that does nothing; one that returns tensors needs ``fake=``, a function of the same arguments that returns
empty tensors of the right shapes, dtypes and devices (it runs on fake tensors while torch.compile traces).
"""
from __future__ import annotations

import inspect
import re
from typing import Any, Callable, Iterable

import torch


def custom_op(name: str, *, mutates_args: Iterable[str] = (), fake: Callable[..., Any] | None = None,
              device_types: str | Iterable[str] | None = None) -> Callable[[Callable[..., Any]], Any]:
    """Decorator: register ``fn`` as the torch custom op ``name`` ("namespace::op") with declared mutations.

    Returns the ``torch.library.CustomOpDef`` (callable like ``fn``, and reachable as ``torch.ops.namespace.op``).
    The schema is inferred from ``fn``'s type annotations (every argument needs one).
    """
    if not isinstance(name, str) or not _OP_NAME.fullmatch(name):
        raise ValueError(f"custom_op(name={name!r}): expected 'namespace::op_name' of identifiers, e.g. "
                         f"'mylib::my_op'")
    namespace, op_name = name.split("::")
    if namespace in _RESERVED:
        raise ValueError(f"custom_op(name={name!r}): namespace {namespace!r} is torch's own; use your library's")
    if _registered(namespace, op_name):
        # (a second registration replaced the first's implementation; calling the first's handle then crashed)
        raise ValueError(f"custom_op(name={name!r}): an op of that name is already registered in this process; "
                         f"give this one another name")
    if isinstance(mutates_args, str):
        raise TypeError(f"custom_op({name!r}): mutates_args={mutates_args!r} must be a tuple of argument names, "
                        f"not a string")
    if fake is not None and not callable(fake):
        raise TypeError(f"custom_op({name!r}): fake={fake!r} must be a function of the op's arguments")
    mutated = tuple(mutates_args)

    def decorate(fn: Callable[..., Any]) -> Any:
        params = inspect.signature(fn).parameters
        unknown = [m for m in mutated if m not in params]
        if unknown:
            raise ValueError(f"custom_op({name!r}): mutates_args {unknown} are not parameters of "
                             f"{getattr(fn, '__name__', fn)!r}; parameters: {list(params)}")
        returns = inspect.signature(fn).return_annotation
        if returns is inspect.Signature.empty:
            raise ValueError(f"custom_op({name!r}): {getattr(fn, '__name__', fn)!r} has no return annotation; "
                             f"annotate it (-> None for a launcher that writes into arguments named in "
                             f"mutates_args; the schema is inferred from the annotations)")
        returns_none = returns in (None, "None", type(None))
        if fake is None and not returns_none:
            raise ValueError(f"custom_op({name!r}): {getattr(fn, '__name__', fn)!r} returns {returns!r}; give fake= "
                             f"(a function of the same arguments returning empty tensors of the output shapes), "
                             f"or return None and write outputs into arguments named in mutates_args")
        op = torch.library.custom_op(name, mutates_args=mutated, device_types=device_types)(fn)
        if fake is not None:
            op.register_fake(fake)
        else:
            op.register_fake(_no_output)
        return op
    return decorate


_OP_NAME = re.compile(r"[A-Za-z_]\w*::[A-Za-z_]\w*")
_RESERVED = frozenset({"aten", "prim", "prims", "torch", "_torch"})


def _registered(namespace: str, op_name: str) -> bool:
    """Whether ``namespace::op_name`` is already an op in this process (torch.library, or any other registration)."""
    try:
        return torch._C._dispatch_has_kernel(f"{namespace}::{op_name}") or \
            hasattr(getattr(torch.ops, namespace), op_name)
    except (AttributeError, RuntimeError):
        return False


def _no_output(*args: Any, **kwargs: Any) -> None:
    # the op only writes tensors it was given (declared in mutates_args): nothing to allocate while tracing
    return None
