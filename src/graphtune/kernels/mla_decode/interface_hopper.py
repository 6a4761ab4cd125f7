"""Launch of the Hopper (sm_90a) Gluon MLA decode kernels (kernel_hopper.py): which inputs they take, their
TMA descriptors, grid and scratch buffers. ``interface._launch`` decides when to call them.

The kernels run fixed, benchmark-chosen configs (bf16: ``HOPPER_CONFIG`` for H % 64 == 0, ``HOPPER_TOK_CONFIG``
otherwise; fp8: ``HOPPER_FP8_CONFIG`` / ``HOPPER_TOK_FP8_CONFIG``; ``benchmarks/bench_mla_decode.py
--hopper-variants`` times the alternatives), not
``graphtune.autotune``: the tuner's launch path does not rebuild the TMA descriptors per config
(docs/mla_decode.md lists what the core would need).
"""
from __future__ import annotations

import functools
from typing import Any

import torch

from . import kernel_hopper
from .reference import D_NOPE, D_QK

BLOCK_N = 64        # the largest tile; pages must hold a multiple of it (a tile never spans two pages)
BLOCK_H = 64
NUM_WARPS = 8
# H % 64 == 0: 2 x 72 KB KV buffers (bf16) + the 72 KB query tile = 225,304 B of the 232,448 an sm_90 block
# may have. Fastest of the four variants timed on the H200 at H = 128, batch 1-64 (BLOCK_N 32 with 3-4
# buffers: 5-32% slower; PIPE = 1: 1-26% slower): docs/mla_decode.md.
HOPPER_CONFIG: dict[str, int] = {"BLOCK_N": 64, "NUM_BUF": 2, "PIPE": 0}
# H < 64 (16, 32, 48): the tokens-on-M kernel, 16 heads and one warpgroup per program; 168,216 B of shared
# memory (a third 72 KB buffer would not fit; BLOCK_N = 32 is not possible: a wgmma's M is a multiple of 64).
TOK_BLOCK_H = 16
TOK_NUM_WARPS = 4
HOPPER_TOK_CONFIG: dict[str, int] = {"BLOCK_N": 64, "NUM_BUF": 2, "PIPE": 0}


# fp8 (per-tensor) cache, H < 64: the tokens-on-M fp8 kernel. Two 32 KB buffers, V^T widened in registers
# (WIDEN 0), two programs per SM (96,528 B each): the fastest of five variants at batch 32-128 on the H200
# (0.1457 ms at H = 16, batch 128, against 0.1820 for four buffers and one program per SM), within 1% of the
# best at batch 1-8 (docs/mla_decode.md, branch issue-mla2, run 2).
HOPPER_TOK_FP8_CONFIG: dict[str, int] = {"BLOCK_N": 64, "NUM_BUF": 2, "PIPE": 0, "WIDEN": 0, "PROGRAMS_PER_SM": 2}
# fp8 (per-tensor) cache, H % 64 == 0: heads on M; 2 x 32 KB fp8 buffers + the 64 KB fp16 copy of a tile's
# latent columns + the query pair = 225,296 B. LO_CHAIN = 1 measured 2-4% faster, but the GPU tests ran 0.
HOPPER_FP8_CONFIG: dict[str, int] = {"BLOCK_N": 64, "NUM_BUF": 2, "PIPE": 0, "LO_CHAIN": 0}
# Whether ``path="auto"`` runs the fp8 Hopper kernels (per kernel). Both beat the portable kernel at every
# batch timed on the H200 (H = 16: 1.3-1.4x at batch 1-128; H = 128: 1.1x at batch 1, 1.7-2.0x at 8-64);
# a kernel that stops winning goes back behind ``path="hopper"`` by setting its entry to False.
FP8_AUTO: dict[str, bool] = {"tokens-on-M": True, "heads-on-M": True}
_B_CHUNK = 128


def _heads_on_m(heads: int) -> bool:
    return heads % BLOCK_H == 0


