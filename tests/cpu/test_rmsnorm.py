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
    with pytest.raises(ValueError, match=r"weight: shape \(7,\), expected \(8,\)"):
        fused_add_rmsnorm(x, x, torch.randn(7))
    with pytest.raises(ValueError, match=r"residual: shape \(3, 8\), expected \(2, 8\)"):
        fused_add_rmsnorm(x, torch.randn(3, 8), torch.randn(8))


BAD_CALLS = [
    # (a too-small out / residual_out was written past its end: a crash on the CPU, a fault on a GPU)
    (dict(out=torch.empty(1, 8)), r"fused_add_rmsnorm: out: shape \(1, 8\), expected \(2, 8\)"),
    (dict(residual_out=torch.empty(2, 4)), r"fused_add_rmsnorm: residual_out: shape \(2, 4\), expected \(2, 8\)"),
    (dict(out=torch.empty(8, 2).t()), r"fused_add_rmsnorm: out: last dimension must be contiguous"),
    (dict(out=torch.empty(2, 8, dtype=torch.int32)), r"fused_add_rmsnorm: out: dtype torch.int32, expected torch.float32"),
    (dict(residual_out=torch.empty(2, 8, device="meta")), r"residual_out: on device meta, expected cpu"),
    (dict(out=[[0.0] * 8] * 2), r"fused_add_rmsnorm: out: expected a torch.Tensor, got list"),
    (dict(x=[[0.0] * 8] * 2), r"fused_add_rmsnorm: x: expected a torch.Tensor, got list"),
    (dict(x=torch.empty(2, 0), residual=torch.empty(2, 0)), r"x: shape \(2, 0\), expected \[B, D\] with D >= 1"),
    (dict(weight=torch.ones(8, device="meta")), r"weight: on device meta, expected cpu"),
    (dict(residual=torch.randn(2, 8).half()), r"residual: dtype torch.float16, expected torch.float32"),
    (dict(eps=None), r"fused_add_rmsnorm: eps: None, expected a finite float > 0"),
    (dict(eps="1e-6"), r"eps: '1e-6', expected"),
    (dict(eps=float("inf")), r"eps: inf, expected"),
    (dict(eps=True), r"eps: True, expected"),
    (dict(eps=torch.tensor(1e-6)), r"eps: tensor\(1.0000e-06\), expected"),
]


@pytest.mark.parametrize("bad,message", BAD_CALLS, ids=[",".join(b) + f"-{i}" for i, (b, _) in enumerate(BAD_CALLS)])
@pytest.mark.parametrize("form", ["eager", "op"])
def test_every_bad_argument_gets_one_line_naming_it(bad, message, form):
    """Each bad argument, eager and through the graphtune:: op: a ValueError naming it and its value, before any
    launch (a given out / residual_out is checked as x is: its shape, dtype, device and last-dimension stride)."""
    from graphtune.kernels.rmsnorm import fused_add_rmsnorm_op
    args = {**dict(x=torch.randn(2, 8), residual=torch.randn(2, 8), weight=torch.randn(8), eps=1e-6), **bad}
    call = fused_add_rmsnorm if form == "eager" else fused_add_rmsnorm_op
    with pytest.raises(ValueError, match=message) as got:
        call(args.pop("x"), args.pop("residual"), args.pop("weight"), args.pop("eps"), **args)
    assert "\n" not in str(got.value)
