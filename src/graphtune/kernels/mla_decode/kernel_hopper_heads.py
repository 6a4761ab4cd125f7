"""Hopper (sm_90a) MLA decode, heads on M, fp8 (per-tensor) cache with 16-bit scores: the cache tile widened
once to fp16 in shared memory, then the bf16 heads-on-M kernel's MMAs with an fp16 copy of the query.

Only ``@gluon.jit`` functions live here (interface_hopper.py launches them); helpers and the work split are
kernel_hopper.py's.

``_mla_decode_hopper_fp8w_kernel`` (H a multiple of 64; 64 heads of one request per program, 8 warps = 2
warpgroups, as ``kernel_hopper._mla_decode_hopper_kernel``). Per tile of 64 tokens:

    fp8 tile      TMA of the 512 latent columns (32 KB; the 64 rope columns by plain loads a tile ahead, as the
                  other fp8 kernels: a 64-byte-swizzled fp8 TMA tile lost the rope term on the H200)
    widen         fp8 -> fp16 into one [64, 576] fp16 tile in shared memory (exact: every e4m3 value is an
                  fp16); rows past seq_len written as zeros (P.V would turn 0 * NaN into NaN)
    S = Q K^T     fp16 wgmmas, A = the query in fp16 (per head times a power of two that puts its largest
                  |q| at 2^14: every bf16 value above 2^-28 of that stays exact), B = the fp16 tile K-major
    O += P V      A = P in fp16 registers (p <= 1: 11 significant bits), B = the same fp16 tile, MN-major

against the hi/lo fp8 kernel (kernel_hopper): no query pair and no second score chain, one widening of the
tile's 576 columns instead of 512, and the fp8 buffer is free as soon as the widening is done, so both fp8
buffers are in flight while a tile is computed (the bf16 kernel holds a buffer until its P.V retires).

PSMEM = 1 hands P to the P.V wgmma through an [64, 64] fp16 shared tile (A from shared memory: one store and
one barrier) instead of the register operand (a layout conversion through shared memory in three rounds of
two barriers each, compiled for sm_90).

LSUM = 1 (with PSMEM) takes the softmax's row sums off the per-tile chain: ``l += P @ ones`` as one more
asynchronous wgmma ([64, 16], both warpgroups' tokens in one product) instead of a reduction across the two
warpgroups (two barriers a tile); rescaled by alpha like O.

MAX1 = 1: the row maxima across the two warpgroups with one barrier (``kernel_hopper._row_max_2wg``)
instead of ``gl.max``'s two. XCH = 1: the whole softmax step (maxima and sums) with one barrier
(``kernel_hopper._softmax_2wg``), instead of MAX1 and LSUM.

WOVL = 1 widens the tile 128 columns at a time and issues the score MMAs of each chunk as soon as it is
written, so the widening of chunk c + 1 runs under the MMAs of chunk c; WOVL = 0 widens the whole tile, then
issues the score MMAs.

Shared memory: the fp16 query 72 KB, the fp16 tile 72 KB, NUM_BUF = 2 fp8 buffers 64 KB: 212,992 B plus
barriers (a third fp8 buffer would not fit an sm_90 block's 232,448 B).
"""
from __future__ import annotations

import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)

from .kernel_hopper import (FP8_SEG_COST, _block_barrier, _issue_nope, _load_rope, _program_ids, _row_max_2wg, _segment,
                            _softmax_2wg, _split_start, _store_lse_and_segment, _store_o, _store_partial_sectors,
                            _tma_load, _widen_cols, SECTORS_HEADS_ON_M_512)

# whether a shared-memory view of another shape is ``reinterpret`` (triton 3.9) or ``_reinterpret`` (3.6)
_REINTERPRET_PUBLIC = gl.constexpr(hasattr(gl.shared_memory_descriptor, "reinterpret"))