def _base_config(on_m: bool, fp8: bool) -> dict[str, int]:
    """The fixed config of the kernel that serves this shape class (a copy: callers overlay theirs)."""
    if fp8:
        return dict(HOPPER_FP8_CONFIG if on_m else HOPPER_TOK_FP8_CONFIG)
    return dict(HOPPER_CONFIG if on_m else HOPPER_TOK_CONFIG)


def supported(q: torch.Tensor, kv_cache: torch.Tensor, fmt: str, explicit: bool = False) -> str | None:
    """None when a Hopper kernel takes these inputs, else why not (the portable kernel runs them).
    ``explicit``: the caller asked for the Hopper path (``path="hopper"``), which also admits an fp8 kernel
    whose ``FP8_AUTO`` entry is off."""
    if q.device.type != "cuda":
        return "not a CUDA tensor"
    capability = _capability(q.device.index if q.device.index is not None else torch.cuda.current_device())
    if capability != (9, 0):
        return f"compute capability {capability}, needs (9, 0)"
    return shape_supported(q, kv_cache, fmt, explicit)


@functools.lru_cache(maxsize=None)
def _capability(device_index: int) -> tuple[int, int]:
    # cached: this runs on every decode call (the hot path), and a device's capability never changes
    return torch.cuda.get_device_capability(device_index)


def shape_supported(q: torch.Tensor, kv_cache: torch.Tensor, fmt: str, explicit: bool = False) -> str | None:
    """The shape / layout half of :func:`supported` (no device query: also for CPU compile tests)."""
    heads = q.shape[1]
    if fmt == "fp8":
        kind = "heads-on-M" if _heads_on_m(heads) else "tokens-on-M"
        if not explicit and not FP8_AUTO[kind]:
            return f"kv_format 'fp8' with H = {heads}: the {kind} fp8 kernel is not the measured faster path " \
                   "(path='hopper' runs it)"
    elif fmt != "bf16":
        return f"kv_format {fmt!r}: the Hopper kernels take bf16 and fp8 caches"
    if heads % BLOCK_H and heads % TOK_BLOCK_H:
        return f"H = {heads} is not a multiple of {TOK_BLOCK_H}"
    if kv_cache.shape[1] % BLOCK_N:
        return f"page size {kv_cache.shape[1]} is not a multiple of {BLOCK_N}"
    if not kv_cache.is_contiguous():
        return "kv_cache is not contiguous (TMA reads it as one [pages * page_size, 576] matrix)"
    if not q.is_contiguous():
        return "q is not contiguous"
    return None


def _gl_dtype(dtype: torch.dtype):
    from triton.experimental.gluon import language as gl
    return {torch.bfloat16: gl.bfloat16, torch.float8_e4m3fn: gl.float8e4nv}[dtype]


def _descriptor(t: torch.Tensor, block: list[int]):
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    layout = gl.NVMMASharedLayout.get_default_for(block, _gl_dtype(t.dtype))
    return TensorDescriptor(t, list(t.shape), list(t.stride()), block, layout)


