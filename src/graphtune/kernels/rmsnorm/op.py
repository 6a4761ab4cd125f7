"""The fused residual add + RMSNorm as torch custom ops, so ``torch.compile`` keeps the launch opaque.

``graphtune::fused_add_rmsnorm(x, residual, weight, eps) -> (out, residual_out)`` allocates its outputs;
``graphtune::fused_add_rmsnorm_out(x, residual, weight, eps, out!, residual_out!)`` writes into given buffers
(declared mutated). Either runs ``interface.fused_add_rmsnorm`` with real tensors when the graph runs, so the
kernel is tuned per batch bucket by graphtune (never inside a captured graph), as in eager.
"""
from __future__ import annotations

import torch

from ...torch_ops import custom_op
from . import interface


def _fake(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
          eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(x), torch.empty_like(residual)


@custom_op("graphtune::fused_add_rmsnorm", fake=_fake)
def _fused_add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    return interface.fused_add_rmsnorm(x, residual, weight, eps)


@custom_op("graphtune::fused_add_rmsnorm_out", mutates_args=("out", "residual_out"))
def _fused_add_rmsnorm_out(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                           out: torch.Tensor, residual_out: torch.Tensor) -> None:
    interface.fused_add_rmsnorm(x, residual, weight, eps, out=out, residual_out=residual_out)


def fused_add_rmsnorm_op(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *,
                         out: torch.Tensor | None = None, residual_out: torch.Tensor | None = None
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """``interface.fused_add_rmsnorm`` through the ``graphtune::`` ops (use this inside ``torch.compile``)."""
    # (before the schema's own checks, which name no argument, and before dispatch: a tensor on another device
    # could pick another implementation than the one that validates)
    interface.check_arguments(x, residual, weight, eps, out, residual_out)
    if out is None and residual_out is None:
        return torch.ops.graphtune.fused_add_rmsnorm(x, residual, weight, float(eps))
    out = torch.empty_like(x) if out is None else out
    residual_out = torch.empty_like(residual) if residual_out is None else residual_out
    torch.ops.graphtune.fused_add_rmsnorm_out(x, residual, weight, float(eps), out, residual_out)
    return out, residual_out
