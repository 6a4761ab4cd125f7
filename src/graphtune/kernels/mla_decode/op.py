"""MLA decode as torch custom ops, so ``torch.compile`` keeps the launch opaque and graphtune tunes it.

``graphtune::mla_decode(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale, kv_scale_tensor?, kv_format,
return_lse, query_precision?, q_scale?, q_scale_tensor?, p_precision="bf16") -> (out, lse)`` allocates its outputs (``lse`` is an empty
``[0]`` tensor unless ``return_lse``); ``graphtune::mla_decode_out(..., kv_format, out!, query_precision?, q_scale?,
q_scale_tensor?, p_precision="bf16")`` writes into a given ``[B, H, 512]`` bf16 buffer (declared mutated). Either runs
``interface.mla_decode`` with real tensors when the graph runs: validation, the per-batch-bucket tuning of the split
kernel and the capture policy apply as in eager. ``kv_scale_tensor`` (a one-element fp32 device tensor) overrides the
float ``kv_scale`` when given. ``graphtune::mla_decode_planned`` / ``mla_decode_out_planned``: the same, last argument
a decode step's :class:`MLADecodePlan` (torch's reference opaque type: an input of the compiled graph, passed to the
implementation as it is; where this torch has them, ``PLAN_UNDER_COMPILE``).
"""
from __future__ import annotations

import torch

from ..._log import logger
from ...torch_ops import custom_op
from . import interface
from . import plan as plan_mod
from .plan import MLADecodePlan
from .reference import D_NOPE


def _scale(kv_scale: float | None, kv_scale_tensor: torch.Tensor | None) -> float | torch.Tensor | None:
    return kv_scale if kv_scale_tensor is None else kv_scale_tensor


def _plan_type_registered() -> bool:
    """Whether the ops can take an :class:`MLADecodePlan`: torch's reference opaque types (an object a custom op
    takes as it is, an input of the compiled graph that Dynamo does not look into or guard on; torch 2.10 on).
    Registered here, where the ops that take it are."""
    try:
        from torch._library.opaque_object import register_opaque_type
    except ImportError:
        return False
    if not issubclass(MLADecodePlan, plan_mod._OpArgument) or plan_mod._OpArgument is object:
        return False
    try:
        register_opaque_type(MLADecodePlan, typ="reference")
    except (TypeError, ValueError, RuntimeError) as err:     # (an API that moved: the ops then take no plan)
        logger.warning("mla_decode: this torch (%s) refused MLADecodePlan as an opaque custom-op argument (%s); "
                       "plan= is not taken under torch.compile", torch.__version__, err)
        return False
    return True


# Whether ``mla_decode_op(..., plan=)`` (and ``mla_decode(..., plan=)`` under torch.compile) is taken: the
# ``graphtune::mla_decode_planned`` / ``mla_decode_out_planned`` ops exist.
PLAN_UNDER_COMPILE = _plan_type_registered()


def _run(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale, kv_scale_tensor, kv_format, out, return_lse,
         query_precision, q_scale, q_scale_tensor, p_precision, plan):
    """The ops' implementation: the interface, eagerly, on real tensors (``plan`` the caller's, or None)."""
    got = interface.mla_decode(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale=_scale(kv_scale, kv_scale_tensor),
                               kv_format=kv_format, out=out, return_lse=return_lse, query_precision=query_precision,
                               q_scale=_scale(q_scale, q_scale_tensor), plan=plan, p_precision=p_precision)
    if out is not None:
        return None
    return got if return_lse else (got, q.new_empty((0,), dtype=torch.float32))


