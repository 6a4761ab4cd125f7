"""Fused residual add + RMSNorm (the other per-layer kernel of a decode step).

Shape letters: B rows (tokens in the batch), D hidden size.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _fused_add_rmsnorm_kernel(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, B, D, eps,
                              stride_x_b, stride_res_b, stride_out_b, stride_res_out_b,
                              BLOCK_D: tl.constexpr, ROWS: tl.constexpr):
    # ROWS rows per program: small batches want 1 (more programs), large batches amortise the weight load
    pid = tl.program_id(0)
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < D
    w = tl.load(w_ptr + offs_d, mask=mask_d, other=0.0).to(tl.float32)
    for r in tl.static_range(ROWS):
        row = pid * ROWS + r
        if row < B:
            x = tl.load(x_ptr + row * stride_x_b + offs_d, mask=mask_d, other=0.0).to(tl.float32)
            res = tl.load(res_ptr + row * stride_res_b + offs_d, mask=mask_d, other=0.0).to(tl.float32)
            h = x + res
            # the residual stream is kept in the input dtype, as engines do, and normalised from that rounding
            h_low = h.to(res_out_ptr.dtype.element_ty)
            tl.store(res_out_ptr + row * stride_res_out_b + offs_d, h_low, mask=mask_d)
            h = h_low.to(tl.float32)
            var = tl.sum(h * h, axis=0) / D
            y = h * tl.rsqrt(var + eps) * w
            tl.store(out_ptr + row * stride_out_b + offs_d, y.to(out_ptr.dtype.element_ty), mask=mask_d)
