"""The query as an fp8 hi/lo pair, for the fp8 ping-pong kernel with fp8 scores (kernel_hopper_pp8.py, ``T8 = 1``).

One small Triton kernel, launched before that kernel in the same stream (inside a CUDA graph capture too: it only
reads ``q`` and writes two buffers allocated on the current stream): each query row ``q`` (576 bf16 values) becomes
``hi = fp8(q s)`` and ``lo = fp8(q s - hi)``, s a power of two per row with max |q s| = 2^8 (e4m3 keeps 448), so that
hi + lo holds the bf16 query's bits up to the e4m3 range. The split kernel copies the pair by TMA and its score MMAs
read it as it landed.

Why a kernel of its own: converted inside the split kernel (two passes over the bf16 query in shared memory, once a
segment, from a cold instruction cache), the conversion took 8.2 us of every program's prologue at batch 64 (H200,
session 24 run 2: query landed 5.7 us after the split, converted 13.9), about 5% of the decode at batch 64 and a third
of it at batch 1; the kernel here moves bytes the split kernel reads anyway.

Layout, one row a query head (``[B * H, 1152]`` float8_e4m3fn): hi of the 512 latent dims at columns 0..511, lo at
512..1023, hi of the 64 rope dims at 1024..1087, lo at 1088..1151 (the kernel's rope tile is [hi | lo] of the rope in
one 128-column box); the scale s of each row in a ``[B * H]`` fp32 tensor.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .reference import D_NOPE, D_QK, D_ROPE

PAIR_COLS = 2 * D_QK            # 1152 bytes a row: [hi | lo] of the latent dims, then [hi | lo] of the rope dims
_ROWS = 16                      # query rows a program


@triton.jit
def _pair(x, scale):
    y = x * scale[:, None]
    hi = y.to(tl.float8e4nv)
    return hi, (y - hi.to(tl.float32)).to(tl.float8e4nv)


@triton.jit
def _query_pair_kernel(q_ptr, pair_ptr, scale_ptr, rows, stride_q,
                       ROWS: tl.constexpr, D_NOPE: tl.constexpr, D_ROPE: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    live = r < rows
    cols = tl.arange(0, D_NOPE)
    cols_r = tl.arange(0, D_ROPE)
    q_row = q_ptr + r.to(tl.int64)[:, None] * stride_q
    x = tl.load(q_row + cols[None, :], mask=live[:, None], other=0.0).to(tl.float32)
    xr = tl.load(q_row + D_NOPE + cols_r[None, :], mask=live[:, None], other=0.0).to(tl.float32)
    amax = tl.maximum(tl.max(tl.abs(x), axis=1), tl.max(tl.abs(xr), axis=1))
    scale = tl.exp2(8.0 - tl.ceil(tl.log2(tl.maximum(amax, 1e-30))))
    hi, lo = _pair(x, scale)
    hr, lr = _pair(xr, scale)
    out = pair_ptr + r.to(tl.int64)[:, None] * (2 * (D_NOPE + D_ROPE))
    tl.store(out + cols[None, :], hi, mask=live[:, None])
    tl.store(out + D_NOPE + cols[None, :], lo, mask=live[:, None])
    tl.store(out + 2 * D_NOPE + cols_r[None, :], hr, mask=live[:, None])
    tl.store(out + 2 * D_NOPE + D_ROPE + cols_r[None, :], lr, mask=live[:, None])
    tl.store(scale_ptr + r, scale, mask=live)


def query_pair(q: torch.Tensor, launch: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``q`` ``[B, H, 576]`` bf16 (rows of 576 contiguous values) -> the pair ``[B * H, 1152]`` float8_e4m3fn and the
    row scales ``[B * H]`` fp32 (module docstring). ``launch=False`` only allocates them (a compile-only caller on a
    machine without a GPU)."""
    rows = q.shape[0] * q.shape[1]
    q2 = q.view(rows, D_QK)
    pair = torch.empty(rows, PAIR_COLS, dtype=torch.float8_e4m3fn, device=q.device)
    scale = torch.empty(rows, dtype=torch.float32, device=q.device)
    if launch and rows:
        _query_pair_kernel[(triton.cdiv(rows, _ROWS), )](q2, pair, scale, rows, q2.stride(0), ROWS=_ROWS,
                                                         D_NOPE=D_NOPE, D_ROPE=D_ROPE, num_warps=4)
    return pair, scale
