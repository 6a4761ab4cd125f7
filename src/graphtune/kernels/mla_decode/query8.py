"""The fp8 query pair made once per decode call, before the split kernel (``Q8PRE = 1`` of the fp8 heads-on-M
kernel with fp8 scores, T8: every T8 launch given a bf16 query since session 29; ``interface_hopper._query_pair``
gives what it saved on an H200).

T8 converts each program's [64, 576] bf16 query block into the pair its score wgmmas take (``hi = e4m3(q s)``, ``lo =
e4m3(q s - hi)``, ``s`` a power of two per head with max |q s| = 2^8; ``kernel_hopper_pp8._q8``) at the start of every
segment: on the H200 its query was ready 13.7 us after the work split at batch 64 (session 25 run 1's timeline), the
copy of the bf16 query landing some 3-5 us in, where the whole pair period is 4.1 us. Here one small kernel makes the
same pair for the whole batch (the same math, bit for bit: ``query_pair_reference``) and T8 copies it by TMA. The
split kernel is launched as its programmatic dependent: its split and first tile copies go while this runs; it waits
(``griddepcontrol.wait``) only before its query's copy.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents

from .reference import D_NOPE, D_QK, D_ROPE

ROWS = 8            # query rows (request, head) a program converts


@triton.jit
def _q8_pair_kernel(q_ptr, stride_qb, stride_qh, pair_ptr, rope_ptr, scale_ptr, R, H,
                    ROWS: tl.constexpr, PDL: tl.constexpr, LO: tl.constexpr = 1):
    """Rows ``[pid ROWS, pid ROWS + ROWS)`` of the [B H, 576] query: ``pair`` [R, 1024] e4m3 (hi of the 512 latent
    columns, then lo), ``rope`` [R, 128] e4m3 (hi of the 64 rope columns, then lo), ``scale`` [R] fp32. ``LO = 0``
    (``query_precision="e4m3"``): the hi halves alone, the lo columns left as they were."""
    if PDL:
        gdc_launch_dependents()
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    valid = rows < R
    base = q_ptr + (rows // H).to(tl.int64) * stride_qb + (rows % H) * stride_qh
    cols = tl.arange(0, 512)
    rcols = tl.arange(0, 64)
    x = tl.load(base[:, None] + cols[None, :], mask=valid[:, None], other=0.0).to(tl.float32)
    xr = tl.load(base[:, None] + 512 + rcols[None, :], mask=valid[:, None], other=0.0).to(tl.float32)
    amax = tl.maximum(tl.max(tl.abs(x), axis=1), tl.max(tl.abs(xr), axis=1))
    s = tl.exp2(8.0 - tl.ceil(tl.log2(tl.maximum(amax, 1e-30))))
    y = x * s[:, None]
    hi = y.to(tl.float8e4nv)
    yr = xr * s[:, None]
    hr = yr.to(tl.float8e4nv)
    pair = pair_ptr + rows.to(tl.int64)[:, None] * 1024 + cols[None, :]
    rope = rope_ptr + rows.to(tl.int64)[:, None] * 128 + rcols[None, :]
    tl.store(pair, hi, mask=valid[:, None])
    tl.store(rope, hr, mask=valid[:, None])
    if LO:
        tl.store(pair + 512, (y - hi.to(tl.float32)).to(tl.float8e4nv), mask=valid[:, None])
        tl.store(rope + 64, (yr - hr.to(tl.float32)).to(tl.float8e4nv), mask=valid[:, None])
    tl.store(scale_ptr + rows, s, mask=valid)


def query_pair(q: torch.Tensor, pdl: bool = False, lo: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(pair [B H, 1024], rope [B H, 128], scale [B H])`` of a [B, H, 576] query (last dim contiguous), launched on
    the current stream; ``pdl``: let the next kernel launch as its programmatic dependent (sm_90+); ``lo=False``
    (``query_precision="e4m3"``, whose T8 reads the hi halves alone): the lo halves are not made (their columns hold
    whatever the allocation held)."""
    if q.dim() != 3 or q.shape[-1] != D_QK or q.stride(-1) != 1:
        raise ValueError(f"query_pair: q must be [B, H, {D_QK}] with its last dim contiguous, got shape "
                         f"{tuple(q.shape)} and strides {tuple(q.stride())}")
    rows = q.shape[0] * q.shape[1]
    pair = torch.empty(rows, 2 * D_NOPE, dtype=torch.float8_e4m3fn, device=q.device)
    rope = torch.empty(rows, 2 * D_ROPE, dtype=torch.float8_e4m3fn, device=q.device)
    scale = torch.empty(rows, dtype=torch.float32, device=q.device)
    _q8_pair_kernel[(triton.cdiv(rows, ROWS), )](q, q.stride(0), q.stride(1), pair, rope, scale, rows, q.shape[1],
                                                 ROWS=ROWS, PDL=pdl, LO=int(lo), num_warps=4)
    return pair, rope, scale


def query_pair_reference(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`query_pair` in torch (the same roundings: e4m3 round-to-nearest-even, saturating)."""
    x = q.reshape(-1, D_QK).float()
    amax = x.abs().amax(1).clamp_min(1e-30)
    s = torch.exp2(8.0 - torch.ceil(torch.log2(amax)))
    y = x * s[:, None]
    hi = y.to(torch.float8_e4m3fn)
    lo = (y - hi.float()).to(torch.float8_e4m3fn)
    pair = torch.cat([hi[:, :D_NOPE], lo[:, :D_NOPE]], 1)
    rope = torch.cat([hi[:, D_NOPE:], lo[:, D_NOPE:]], 1)
    return pair, rope, s
