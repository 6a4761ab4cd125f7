"""Hopper (sm_90a) MLA decode, fp8 (per-tensor) cache, H < 64: two consumer warpgroups and a producer warp on one
pool of KV buffers (``WG2=1`` of ``kernel_hopper_tok._mla_decode_hopper_tok_fp8_v2_kernel``, which hands its launch to
:func:`run`). Only ``@gluon.jit`` functions live here; shape letters and the work split are kernel_hopper.py's, the
tile's math (the [hi | lo] score chain, the relabelled V^T chunks, the softmax) kernel_hopper_tok.py's.

Why (session 58's stamped runs of the one-warpgroup kernel, H = 16, batch 32, on an H100; docs/mla_decode.md "Issue 14,
session 58"): with three buffers at one program an SM a tile's work is 1.19 us and its program waits ~0.1 us for it,
so the one warpgroup's chain is the limit; with two buffers at two programs an SM the chains keep up but each program
waits 1.5-3 us a tile in the middle of the run while the memory serves 52-65 tiles a us, short of the ~85 it serves
the stream kernel (the same split and copies, no math) with the same four buffers an SM always in flight. Two
programs an SM cannot hold more (two 40 KB buffers, the query and P each: 107,280 B a program). Here one program an SM
has two warpgroups computing and up to five 40 KB buffers, three or more of them in flight while a pair is computed.

* **The producer** (a 1-warp partition): walks the program's segments as the consumers do and, for each tile in
  turn, waits until both warpgroups have released its buffer (``free``, two arrivals) and issues its copies (the
  latent box and the zero-padded rope box, ``kernel_hopper_tok_tile._issue_tile2_at``) on ``full``. The first segment's
  first three page ids are the plan's (when given); the others are loaded a tile before their copy's wait.
* **Tile ownership**: a segment's tiles alternate between the warpgroups (tile ``i_first + k`` is WG ``k % 2``'s).
  The owner computes S = K [hi | lo]^T (one chain of 20 fp8 MMAs), its own online softmax (its own running max and
  per-slot sums), and hands P^T ([64 tokens, 16 heads] fp16) and the tile's rescale factor to the other through
  shared memory behind an mbarrier (``p_bars``).
* **Each warpgroup owns half of the output's 512 dims** (V^T chunks 2 WG and 2 WG + 1) and multiplies the P of every
  tile by its half of V: the P of its own tiles into one pair of accumulators (``oo``, relative to its own running
  max), the other's into another (``ox``, relative to the other's, whose factor came with P). So no running max
  crosses the warpgroups tile by tile, and each tile's P.V work (the V^T loads and their widening, most of a tile's
  chain) is split between them. The warpgroups take each pair of tiles own first, so both score chains run at once.
* **A segment's end**: the two (max, sum) pairs cross (``x_bars``, by the segment's parity), each warpgroup scales its two accumulators to the
  common max and stores its 256 dims; WG0 the log-sum-exp and the reduction's slots. No O crosses shared memory.
* **The query**: WG0 loads it and writes the [hi | lo] tiles and the per-head score multiplier, then arrives on
  ``q_bar``; WG1 waits there. WG0 rewrites them for the next segment only past the end's exchange (WG1's score MMAs
  retired).

Each warpgroup loads its half of V^T ahead of its wait: for its own tile while the score MMAs run, for the other's
as soon as the tile has landed, before the other's P. Rows past ``seq_len`` (a request's last tile; the cache may
hold NaN there) stay in shared memory as they landed: their scores are masked, their V^T rows set to zero in
registers (``kernel_hopper_tok_tile._v_chunk``'s ``n_valid``). The owner rewrites its P tile (one a warpgroup) only once
the other has arrived on ``pc_bars`` (its P.V of the previous one retired).

Not here: the row gather (page size 1), fp8_ds_mla rows, the schedule knobs of the one-warpgroup kernel (``LOOK``,
``CHAIN``, ``PREFETCH``, ``PT_EARLY``, ``COPY_FIRST``: the interface refuses them with ``WG2``), the streamed
reduction's counts (more than two buffers: ``kernel_hopper.STREAM_MAX_BUF``).
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from .kernel_hopper import (FP8_SEG_COST, STAMP_CLK_IN, STAMP_CLK_READY, STAMP_CLK_SPLIT, STAMP_GT_IN, _block_barrier,
                            _launch_dependents, _load_q_raw, _plan_row, _program_ids, _segment_or_planned,
                            _split_start, _stamp, _stamp_out, _stamp_tile, _store_chunk_pair, _store_lse_and_segment,
                            _wait_primary)
from .kernel_hopper_tok_tile import (_issue_tile2_at, _q_cat, _scores_v2, _softmax_v2, _v_chunk, v_load_layout,
                                     wgmma_layout)

_D_V = gl.constexpr(512)
# the producer warp's registers (a segment's scalars and a page id; with 40 the consumers get 232 each and the
# planned build spills 8 bytes, compiled for sm_90a)
PRODUCER_REGS = gl.constexpr(40)


@gluon.jit
def _program_start(plan_ptr, seq_lens_ptr, B, B_CHUNK: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr,
                   PDL: gl.constexpr, num_warps: gl.constexpr):
    """A partition's program-wide values: the program ids, its first head, its tile range (the plan's row or
    ``_split_start``) and the plan's first segment (its request's length and first three page ids; zeros without a
    plan); with ``PDL`` 2 the wait for the kernel ahead right after the plan's row (1: before it)."""
    pid_h, pid, num_progs, h0 = _program_ids(BLOCK_H)
    if PDL == 1:
        _wait_primary()
    if plan_ptr is not None:
        _launch_dependents()
        t, t_stop, b, req_end, p_seq, p_pg0, p_pg1, p_pg2 = _plan_row(plan_ptr, pid)
    else:
        t, t_stop, b, req_end = _split_start(seq_lens_ptr, B, pid, num_progs, BLOCK_N, B_CHUNK, num_warps,
                                             FP8_SEG_COST)
        p_seq = 0
        p_pg0 = 0
        p_pg1 = 0
        p_pg2 = 0
    if PDL == 2:
        _wait_primary()
    return pid_h, pid, h0, t, t_stop, b, req_end, p_seq, p_pg0, p_pg1, p_pg2