def _fake(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor, seq_lens: torch.Tensor,
          sm_scale: float, kv_scale: float, kv_scale_tensor: torch.Tensor | None, kv_format: str,
          return_lse: bool, query_precision: str | None, q_scale: float | None,
          q_scale_tensor: torch.Tensor | None, *rest, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    # (rest: the planned ops' plan, then p_precision, where given positionally)
    if q.dim() != 3:   # (the op's implementation validates the rest when it runs)
        interface._fail("q", f"shape {tuple(q.shape)} has {q.dim()} dims, expected 3")
    batch, heads = q.shape[0], q.shape[1]
    out = q.new_empty((batch, heads, D_NOPE), dtype=torch.bfloat16)
    lse = q.new_empty((batch, heads) if return_lse else (0,), dtype=torch.float32)
    return out, lse


@custom_op("graphtune::mla_decode", fake=_fake)
def _mla_decode(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor, seq_lens: torch.Tensor,
                sm_scale: float, kv_scale: float, kv_scale_tensor: torch.Tensor | None, kv_format: str,
                return_lse: bool, query_precision: str | None, q_scale: float | None,
                q_scale_tensor: torch.Tensor | None, p_precision: str = "bf16") -> tuple[torch.Tensor, torch.Tensor]:
    return _run(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale, kv_scale_tensor, kv_format, None, return_lse,
                query_precision, q_scale, q_scale_tensor, p_precision, None)


@custom_op("graphtune::mla_decode_out", mutates_args=("out",))
def _mla_decode_out(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor, seq_lens: torch.Tensor,
                    sm_scale: float, kv_scale: float, kv_scale_tensor: torch.Tensor | None, kv_format: str,
                    out: torch.Tensor, query_precision: str | None, q_scale: float | None,
                    q_scale_tensor: torch.Tensor | None, p_precision: str = "bf16") -> None:
    _run(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale, kv_scale_tensor, kv_format, out, False,
         query_precision, q_scale, q_scale_tensor, p_precision, None)


if PLAN_UNDER_COMPILE:
    # the same two ops taking a decode step's plan (a schema argument cannot be an optional opaque object, so they
    # are ops of their own)
    @custom_op("graphtune::mla_decode_planned", fake=_fake)
    def _mla_decode_planned(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor,
                            seq_lens: torch.Tensor, sm_scale: float, kv_scale: float,
                            kv_scale_tensor: torch.Tensor | None, kv_format: str, return_lse: bool,
                            query_precision: str | None, q_scale: float | None, q_scale_tensor: torch.Tensor | None,
                            plan: MLADecodePlan, p_precision: str = "bf16") -> tuple[torch.Tensor, torch.Tensor]:
        return _run(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale, kv_scale_tensor, kv_format, None,
                    return_lse, query_precision, q_scale, q_scale_tensor, p_precision, plan)

    @custom_op("graphtune::mla_decode_out_planned", mutates_args=("out",))
    def _mla_decode_out_planned(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor,
                                seq_lens: torch.Tensor, sm_scale: float, kv_scale: float,
                                kv_scale_tensor: torch.Tensor | None, kv_format: str, out: torch.Tensor,
                                query_precision: str | None, q_scale: float | None,
                                q_scale_tensor: torch.Tensor | None, plan: MLADecodePlan,
                                p_precision: str = "bf16") -> None:
        _run(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale, kv_scale_tensor, kv_format, out, False,
             query_precision, q_scale, q_scale_tensor, p_precision, plan)


def _check_op_arguments(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale, kv_format, out, return_lse,
                        query_precision, q_scale, plan, p_precision="bf16") -> None:
    """What the op's schema would otherwise reject with an error naming no argument (a float() of None, a schema
    mismatch, a list dumped whole), or let through (a bool scale, an ``out`` the op copies into after the fact), and
    tensors on another device than q's (the dispatcher would pick that device's implementation: on ``meta`` the fake
    one, which validates nothing and returns uninitialised memory). Metadata only: it runs under torch.compile's
    tracing too. The op's implementation validates the rest when it runs."""
    if not isinstance(return_lse, bool):
        interface._fail("return_lse", f"{return_lse!r}, expected True or False")
    tensors = (("q", q), ("kv_cache", kv_cache), ("page_table", page_table), ("seq_lens", seq_lens))
    for name, t in tensors:
        if not isinstance(t, torch.Tensor):
            interface._fail(name, f"expected a torch.Tensor, got {type(t).__name__}")
    for name, t in (*tensors[1:], ("kv_scale", kv_scale), ("q_scale", q_scale), ("out", out)):
        if isinstance(t, torch.Tensor) and t.device != q.device:
            interface._fail(name, f"on device {t.device}, expected {q.device} (the device of q)")
    interface.check_scale("sm_scale", sm_scale, "a finite float > 0 (usually 1 / sqrt(576))")
    if not isinstance(kv_scale, torch.Tensor):
        interface.check_scale("kv_scale", kv_scale, "a finite float > 0 or a one-element float32 tensor")
    if not isinstance(kv_format, str):
        interface._fail("kv_format", f"{kv_format!r}, expected a string ('auto', 'fp8', 'bf16' or 'fp8_ds_mla')")
    # (the format "auto" stands for, where the cache's dtype says it: metadata only)
    known_fmt = kv_format if kv_format != "auto" else {torch.float8_e4m3fn: "fp8", torch.bfloat16: "bf16"}.get(
        kv_cache.dtype)
    if query_precision is not None:
        interface.check_query_precision(query_precision, known_fmt)
    resolved = (query_precision if query_precision is not None else
                interface.query_precision_of(q, None) if isinstance(q, torch.Tensor) else None)
    interface.check_p_precision(p_precision, known_fmt, resolved)
    if q_scale is not None and not isinstance(q_scale, torch.Tensor):
        interface.check_scale("q_scale", q_scale, "a finite float > 0 or a one-element float32 tensor")
    if plan is not None:
        if not isinstance(plan, MLADecodePlan):
            interface._fail("plan", f"{type(plan).__name__} {plan!r:.80}, expected a graphtune.kernels.MLADecodePlan "
                                    "or None")
        if not PLAN_UNDER_COMPILE:
            interface._fail("plan", f"{plan!r}: this torch ({torch.__version__}) has no opaque custom-op arguments "
                                    "(torch._opaque_base, torch 2.10 on), so the graphtune:: ops take no plan; call "
                                    "without it here")
    if out is not None and return_lse and isinstance(q, torch.Tensor) and q.dim() == 3:
        interface._check_tensor("out", out, torch.bfloat16, 3, q.device)
        if tuple(out.shape) != (q.shape[0], q.shape[1], D_NOPE):
            interface._fail("out", f"shape {tuple(out.shape)}, expected {(q.shape[0], q.shape[1], D_NOPE)}")


def mla_decode_op(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor, seq_lens: torch.Tensor,
                  sm_scale: float, *, kv_scale: float | torch.Tensor = 1.0, kv_format: str = "auto",
                  out: torch.Tensor | None = None, return_lse: bool = False, query_precision: str | None = None,
                  q_scale: float | torch.Tensor | None = None, plan: MLADecodePlan | None = None,
                  p_precision: str = "bf16") -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """``interface.mla_decode`` (same arguments) through the ``graphtune::`` ops: use it inside ``torch.compile``.
    ``plan``: a decode step's :class:`MLADecodePlan`, made outside the compiled function and passed in (an input
    of its graph; a new one each step recompiles nothing), through the ``_planned`` ops."""
    _check_op_arguments(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale, kv_format, out, return_lse,
                        query_precision, q_scale, plan, p_precision)
    scale_t = kv_scale if isinstance(kv_scale, torch.Tensor) else None
    scale_f = 1.0 if scale_t is not None else float(kv_scale)
    q_scale_t = q_scale if isinstance(q_scale, torch.Tensor) else None
    q_scale_f = None if q_scale is None or q_scale_t is not None else float(q_scale)
    ops = torch.ops.graphtune
    planned = () if plan is None else (plan,)
    if out is not None and not return_lse:
        (ops.mla_decode_out if plan is None else ops.mla_decode_out_planned)(
            q, kv_cache, page_table, seq_lens, float(sm_scale), scale_f, scale_t, kv_format, out, query_precision,
            q_scale_f, q_scale_t, *planned, p_precision)
        return out
    got, lse = (ops.mla_decode if plan is None else ops.mla_decode_planned)(
        q, kv_cache, page_table, seq_lens, float(sm_scale), scale_f, scale_t, kv_format, return_lse, query_precision,
        q_scale_f, q_scale_t, *planned, p_precision)
    if out is not None:
        out.copy_(got)
        got = out
    return (got, lse) if return_lse else got


def mla_decode(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor, seq_lens: torch.Tensor,
               sm_scale: float, *, kv_scale: float | torch.Tensor = 1.0, kv_format: str = "auto",
               out: torch.Tensor | None = None, return_lse: bool = False, query_precision: str | None = None,
               q_scale: float | torch.Tensor | None = None, plan: MLADecodePlan | None = None,
               p_precision: str = "bf16") -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """``interface.mla_decode`` (its docstring says what the arguments are), exported as
    ``graphtune.kernels.mla_decode.mla_decode``: eagerly it is the interface itself; traced by torch.compile it
    is one opaque ``graphtune::`` op, whose implementation runs the interface eagerly (with the ``plan``, an input of
    the compiled function: :func:`mla_decode_op`)."""
    if torch.compiler.is_dynamo_compiling():
        return mla_decode_op(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale=kv_scale, kv_format=kv_format,
                             out=out, return_lse=return_lse, query_precision=query_precision, q_scale=q_scale,
                             plan=plan, p_precision=p_precision)
    return interface.mla_decode(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale=kv_scale, kv_format=kv_format,
                                out=out, return_lse=return_lse, query_precision=query_precision, q_scale=q_scale,
                                plan=plan, p_precision=p_precision)

