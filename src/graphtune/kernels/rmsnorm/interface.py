"""Validated launch of the fused residual add + RMSNorm kernel, tuned per batch bucket by graphtune."""
from __future__ import annotations

import torch
import triton

from ... import settings
from ...keys import ENGINE_CAPTURE_SIZES, Buckets
from ...tuner import autotune
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


def fused_add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *,
                      out: torch.Tensor | None = None, residual_out: torch.Tensor | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """``h = x + residual`` (returned as the new residual) and ``rmsnorm(h) * weight``; x, residual: [B, D]."""
    if x.dim() != 2:
        raise ValueError(f"x must be [B, D], got shape {tuple(x.shape)}")
    if residual.shape != x.shape:
        raise ValueError(f"residual shape {tuple(residual.shape)} != x shape {tuple(x.shape)}")
    if weight.shape != (x.shape[1],):
        raise ValueError(f"weight must be [D]=[{x.shape[1]}], got {tuple(weight.shape)}")
    if x.dtype not in (torch.bfloat16, torch.float16, torch.float32) or residual.dtype != x.dtype:
        raise ValueError(f"x/residual dtype must match and be bf16/fp16/fp32, got {x.dtype}/{residual.dtype}")
    for name, t in (("x", x), ("residual", residual), ("weight", weight)):
        if t.stride(-1) != 1:
            raise ValueError(f"{name} must have a contiguous last dimension, got strides {t.stride()}")
        if t.device != x.device:
            raise ValueError(f"{name} is on {t.device}, x is on {x.device}")
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    B, D = x.shape
    out = torch.empty_like(x) if out is None else out
    residual_out = torch.empty_like(residual) if residual_out is None else residual_out
    block_d = triton.next_power_of_2(D)
    rmsnorm_kernel[lambda m: (triton.cdiv(B, m["ROWS"]),)](
        x, residual, weight, out, residual_out, B, D, eps, x.stride(0), residual.stride(0), out.stride(0),
        residual_out.stride(0), block_d)
    return out, residual_out
