"""Hopper (sm_90a) MLA decode, fp8 (per-tensor) cache, H % 64 == 0: two warpgroups that split a program's 64 heads
("head split", ``HS = 1``). Only ``@gluon.jit`` functions live here (interface_hopper.py launches them); shape
letters and the work split as in kernel_hopper.py.

Why: the fp8 ping-pong kernel (kernel_hopper_pp.py) widens every fp8 tile to fp16 in shared memory (36 KB read,
72 KB written a tile) because its P.V takes V from shared memory as the wgmma's B operand, and fp8 wgmmas take only
K-major operands (V is stored N-major); on the H200 it took 3.85 us a tile against the bf16 kernel's 2.37
(docs/mla_decode.md, session 16). Here no tile is widened in shared memory:

* each warpgroup is the second fp8 tokens-on-M kernel's consumer (kernel_hopper_tok.py) for 32 of the program's 64
  heads: scores ``S^T = K [hi | lo]^T`` as fp8 wgmmas straight from the TMA tile (the query's fp8 hi/lo pair, one
  [64, 640] tile a warpgroup), the online softmax over the tile's tokens, and ``O^T += V^T P^T`` with V^T loaded
  from the fp8 tile into the wgmma's register A operand (32-bit loads, widened in registers, the dims relabelled)
  and P^T [64 tokens, 32 heads] from the warpgroup's own shared tile;
* the two warpgroups share the KV tiles (``NUM_BUF`` 40 KB buffers: 3 fit beside the two query tiles) and nothing
  else: no max, sum or P crosses between them, so while one runs its softmax the tensor cores run the other's MMAs
  without a chain through both (the ping-pong kernels hand P and the running max from one warpgroup to the other
  every tile);
* warpgroup 0 issues every TMA (the program's tile g into buffer ``g % NUM_BUF``) once both warpgroups released
  the buffer's previous tile (``empty``: an mbarrier of count 2, one arrival a warpgroup once its score MMAs of the
  tile retired and its V^T loads of it are done); the tile g + NUM_BUF - 1 is requested at the top of tile g, into
  the buffer of tile g - 1.

Per tile and warpgroup: 16 + 4 fp8 k-steps of ``QGMMA.64x64x32`` (CHAIN 0: one chain; CHAIN 1: one chain per 128
dims and the rope's, folded in fp32, as the tokens-on-M kernel's CHAIN) and 32 ``HGMMA.64x32x16`` of P.V; each
warpgroup holds O^T [512, 32] in fp32 (128 registers a thread). Rows past ``seq_len`` in a request's last tile are
zeroed in shared memory by each warpgroup before its reads (the same zeros from both: ``_tile_landed``).
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)

from .kernel_hopper import _block_barrier, _segment, _split_start, _store_chunks_segment
from .kernel_hopper_tok import (_dim_of_row, _group_scores, _ds_group, _issue_tile2, _q_cat, _scores_v2, _softmax_v2,
                                _tile_landed, _v_chunk)

_D_V = gl.constexpr(512)
_WG_H = gl.constexpr(32)      # heads a warpgroup


@gluon.jit
def _hs_issue(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, full, empty, pt_base, j, g, PAGE_SIZE: gl.constexpr,
              BLOCK_N: gl.constexpr, NUM_BUF: gl.constexpr):
    """TMA of tile j, the program's g-th, into buffer ``g % NUM_BUF`` once both warpgroups released the tile before
    it there (the program's tile g - NUM_BUF)."""
    stage = g % NUM_BUF
    if g >= NUM_BUF:
        mbarrier.wait(empty.index(stage), ((g - NUM_BUF) // NUM_BUF) & 1)
    _issue_tile2(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, full, pt_base, j, stage, PAGE_SIZE, 512, BLOCK_N)


@gluon.jit
def _hs_wg(WG: gl.constexpr, q_ptr, kv_nope_desc, kv_rope_desc, kv_scale_ptr, page_table_ptr, seq_lens_ptr,
           out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, kv_scale, B, H, stride_q_b, stride_q_h,
           stride_pt_b, stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s,
           qn_all, qr_all, kn_bufs, kr_bufs, p_all, red_all, full, empty,
           PAGE_SIZE: gl.constexpr, KV_SCALE_FROM_PTR: gl.constexpr, RETURN_LSE: gl.constexpr,
           B_CHUNK: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUF: gl.constexpr, PREFETCH: gl.constexpr,
           CHAIN: gl.constexpr):
    """Warpgroup WG: heads ``[64 pid_h + 32 WG, + 32)`` of every tile of the program (module docstring); WG 0 also
    issues the tiles' TMA."""
    LOG2E: gl.constexpr = 1.4426950408889634
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, 2 * _WG_H, 32])
    s16_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, _WG_H, 32])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, _WG_H, 16])
    v_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    # (kernel_hopper_tok's V^T load layout: 4 adjacent dims of a token a 32-bit load)
    ld_layout: gl.constexpr = gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [0, 2], [1, 0], [8, 0], [16, 0], [32, 0]],
        lane_bases=[[2, 0], [4, 0], [0, 4], [0, 8], [0, 16]],
        warp_bases=[[0, 32], [0, 64]], block_bases=[], shape=[BLOCK_N, 128])
    q_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])

    pid_h = gl.program_id(0)
    pid = gl.program_id(1)
    h0 = pid_h * (2 * _WG_H) + WG * _WG_H
    if KV_SCALE_FROM_PTR:
        kv_scale = gl.load(kv_scale_ptr).to(gl.float32)
    qn_smem = qn_all.index(WG)
    qr_smem = qr_all.index(WG)
    # the query's rope padding (columns 64..127), written once (the segments rewrite columns 0..63)
    qr_smem.slice(64, 64, dim=1).store(gl.zeros([2 * _WG_H, 64], gl.float8e4nv, layout=q_layout))

    t, t_stop, b, req_end = _split_start(seq_lens_ptr, B, pid, gl.num_programs(1), BLOCK_N, B_CHUNK, 4)
    offs_tok = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s16_layout))
    offs_h_s = gl.arange(0, _WG_H, layout=gl.SliceLayout(0, s16_layout))
    offs_h_o = gl.arange(0, _WG_H, layout=gl.SliceLayout(0, o_layout))
    offs_d_o = _dim_of_row(gl.arange(0, 128, layout=gl.SliceLayout(1, o_layout)))
    heads_q = h0 + gl.arange(0, _WG_H, layout=gl.SliceLayout(1, q_layout))
    hmask_q = heads_q < H
    it = 0          # the program's tiles before this one (both warpgroups count alike)
    while t < t_stop:
        b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _segment(
            seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, BLOCK_N)
        if WG == 0:
            for k in gl.static_range(NUM_BUF - 1):
                if i_first + k < i_stop:
                    _hs_issue(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, full, empty, pt_base, i_first + k, it + k,
                              PAGE_SIZE, BLOCK_N, NUM_BUF)
        # (this warpgroup's MMAs of the previous segment, the query tile's readers, retired at its end)
        q_scale = _q_cat(q_ptr + b.to(gl.int64) * stride_q_b, heads_q, hmask_q, stride_q_h, qn_smem, qr_smem, _WG_H,
                         q_layout)
        fence_async_shared()
        _block_barrier()
        qk_mul = gl.convert_layout(sm_scale * LOG2E * kv_scale / q_scale, gl.SliceLayout(0, s16_layout))

        m_i = gl.full([_WG_H], float("-inf"), gl.float32, layout=gl.SliceLayout(0, s16_layout))
        l_acc = gl.zeros([BLOCK_N, _WG_H], gl.float32, layout=s16_layout)
        o0 = gl.zeros([128, _WG_H], gl.float32, layout=o_layout)
        o1 = gl.zeros([128, _WG_H], gl.float32, layout=o_layout)
        o2 = gl.zeros([128, _WG_H], gl.float32, layout=o_layout)
        o3 = warpgroup_mma_init(gl.zeros([128, _WG_H], gl.float32, layout=o_layout))
        for i in range(i_first, i_stop):
            stage = it % NUM_BUF
            kn = kn_bufs.index(stage)
            kr = kr_bufs.index(stage)
            if WG == 0:
                if i + NUM_BUF - 1 < i_stop:
                    _hs_issue(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, full, empty, pt_base, i + NUM_BUF - 1,
                              it + NUM_BUF - 1, PAGE_SIZE, BLOCK_N, NUM_BUF)
            n_valid = _tile_landed(kn, full.index(stage), (it // NUM_BUF) & 1, seq_len - i * BLOCK_N, 0, BLOCK_N,
                                   _D_V, 4)
            if CHAIN:
                g0 = _ds_group(kn, qn_smem, 0, s_layout, BLOCK_N, _WG_H)
                g1 = _ds_group(kn, qn_smem, 1, s_layout, BLOCK_N, _WG_H)
            else:
                s2 = _scores_v2(kn, kr, qn_smem, qr_smem, s_layout, BLOCK_N, _WG_H, 0)
            if PREFETCH:
                v0 = _v_chunk(kn, 0, ld_layout, v_layout)
                v1 = _v_chunk(kn, 1, ld_layout, v_layout)
            if CHAIN:
                # (retires P.V(i - 1)'s last chunk, the reader of the other P buffer, with groups 0 and 1)
                s2, o3 = _group_scores(g0, g1, o3, kn, kr, qn_smem, qr_smem, None, None, None, None, s_layout,
                                       s_layout, s16_layout, BLOCK_N, _WG_H, 0, 0)
            else:
                s2, o3 = warpgroup_mma_wait(num_outstanding=0, deps=(s2, o3))
            p, alpha_o, m_i, l_acc = _softmax_v2(s2, qk_mul, n_valid, m_i, l_acc, red_all.index(2 * WG + it % 2),
                                                 offs_tok, s16_layout, o_layout, BLOCK_N, _WG_H, 1, 1 - CHAIN)
            pc = p_all.index(2 * WG + it % 2)
            pc.store(p.to(gl.float16))
            fence_async_shared()
            _block_barrier()
            if not PREFETCH:
                v0 = _v_chunk(kn, 0, ld_layout, v_layout)
            a0 = warpgroup_mma(v0, pc, o0 * alpha_o, is_async=True)
            if not PREFETCH:
                v1 = _v_chunk(kn, 1, ld_layout, v_layout)
            a1 = warpgroup_mma(v1, pc, o1 * alpha_o, is_async=True)
            o0 = warpgroup_mma_wait(num_outstanding=1, deps=(a0, ))
            a2 = warpgroup_mma(_v_chunk(kn, 2, ld_layout, v_layout), pc, o2 * alpha_o, is_async=True)
            o1 = warpgroup_mma_wait(num_outstanding=1, deps=(a1, ))
            o3 = warpgroup_mma(_v_chunk(kn, 3, ld_layout, v_layout), pc, o3 * alpha_o, is_async=True)
            o2 = warpgroup_mma_wait(num_outstanding=1, deps=(a2, ))
            # this warpgroup's last readers of the tile: its score MMAs (retired) and its V^T loads (done in every
            # warp past the barrier; P.V reads registers)
            _block_barrier()
            mbarrier.arrive(empty.index(stage), count=1)
            it += 1
        o3 = warpgroup_mma_wait(num_outstanding=0, deps=(o3, ))
        l_i = gl.sum(l_acc, axis=0)
        inv = gl.convert_layout(kv_scale / l_i, gl.SliceLayout(0, o_layout))[None, :]
        _store_chunks_segment(o0, o1, o2, o3, inv, m_i, l_i, h0, offs_h_o, offs_h_s, offs_d_o, H, b, pid, pid_h,
                              i_first, i_stop, req_tiles, out_ptr, part_o_ptr, lse_ptr, part_lse_ptr, seg_ptr,
                              stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s, RETURN_LSE)
        t = seg_stop
        b += 1


@gluon.jit
def _hs_wg0(q_ptr, kv_nope_desc, kv_rope_desc, kv_scale_ptr, page_table_ptr, seq_lens_ptr, out_ptr, lse_ptr,
            part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, kv_scale, B, H, stride_q_b, stride_q_h, stride_pt_b,
            stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s, qn_all, qr_all, kn_bufs, kr_bufs,
            p_all, red_all, full, empty, PAGE_SIZE: gl.constexpr, KV_SCALE_FROM_PTR: gl.constexpr,
            RETURN_LSE: gl.constexpr, B_CHUNK: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUF: gl.constexpr,
            PREFETCH: gl.constexpr, CHAIN: gl.constexpr):
    _hs_wg(0, q_ptr, kv_nope_desc, kv_rope_desc, kv_scale_ptr, page_table_ptr, seq_lens_ptr, out_ptr, lse_ptr,
           part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, kv_scale, B, H, stride_q_b, stride_q_h, stride_pt_b,
           stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s, qn_all, qr_all, kn_bufs, kr_bufs,
           p_all, red_all, full, empty, PAGE_SIZE, KV_SCALE_FROM_PTR, RETURN_LSE, B_CHUNK, BLOCK_N, NUM_BUF,
           PREFETCH, CHAIN)


@gluon.jit
def _hs_wg1(q_ptr, kv_nope_desc, kv_rope_desc, kv_scale_ptr, page_table_ptr, seq_lens_ptr, out_ptr, lse_ptr,
            part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, kv_scale, B, H, stride_q_b, stride_q_h, stride_pt_b,
            stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s, qn_all, qr_all, kn_bufs, kr_bufs,
            p_all, red_all, full, empty, PAGE_SIZE: gl.constexpr, KV_SCALE_FROM_PTR: gl.constexpr,
            RETURN_LSE: gl.constexpr, B_CHUNK: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUF: gl.constexpr,
            PREFETCH: gl.constexpr, CHAIN: gl.constexpr):
    _hs_wg(1, q_ptr, kv_nope_desc, kv_rope_desc, kv_scale_ptr, page_table_ptr, seq_lens_ptr, out_ptr, lse_ptr,
           part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, kv_scale, B, H, stride_q_b, stride_q_h, stride_pt_b,
           stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s, qn_all, qr_all, kn_bufs, kr_bufs,
           p_all, red_all, full, empty, PAGE_SIZE, KV_SCALE_FROM_PTR, RETURN_LSE, B_CHUNK, BLOCK_N, NUM_BUF,
           PREFETCH, CHAIN)


@gluon.jit(do_not_specialize=["B"])
def _mla_decode_hopper_hs_fp8_kernel(
    q_ptr, kv_nope_desc, kv_rope_desc, kv_ptr, kv_scale_ptr,
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
    HS: gl.constexpr,
    NUM_BUF: gl.constexpr,
    num_warps: gl.constexpr,
    PREFETCH: gl.constexpr = 0,
    CHAIN: gl.constexpr = 1,
    WG1_REGS: gl.constexpr = 256,
):
    """Grid ``(H // 64, P)``; the second fp8 tokens-on-M kernel's arguments (``kv_nope_desc`` / ``kv_rope_desc``:
    the cache as [rows, 576] fp8 with [BLOCK_N, 512] / [BLOCK_N, 128] boxes; ``kv_ptr`` unused: TMA only, page
    sizes that are multiples of 64). ``num_warps = 4`` (warpgroup 0, the default partition) plus a 4-warp worker
    partition (warpgroup 1, ``WG1_REGS`` registers a thread). ``NUM_BUF`` KV buffers of 40 KB (at most 3 fit);
    ``PREFETCH``: V^T chunks 0 and 1 loaded while the score MMAs run; ``CHAIN``: the scores' fp32 fold per 128
    dims (module docstring)."""
    gl.static_assert(HS == 1)
    gl.static_assert(BLOCK_H == 2 * _WG_H)
    gl.static_assert(BLOCK_N == 64)
    gl.static_assert(num_warps == 4)
    gl.static_assert(NUM_BUF >= 2)
    gl.static_assert(NUM_BUF <= 3)
    gl.static_assert(kv_nope_desc.block_type.shape[1] == _D_V)
    gl.static_assert(kv_rope_desc.block_type.shape[1] == 128)
    qn_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([2 * _WG_H, _D_V], gl.float8e4nv)
    qr_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([2 * _WG_H, 128], gl.float8e4nv)
    kn_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, _D_V], gl.float8e4nv)
    kr_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, 128], gl.float8e4nv)
    p_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, _WG_H], gl.float16)
    # per warpgroup: its query hi/lo pair (latent and rope tiles); P^T and the per-warp maxima, double-buffered
    # (index 2 WG + tile parity: P.V(i - 1)'s last chunk may still read one while tile i writes the other)
    qn_all = gl.allocate_shared_memory(gl.float8e4nv, [2, 2 * _WG_H, _D_V], qn_layout)
    qr_all = gl.allocate_shared_memory(gl.float8e4nv, [2, 2 * _WG_H, 128], qr_layout)
    kn_bufs = gl.allocate_shared_memory(gl.float8e4nv, [NUM_BUF, BLOCK_N, _D_V], kn_layout)
    kr_bufs = gl.allocate_shared_memory(gl.float8e4nv, [NUM_BUF, BLOCK_N, 128], kr_layout)
    p_all = gl.allocate_shared_memory(gl.float16, [4, BLOCK_N, _WG_H], p_layout)
    red_all = gl.allocate_shared_memory(gl.float32, [4, 4, _WG_H], gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0]))
    full = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    for k in gl.static_range(NUM_BUF):
        mbarrier.init(full.index(k), count=1)
        mbarrier.init(empty.index(k), count=2)
    # (the argument tuples written out: a tuple bound to a name first loses its constexprs' types, triton 3.6)
    gl.warp_specialize([
        (_hs_wg0, (q_ptr, kv_nope_desc, kv_rope_desc, kv_scale_ptr, page_table_ptr, seq_lens_ptr, out_ptr, lse_ptr,
                   part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, kv_scale, B, H, stride_q_b, stride_q_h, stride_pt_b,
                   stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s, qn_all, qr_all, kn_bufs,
                   kr_bufs, p_all, red_all, full, empty, PAGE_SIZE, KV_SCALE_FROM_PTR, RETURN_LSE, B_CHUNK, BLOCK_N,
                   NUM_BUF, PREFETCH, CHAIN)),
        (_hs_wg1, (q_ptr, kv_nope_desc, kv_rope_desc, kv_scale_ptr, page_table_ptr, seq_lens_ptr, out_ptr, lse_ptr,
                   part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, kv_scale, B, H, stride_q_b, stride_q_h, stride_pt_b,
                   stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s, qn_all, qr_all, kn_bufs,
                   kr_bufs, p_all, red_all, full, empty, PAGE_SIZE, KV_SCALE_FROM_PTR, RETURN_LSE, B_CHUNK, BLOCK_N,
                   NUM_BUF, PREFETCH, CHAIN)),
    ], [4], [WG1_REGS])
