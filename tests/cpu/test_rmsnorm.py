from __future__ import annotations

import pytest
import torch

from graphtune.kernels.rmsnorm import fused_add_rmsnorm, fused_add_rmsnorm_reference


def _rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


@pytest.mark.parametrize("B,D", [(1, 64), (3, 100), (7, 33)], ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_matches_reference(B, D, dtype):
    x = torch.randn(B, D).to(dtype)
    res = torch.randn(B, D).to(dtype)
    w = torch.randn(D).to(dtype)
    out = torch.full_like(x, float("nan"))
    res_out = torch.full_like(x, float("nan"))
    fused_add_rmsnorm(x, res, w, 1e-6, out=out, residual_out=res_out)
    ref, ref_h = fused_add_rmsnorm_reference(x, res, w, 1e-6)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    assert _rel(out, ref) <= tol and _rel(res_out, ref_h) <= tol


def test_bad_input_names_argument():
    x = torch.randn(2, 8)
    with pytest.raises(ValueError, match="weight must be"):
        fused_add_rmsnorm(x, x, torch.randn(7))
    with pytest.raises(ValueError, match="residual shape"):
        fused_add_rmsnorm(x, torch.randn(3, 8), torch.randn(8))