@gluon.jit
def _q_chunks(qn_smem, BLOCK_H: gl.constexpr, COLS: gl.constexpr):
    """The [BLOCK_H, 512] 128-byte-swizzled query tile as 512 / COLS [BLOCK_H, COLS] chunks (each 64-column block of
    such a tile is contiguous: the same bytes). A kernel indexes them through a value of its tile loop that is 0 but
    not provably so (``kernel_hopper_pp._scores`` says why: as loop invariants their addresses were hoisted and
    spilled)."""
    layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_H, COLS], qn_smem.dtype)
    if _REINTERPRET_PUBLIC:
        chunks = qn_smem.reinterpret(qn_smem.dtype, [512 // COLS, BLOCK_H, COLS], layout)
    else:
        chunks = qn_smem._reinterpret(qn_smem.dtype, [512 // COLS, BLOCK_H, COLS], layout)
    return chunks


@gluon.jit
def _as_dtype(smem, dtype: gl.constexpr):
    """The same shared-memory bytes and layout viewed with another element type of the same width (the 16-bit
    types' NVMMA layouts do not depend on which: a bf16 TMA box lands in an fp16 tile's swizzle)."""
    if _REINTERPRET_PUBLIC:
        view = smem.reinterpret(dtype, smem.shape, smem.layout)
    else:
        view = smem._reinterpret(dtype, smem.shape, smem.layout)
    return view


@gluon.jit
def _q_issue(q_nope_desc, q_rope_desc, row, bar, qn_smem, qr_smem):
    """TMA of the query's bf16 rows ``[row, row + 64)`` (latent and rope columns) into the bytes of the fp16 query
    tiles (same width, same 128-byte swizzle) on ``bar``; ``_q_fp16`` converts them in place once landed. One
    asynchronous read of the query, issued before the segment's first tiles' copies: it lands ~3-6 us after the work
    split (H200, fp8 ping-pong at H = 128, batch 8 / 64; session 19's prologue marks). (The widened-score kernel
    keeps ``_q_fp16_loads``: there these shared-memory views cost 17 spilled values reloaded in the tile loop,
    compiled for sm_90.)"""
    fence_async_shared()        # (the generic proxy's reads of the previous segment's query before the TMA's writes)
    mbarrier.expect(bar, q_nope_desc.block_type.nbytes + q_rope_desc.block_type.nbytes)
    _tma_load(q_nope_desc, [row, 0], bar, _as_dtype(qn_smem, gl.bfloat16))
    _tma_load(q_rope_desc, [row, 0], bar, _as_dtype(qr_smem, gl.bfloat16))


@gluon.jit
def _fp16_scale(amax):
    """Per head the power of two s with max |q s| in (2^13, 2^14] (fp16's largest finite is 65504)."""
    return gl.exp2(14.0 - gl.ceil(gl.log2(gl.maximum(amax, 1e-30))))


@gluon.jit
def _q_fp16(qn_smem, qr_smem, BLOCK_H: gl.constexpr, num_warps: gl.constexpr):
    """The landed bf16 query (``_q_issue``) rewritten in place as fp16, each head times a power of two s with
    max |q s| in (2^13, 2^14] (fp16's largest finite is 65504); returns s per head. Two passes over the tiles (the
    head maxima, then the scaled copy), 128 columns at a time: a [64, 576] register tile would set the register
    budget. Each thread rewrites exactly the elements it read (one layout for both), so no barrier sits between a
    read and the write of the same bytes; the caller fences and synchronises before the MMAs read them.

    The passes are loops that stay loops (``loop_unroll_factor=1``). Unrolled (1,526 instructions between the
    query's arrival and the end of its conversion, compiled for sm_90) the conversion took 10.6-11.7 us on the H200,
    as loops (617) 5.0-5.1 us (fp8 ping-pong, H = 128, batch 8 / 64; session 19's prologue marks), for ~1 us of
    issue either way; why the unrolled form waits is open (docs/mla_decode.md, session 19)."""
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    qb = _q_chunks(_as_dtype(qn_smem, gl.bfloat16), BLOCK_H, 128)
    qh = _q_chunks(qn_smem, BLOCK_H, 128)
    qrb = _as_dtype(qr_smem, gl.bfloat16)
    amax = gl.max(gl.abs(qrb.load(layout).to(gl.float32)), axis=1)
    for c in tl.range(0, 4, loop_unroll_factor=1):
        amax = gl.maximum(amax, gl.max(gl.abs(qb.index(c).load(layout).to(gl.float32)), axis=1))
    q_scale = _fp16_scale(amax)
    for c in tl.range(0, 4, loop_unroll_factor=1):
        x = qb.index(c).load(layout).to(gl.float32)
        qh.index(c).store((x * q_scale[:, None]).to(gl.float16))
    xr = qrb.load(layout).to(gl.float32)
    qr_smem.store((xr * q_scale[:, None]).to(gl.float16))
    return q_scale


@gluon.jit
def _q_fp16_loads(q_base, stride_q_h, qn_smem, qr_smem, BLOCK_H: gl.constexpr, num_warps: gl.constexpr):
    """``_q_fp16``'s result from the query in global memory (``q_base``, heads ``stride_q_h`` apart) by plain
    loads, the two passes as loops as there (the widened-score kernel's form)."""
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    heads = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, 128, layout=gl.SliceLayout(0, layout))
    cols_r = gl.arange(0, 64, layout=gl.SliceLayout(0, layout))
    rows = heads[:, None] * stride_q_h
    qh = _q_chunks(qn_smem, BLOCK_H, 128)
    amax = gl.max(gl.abs(gl.load(q_base + rows + 512 + cols_r[None, :]).to(gl.float32)), axis=1)
    for c in tl.range(0, 4, loop_unroll_factor=1):
        x = gl.load(q_base + rows + c * 128 + cols[None, :]).to(gl.float32)
        amax = gl.maximum(amax, gl.max(gl.abs(x), axis=1))
    q_scale = _fp16_scale(amax)
    for c in tl.range(0, 4, loop_unroll_factor=1):
        x = gl.load(q_base + rows + c * 128 + cols[None, :]).to(gl.float32)
        qh.index(c).store((x * q_scale[:, None]).to(gl.float16))
    xr = gl.load(q_base + rows + 512 + cols_r[None, :]).to(gl.float32)
    qr_smem.store((xr * q_scale[:, None]).to(gl.float16))
    return q_scale


@gluon.jit(do_not_specialize=["B"])
def _mla_decode_hopper_fp8w_kernel(
    q_ptr, kv_nope_desc, kv_ptr, kv_scale_ptr,
    page_table_ptr, seq_lens_ptr,
    out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr,
    sm_scale, kv_scale,
    B, H,
    stride_q_b, stride_q_h,
    stride_pt_b,
    stride_out_b, stride_out_h,
    stride_po_s, stride_po_h,
    stride_pl_s,
    PAGE_SIZE: gl.constexpr,
    KV_SCALE_FROM_PTR: gl.constexpr,
    RETURN_LSE: gl.constexpr,
    B_CHUNK: gl.constexpr,
    BLOCK_N: gl.constexpr,
    BLOCK_H: gl.constexpr,
    NUM_BUF: gl.constexpr,
    num_warps: gl.constexpr,
    WOVL: gl.constexpr = 0,
    PSMEM: gl.constexpr = 0,
    LSUM: gl.constexpr = 0,
    MAX1: gl.constexpr = 0,
    XCH: gl.constexpr = 0,
    SPLIT_MAX: gl.constexpr = 0,    # the grid's programs per request at most (interface_hopper; unused in here)
):
    """Grid ``(H // 64, P)``: program (h, p) attends heads ``[h * 64, h * 64 + 64)`` over tile range p (the
    arguments are the hi/lo fp8 heads-on-M kernel's, so one launch path serves both)."""
    LOG2E: gl.constexpr = 1.4426950408889634
    D_V: gl.constexpr = 512
    gl.static_assert(BLOCK_H == 64)
    gl.static_assert(BLOCK_N == 64)
    gl.static_assert(num_warps == 8)
    dtype: gl.constexpr = kv_nope_desc.dtype

    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                                       instr_shape=[16, BLOCK_N // 2, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                                       instr_shape=[16, D_V // 2, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    rope_layout: gl.constexpr = gl.BlockedLayout([1, 16], [8, 4], [num_warps, 1], [1, 0])
    qn_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_H, D_V], gl.float16)
    qr_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_H, 64], gl.float16)
    kw_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, D_V], gl.float16)
    krw_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, 64], gl.float16)
    ps_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_H, BLOCK_N], gl.float16)
    # LSUM: the row sums of P as a [64, 16] wgmma product P @ ones (each warpgroup 8 columns, all equal)
    l_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                                       instr_shape=[16, 8, 16])
    ones_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, 16], gl.float16)

    pid_h, pid, num_progs, h0 = _program_ids(BLOCK_H)
    if KV_SCALE_FROM_PTR:
        kv_scale = gl.load(kv_scale_ptr).to(gl.float32)

    qn_smem = gl.allocate_shared_memory(gl.float16, [BLOCK_H, D_V], qn_layout)
    q_chunks = _q_chunks(qn_smem, BLOCK_H, 128)
    qr_smem = gl.allocate_shared_memory(gl.float16, [BLOCK_H, 64], qr_layout)
    kw = gl.allocate_shared_memory(gl.float16, [BLOCK_N, D_V], kw_layout)
    krw = gl.allocate_shared_memory(gl.float16, [BLOCK_N, 64], krw_layout)
    kn_bufs = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_N, D_V], kv_nope_desc.layout)
    if PSMEM:
        p_smem = gl.allocate_shared_memory(gl.float16, [BLOCK_H, BLOCK_N], ps_layout)
    if LSUM:
        gl.static_assert(PSMEM == 1)
        ones_smem = gl.allocate_shared_memory(gl.float16, [BLOCK_N, 16], ones_layout)
        # (made visible to the MMAs by the fence and barrier after the first widening)
        ones_smem.store(gl.full([BLOCK_N, 16], 1.0, gl.float16,
                                layout=gl.BlockedLayout([1, 2], [4, 8], [num_warps, 1], [1, 0])))
    if MAX1:
        mx_smem = gl.allocate_shared_memory(gl.float32, [2 * BLOCK_H], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    if XCH:
        gl.static_assert(LSUM + MAX1 == 0)
        m_smem = gl.allocate_shared_memory(gl.float32, [2 * BLOCK_H], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        l_smem = gl.allocate_shared_memory(gl.float32, [2 * BLOCK_H], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    bars = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    for k in gl.static_range(NUM_BUF):
        mbarrier.init(bars.index(k), count=1)

    t, t_stop, b, req_end = _split_start(seq_lens_ptr, B, pid, num_progs, BLOCK_N, B_CHUNK, num_warps, FP8_SEG_COST)

    offs_tok = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    offs_h_o = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(1, o_layout))
    offs_d_o = gl.arange(0, D_V, layout=gl.SliceLayout(0, o_layout))
    offs_h_s = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(1, s_layout))
    it = 0          # tiles consumed by this program: buffer it % NUM_BUF, barrier phase (it // NUM_BUF) & 1
    while t < t_stop:
        b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _segment(
            seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, BLOCK_N)

        # Every warp has retired the previous segment's MMAs (the last readers of the query and the fp16
        # tile) once past this barrier.
        _block_barrier()
        # Prologue: the first NUM_BUF tiles of the segment in flight (a buffer is free once widened).
        for k in gl.static_range(NUM_BUF):
            if i_first + k < i_stop:
                _issue_nope(kv_nope_desc, kn_bufs, bars, pt_base, i_first + k, (it + k) % NUM_BUF, PAGE_SIZE,
                            BLOCK_N)
        q_base = q_ptr + b.to(gl.int64) * stride_q_b + h0 * stride_q_h
        q_scale = _q_fp16_loads(q_base, stride_q_h, qn_smem, qr_smem, BLOCK_H, num_warps)
        qk_mul = gl.convert_layout(sm_scale * LOG2E * kv_scale / q_scale, gl.SliceLayout(1, s_layout))
        rope = _load_rope(kv_ptr, pt_base, i_first, PAGE_SIZE, BLOCK_N, rope_layout)

        m_i = gl.full([BLOCK_H], float("-inf"), gl.float32, layout=gl.SliceLayout(1, s_layout))
        l_i = gl.zeros([BLOCK_H], gl.float32, layout=gl.SliceLayout(1, s_layout))
        o = warpgroup_mma_init(gl.zeros([BLOCK_H, D_V], gl.float32, layout=o_layout))
        if LSUM:
            l_acc = warpgroup_mma_init(gl.zeros([BLOCK_H, 16], gl.float32, layout=l_layout))
        for i in range(i_first, i_stop):
            stage = it % NUM_BUF
            kn = kn_bufs.index(stage)
            n_valid = seq_len - i * BLOCK_N
            # the next tile's rope rows (the last tile loads its own again: harmless, a valid page)
            rope_next = _load_rope(kv_ptr, pt_base, gl.minimum(i + 1, i_stop - 1), PAGE_SIZE, BLOCK_N, rope_layout)
            # O(i - 1), the fp16 tile's last reader, retired in both warpgroups past the barrier
            if LSUM:
                o, l_acc = warpgroup_mma_wait(num_outstanding=0, deps=(o, l_acc))
            else:
                o = warpgroup_mma_wait(num_outstanding=0, deps=(o, ))
            mbarrier.wait(bars.index(stage), (it // NUM_BUF) & 1)
            _block_barrier()
            # rope rows past seq_len only reach masked scores: no zeroing needed for them
            krw.store(rope.to(gl.float16))
            s = gl.zeros([BLOCK_H, BLOCK_N], gl.float32, layout=s_layout)
            if WOVL:
                for c in gl.static_range(4):
                    _widen_cols(kn.slice(c * 128, 128, dim=1), kw.slice(c * 128, 128, dim=1), n_valid, BLOCK_N,
                                128, num_warps)
                    fence_async_shared()
                    _block_barrier()
                    if c == 0:
                        s = warpgroup_mma(qr_smem, krw.permute((1, 0)), s, use_acc=False, is_async=True)
                    # (the query's chunks through a loop value that is 0: kernel_hopper_pp._scores says why)
                    s = warpgroup_mma(q_chunks.index(c + (i >> 30)),
                                      kw.slice(c * 128, 128, dim=1).permute((1, 0)), s, is_async=True)
            else:
                _widen_cols(kn, kw, n_valid, BLOCK_N, D_V, num_warps)
                fence_async_shared()
                _block_barrier()
                s = warpgroup_mma(qn_smem, kw.permute((1, 0)), s, use_acc=False, is_async=True)
                s = warpgroup_mma(qr_smem, krw.permute((1, 0)), s, is_async=True)
            # every warp is past the barrier after the last widening: the fp8 buffer is free
            if i + NUM_BUF < i_stop:
                _issue_nope(kv_nope_desc, kn_bufs, bars, pt_base, i + NUM_BUF, stage, PAGE_SIZE, BLOCK_N)
            s = warpgroup_mma_wait(num_outstanding=0, deps=(s, ))
            s = s * qk_mul[:, None]
            s = gl.where((i * BLOCK_N + offs_tok < seq_len)[None, :], s, float("-inf"))
            if XCH:
                p, alpha, m_i, l_i = _softmax_2wg(s, m_i, l_i, m_smem, l_smem, BLOCK_H, BLOCK_N, s_layout)
            else:
                if MAX1:
                    m_new = gl.maximum(m_i, _row_max_2wg(s, mx_smem, BLOCK_H, BLOCK_N, s_layout))
                else:
                    m_new = gl.maximum(m_i, gl.max(s, axis=1))
                alpha = gl.exp2(m_i - m_new)
                p = gl.exp2(s - m_new[:, None])
                if LSUM:
                    l_acc = l_acc * gl.convert_layout(alpha, gl.SliceLayout(1, l_layout))[:, None]
                else:
                    l_i = l_i * alpha + gl.sum(p, axis=1)
                m_i = m_new
            o = o * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
            if PSMEM:
                # P as the A operand from shared memory: each warpgroup writes its 32 tokens, one barrier
                # (free again: O(i - 1), its last reader, retired in both warpgroups at the top barrier)
                p_smem.store(p.to(gl.float16))
                fence_async_shared()
                _block_barrier()
                o = warpgroup_mma(p_smem, kw, o, is_async=True)
                if LSUM:
                    l_acc = warpgroup_mma(p_smem, ones_smem, l_acc, is_async=True)
            else:
                p_op = gl.convert_layout(p.to(gl.float16), p_layout)
                o = warpgroup_mma(p_op, kw, o, is_async=True)
            rope = rope_next
            it += 1
        if LSUM:
            o, l_acc = warpgroup_mma_wait(num_outstanding=0, deps=(o, l_acc))
            l_i = gl.convert_layout(gl.max(l_acc, axis=1), gl.SliceLayout(1, s_layout))
        else:
            o = warpgroup_mma_wait(num_outstanding=0, deps=(o, ))

        inv = gl.convert_layout(kv_scale / l_i, gl.SliceLayout(1, o_layout))
        o = o * inv[:, None]
        lse2 = m_i + gl.log2(l_i)
        heads_o = h0 + offs_h_o
        heads_s = h0 + offs_h_s
        whole = (i_first == 0) & (i_stop == req_tiles)
        if (part_o_ptr.dtype.element_ty.primitive_bitwidth == 16) and (not whole):
            _store_partial_sectors(o, b, pid, h0, 0, part_o_ptr, stride_po_s, stride_po_h, SECTORS_HEADS_ON_M_512)
        else:
            _store_o(o, whole, b, pid, heads_o, offs_d_o, out_ptr, part_o_ptr, stride_out_b, stride_out_h,
                     stride_po_s, stride_po_h, None, False)
        _store_lse_and_segment(lse2, whole, b, H, pid, pid_h, i_first, i_stop, req_tiles, heads_s, lse_ptr,
                               part_lse_ptr, seg_ptr, stride_pl_s, None, RETURN_LSE)
        t = seg_stop
        b += 1

    for k in gl.static_range(NUM_BUF):
        mbarrier.invalidate(bars.index(k))
