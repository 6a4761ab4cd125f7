"""Small Gluon kernels for the tests of graphtune's Gluon support (tests/cpu/test_gluon.py compiles them for
sm_90 without a GPU; tests/gpu/test_gluon_gpu.py runs them). Both scale a 2-D fp32 tensor by ``scale``, one
[BM, BN] tile per program, read and written through TMA tensor descriptors:

    _tma_scale_kernel  TMA load -> registers (x scale) -> shared memory -> TMA store, all in num_warps warps
    _ws_scale_kernel   the same with the load in a 1-warp worker partition (``gl.warp_specialize``); the
                       default partition (num_warps warps) computes and stores

Shape letters: M rows, N columns of the tensor; BM x BN the tile (the descriptors' block shape). BM and BN are
constexpr parameters so a config can set them; the kernels assert that the descriptors' block shape is
[BM, BN], so a launch whose descriptors were not rebuilt for the config fails to compile instead of reading
the wrong tiles.
"""
from __future__ import annotations

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

# Gluon's TMA copies were renamed between triton 3.6 and 3.9 (the old names raise there): the suite runs on both
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global


@gluon.jit
def _tma_scale_kernel(in_desc, out_desc, B, scale, BM: gl.constexpr, BN: gl.constexpr, num_warps: gl.constexpr):
    gl.static_assert(in_desc.block_type.shape[0] == BM)
    gl.static_assert(in_desc.block_type.shape[1] == BN)
    gl.static_assert(out_desc.block_type.shape[0] == BM)
    gl.static_assert(out_desc.block_type.shape[1] == BN)
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    in_smem = gl.allocate_shared_memory(in_desc.dtype, [BM, BN], in_desc.layout)
    out_smem = gl.allocate_shared_memory(out_desc.dtype, [BM, BN], out_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    _tma_load(in_desc, [off_m, off_n], bar, in_smem)
    mbarrier.wait(bar, 0)
    mbarrier.invalidate(bar)
    x = in_smem.load(layout)
    out_smem.store(x * scale)
    fence_async_shared()          # the generic-proxy store above before the async-proxy (TMA) read below
    _tma_store(out_desc, [off_m, off_n], out_smem)
    tma.store_wait(0)


@gluon.jit
def _ws_load_partition(in_desc, in_smem, bar, off_m, off_n):
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    _tma_load(in_desc, [off_m, off_n], bar, in_smem)


@gluon.jit
def _ws_compute_partition(out_desc, in_smem, out_smem, bar, off_m, off_n, scale, num_warps: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    mbarrier.wait(bar, 0)
    x = in_smem.load(layout)
    out_smem.store(x * scale)
    fence_async_shared()
    _tma_store(out_desc, [off_m, off_n], out_smem)
    tma.store_wait(0)


@gluon.jit
def _ws_scale_kernel(in_desc, out_desc, B, scale, BM: gl.constexpr, BN: gl.constexpr, num_warps: gl.constexpr):
    gl.static_assert(in_desc.block_type.shape[0] == BM)
    gl.static_assert(in_desc.block_type.shape[1] == BN)
    gl.static_assert(out_desc.block_type.shape[0] == BM)
    gl.static_assert(out_desc.block_type.shape[1] == BN)
    in_smem = gl.allocate_shared_memory(in_desc.dtype, [BM, BN], in_desc.layout)
    out_smem = gl.allocate_shared_memory(out_desc.dtype, [BM, BN], out_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    # the default partition (num_warps warps) computes and stores; one worker warp with 24 registers loads
    gl.warp_specialize([
        (_ws_compute_partition, (out_desc, in_smem, out_smem, bar, off_m, off_n, scale, num_warps)),
        (_ws_load_partition, (in_desc, in_smem, bar, off_m, off_n)),
    ], [1], [24])
    mbarrier.invalidate(bar)


# ------------------------------------------------------------------------------------------- host side

def layout_for(block: list[int], dtype=None):
    """The shared layout of a ``block`` tile of ``dtype`` (a torch dtype; fp32 by default)."""
    import torch
    element = {torch.float32: gl.float32, torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}[dtype or torch.float32]
    return gl.NVMMASharedLayout.get_default_for(block, element)


def descriptor(t, block: list[int]) -> TensorDescriptor:
    """A descriptor over 2-D ``t`` with tiles of ``block``."""
    return TensorDescriptor(t, list(t.shape), list(t.stride()), list(block), layout_for(block, t.dtype))


def set_block_shape(nargs: dict) -> None:
    """The configs' pre-hook (Triton's convention: the launch's arguments and the config's values by name):
    the descriptors' tiles follow the config's BM x BN. Host work only: it runs inside CUDA graph capture."""
    block = [nargs["BM"], nargs["BN"]]
    for name in ("in_desc", "out_desc"):
        nargs[name].block_shape = block
        nargs[name].layout = layout_for(block, nargs[name].base.dtype)


def configs_with_hooks(blocks=((32, 64), (64, 64), (128, 32)), num_warps=4) -> list[triton.Config]:
    return [triton.Config({"BM": bm, "BN": bn}, num_warps=num_warps, pre_hook=set_block_shape)
            for bm, bn in blocks]


def grid(m: int, n: int):
    return lambda meta: (triton.cdiv(m, meta["BM"]), triton.cdiv(n, meta["BN"]))