def hopper_call(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor, seq_lens: torch.Tensor,
                sm_scale: float, kv_scale: float | torch.Tensor, fmt: str, out: torch.Tensor, return_lse: bool, *,
                sms: int, config: dict[str, int] | None = None, programs_per_sm: int = 1,
                lse: torch.Tensor | None = None):
    """Positional arguments, grid and constexprs of the Hopper kernel, plus ``(lse, part_o, part_lse, seg)``."""
    batch, heads, _ = q.shape
    device = q.device
    if lse is None:
        lse = torch.empty(batch, heads, dtype=torch.float32, device=device) if return_lse else out
    on_m = _heads_on_m(heads)
    block_h = BLOCK_H if on_m else TOK_BLOCK_H
    head_blocks = heads // block_h
    fp8 = fmt == "fp8"
    cfg = {**_base_config(on_m, fp8), **(config or {})}
    programs_per_sm = cfg.pop("PROGRAMS_PER_SM", programs_per_sm)
    programs = max(1, sms * programs_per_sm // head_blocks)
    slots = programs + batch
    part_o = torch.empty(slots, heads, D_NOPE, dtype=torch.float32, device=device)
    part_lse = torch.empty(slots, heads, dtype=torch.float32, device=device)
    seg = torch.empty(batch, 2, dtype=torch.int32, device=device)
    block_n = cfg["BLOCK_N"]
    q2 = q.view(batch * heads, D_QK)
    kv2 = kv_cache.view(kv_cache.shape[0] * kv_cache.shape[1], D_QK)
    if fp8:
        if isinstance(kv_scale, torch.Tensor):
            scale_ptr, scale_value, scale_from_ptr = kv_scale, 1.0, True
        else:
            scale_ptr, scale_value, scale_from_ptr = seq_lens, float(kv_scale), False   # pointer unused
        args = (q, _descriptor(kv2, [block_n, D_NOPE]), kv_cache, scale_ptr,
                page_table, seq_lens,
                out, lse, part_o, part_lse, seg,
                float(sm_scale), scale_value,
                batch, heads,
                q.stride(0), q.stride(1),
                page_table.stride(0),
                out.stride(0), out.stride(1),
                part_o.stride(0), part_o.stride(1),
                part_lse.stride(0))
        consts = dict(PAGE_SIZE=kv_cache.shape[1], KV_SCALE_FROM_PTR=scale_from_ptr, RETURN_LSE=return_lse,
                      B_CHUNK=_B_CHUNK, BLOCK_H=block_h, **cfg, num_warps=NUM_WARPS if on_m else TOK_NUM_WARPS)
        return args, (head_blocks, programs), consts, (lse, part_o, part_lse, seg)
    args = (_descriptor(q2, [block_h, D_NOPE]), _descriptor(q2[:, D_NOPE:], [block_h, 64]),
            _descriptor(kv2, [block_n, D_NOPE]), _descriptor(kv2[:, D_NOPE:], [block_n, 64]),
            page_table, seq_lens,
            out, lse, part_o, part_lse, seg,
            float(sm_scale),
            batch, heads,
            page_table.stride(0),
            out.stride(0), out.stride(1),
            part_o.stride(0), part_o.stride(1),
            part_lse.stride(0))
    consts = dict(PAGE_SIZE=kv_cache.shape[1], RETURN_LSE=return_lse, B_CHUNK=_B_CHUNK, BLOCK_H=block_h, **cfg,
                  num_warps=NUM_WARPS if on_m else TOK_NUM_WARPS)
    return args, (head_blocks, programs), consts, (lse, part_o, part_lse, seg)


def kernel_for(heads: int, fmt: str = "bf16"):
    """The Gluon kernel that serves H heads: heads on M for H % 64 == 0, else tokens on M (bf16 or fp8)."""
    if fmt == "fp8":
        return (kernel_hopper._mla_decode_hopper_fp8_kernel if _heads_on_m(heads)
                else kernel_hopper._mla_decode_hopper_tok_fp8_kernel)
    return kernel_hopper._mla_decode_hopper_kernel if _heads_on_m(heads) else kernel_hopper._mla_decode_hopper_tok_kernel


def launch(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor, seq_lens: torch.Tensor,
           sm_scale: float, kv_scale: float | torch.Tensor, fmt: str, out: torch.Tensor, return_lse: bool, *,
           sms: int, config: dict[str, int] | None = None) -> tuple[torch.Tensor, torch.Tensor, Any]:
    """Run the Hopper split kernel; returns ``(lse, part_o, part_lse, seg)`` for the reduction."""
    args, grid, consts, scratch = hopper_call(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale, fmt, out,
                                              return_lse, sms=sms, config=config)
    kernel_for(q.shape[1], fmt)[grid](*args, **consts)
    return scratch


