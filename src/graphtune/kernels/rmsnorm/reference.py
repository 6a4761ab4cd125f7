"""Pure-torch fp32 reference of fused residual add + RMSNorm (no Triton)."""
from __future__ import annotations

import torch


def fused_add_rmsnorm_reference(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                                eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    h = (x.float() + residual.float()).to(residual.dtype)
    hf = h.float()
    y = hf * torch.rsqrt(hf.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    return y.to(x.dtype), h
