"""Validated launch of the fused residual add + RMSNorm kernel, tuned per batch bucket by graphtune."""
from __future__ import annotations

from typing import Any

import torch
import triton

from ... import settings
from ...keys import ENGINE_CAPTURE_SIZES, Buckets
from ...tuner import autotune
from .._checks import finite_positive, tensor_problem
from .kernel import _fused_add_rmsnorm_kernel

CAPTURE_SIZES = ENGINE_CAPTURE_SIZES


def _configs() -> list[triton.Config]:
    if settings.interpret():
        return [triton.Config({"ROWS": r}, num_warps=1) for r in (1, 2)]
    return [triton.Config({"ROWS": r}, num_warps=w, num_stages=1) for r in (1, 2, 4) for w in (2, 4, 8, 16)]


CONFIGS = _configs()
DEFAULT = CONFIGS[0] if settings.interpret() else triton.Config({"ROWS": 1}, num_warps=8, num_stages=1)

rmsnorm_kernel = autotune(CONFIGS, key=["B", "D"], buckets={"B": Buckets.explicit(CAPTURE_SIZES)}, default=DEFAULT,
                          name="fused_add_rmsnorm")(_fused_add_rmsnorm_kernel)


_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _fail(name: str, what: str) -> None:
    raise ValueError(f"fused_add_rmsnorm: {name}: {what}")


def _check_tensor(name: str, t: Any, shape: tuple[int, ...], dtypes: tuple[torch.dtype, ...],
                  device: torch.device | None) -> None:
    """One argument of the call: a tensor of ``shape``, one of ``dtypes``, on ``device`` (None: any), its last
    dimension contiguous; else one line naming it and its value."""
    problem = tensor_problem(t, dtypes, shape=shape, device=device, device_of="x")
    if problem is not None:
        _fail(name, problem)


def _check_eps(eps: Any) -> None:
    """``eps``: a finite real number > 0 (``_checks.finite_positive``), else one line naming it."""
    if not finite_positive(eps):
        _fail("eps", f"{eps!r}, expected a finite float > 0")


def check_arguments(x: Any, residual: Any, weight: Any, eps: Any, out: Any = None, residual_out: Any = None) -> None:
    """:func:`fused_add_rmsnorm`'s arguments, one line naming the first bad one. Metadata only (shapes, dtypes,
    devices, strides): the op form runs it under torch.compile's tracing too."""
    if not isinstance(x, torch.Tensor):
        _fail("x", f"expected a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2 or x.shape[1] < 1:
        _fail("x", f"shape {tuple(x.shape)}, expected [B, D] with D >= 1")
    shape = tuple(x.shape)
    _check_tensor("x", x, shape, _DTYPES, None)
    _check_tensor("residual", residual, shape, (x.dtype, ), x.device)
    _check_tensor("weight", weight, shape[1:], _DTYPES, x.device)
    _check_eps(eps)
    for name, given in (("out", out), ("residual_out", residual_out)):
        if given is not None:
            _check_tensor(name, given, shape, (x.dtype, ), x.device)


def fused_add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *,
                      out: torch.Tensor | None = None, residual_out: torch.Tensor | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """``h = x + residual`` (returned as the new residual) and ``rmsnorm(h) * weight``; x, residual: [B, D]
    (bf16, fp16 or fp32, the same dtype; D >= 1); weight: [D]; ``out`` / ``residual_out`` (optional): [B, D] of
    x's dtype. Every tensor on x's device with its last dimension contiguous."""
    check_arguments(x, residual, weight, eps, out, residual_out)
    B, D = x.shape
    out = torch.empty_like(x) if out is None else out
    residual_out = torch.empty_like(residual) if residual_out is None else residual_out
    block_d = triton.next_power_of_2(D)
    rmsnorm_kernel[lambda m: (triton.cdiv(B, m["ROWS"]),)](
        x, residual, weight, out, residual_out, B, D, eps, x.stride(0), residual.stride(0), out.stride(0),
        residual_out.stride(0), block_d)
    return out, residual_out