@gluon.jit
def _next_segment(plan_ptr, seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, p_seq, it,
                  BLOCK_N: gl.constexpr):
    """The segment a partition takes next (``kernel_hopper._segment``'s values; ``it``: the program's tiles so far):
    from the plan's row for the program's first one (``it`` 0) when there is a plan (``kernel_hopper._segment_or_planned``, its page ids unused here: each
    of WG2's tiles takes its page id in the producer, :func:`_page_of`)."""
    b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base, _, _ = _segment_or_planned(
        seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, it, p_seq, 0, 0, 1,
        BLOCK_N, plan_ptr)
    return b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base


@gluon.jit
def _page_of(pt_base, i, k, first, plan_ptr, p_pg0, p_pg1, p_pg2, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr):
    """Tile i's page id (the segment's k-th tile): the plan's for the program's first segment's first three tiles,
    else the page table's."""
    if plan_ptr is not None:
        if first & (k < 3):
            page = gl.where(k == 0, p_pg0, gl.where(k == 1, p_pg1, p_pg2))
        else:
            page = gl.load(pt_base + (i * BLOCK_N) // PAGE_SIZE)
    else:
        page = gl.load(pt_base + (i * BLOCK_N) // PAGE_SIZE)
    return page


@gluon.jit
def _producer(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, full, free, page_table_ptr, seq_lens_ptr, stride_pt_b, B,
              plan_ptr, PAGE_SIZE: gl.constexpr, B_CHUNK: gl.constexpr, BLOCK_N: gl.constexpr,
              BLOCK_H: gl.constexpr, NUM_BUF: gl.constexpr, PDL: gl.constexpr):
    """The 1-warp partition that issues every tile's copies (module docstring)."""
    pid_h, pid, h0, t, t_stop, b, req_end, p_seq, p_pg0, p_pg1, p_pg2 = _program_start(
        plan_ptr, seq_lens_ptr, B, B_CHUNK, BLOCK_N, BLOCK_H, PDL, 1)
    it = 0
    while t < t_stop:
        b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _next_segment(
            plan_ptr, seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, p_seq, it, BLOCK_N)
        first = it == 0
        for i in range(i_first, i_stop):
            page = _page_of(pt_base, i, i - i_first, first, plan_ptr, p_pg0, p_pg1, p_pg2, PAGE_SIZE, BLOCK_N)
            stage = it % NUM_BUF
            if it >= NUM_BUF:
                # both warpgroups are done with the tile NUM_BUF before this one
                mbarrier.wait(free.index(stage), ((it // NUM_BUF) + 1) & 1)
            _issue_tile2_at(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, full, page, i, stage, PAGE_SIZE, _D_V,
                            BLOCK_N)
            it += 1
        t = seg_stop
        b += 1


@gluon.jit
def _own_tile(kn, kr, full_bar, phase, free_bar, n_valid, qn_smem, qr_smem, qk_mul, m_i, l_acc, oo0, oo1, red,
              p_smem, a_smem, p_bar, pc_bar, own_cnt, offs_tok, STAMPS, srow, pair, WG: gl.constexpr,
              s_layout: gl.constexpr, s16_layout: gl.constexpr, o_layout: gl.constexpr, v_layout: gl.constexpr,
              ld_layout: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr, FAST_MAX: gl.constexpr,
              RK64: gl.constexpr):
    """One of the warpgroup's own tiles: the score MMAs issued, this warpgroup's half of V^T loaded while they run,
    the softmax, P and its factor handed to the other warpgroup, the P.V; the buffer released. Returns ``(m_i,
    l_acc, oo0, oo1)``."""
    mbarrier.wait(full_bar, phase)
    s2 = _scores_v2(kn, kr, qn_smem, qr_smem, s_layout, BLOCK_N, BLOCK_H, RK64)
    v0 = _v_chunk(kn, 2 * WG, ld_layout, v_layout, n_valid)
    v1 = _v_chunk(kn, 2 * WG + 1, ld_layout, v_layout, n_valid)
    s2 = warpgroup_mma_wait(num_outstanding=0, deps=(s2, ))
    _stamp_tile(STAMPS, srow, pair, 1, 4)
    # (rows past the request's end: their scores masked here, their V^T rows zeroed in registers above)
    p, alpha_o, m_new, l_acc = _softmax_v2(s2, qk_mul, n_valid, m_i, l_acc, red, offs_tok, s16_layout, o_layout,
                                           BLOCK_N, BLOCK_H, FAST_MAX)
    if own_cnt > 0:
        # the other warpgroup's P.V of this warpgroup's previous P has retired
        mbarrier.wait(pc_bar, (own_cnt - 1) & 1)
    p_smem.store(p.to(gl.float16))
    a_smem.store(gl.exp2(m_i - m_new))
    fence_async_shared()
    _block_barrier()
    mbarrier.arrive(p_bar, count=1)
    _stamp_tile(STAMPS, srow, pair, 2, 4)
    a0 = warpgroup_mma(v0, p_smem, oo0 * alpha_o, is_async=True)
    a1 = warpgroup_mma(v1, p_smem, oo1 * alpha_o, is_async=True)
    oo0, oo1 = warpgroup_mma_wait(num_outstanding=0, deps=(a0, a1))
    # every warp's loads of the tile done and its score MMAs retired: the buffer is this warpgroup's no more
    mbarrier.arrive(free_bar, count=1)
    return m_new, l_acc, oo0, oo1


@gluon.jit
def _other_tile(kn, full_bar, phase, free_bar, n_valid, ox0, ox1, p_smem, a_smem, p_bar, pc_bar, oth_cnt, STAMPS,
                srow, pair, WG: gl.constexpr, o_layout: gl.constexpr, v_layout: gl.constexpr,
                ld_layout: gl.constexpr):
    """One of the other warpgroup's tiles: this warpgroup's half of V^T loaded as soon as the tile has landed, then
    the other's P and factor taken and the half multiplied in; the P tile and the buffer released. Returns
    ``(ox0, ox1)``."""
    mbarrier.wait(full_bar, phase)
    v0 = _v_chunk(kn, 2 * WG, ld_layout, v_layout, n_valid)
    v1 = _v_chunk(kn, 2 * WG + 1, ld_layout, v_layout, n_valid)
    mbarrier.wait(p_bar, oth_cnt & 1)
    _stamp_tile(STAMPS, srow, pair, 3, 4)
    alpha = a_smem.load(gl.SliceLayout(0, o_layout))[None, :]
    a0 = warpgroup_mma(v0, p_smem, ox0 * alpha, is_async=True)
    a1 = warpgroup_mma(v1, p_smem, ox1 * alpha, is_async=True)
    ox0, ox1 = warpgroup_mma_wait(num_outstanding=0, deps=(a0, a1))
    _block_barrier()
    mbarrier.arrive(pc_bar, count=1)
    mbarrier.arrive(free_bar, count=1)
    return ox0, ox1


@gluon.jit
def _consumer(WG: gl.constexpr, q_ptr, page_table_ptr, seq_lens_ptr, out_ptr, lse_ptr, part_o_ptr, part_lse_ptr,
              seg_ptr, sm_scale, score_scale, kv_scale, B, H, stride_q_b, stride_q_h, stride_pt_b, stride_out_b,
              stride_out_h, stride_po_s, stride_po_h, stride_pl_s, qn_smem, qr_smem, kn_bufs, kr_bufs, p_bufs, a_smem,
              red_bufs, qk_smem, ml_smem, full, free, p_bars, pc_bars, x_bars, q_bar, plan_ptr,
              s_layout: gl.constexpr, s16_layout: gl.constexpr, o_layout: gl.constexpr, v_layout: gl.constexpr,
              ld_layout: gl.constexpr, q_layout: gl.constexpr, RETURN_LSE: gl.constexpr, B_CHUNK: gl.constexpr,
              BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr, NUM_BUF: gl.constexpr, FAST_MAX: gl.constexpr,
              RK64: gl.constexpr, PDL: gl.constexpr, STAMPS=None):
    """Warpgroup WG (0: the default partition, 1: a worker) of the two-warpgroup kernel (module docstring).
    ``STAMPS`` (benchmarks/probes/timeline.py): a row a warpgroup (program p's: 2 p + WG), its pairs' marks as the
    ping-pong kernels' (the pair's top, its own tile's scores retired, its P handed off, the other's P received)."""
    LOG2E: gl.constexpr = 1.4426950408889634
    rows_h: gl.constexpr = gl.SliceLayout(0, s16_layout)
    srow = (gl.program_id(0) * gl.num_programs(1) + gl.program_id(1)) * 2 + WG
    _stamp(STAMPS, srow, STAMP_GT_IN, 1)
    _stamp(STAMPS, srow, STAMP_CLK_IN)
    pid_h, pid, h0, t, t_stop, b, req_end, p_seq, p_pg0, p_pg1, p_pg2 = _program_start(
        plan_ptr, seq_lens_ptr, B, B_CHUNK, BLOCK_N, BLOCK_H, PDL, 4)
    _stamp(STAMPS, srow, STAMP_CLK_SPLIT)
    pair = 0        # this warpgroup's pairs so far (the stamps' index)
    offs_tok = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s16_layout))
    offs_h_s = gl.arange(0, BLOCK_H, layout=rows_h)
    heads_q = h0 + gl.arange(0, BLOCK_H, layout=gl.SliceLayout(1, q_layout))
    hmask_q = heads_q < H
    it = 0          # the program's tiles so far (the producer's count)
    seg = 0
    own_cnt = 0     # this warpgroup's own tiles so far, and the other's
    oth_cnt = 0
    while t < t_stop:
        b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _next_segment(
            plan_ptr, seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, p_seq, it, BLOCK_N)
        if WG == 0:
            qn, qr = _load_q_raw(q_ptr + b.to(gl.int64) * stride_q_b, heads_q, hmask_q, stride_q_h, q_layout)
            q_scale = _q_cat(qn, qr, qn_smem, qr_smem, BLOCK_H)
            qk_smem.store(gl.convert_layout(sm_scale * LOG2E * score_scale / q_scale, rows_h))
            fence_async_shared()
            _block_barrier()
            mbarrier.arrive(q_bar, count=1)
        else:
            mbarrier.wait(q_bar, seg & 1)
        qk_mul = qk_smem.load(rows_h)
        if it == 0:
            _stamp(STAMPS, srow, STAMP_CLK_READY)
        m_i = gl.full([BLOCK_H], float("-inf"), gl.float32, layout=rows_h)
        l_acc = gl.zeros([BLOCK_N, BLOCK_H], gl.float32, layout=s16_layout)
        oo0 = gl.zeros([128, BLOCK_H], gl.float32, layout=o_layout)
        oo1 = gl.zeros([128, BLOCK_H], gl.float32, layout=o_layout)
        ox0 = gl.zeros([128, BLOCK_H], gl.float32, layout=o_layout)
        ox1 = gl.zeros([128, BLOCK_H], gl.float32, layout=o_layout)
        n = i_stop - i_first
        for k in range(0, n, 2):
            # the pair's own tile first (both warpgroups' score chains at once), then the other's
            _stamp_tile(STAMPS, srow, pair, 0, 4)
            if k + WG < n:
                i = i_first + k + WG
                j = it + k + WG
                stage = j % NUM_BUF
                m_i, l_acc, oo0, oo1 = _own_tile(
                    kn_bufs.index(stage), kr_bufs.index(stage), full.index(stage), (j // NUM_BUF) & 1,
                    free.index(stage), seq_len - i * BLOCK_N, qn_smem, qr_smem, qk_mul, m_i, l_acc, oo0, oo1,
                    red_bufs.index(2 * WG + own_cnt % 2), p_bufs.index(WG), a_smem.index(WG), p_bars.index(WG),
                    pc_bars.index(WG), own_cnt, offs_tok, STAMPS, srow, pair, WG, s_layout, s16_layout, o_layout,
                    v_layout, ld_layout, BLOCK_N, BLOCK_H, FAST_MAX, RK64)
                own_cnt += 1
            else:       # (no own tile in the segment's last pair: its marks at the pair's top)
                _stamp_tile(STAMPS, srow, pair, 1, 4)
                _stamp_tile(STAMPS, srow, pair, 2, 4)
            if k + 1 - WG < n:
                j = it + k + 1 - WG
                stage = j % NUM_BUF
                ox0, ox1 = _other_tile(kn_bufs.index(stage), full.index(stage), (j // NUM_BUF) & 1, free.index(stage),
                                       seq_len - (i_first + k + 1 - WG) * BLOCK_N, ox0, ox1, p_bufs.index(1 - WG),
                                       a_smem.index(1 - WG), p_bars.index(1 - WG), pc_bars.index(1 - WG), oth_cnt,
                                       STAMPS, srow, pair, WG, o_layout, v_layout, ld_layout)
                oth_cnt += 1
            pair += 1
        # the segment's end: the two (max, sum) pairs cross; both halves scaled to the common max
        l_own = gl.sum(l_acc, axis=0)
        row = 4 * (seg % 2)
        ml_smem.index(row + 2 * WG).store(m_i)
        ml_smem.index(row + 2 * WG + 1).store(l_own)
        _block_barrier()
        # (one mbarrier a warpgroup and segment parity: WG0 may finish a one-tile segment, which needs nothing of
        # WG1, and arrive again before WG1 has waited on its previous arrival)
        mbarrier.arrive(x_bars.index(2 * WG + seg % 2), count=1)
        mbarrier.wait(x_bars.index(2 * (1 - WG) + seg % 2), (seg // 2) & 1)
        m_x = ml_smem.index(row + 2 - 2 * WG).load(rows_h)
        l_x = ml_smem.index(row + 3 - 2 * WG).load(rows_h)
        m = gl.maximum(m_i, m_x)
        f_own = gl.exp2(m_i - m)
        f_x = gl.exp2(m_x - m)
        l_tot = l_own * f_own + l_x * f_x
        inv = kv_scale / l_tot
        c_own = gl.convert_layout(f_own * inv, gl.SliceLayout(0, o_layout))[None, :]
        c_x = gl.convert_layout(f_x * inv, gl.SliceLayout(0, o_layout))[None, :]
        whole = (i_first == 0) & (i_stop == req_tiles)
        _store_chunk_pair(oo0 * c_own + ox0 * c_x, oo1 * c_own + ox1 * c_x, 256 * WG, whole, b, pid, h0, H, out_ptr,
                          part_o_ptr, stride_out_b, stride_out_h, stride_po_s, stride_po_h, True)
        if WG == 0:
            heads_s = h0 + offs_h_s
            _store_lse_and_segment(m + gl.log2(l_tot), whole, b, H, pid, pid_h, i_first, i_stop, req_tiles, heads_s,
                                   lse_ptr, part_lse_ptr, seg_ptr, stride_pl_s, heads_s < H, RETURN_LSE)
        it += n
        seg += 1
        t = seg_stop
        b += 1
    # (the row's tile count as twice its pairs: the probe reads (count + 1) // 2 pairs of marks, as the ping-pong's)
    _stamp_out(STAMPS, srow, 2 * pair)


@gluon.jit
def run(q_ptr, kv_nope_desc, kv_rope_desc, page_table_ptr, seq_lens_ptr, out_ptr, lse_ptr, part_o_ptr, part_lse_ptr,
        seg_ptr, sm_scale, score_scale, kv_scale, B, H, stride_q_b, stride_q_h, stride_pt_b, stride_out_b, stride_out_h,
        stride_po_s, stride_po_h, stride_pl_s, PAGE_SIZE: gl.constexpr, RETURN_LSE: gl.constexpr,
        B_CHUNK: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr, NUM_BUF: gl.constexpr,
        FAST_MAX: gl.constexpr, RK64: gl.constexpr, WG1_REGS: gl.constexpr, plan_ptr, PDL: gl.constexpr,
        num_warps: gl.constexpr, STAMPS=None):
    """The two-warpgroup kernel's shared memory, mbarriers and partitions (``score_scale``: the scores' multiplier
    besides ``sm_scale`` and the query's power of two; ``kv_scale``: the output's)."""
    gl.static_assert(num_warps == 4)
    # (each warpgroup's layouts: kernel_hopper_tok's, one warpgroup's)
    s_layout: gl.constexpr = wgmma_layout(2 * BLOCK_H, 32)
    s16_layout: gl.constexpr = wgmma_layout(BLOCK_H, 32)
    o_layout: gl.constexpr = wgmma_layout(BLOCK_H, 16)
    v_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    ld_layout: gl.constexpr = v_load_layout(BLOCK_N)
    q_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    vec: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[0])
    # (a layout of one rank less than the buffer's: each index() of it has the layout's rank)
    vec2: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0])
    qn_smem = gl.allocate_shared_memory(gl.float8e4nv, [2 * BLOCK_H, _D_V],
                                        gl.NVMMASharedLayout.get_default_for([2 * BLOCK_H, _D_V], gl.float8e4nv))
    qr_smem = gl.allocate_shared_memory(gl.float8e4nv, [2 * BLOCK_H, 128],
                                        gl.NVMMASharedLayout.get_default_for([2 * BLOCK_H, 128], gl.float8e4nv))
    kn_bufs = gl.allocate_shared_memory(gl.float8e4nv, [NUM_BUF, BLOCK_N, _D_V],
                                        gl.NVMMASharedLayout.get_default_for([BLOCK_N, _D_V], gl.float8e4nv))
    kr_bufs = gl.allocate_shared_memory(gl.float8e4nv, [NUM_BUF, BLOCK_N, 128],
                                        gl.NVMMASharedLayout.get_default_for([BLOCK_N, 128], gl.float8e4nv))
    # one P^T tile and one rescale factor a warpgroup (pc_bars order their reuse)
    p_bufs = gl.allocate_shared_memory(gl.float16, [2, BLOCK_N, BLOCK_H],
                                       gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_H], gl.float16))
    a_smem = gl.allocate_shared_memory(gl.float32, [2, BLOCK_H], vec)
    # FAST_MAX's per-warp maxima: two a warpgroup (its tile t + 1 may write while a warp still reads tile t's)
    red_bufs = gl.allocate_shared_memory(gl.float32, [4, 4, BLOCK_H], vec2)
    qk_smem = gl.allocate_shared_memory(gl.float32, [BLOCK_H], vec)
    # a segment's (max, sum) of each warpgroup, by the segment's parity: rows 4 parity + (m0, l0, m1, l1)
    ml_smem = gl.allocate_shared_memory(gl.float32, [8, BLOCK_H], vec)
    full = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    free = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    p_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    pc_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    x_bars = gl.allocate_shared_memory(gl.int64, [4, 1], mbarrier.MBarrierLayout())
    q_bars = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    for k in gl.static_range(NUM_BUF):
        mbarrier.init(full.index(k), count=1)
        mbarrier.init(free.index(k), count=2)
    for k in gl.static_range(2):
        mbarrier.init(p_bars.index(k), count=1)
        mbarrier.init(pc_bars.index(k), count=1)
    for k in gl.static_range(4):
        mbarrier.init(x_bars.index(k), count=1)
    mbarrier.init(q_bars.index(0), count=1)
    # the query's rope padding, written once (the segments rewrite columns 0..63)
    qr_smem.slice(64, 64, dim=1).store(gl.zeros([2 * BLOCK_H, 64], gl.float8e4nv, layout=q_layout))
    fence_async_shared()
    _block_barrier()
    # (the argument tuples written out: a tuple bound to a name first loses its constexprs' types, triton 3.6)
    gl.warp_specialize([
        (_consumer, (0, q_ptr, page_table_ptr, seq_lens_ptr, out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr,
                     sm_scale, score_scale, kv_scale, B, H, stride_q_b, stride_q_h, stride_pt_b, stride_out_b,
                     stride_out_h, stride_po_s, stride_po_h, stride_pl_s, qn_smem, qr_smem, kn_bufs, kr_bufs, p_bufs,
                     a_smem, red_bufs, qk_smem, ml_smem, full, free, p_bars, pc_bars, x_bars, q_bars.index(0),
                     plan_ptr, s_layout, s16_layout, o_layout, v_layout, ld_layout, q_layout, RETURN_LSE, B_CHUNK,
                     BLOCK_N, BLOCK_H, NUM_BUF, FAST_MAX, RK64, PDL, STAMPS)),
        (_consumer, (1, q_ptr, page_table_ptr, seq_lens_ptr, out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr,
                     sm_scale, score_scale, kv_scale, B, H, stride_q_b, stride_q_h, stride_pt_b, stride_out_b,
                     stride_out_h, stride_po_s, stride_po_h, stride_pl_s, qn_smem, qr_smem, kn_bufs, kr_bufs, p_bufs,
                     a_smem, red_bufs, qk_smem, ml_smem, full, free, p_bars, pc_bars, x_bars, q_bars.index(0),
                     plan_ptr, s_layout, s16_layout, o_layout, v_layout, ld_layout, q_layout, RETURN_LSE, B_CHUNK,
                     BLOCK_N, BLOCK_H, NUM_BUF, FAST_MAX, RK64, PDL, STAMPS)),
        (_producer, (kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, full, free, page_table_ptr, seq_lens_ptr,
                     stride_pt_b, B, plan_ptr, PAGE_SIZE, B_CHUNK, BLOCK_N, BLOCK_H, NUM_BUF, PDL)),
    ], [4, 1], [WG1_REGS, PRODUCER_REGS])
