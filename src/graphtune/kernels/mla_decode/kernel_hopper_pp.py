"""Hopper (sm_90a) MLA decode, heads on M, two consumer warpgroups that take alternate tiles ("ping-pong").

Only ``@gluon.jit`` functions live here (interface_hopper.py launches them; a config with ``PP = 1`` selects
this kernel for a bf16 cache with H a multiple of 64, and ``_mla_decode_hopper_pp_fp8_kernel`` below for a
per-tensor fp8 one). Shape letters as in kernel.py.

Why a second heads-on-M kernel: ``kernel_hopper._mla_decode_hopper_kernel`` splits each 64-token tile's
tokens between its two warpgroups (S = Q K^T with N = 32 each), so each warpgroup reads the whole 72 KB query
tile from shared memory every tile, and the tensor cores idle while both warpgroups run the softmax of the
same tile (docs/mla_decode.md, "Where the H = 128 gap stands"). Here (the schedule public FlashMLA write-ups
describe for 64 heads and two warpgroups; the code is this project's):

* ``gl.warp_specialize`` with two 4-warp partitions: WG0 (the default partition) computes the whole score
  tile S = Q K^T [64 heads, 64 tokens] of the segment's even tiles, WG1 of the odd ones, so the query is read
  once per tile;
* each warpgroup owns half of the 512 output columns (O [64, 256] fp32: 128 registers per thread) and
  multiplies the P of *every* tile by its half of V: its own P from registers (the wgmma's A operand), the
  other warpgroup's P from a [64, 64] shared tile (``p_smem``, one buffer: the hand-offs below order its
  reuse);
* the running max is a chain through the tiles: tile r's softmax starts from the max after tile r - 1, which
  the other warpgroup computed and left in shared memory (``m_smem`` slot of its warpgroup) together with
  its P, behind an mbarrier (``p_bars``: index 0 = an even tile's P and max, 1 = an odd tile's). Each
  warpgroup rescales its O half and its own partial row sum by every max step; the two partial sums are
  added at the end of the segment (``l_smem``, ``x_bars``);
* the KV tile is loaded as three TMA parts with one mbarrier each (``c_bars``, index ``stage * 3 + part``:
  latent columns 0..255 = V's left half, 256..511 = the right half, the rope columns), and each part is
  reloaded by the warpgroup that reads it last: the left half by WG0 once its P.V of the tile retired, the
  right half by WG1, the rope columns by the tile's owner once its score MMAs retired. So no warpgroup waits
  for the other to free a buffer, and a tile's score MMAs (nine wgmma groups of 64 columns) start on the
  half that has landed. (One mbarrier per 64-column chunk instead compiled to 209 128-thread barriers in the
  kernel: Gluon puts one around every mbarrier wait, expect and TMA issue; 121 with three parts.) Two
  buffers (query 72 KB + 2 x 72 KB + P 8 KB: 231,260 B, 232,284 with the 1 KB the cubin adds, of the 232,448
  an sm_90 block may have): tile r + 2 goes into tile r's buffer.

Tensor-core overlap: while one warpgroup runs its softmax, the other's P.V (of the previous tile) and score
MMAs (of its next tile) are in flight. Compiled for sm_90, ptxas retires WG1's P(r) V_R(r) before WG1's
softmax even where the source waits for it after (WG1_FIRST = 0), hence WG1_FIRST = 1 (softmax and hand-off
first, both P.V of the pair after). On the H200 (session 10) 13% faster than the other heads-on-M kernel at
batch 32 / 64, H = 128 (docs/mla_decode.md, "Issue 14, session 10").

Rows past ``seq_len`` in a request's last tile (TMA reads whole tiles; they may hold NaN) are masked to -inf
in the scores and zeroed in shared memory before P.V reads them (0 * NaN is NaN): each warpgroup zeroes its
own half of V, the owner before its score MMAs, the other after the hand-off (the owner's score MMAs retired).

A whole request's output (a segment that is all of it) is stored in whole 32-byte sectors (``OUT32``, 1 unless
pinned 0: ``kernel_hopper._store_whole_sectors``); partial outputs are fp32, whole sectors as they are.

Work split as the other Hopper kernels (``kernel_hopper._split_start`` / ``_segment``: the batch's tiles end to
end, equal ranges per program, decided on the device from ``seq_lens``; partials for the reduction kernel).
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

from . import kernel_hopper
from .kernel_hopper import (BF16_SEG_COST, FP8_SEG_COST, STAMP_CLK_IN, STAMP_CLK_READY, STAMP_CLK_SPLIT, STAMP_GT_IN,
                            _launch_dependents, _load_rope, _page_row, _plan_row, _segment_or_planned,
                            _segment_written, _split_start, _wait_primary,
                            _scaled_partial, _stamp, _stamp_out, _stamp_tile, _store_lse_and_segment, _store_o,
                            _store_partial_sectors, _store_whole_sectors, _tile_row, _tma_load, _zero_rows,
                            SECTORS_HEADS_ON_M,
                            widen_layout)
from .kernel_hopper_heads import _REINTERPRET_PUBLIC, _q_chunks, _q_fp16, _q_issue

# A barrier of the calling partition's warps only (inside ``gl.warp_specialize`` Gluon lowers it to a named
# barrier of that partition: ``bar.sync id, 128``).
_wg_barrier = getattr(gl, "thread_barrier", None) or gl.barrier


_D_V = gl.constexpr(512)
# (timeline probe: a segment's end, its sums exchanged, its output stored; meaningful for programs of < 60 pairs)
STAMP_FINISH = gl.constexpr(kernel_hopper.STAMP_ROW - 4)
# (timeline probe: the first segment's prologue, up to five marks a warpgroup; meaningful for programs of < 59 pairs)
STAMP_PRO = gl.constexpr(kernel_hopper.STAMP_ROW - 12)
_HALF = gl.constexpr(256)       # output columns per warpgroup


@gluon.jit
def _pro(STAMPS, srow, seg, x: gl.constexpr):
    """Timeline probe: prologue mark ``x`` of the program's first segment (0: segment found; 1: copies issued;
    2: fp8 rope rows requested; 3: query landed; 4: fp8 query converted)."""
    if STAMPS is not None:
        if seg == 0:
            _stamp(STAMPS, srow, STAMP_PRO + x)


@gluon.jit
def _issue_half(kv_nope_desc, kv_rope_desc, kn, kr, c_bars, pt_base, j, stage, HALF: gl.constexpr,
                ROPE: gl.constexpr, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr, page=None,
                LOADED: gl.constexpr = True):
    """TMA of tile j's latent columns ``[HALF * 256, HALF * 256 + 256)`` (one warpgroup's half of V) into buffer
    ``stage`` on mbarrier ``stage * 3 + HALF``, and its rope columns on ``stage * 3 + 2`` when ``ROPE``; ``page``:
    the tile's page id when loaded already (a plan's; ``LOADED`` off: not loaded, a launch without a plan), else
    loaded here."""
    row = _page_row(pt_base, j, page, PAGE_SIZE, BLOCK_N, LOADED)
    bar = c_bars.index(stage * 3 + HALF)
    mbarrier.expect(bar, kv_nope_desc.block_type.nbytes)
    _tma_load(kv_nope_desc, [row, HALF * 256], bar, kn.slice(HALF * 256, 256, dim=1))
    if ROPE:
        bar_r = c_bars.index(stage * 3 + 2)
        mbarrier.expect(bar_r, kv_rope_desc.block_type.nbytes)
        _tma_load(kv_rope_desc, [row, 0], bar_r, kr)


@gluon.jit
def _issue_rope(kv_rope_desc, kr, c_bars, pt_base, j, stage, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr):
    row = _tile_row(pt_base, j, PAGE_SIZE, BLOCK_N)
    bar = c_bars.index(stage * 3 + 2)
    mbarrier.expect(bar, kv_rope_desc.block_type.nbytes)
    _tma_load(kv_rope_desc, [row, 0], bar, kr)


@gluon.jit
def _scores(qn_smem, qr_smem, kn, kr, c_bars, stage, phase, qz, s_layout: gl.constexpr, BLOCK_H: gl.constexpr,
            BLOCK_N: gl.constexpr):
    """S = Q K^T of one tile as nine async wgmma groups (one per 64 columns), each half of the latent columns
    and the rope columns issued once they have landed. ``qz`` is 0, but a value of the caller's loop that the
    compiler cannot prove 0: the query chunks are indexed through it, so their shared-memory addresses are computed
    at each issue. As constants, LLVM hoisted all nine out of the tile loop and ptxas, at 255 registers, spilled
    them: every score MMA's issue waited on a local load, which at 227 KB of shared memory has ~25 KB of L1 left
    and goes to L2 (compiled for sm_90: 160 bytes of stack a thread, 91 local loads, 13 in WG0's tile loop; with
    ``qz``: 16 bytes, 8, none)."""
    s = gl.zeros([BLOCK_H, BLOCK_N], gl.float32, layout=s_layout)
    q_chunks = _q_chunks(qn_smem, BLOCK_H, 64)
    for c in gl.static_range(8):
        if c % 4 == 0:
            mbarrier.wait(c_bars.index(stage * 3 + c // 4), phase)
        s = warpgroup_mma(q_chunks.index(c + qz), kn.slice(c * 64, 64, dim=1).permute((1, 0)), s,
                          use_acc=c > 0, is_async=True)
    mbarrier.wait(c_bars.index(stage * 3 + 2), phase)
    return warpgroup_mma(qr_smem, kr.permute((1, 0)), s, is_async=True)


@gluon.jit
def _widen_scores(k8, kn, kr, qn_smem, qr_smem, rope, qz, s_layout: gl.constexpr, BLOCK_H: gl.constexpr,
                  BLOCK_N: gl.constexpr):
    """fp8 ping-pong: the tile's fp8 latent columns (``k8``, [BLOCK_N, 512], TMA'd into the first 32 KB of the
    tile's fp16 buffer ``kn``) widened in place to fp16 (exact: every e4m3 value is an fp16) and its rope rows
    (``rope``, fp8 registers) into ``kr``, with the score MMAs of each part issued once it is written, so that the
    widening of the next part runs under them (nine async wgmma groups, as ``_scores``). Each 128-column fp8 block
    c (8 KB at byte 8 KB * c) becomes fp16 bytes [16 KB * c, 16 KB * c + 16 KB): the rope and blocks 3 and 2 first
    (their fp16 bytes lie past the fp8 ones); past a barrier of the warpgroup (every thread's reads of blocks 2-3
    done) block 1 (its fp16 bytes are blocks 2-3's) and block 0 loaded; past a second barrier (every thread's reads
    of 0-1 done) block 0 stored. Rows past the request's end are widened as they are: the owner zeroes them once
    the score MMAs retired (``_zero_tail``), in a request's last tile only. ``qz``: as ``_scores``."""
    layout: gl.constexpr = widen_layout(BLOCK_N, 4)     # (no shared-memory bank conflict)
    q_chunks = _q_chunks(qn_smem, BLOCK_H, 64)
    kr.store(rope.to(gl.float16))
    for c in gl.static_range(2):
        kn.slice((3 - c) * 128, 128, dim=1).store(k8.slice((3 - c) * 128, 128, dim=1).load(layout).to(gl.float16))
    fence_async_shared()
    _wg_barrier()
    s = warpgroup_mma(qr_smem, kr.permute((1, 0)), gl.zeros([BLOCK_H, BLOCK_N], gl.float32, layout=s_layout),
                      use_acc=False, is_async=True)
    for c in gl.static_range(4, 8):
        s = warpgroup_mma(q_chunks.index(c + qz), kn.slice(c * 64, 64, dim=1).permute((1, 0)), s,
                          is_async=True)
    kn.slice(128, 128, dim=1).store(k8.slice(128, 128, dim=1).load(layout).to(gl.float16))
    x0 = k8.slice(0, 128, dim=1).load(layout)          # (held as fp8: 16 registers a thread)
    fence_async_shared()
    _wg_barrier()
    for c in gl.static_range(2, 4):
        s = warpgroup_mma(q_chunks.index(c + qz), kn.slice(c * 64, 64, dim=1).permute((1, 0)), s,
                          is_async=True)
    kn.slice(0, 128, dim=1).store(x0.to(gl.float16))
    fence_async_shared()
    _wg_barrier()
    for c in gl.static_range(2):
        s = warpgroup_mma(q_chunks.index(c + qz), kn.slice(c * 64, 64, dim=1).permute((1, 0)), s,
                          is_async=True)
    return s


@gluon.jit
def _zero_tail(kn, n_valid, BLOCK_N: gl.constexpr):
    """fp8 ping-pong, the tile's owner once its score MMAs retired (no wgmma reads ``kn`` then): rows ``>= n_valid``
    of the widened [BLOCK_N, 512] tile set to zero (P.V would turn 0 * NaN into NaN), in a request's last tile only;
    the hand-off after it (proxy fence, barrier) orders them before either warpgroup's P.V."""
    if n_valid < BLOCK_N:
        _zero_rows(kn, n_valid, BLOCK_N, _D_V, 4)


@gluon.jit
def _zero_half(kn, c_bars, stage, phase, n_valid, HALF: gl.constexpr, BLOCK_N: gl.constexpr):
    """Rows ``>= n_valid`` of a warpgroup's half of V (columns ``HALF * 256 ..``) of buffer ``stage`` set to zero,
    once they have landed; visible to this warpgroup's wgmmas after it returns."""
    mbarrier.wait(c_bars.index(stage * 3 + HALF), phase)
    _zero_rows(kn.slice(HALF * 256, 256, dim=1), n_valid, BLOCK_N, 256, 4)
    fence_async_shared()
    _wg_barrier()


@gluon.jit
def _softmax_step(s, m_i, l_i, valid, qk_mul):
    """Online softmax of one log2-domain tile from the running max ``m_i``: (p, alpha, m_new, l_new)."""
    s = gl.where(valid[None, :], s * qk_mul, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, axis=1))
    alpha = gl.exp2(m_i - m_new)
    p = gl.exp2(s - m_new[:, None])
    return p, alpha, m_new, l_i * alpha + gl.sum(p, axis=1)


@gluon.jit
def _softmax_p(s, m_i, n_valid, offs_tok, qk_mul, BLOCK_N: gl.constexpr):
    """SM1's online softmax of one tile (bf16, ``qk_mul`` > 0 a scalar): the tile's rows past the request's end
    masked only in a request's last tile (``n_valid < BLOCK_N``, a branch the whole warpgroup takes alike), the max
    taken on the raw scores and the scale folded into the exponent (one FFMA a score: max(s) * qk_mul is the max of
    the scaled scores), and the row sums left to the caller, after its hand-off: ``_softmax_step``'s 64 compares and
    selects and 32 multiplies a thread off the path to the other warpgroup's P (the pair waits on both softmaxes in
    turn: 0.94 / 0.80 us of its 3.8, session 41's timeline). Returns (p, alpha, m_new)."""
    if n_valid < BLOCK_N:
        s = gl.where((offs_tok < n_valid)[None, :], s, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_mul)
    alpha = gl.exp2(m_i - m_new)
    p = gl.exp2(s * qk_mul - m_new[:, None])
    return p, alpha, m_new


@gluon.jit
def _hand_off(p, m_new, p_smem, m_slot, bar):
    """This warpgroup's P and max to the other: stores, proxy fence (P is a wgmma operand), the warpgroup's
    barrier (every thread's stores before the arrival), one arrival."""
    p_smem.store(p.to(p_smem.dtype))
    m_slot.store(m_new)
    fence_async_shared()
    _wg_barrier()
    mbarrier.arrive(bar, count=1)


@gluon.jit
def _finish_segment(WG: gl.constexpr, o, m_i, l_i, l_smem, x_bars, seg, b, pid, pid_h, h0, H, i_first, i_stop,
                    req_tiles, out_ptr, part_o_ptr, lse_ptr, part_lse_ptr, seg_ptr, stride_out_b, stride_out_h,
                    stride_po_s, stride_po_h, stride_pl_s, out_mul, RETURN_LSE: gl.constexpr,
                    s_layout: gl.constexpr, o_layout: gl.constexpr, BLOCK_H: gl.constexpr, OUT32: gl.constexpr,
                    STAMPS, srow, PART_SCALED: gl.constexpr = False, COLS_SWAP: gl.constexpr = False,
                    done_ptr=None):
    """End of a segment: the two partial row sums added (each warpgroup's O half and sum are relative to the
    same final max), the O half stored (times ``out_mul``: the fp8 cache's scale), LSE and the segment slots by
    WG0. The exchange (slots by segment parity) is also the hand-shake after which either warpgroup may reload
    the query and the buffers. ``PART_SCALED`` (a bf16 cache's fp16 partials): a partial half stored times 2^-k,
    k beside the LSE (``kernel_hopper._scaled_partial``). ``COLS_SWAP`` (kernel_hopper_pp8's VS): O's column p holds
    output dim p with its bits 0 and 3 swapped."""
    rows: gl.constexpr = gl.SliceLayout(1, s_layout)
    _stamp(STAMPS, srow, STAMP_FINISH)
    if seg % 2 == 0:
        l_smem.slice(WG * BLOCK_H, BLOCK_H).store(l_i)
    else:
        l_smem.slice((2 + WG) * BLOCK_H, BLOCK_H).store(l_i)
    _wg_barrier()
    mbarrier.arrive(x_bars.index(WG), count=1)
    mbarrier.wait(x_bars.index(1 - WG), seg & 1)
    _stamp(STAMPS, srow, STAMP_FINISH + 1)
    if seg % 2 == 0:
        l_other = l_smem.slice((1 - WG) * BLOCK_H, BLOCK_H).load(rows)
    else:
        l_other = l_smem.slice((3 - WG) * BLOCK_H, BLOCK_H).load(rows)
    l_tot = l_i + l_other
    inv = gl.convert_layout(out_mul / l_tot, gl.SliceLayout(1, o_layout))
    offs_h_o = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(1, o_layout))
    offs_d_o = WG * _HALF + gl.arange(0, _HALF, layout=gl.SliceLayout(0, o_layout))
    whole = (i_first == 0) & (i_stop == req_tiles)
    if PART_SCALED:     # (a bf16 cache's fp16 partials: this warpgroup's half-row at its own k)
        inv = _scaled_partial(o, inv, whole, b, pid, h0 + offs_h_o, H, part_lse_ptr, stride_pl_s, None, 1, WG)
    o = o * inv[:, None]
    if COLS_SWAP:
        o = _cols_unswapped(o)
    if OUT32 and (out_ptr.dtype.element_ty.primitive_bitwidth == 16) and whole:
        _store_whole_sectors(o, b, h0, WG * _HALF, out_ptr, stride_out_b, stride_out_h)
    elif OUT32 and (part_o_ptr.dtype.element_ty.primitive_bitwidth == 16) and not whole:
        _store_partial_sectors(o, b, pid, h0, WG * _HALF, part_o_ptr, stride_po_s, stride_po_h, SECTORS_HEADS_ON_M)
    elif COLS_SWAP:
        _store_o(gl.convert_layout(o, o_layout), whole, b, pid, h0 + offs_h_o, offs_d_o, out_ptr, part_o_ptr,
                 stride_out_b, stride_out_h, stride_po_s, stride_po_h, None, False)
    else:
        _store_o(o, whole, b, pid, h0 + offs_h_o, offs_d_o, out_ptr, part_o_ptr, stride_out_b, stride_out_h,
                 stride_po_s, stride_po_h, None, False)
    _stamp(STAMPS, srow, STAMP_FINISH + 2)
    if WG == 0:
        heads_s = h0 + gl.arange(0, BLOCK_H, layout=rows)
        _store_lse_and_segment(m_i + gl.log2(l_tot), whole, b, H, pid, pid_h, i_first, i_stop, req_tiles, heads_s,
                               lse_ptr, part_lse_ptr, seg_ptr, stride_pl_s, None, RETURN_LSE)
    if done_ptr is not None:
        # (the streamed reduction, reduction.STREAM: each warpgroup counts its own stores of a partial segment, its
        # O half and, WG0's, the LSE, so a segment is written once its request's count has gone up by two)
        if (i_first != 0) | (i_stop != req_tiles):
            _wg_barrier()
            _segment_written(done_ptr, b, pid_h)


@gluon.jit
def _cols_unswapped(o):
    """``o`` [rows, 256] with its column index's bits 0 and 3 swapped, by reshapes and a permute (no data moves: the
    same registers under a relabelled layout)."""
    x = gl.permute(gl.reshape(o, [o.shape[0], 16, 2, 4, 2]), (0, 1, 4, 3, 2))
    return gl.reshape(x, [o.shape[0], 256])


@gluon.jit
def _take_even(o, m_i, l_i, p0_phase, kn, p_smem, m_smem, p_bars, c_bars, stage, phase, n_valid,
               s_layout: gl.constexpr, o_layout: gl.constexpr, BLOCK_N: gl.constexpr, FP8: gl.constexpr):
    """WG1's share of WG0's tile r: wait for its P and max, rescale (O, l) to that max, and issue
    O += P(r) V_R(r) with P from ``p_smem`` (rows past seq_len of the right half zeroed first: WG0's score MMAs,
    the other reader of those rows, are retired). ``o`` must be retired (a tensor); returns it in flight."""
    mbarrier.wait(p_bars.index(0), p0_phase)
    m_e = m_smem.slice(0, 64).load(gl.SliceLayout(1, s_layout))
    alpha = gl.exp2(m_i - m_e)
    o = o * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
    if (not FP8) and (n_valid < BLOCK_N):       # (FP8: the owner zeroed those rows, _zero_tail)
        _zero_half(kn, c_bars, stage, phase, n_valid, 1, BLOCK_N)
    o = warpgroup_mma(p_smem, kn.slice(_HALF, _HALF, dim=1), o, is_async=True)
    return o, m_e, l_i * alpha, p0_phase ^ 1


@gluon.jit
def _wg_start(seq_lens_ptr, sm_scale, B, STAMPS, WG: gl.constexpr, s_layout: gl.constexpr, B_CHUNK: gl.constexpr,
              BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr, SEG_COST: gl.constexpr = 0, plan_ptr=None,
              MIN_TILES: gl.constexpr = 1, PDL: gl.constexpr = 0):
    """A warpgroup's program-wide values: the program ids, its first head, the scores' log2 scale, the token
    offsets of a tile, the program's tile range (``_split_start``, or with ``plan_ptr`` the plan's row:
    ``kernel_hopper._plan_row``) and its row of ``STAMPS`` (the timeline probe's: two a program, one per warpgroup);
    last the plan's first segment (its request's length, its first two tiles' page ids; zeros without a plan).
    ``PDL`` (the kernel launched as the programmatic dependent of the kernel before it): 1 waits for that kernel
    before the warpgroup's first global load, 2 (with ``plan_ptr``) right after the plan's row."""
    LOG2E: gl.constexpr = 1.4426950408889634
    pid_h = gl.program_id(0)
    pid = gl.program_id(1)
    srow = (pid_h * gl.num_programs(1) + pid) * 2 + WG
    _stamp(STAMPS, srow, STAMP_GT_IN, 1)
    _stamp(STAMPS, srow, STAMP_CLK_IN)
    h0 = pid_h * BLOCK_H
    qk_mul = sm_scale * LOG2E
    offs_tok = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    # the split's pass a reduction a sum here (FUSED = 0): one scan and one reduction a chunk made the fp8 ping-pong
    # kernels 1.5-3.9% slower at H = 128, batch 8 / 32 (H200, session 33 call N; the session-31 stack on an H100,
    # session 32 call A, 1.5-3.0% on ragged batches)
    if PDL == 2:
        gl.static_assert(plan_ptr is not None)
    if PDL == 1:
        _wait_primary()
    if plan_ptr is not None:
        _launch_dependents()
        t, t_stop, b, req_end, p_seq, p_pg0, p_pg1, _ = _plan_row(plan_ptr, pid)
    else:
        t, t_stop, b, req_end = _split_start(seq_lens_ptr, B, pid, gl.num_programs(1), BLOCK_N, B_CHUNK, 4, SEG_COST,
                                             0, MIN_TILES)
        p_seq = 0
        p_pg0 = 0
        p_pg1 = 0
    if PDL == 2:
        _wait_primary()
    _stamp(STAMPS, srow, STAMP_CLK_SPLIT)
    return pid_h, pid, h0, qk_mul, offs_tok, t, t_stop, b, req_end, srow, p_seq, p_pg0, p_pg1



@gluon.jit
def _issue_fp8(kv_nope_desc, k8_bufs, c_bars, pt_base, j, stage, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr):
    """fp8 ping-pong: TMA of tile j's 512 fp8 latent columns into the first 32 KB of buffer ``stage`` (the left
    half of its fp16 tile, which its reader WG0 frees) on mbarrier ``stage * 3``."""
    row = _tile_row(pt_base, j, PAGE_SIZE, BLOCK_N)
    bar = c_bars.index(stage * 3)
    mbarrier.expect(bar, kv_nope_desc.block_type.nbytes)
    _tma_load(kv_nope_desc, [row, 0], bar, k8_bufs.index(stage).slice(0, _D_V, dim=1))


@gluon.jit
def _reload(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, k8_bufs, c_bars, pt_base, j, stage, HALF: gl.constexpr,
            FP8: gl.constexpr, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr):
    """A warpgroup's P.V of buffer ``stage``'s half ``HALF`` retired, and the buffer takes tile j next. bf16: the TMA
    of that half of tile j. fp8: WG0 (HALF 0) the TMA of tile j's fp8 latent columns into the left half; WG1
    (HALF 1) its arrival on the buffer's "right half free" mbarrier, which WG0 waits on before widening."""
    if FP8:
        if HALF == 0:
            _issue_fp8(kv_nope_desc, k8_bufs, c_bars, pt_base, j, stage, PAGE_SIZE, BLOCK_N)
        else:
            mbarrier.arrive(c_bars.index(stage * 3 + 1), count=1)
    else:
        _issue_half(kv_nope_desc, kv_rope_desc, kn_bufs.index(stage), kr_bufs.index(stage), c_bars, pt_base, j,
                    stage, HALF, False, PAGE_SIZE, BLOCK_N)


@gluon.jit
def _qk_store(l_smem, seg, qk, BLOCK_H: gl.constexpr):
    """fp8 ping-pong: WG0 leaves the segment's per-head score multipliers for WG1 in WG1's row-sum slot of the
    segment's parity, free until WG1's exchange at the segment's end (``_finish_segment``), which WG1 reads them
    before (``_qk_load``)."""
    if seg % 2 == 0:
        l_smem.slice(BLOCK_H, BLOCK_H).store(qk)
    else:
        l_smem.slice(3 * BLOCK_H, BLOCK_H).store(qk)


@gluon.jit
def _qk_load(l_smem, seg, layout: gl.constexpr, BLOCK_H: gl.constexpr):
    if seg % 2 == 0:
        qk = l_smem.slice(BLOCK_H, BLOCK_H).load(layout)
    else:
        qk = l_smem.slice(3 * BLOCK_H, BLOCK_H).load(layout)
    return qk


@gluon.jit
def _pp_wg0(q_nope_desc, q_rope_desc, kv_nope_desc, kv_rope_desc, page_table_ptr, seq_lens_ptr,
            out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, B, H, stride_pt_b,
            stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s,
            qn_smem, qr_smem, kn_bufs, kr_bufs, p_smem, m_smem, l_smem, c_bars, q_bar, qt_bar, p_bars, x_bars,
            kv_ptr, kv_scale_ptr, kv_scale, k8_bufs,
            PAGE_SIZE: gl.constexpr, RETURN_LSE: gl.constexpr, B_CHUNK: gl.constexpr, BLOCK_N: gl.constexpr,
            BLOCK_H: gl.constexpr, RELOAD: gl.constexpr, WG1_FIRST: gl.constexpr, s_layout: gl.constexpr,
            o_layout: gl.constexpr, FP8: gl.constexpr, KV_SCALE_FROM_PTR: gl.constexpr, INDEP: gl.constexpr = 0,
            OUT32: gl.constexpr = 1, STAMPS=None, plan_ptr=None, PART_SCALED: gl.constexpr = False,
            SM1: gl.constexpr = 0, RA: gl.constexpr = 0, done_ptr=None, PDL: gl.constexpr = 0):
    """Warpgroup 0: the even tiles of each segment, output columns 0..255; loads the query (``FP8``: the fp16
    query scaled per head, written by this warpgroup, and each fp8 tile's TMA into its left half)."""
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    rows_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    rows_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    rope_layout: gl.constexpr = gl.BlockedLayout([1, 16], [8, 4], [4, 1], [1, 0])
    seg_cost: gl.constexpr = FP8_SEG_COST * FP8 + BF16_SEG_COST * (1 - FP8)
    if plan_ptr is not None:
        gl.static_assert(FP8 == 0)      # (the plan's rows: the bf16 kernel's TMA halves)
    pid_h, pid, h0, qk_mul, offs_tok, t, t_stop, b, req_end, srow, p_seq, p_pg0, p_pg1 = _wg_start(
        seq_lens_ptr, sm_scale, B, STAMPS, 0, s_layout, B_CHUNK, BLOCK_N, BLOCK_H, seg_cost, plan_ptr, PDL=PDL)
    if FP8:
        if KV_SCALE_FROM_PTR:
            kv_scale = gl.load(kv_scale_ptr).to(gl.float32)
        out_mul = kv_scale
        # completions of each buffer's "right half free" mbarrier (stage * 3 + 1: WG1 arrives once its P.V of a
        # tile whose buffer takes a later tile of the segment retired), counted to know their phases
        f0 = 0
        f1 = 0
    else:
        out_mul = 1.0
    it = 0          # tiles of this program before the segment: tile r of the segment is in buffer (it + r) % 2
    seg = 0
    p1_phase = 0
    while t < t_stop:
        b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base, pg_a, pg_b = _segment_or_planned(
            seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, seg, p_seq, p_pg0, p_pg1, PAGE_SIZE,
            BLOCK_N, plan_ptr)
        n = i_stop - i_first
        _pro(STAMPS, srow, seg, 0)
        # (past the previous segment's exchange: both warpgroups' MMAs of it are retired)
        if FP8:
            s0 = it % 2
            _q_issue(q_nope_desc, q_rope_desc, b * H + h0, qt_bar, qn_smem, qr_smem)
            _issue_fp8(kv_nope_desc, k8_bufs, c_bars, pt_base, i_first, s0, PAGE_SIZE, BLOCK_N)
            if n > 1:
                _issue_fp8(kv_nope_desc, k8_bufs, c_bars, pt_base, i_first + 1, 1 - s0, PAGE_SIZE, BLOCK_N)
            _pro(STAMPS, srow, seg, 1)
            rope = _load_rope(kv_ptr, pt_base, i_first, PAGE_SIZE, BLOCK_N, rope_layout)
            _pro(STAMPS, srow, seg, 2)
            mbarrier.wait(qt_bar, seg & 1)
            _pro(STAMPS, srow, seg, 3)
            q_scale = _q_fp16(qn_smem, qr_smem, BLOCK_H, 4)
            _pro(STAMPS, srow, seg, 4)
            qk_vec = gl.convert_layout(qk_mul * kv_scale / q_scale, rows_s)
            _qk_store(l_smem, seg, qk_vec, BLOCK_H)
            fence_async_shared()
            _wg_barrier()
            mbarrier.arrive(q_bar, count=1)
            qk = qk_vec[:, None]
            f_s0 = f0 * (1 - s0) + f1 * s0
        else:
            mbarrier.expect(q_bar, q_nope_desc.block_type.nbytes + q_rope_desc.block_type.nbytes)
            _tma_load(q_nope_desc, [b * H + h0, 0], q_bar, qn_smem)
            _tma_load(q_rope_desc, [b * H + h0, 0], q_bar, qr_smem)
            s0 = it % 2
            _issue_half(kv_nope_desc, kv_rope_desc, kn_bufs.index(s0), kr_bufs.index(s0), c_bars, pt_base, i_first,
                        s0, 0, True, PAGE_SIZE, BLOCK_N, pg_a,
                        plan_ptr is not None)
            if n > 1:
                _issue_half(kv_nope_desc, kv_rope_desc, kn_bufs.index(1 - s0), kr_bufs.index(1 - s0), c_bars,
                            pt_base, i_first + 1, 1 - s0, 0, False, PAGE_SIZE, BLOCK_N, pg_b,
                            plan_ptr is not None)
            _pro(STAMPS, srow, seg, 1)
            mbarrier.wait(q_bar, seg & 1)
            _pro(STAMPS, srow, seg, 3)
            qk = qk_mul
        if seg == 0:
            _stamp(STAMPS, srow, STAMP_CLK_READY)

        m_i = gl.full([BLOCK_H], float("-inf"), gl.float32, layout=rows_s)
        l_i = gl.zeros([BLOCK_H], gl.float32, layout=rows_s)
        o = warpgroup_mma_init(gl.zeros([BLOCK_H, _HALF], gl.float32, layout=o_layout))
        for k in range(0, (n + 1) // 2):
            r = 2 * k
            g = it + r
            _stamp_tile(STAMPS, srow, g // 2, 0, 4)
            stage = g % 2
            phase = (g // 2) & 1
            kn = kn_bufs.index(stage)
            j = i_first + r
            n_valid = seq_len - j * BLOCK_N
            if FP8:
                # tile r's fp8 columns landed; from the second pair on, WG1's P.V of tile r - 2 (the last reader of
                # the right half the widening writes) retired
                rope_next = _load_rope(kv_ptr, pt_base, gl.minimum(j + 2, i_stop - 1), PAGE_SIZE, BLOCK_N,
                                       rope_layout)
                mbarrier.wait(c_bars.index(stage * 3), phase)
                if k > 0:
                    mbarrier.wait(c_bars.index(stage * 3 + 1), (f_s0 + k - 1) & 1)
                s = _widen_scores(k8_bufs.index(stage).slice(0, _D_V, dim=1), kn, kr_bufs.index(stage), qn_smem,
                                  qr_smem, rope, j >> 30, s_layout, BLOCK_H, BLOCK_N)
                rope = rope_next
            else:
                if n_valid < BLOCK_N:
                    _zero_half(kn, c_bars, stage, phase, n_valid, 0, BLOCK_N)
                s = _scores(qn_smem, qr_smem, kn, kr_bufs.index(stage), c_bars, stage, phase, j >> 30, s_layout,
                            BLOCK_H, BLOCK_N)
            if (RELOAD == 0) and (k > 0):
                # O += P(r - 1) V_L(r - 1), issued before these score MMAs, retired: WG0's last read of tile
                # r - 1's left half, whose buffer takes tile r + 1
                o = warpgroup_mma_init(warpgroup_mma_wait(num_outstanding=9, deps=(o, )))
                if r + 1 < n:
                    _reload(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, k8_bufs, c_bars, pt_base, j + 1, 1 - stage,
                            0, FP8, PAGE_SIZE, BLOCK_N)
            s, o = warpgroup_mma_wait(num_outstanding=0, deps=(s, o))
            _stamp_tile(STAMPS, srow, g // 2, 1, 4)
            if FP8:
                _zero_tail(kn, n_valid, BLOCK_N)
            if (r + 2 < n) and (not FP8) and (not RA):
                # the score MMAs were the rope chunk's only reader
                _issue_rope(kv_rope_desc, kr_bufs.index(stage), c_bars, pt_base, j + 2, stage, PAGE_SIZE, BLOCK_N)
            if SM1:
                p, alpha, m_i = _softmax_p(s, m_i, n_valid, offs_tok, qk, BLOCK_N)
            else:
                p, alpha, m_i, l_i = _softmax_step(s, m_i, l_i, j * BLOCK_N + offs_tok < seq_len, qk)
            o = o * gl.convert_layout(alpha, rows_o)[:, None]
            # p_smem's last reader (this warpgroup's P.V of tile r - 1) is retired; WG1 read its previous
            # content (P of tile r - 2) before it wrote that of tile r - 1
            _hand_off(p, m_i, p_smem, m_smem.slice(0, BLOCK_H), p_bars.index(0))
            _stamp_tile(STAMPS, srow, g // 2, 2, 4)
            o = warpgroup_mma(gl.convert_layout(p.to(p_smem.dtype), p_layout), kn.slice(0, _HALF, dim=1), o,
                              is_async=True)
            if SM1:
                l_i = l_i * alpha + gl.sum(p, axis=1)
            if (r + 2 < n) and (not FP8) and RA:
                # RA: the rope chunk's copy for tile r + 2 (its page id loaded first) under this P.V, off the path
                # from the scores to the hand-off
                _issue_rope(kv_rope_desc, kr_bufs.index(stage), c_bars, pt_base, j + 2, stage, PAGE_SIZE, BLOCK_N)
            if r + 1 < n:
                # P(r) V_L(r) retired (WG0's last read of tile r's left half): the left half of tile r + 2 is
                # requested before waiting for WG1's softmax, which cannot end sooner than this MMA
                o = warpgroup_mma_wait(num_outstanding=0, deps=(o, ))
                if r + 2 < n:
                    _reload(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, k8_bufs, c_bars, pt_base, j + 2, stage, 0,
                            FP8, PAGE_SIZE, BLOCK_N)
                mbarrier.wait(p_bars.index(1), p1_phase)
                _stamp_tile(STAMPS, srow, g // 2, 3, 4)
                p1_phase ^= 1
                m_o = m_smem.slice(BLOCK_H, BLOCK_H).load(rows_s)
                beta = gl.exp2(m_i - m_o)
                l_i = l_i * beta
                m_i = m_o
                o = o * gl.convert_layout(beta, rows_o)[:, None]
                kn_o = kn_bufs.index(1 - stage)
                if (not FP8) and (n_valid - BLOCK_N < BLOCK_N):
                    _zero_half(kn_o, c_bars, 1 - stage, ((g + 1) // 2) & 1, n_valid - BLOCK_N, 0, BLOCK_N)
                o = warpgroup_mma(p_smem, kn_o.slice(0, _HALF, dim=1), o, is_async=True)
                if RELOAD:
                    # RELOAD = 1: retire it at once and reload tile r + 3's left half into its buffer, instead of
                    # after the next tile's score MMAs are issued (which wait for that tile's own loads)
                    o = warpgroup_mma_init(warpgroup_mma_wait(num_outstanding=0, deps=(o, )))
                    if r + 3 < n:
                        _reload(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, k8_bufs, c_bars, pt_base, j + 3,
                                1 - stage, 0, FP8, PAGE_SIZE, BLOCK_N)
        o = warpgroup_mma_wait(num_outstanding=0, deps=(o, ))
        _finish_segment(0, o, m_i, l_i, l_smem, x_bars, seg, b, pid, pid_h, h0, H, i_first, i_stop, req_tiles,
                        out_ptr, part_o_ptr, lse_ptr, part_lse_ptr, seg_ptr, stride_out_b, stride_out_h, stride_po_s,
                        stride_po_h, stride_pl_s, out_mul, RETURN_LSE, s_layout, o_layout, BLOCK_H, OUT32, STAMPS, srow,
                        PART_SCALED, done_ptr=done_ptr)
        if FP8:
            # WG1's arrivals this segment: once per tile u with u + 2 < n, even tiles on buffer s0, odd on 1 - s0
            ce = (n - 1) // 2
            co = gl.maximum(n - 2, 0) // 2
            f0 += ce * (1 - s0) + co * s0
            f1 += ce * s0 + co * (1 - s0)
        it += n
        seg += 1
        t = seg_stop
        b += 1
    _stamp_out(STAMPS, srow, it)


@gluon.jit
def _pp_wg1(q_nope_desc, q_rope_desc, kv_nope_desc, kv_rope_desc, page_table_ptr, seq_lens_ptr,
            out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, B, H, stride_pt_b,
            stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s,
            qn_smem, qr_smem, kn_bufs, kr_bufs, p_smem, m_smem, l_smem, c_bars, q_bar, qt_bar, p_bars, x_bars,
            kv_ptr, kv_scale_ptr, kv_scale, k8_bufs,
            PAGE_SIZE: gl.constexpr, RETURN_LSE: gl.constexpr, B_CHUNK: gl.constexpr, BLOCK_N: gl.constexpr,
            BLOCK_H: gl.constexpr, RELOAD: gl.constexpr, WG1_FIRST: gl.constexpr, s_layout: gl.constexpr,
            o_layout: gl.constexpr, FP8: gl.constexpr, KV_SCALE_FROM_PTR: gl.constexpr, INDEP: gl.constexpr = 0,
            OUT32: gl.constexpr = 1, STAMPS=None, plan_ptr=None, PART_SCALED: gl.constexpr = False,
            SM1: gl.constexpr = 0, RA: gl.constexpr = 0, done_ptr=None, PDL: gl.constexpr = 0):
    """Warpgroup 1: the odd tiles of each segment, output columns 256..511 (``FP8``: instead of reloading the
    right half of a buffer, it tells WG0 the half is free, on mbarrier ``stage * 3 + 1``)."""
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    rows_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    rows_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    rope_layout: gl.constexpr = gl.BlockedLayout([1, 16], [8, 4], [4, 1], [1, 0])
    seg_cost: gl.constexpr = FP8_SEG_COST * FP8 + BF16_SEG_COST * (1 - FP8)
    pid_h, pid, h0, qk_mul, offs_tok, t, t_stop, b, req_end, srow, p_seq, p_pg0, p_pg1 = _wg_start(
        seq_lens_ptr, sm_scale, B, STAMPS, 1, s_layout, B_CHUNK, BLOCK_N, BLOCK_H, seg_cost, plan_ptr, PDL=PDL)
    if FP8:
        if KV_SCALE_FROM_PTR:
            kv_scale = gl.load(kv_scale_ptr).to(gl.float32)
        out_mul = kv_scale
    else:
        out_mul = 1.0
    it = 0
    seg = 0
    p0_phase = 0
    while t < t_stop:
        b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base, pg_a, pg_b = _segment_or_planned(
            seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, seg, p_seq, p_pg0, p_pg1, PAGE_SIZE,
            BLOCK_N, plan_ptr)
        n = i_stop - i_first
        s0 = it % 2
        _pro(STAMPS, srow, seg, 0)
        if FP8:
            rope = _load_rope(kv_ptr, pt_base, gl.minimum(i_first + 1, i_stop - 1), PAGE_SIZE, BLOCK_N, rope_layout)
            _pro(STAMPS, srow, seg, 2)
            mbarrier.wait(q_bar, seg & 1)
            qk = _qk_load(l_smem, seg, rows_s, BLOCK_H)[:, None]
            _wg_barrier()       # every thread has its multipliers before any thread's exchange reuses the slot
        else:
            _issue_half(kv_nope_desc, kv_rope_desc, kn_bufs.index(s0), kr_bufs.index(s0), c_bars, pt_base, i_first,
                        s0, 1, False, PAGE_SIZE, BLOCK_N, pg_a,
                        plan_ptr is not None)
            if n > 1:
                _issue_half(kv_nope_desc, kv_rope_desc, kn_bufs.index(1 - s0), kr_bufs.index(1 - s0), c_bars,
                            pt_base, i_first + 1, 1 - s0, 1, True, PAGE_SIZE, BLOCK_N, pg_b,
                            plan_ptr is not None)
            _pro(STAMPS, srow, seg, 1)
            mbarrier.wait(q_bar, seg & 1)
            qk = qk_mul
        if seg == 0:
            _stamp(STAMPS, srow, STAMP_CLK_READY)

        m_i = gl.full([BLOCK_H], float("-inf"), gl.float32, layout=rows_s)
        l_i = gl.zeros([BLOCK_H], gl.float32, layout=rows_s)
        o = warpgroup_mma_init(gl.zeros([BLOCK_H, _HALF], gl.float32, layout=o_layout))
        for k in range(0, (n + 1) // 2):
            r = 2 * k
            g = it + r
            _stamp_tile(STAMPS, srow, g // 2, 0, 4)
            stage = g % 2               # tile r (WG0's); tile r + 1 (this warpgroup's) is in 1 - stage
            phase = (g // 2) & 1
            phase_o = ((g + 1) // 2) & 1
            kn = kn_bufs.index(stage)
            kn_o = kn_bufs.index(1 - stage)
            j = i_first + r
            n_valid = seq_len - j * BLOCK_N
            # O += P(r - 1) V_R(r - 1) retired: this warpgroup's last read of tile r - 1's right half, whose
            # buffer takes tile r + 1
            o_done = warpgroup_mma_wait(num_outstanding=0, deps=(o, ))
            if r + 1 < n:
                if k > 0:
                    _reload(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, k8_bufs, c_bars, pt_base, j + 1, 1 - stage,
                            1, FP8, PAGE_SIZE, BLOCK_N)
                if FP8:
                    # this warpgroup's own tile: its fp8 columns landed (WG0 issued them once its P.V of the tile
                    # before in the buffer retired; this warpgroup's retired above)
                    rope_next = _load_rope(kv_ptr, pt_base, gl.minimum(j + 3, i_stop - 1), PAGE_SIZE, BLOCK_N,
                                           rope_layout)
                    mbarrier.wait(c_bars.index((1 - stage) * 3), phase_o)
                    s = _widen_scores(k8_bufs.index(1 - stage).slice(0, _D_V, dim=1), kn_o, kr_bufs.index(1 - stage),
                                      qn_smem, qr_smem, rope, j >> 30, s_layout, BLOCK_H, BLOCK_N)
                    rope = rope_next
                else:
                    if n_valid - BLOCK_N < BLOCK_N:
                        _zero_half(kn_o, c_bars, 1 - stage, phase_o, n_valid - BLOCK_N, 1, BLOCK_N)
                    s = _scores(qn_smem, qr_smem, kn_o, kr_bufs.index(1 - stage), c_bars, 1 - stage, phase_o, j >> 30,
                                s_layout, BLOCK_H, BLOCK_N)
                if WG1_FIRST:
                    # Softmax first, MMAs after: nothing of this warpgroup is in flight during its softmax, so the
                    # hand-off to WG0 is not held up by P(r) V_R(r) (with the order below ptxas retires that MMA before
                    # the softmax's exponentials anyway). P(r) is read back from p_smem, scaled by this tile's max step
                    # and used from registers, since O is rescaled once for both tiles.
                    #
                    # INDEP = 1: this tile's softmax from this warpgroup's own running max, before WG0's P(r) and
                    # max are waited for (the two softmaxes of a pair run at once instead of one after the other);
                    # then the pair's max: this P and sum scaled down to it in registers, P(r) as below. The max
                    # handed to WG0 is at least WG0's own, so WG0 is unchanged.
                    if INDEP == 0:
                        mbarrier.wait(p_bars.index(0), p0_phase)
                        _stamp_tile(STAMPS, srow, g // 2, 3, 4)
                        p0_phase ^= 1
                        m_e = m_smem.slice(0, BLOCK_H).load(rows_s)
                        alpha = gl.exp2(m_i - m_e)
                    s = warpgroup_mma_wait(num_outstanding=0, deps=(s, ))
                    _stamp_tile(STAMPS, srow, g // 2, 1, 4)
                    if FP8:
                        _zero_tail(kn_o, n_valid - BLOCK_N, BLOCK_N)
                    if (r + 3 < n) and (not FP8) and (not RA):
                        _issue_rope(kv_rope_desc, kr_bufs.index(1 - stage), c_bars, pt_base, j + 3, 1 - stage,
                                    PAGE_SIZE, BLOCK_N)
                    valid = (j + 1) * BLOCK_N + offs_tok < seq_len
                    if INDEP:
                        p, alpha, m_own, l_i = _softmax_step(s, m_i, l_i, valid, qk)
                        mbarrier.wait(p_bars.index(0), p0_phase)
                        _stamp_tile(STAMPS, srow, g // 2, 3, 4)
                        p0_phase ^= 1
                        m_e = m_smem.slice(0, BLOCK_H).load(rows_s)
                        m_i = gl.maximum(m_own, m_e)
                        c_own = gl.exp2(m_own - m_i)
                        beta = gl.exp2(m_e - m_i)
                        p = p * c_own[:, None]
                        l_i = l_i * c_own
                        o_scale = alpha * c_own
                    elif SM1:
                        p, beta, m_i = _softmax_p(s, m_e, n_valid - BLOCK_N, offs_tok, qk, BLOCK_N)
                        o_scale = alpha * beta
                    else:
                        p, beta, m_i, l_i = _softmax_step(s, m_e, l_i * alpha, valid, qk)
                        o_scale = alpha * beta
                    if (not FP8) and (n_valid < BLOCK_N):
                        _zero_half(kn, c_bars, stage, phase, n_valid, 1, BLOCK_N)
                    pe = (p_smem.load(s_layout).to(gl.float32) * beta[:, None]).to(p_smem.dtype)
                    _wg_barrier()          # every thread has read P(r) before P(r + 1) overwrites it
                    o_done = o_done * gl.convert_layout(o_scale, rows_o)[:, None]
                    _hand_off(p, m_i, p_smem, m_smem.slice(BLOCK_H, BLOCK_H), p_bars.index(1))
                    _stamp_tile(STAMPS, srow, g // 2, 2, 4)
                    pe_op = gl.convert_layout(pe, p_layout)
                    o = warpgroup_mma(pe_op, kn.slice(_HALF, _HALF, dim=1), o_done, is_async=True)
                    o = warpgroup_mma(gl.convert_layout(p.to(p_smem.dtype), p_layout),
                                      kn_o.slice(_HALF, _HALF, dim=1), o, is_async=True)
                    if SM1 and (INDEP == 0):
                        l_i = l_i * o_scale + gl.sum(p, axis=1)
                    if (r + 3 < n) and (not FP8) and RA:
                        _issue_rope(kv_rope_desc, kr_bufs.index(1 - stage), c_bars, pt_base, j + 3, 1 - stage,
                                    PAGE_SIZE, BLOCK_N)
                    # P(r) V_R(r) retired: tile r's right half is free for tile r + 2
                    warpgroup_mma_wait(num_outstanding=1, deps=(pe_op, ))
                    if r + 2 < n:
                        _reload(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, k8_bufs, c_bars, pt_base, j + 2, stage,
                                1, FP8, PAGE_SIZE, BLOCK_N)
                else:
                    o, m_i, l_i, p0_phase = _take_even(o_done, m_i, l_i, p0_phase, kn, p_smem, m_smem, p_bars, c_bars,
                                                       stage, phase, n_valid, s_layout, o_layout, BLOCK_N, FP8)
                    # (groups in flight: the score MMAs, then P(r) V_R(r))
                    s = warpgroup_mma_wait(num_outstanding=1, deps=(s, ))
                    _stamp_tile(STAMPS, srow, g // 2, 1, 4)
                    if FP8:
                        _zero_tail(kn_o, n_valid - BLOCK_N, BLOCK_N)
                    if (r + 3 < n) and (not FP8) and (not RA):
                        _issue_rope(kv_rope_desc, kr_bufs.index(1 - stage), c_bars, pt_base, j + 3, 1 - stage,
                                    PAGE_SIZE, BLOCK_N)
                    valid = (j + 1) * BLOCK_N + offs_tok < seq_len
                    if SM1:
                        p, beta, m_i = _softmax_p(s, m_i, n_valid - BLOCK_N, offs_tok, qk, BLOCK_N)
                    else:
                        p, beta, m_i, l_i = _softmax_step(s, m_i, l_i, valid, qk)
                    # P(r) V_R(r) retired: this warpgroup is done with tile r's right half and with p_smem
                    o = warpgroup_mma_wait(num_outstanding=0, deps=(o, ))
                    if r + 2 < n:
                        _reload(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, k8_bufs, c_bars, pt_base, j + 2, stage,
                                1, FP8, PAGE_SIZE, BLOCK_N)
                    o = o * gl.convert_layout(beta, rows_o)[:, None]
                    _hand_off(p, m_i, p_smem, m_smem.slice(BLOCK_H, BLOCK_H), p_bars.index(1))
                    _stamp_tile(STAMPS, srow, g // 2, 2, 4)
                    o = warpgroup_mma(gl.convert_layout(p.to(p_smem.dtype), p_layout), kn_o.slice(_HALF, _HALF, dim=1),
                                      o, is_async=True)
                    if SM1:
                        l_i = l_i * beta + gl.sum(p, axis=1)
                    if (r + 3 < n) and (not FP8) and RA:
                        _issue_rope(kv_rope_desc, kr_bufs.index(1 - stage), c_bars, pt_base, j + 3, 1 - stage,
                                    PAGE_SIZE, BLOCK_N)
            else:
                o, m_i, l_i, p0_phase = _take_even(o_done, m_i, l_i, p0_phase, kn, p_smem, m_smem, p_bars, c_bars,
                                                   stage, phase, n_valid, s_layout, o_layout, BLOCK_N, FP8)
        o = warpgroup_mma_wait(num_outstanding=0, deps=(o, ))
        _finish_segment(1, o, m_i, l_i, l_smem, x_bars, seg, b, pid, pid_h, h0, H, i_first, i_stop, req_tiles,
                        out_ptr, part_o_ptr, lse_ptr, part_lse_ptr, seg_ptr, stride_out_b, stride_out_h, stride_po_s,
                        stride_po_h, stride_pl_s, out_mul, RETURN_LSE, s_layout, o_layout, BLOCK_H, OUT32, STAMPS, srow,
                        PART_SCALED, done_ptr=done_ptr)
        it += n
        seg += 1
        t = seg_stop
        b += 1
    _stamp_out(STAMPS, srow, it)


@gluon.jit(do_not_specialize=["B"])
def _mla_decode_hopper_pp_kernel(
    q_nope_desc, q_rope_desc, kv_nope_desc, kv_rope_desc,
    page_table_ptr, seq_lens_ptr,
    out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr,
    sm_scale,
    B, H,
    stride_pt_b,
    stride_out_b, stride_out_h,
    stride_po_s, stride_po_h,
    stride_pl_s,
    PAGE_SIZE: gl.constexpr,
    RETURN_LSE: gl.constexpr,
    B_CHUNK: gl.constexpr,
    BLOCK_N: gl.constexpr,
    BLOCK_H: gl.constexpr,
    PP: gl.constexpr,
    num_warps: gl.constexpr,
    WG1_REGS: gl.constexpr = 256,
    RELOAD: gl.constexpr = 1,
    WG1_FIRST: gl.constexpr = 0,
    INDEP: gl.constexpr = 0,
    OUT32: gl.constexpr = 1,
    STAMPS=None,
    SPLIT_MAX: gl.constexpr = 0,    # the grid's programs per request at most (interface_hopper; unused in here)
    plan_ptr=None,
    PART_SCALED: gl.constexpr = False,
    SM1: gl.constexpr = 0,
    RA: gl.constexpr = 0,
    done_ptr=None,
    PDL: gl.constexpr = 0,
):
    """Grid ``(H // 64, P)``, as ``kernel_hopper._mla_decode_hopper_kernel`` (same arguments), but
    ``num_warps = 4`` (warpgroup 0, the default partition) plus a 4-warp worker partition (warpgroup 1, with
    ``WG1_REGS`` registers per thread). ``kv_nope_desc`` has [BLOCK_N, 256] blocks (one warpgroup's half of V),
    ``kv_rope_desc`` [BLOCK_N, 64]. RELOAD (WG0's reload of an odd tile's left half, the buffer of tile r + 2): 1
    retires its P.V at once and reloads; 0 after the next tile's score MMAs are issued. WG1_FIRST = 1: WG1 runs
    its softmax before issuing any P.V of the pair (see ``_pp_wg1``). SM1 = 1: the softmax of ``_softmax_p`` (masks in a
    request's last tile only, the scale in the exponent, row sums after the hand-off). RA = 1: each tile's rope copy
    for two tiles on issued after the hand-off, under the P.V, instead of between the scores and the softmax. ``PDL``:
    launched as the programmatic dependent of the kernel before it (``interface_hopper.SPLIT_PDL``), each warpgroup
    waiting for that kernel before its first global load (1) or right after the plan's row (2, with ``plan_ptr``)."""
    gl.static_assert(PP == 1)
    gl.static_assert(BLOCK_H == 64)
    gl.static_assert(BLOCK_N == 64)
    gl.static_assert(num_warps == 4)
    gl.static_assert(kv_nope_desc.block_type.shape[1] == _HALF)
    dtype: gl.constexpr = kv_nope_desc.dtype
    kn_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, _D_V], dtype)
    qn_smem = gl.allocate_shared_memory(dtype, [BLOCK_H, _D_V], q_nope_desc.layout)
    qr_smem = gl.allocate_shared_memory(dtype, [BLOCK_H, 64], q_rope_desc.layout)
    # each 64-column chunk of a [64, 512] tile is one contiguous 8 KB swizzled block: the TMA chunks land in
    # slices of it, the P.V wgmmas read four of them as one [64, 256] operand
    kn_bufs = gl.allocate_shared_memory(dtype, [2, BLOCK_N, _D_V], kn_layout)
    kr_bufs = gl.allocate_shared_memory(dtype, [2, BLOCK_N, 64], kv_rope_desc.layout)
    _pp_partitions(q_nope_desc, q_rope_desc, kv_nope_desc, kv_rope_desc, page_table_ptr, seq_lens_ptr,
                   out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, B, H, stride_pt_b,
                   stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s,
                   qn_smem, qr_smem, kn_bufs, kr_bufs, None, None, 1.0, None,
                   PAGE_SIZE, RETURN_LSE, B_CHUNK, BLOCK_N, BLOCK_H, RELOAD, WG1_FIRST, False, False, WG1_REGS, INDEP,
                   OUT32, STAMPS, plan_ptr, PART_SCALED, SM1, RA, done_ptr, PDL)


@gluon.jit(do_not_specialize=["B"])
def _mla_decode_hopper_pp_fp8_kernel(
    q_nope_desc, q_rope_desc, kv_nope_desc, kv_ptr, kv_scale_ptr,
    page_table_ptr, seq_lens_ptr,
    out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr,
    sm_scale, kv_scale,
    B, H,
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
    PP: gl.constexpr,
    num_warps: gl.constexpr,
    WG1_REGS: gl.constexpr = 256,
    RELOAD: gl.constexpr = 1,
    WG1_FIRST: gl.constexpr = 0,
    INDEP: gl.constexpr = 0,
    OUT32: gl.constexpr = 1,
    STAMPS=None,
    SPLIT_MAX: gl.constexpr = 0,    # the grid's programs per request at most (interface_hopper; unused in here)
):
    """The ping-pong kernel on a per-tensor fp8 cache (the arguments of the fp8 heads-on-M kernel,
    ``kernel_hopper_heads._mla_decode_hopper_fp8w_kernel``, with the query's two descriptors for its pointer and
    strides): each tile's fp8 latent columns by TMA into the
    first 32 KB of its fp16 buffer, widened in place by the tile's owner under its score MMAs (``_widen_scores``;
    the rope rows by plain loads a tile ahead, as the other fp8 kernels); the query copied by TMA as bf16
    (``q_nope_desc`` / ``q_rope_desc``, [64, 512] / [64, 64] boxes) into the fp16 query tiles' bytes and converted
    there, each head times a power of two (``kernel_hopper_heads._q_issue`` / ``_q_fp16``); P in fp16; the cache
    scale on the scores and the output.
    Shared memory as the bf16 kernel's: no fp8 staging buffer (none would fit beside two fp16 tiles)."""
    gl.static_assert(PP == 1)
    gl.static_assert(BLOCK_H == 64)
    gl.static_assert(BLOCK_N == 64)
    gl.static_assert(num_warps == 4)
    gl.static_assert(kv_nope_desc.block_type.shape[1] == _D_V)
    kn_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, _D_V], gl.float16)
    qn_smem = gl.allocate_shared_memory(gl.float16, [BLOCK_H, _D_V], kn_layout)
    qr_smem = gl.allocate_shared_memory(gl.float16, [BLOCK_H, 64],
                                        gl.NVMMASharedLayout.get_default_for([BLOCK_H, 64], gl.float16))
    kn_bufs = gl.allocate_shared_memory(gl.float16, [2, BLOCK_N, _D_V], kn_layout)
    kr_bufs = gl.allocate_shared_memory(gl.float16, [2, BLOCK_N, 64],
                                        gl.NVMMASharedLayout.get_default_for([BLOCK_N, 64], gl.float16))
    # the same bytes as fp8 [64, 1024] per buffer (eight 8 KB blocks of 128 columns, the fp16 tile's 64-column
    # blocks two by two): the TMA lands in the first four
    k8_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, 2 * _D_V], gl.float8e4nv)
    if _REINTERPRET_PUBLIC:
        k8_bufs = kn_bufs.reinterpret(gl.float8e4nv, [2, BLOCK_N, 2 * _D_V], k8_layout)
    else:
        k8_bufs = kn_bufs._reinterpret(gl.float8e4nv, [2, BLOCK_N, 2 * _D_V], k8_layout)
    _pp_partitions(q_nope_desc, q_rope_desc, kv_nope_desc, None, page_table_ptr, seq_lens_ptr,
                   out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, B, H, stride_pt_b,
                   stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s,
                   qn_smem, qr_smem, kn_bufs, kr_bufs, kv_ptr, kv_scale_ptr, kv_scale, k8_bufs,
                   PAGE_SIZE, RETURN_LSE, B_CHUNK, BLOCK_N, BLOCK_H, RELOAD, WG1_FIRST, True,
                   KV_SCALE_FROM_PTR, WG1_REGS, INDEP, OUT32, STAMPS)


@gluon.jit
def _pp_partitions(q_nope_desc, q_rope_desc, kv_nope_desc, kv_rope_desc, page_table_ptr, seq_lens_ptr,
                   out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, B, H, stride_pt_b,
                   stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s,
                   qn_smem, qr_smem, kn_bufs, kr_bufs, kv_ptr, kv_scale_ptr, kv_scale, k8_bufs,
                   PAGE_SIZE: gl.constexpr, RETURN_LSE: gl.constexpr, B_CHUNK: gl.constexpr,
                   BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr, RELOAD: gl.constexpr, WG1_FIRST: gl.constexpr,
                   FP8: gl.constexpr, KV_SCALE_FROM_PTR: gl.constexpr, WG1_REGS: gl.constexpr, INDEP: gl.constexpr,
                   OUT32: gl.constexpr, STAMPS=None, plan_ptr=None, PART_SCALED: gl.constexpr = False,
                   SM1: gl.constexpr = 0, RA: gl.constexpr = 0, done_ptr=None, PDL: gl.constexpr = 0):
    """Both kernels' P tile, maxima, sums and mbarriers, and the two warpgroups."""
    vec: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    p_smem = gl.allocate_shared_memory(qn_smem.dtype, [BLOCK_H, BLOCK_N],
                                       gl.NVMMASharedLayout.get_default_for([BLOCK_H, BLOCK_N], qn_smem.dtype))
    m_smem = gl.allocate_shared_memory(gl.float32, [2 * BLOCK_H], vec)
    l_smem = gl.allocate_shared_memory(gl.float32, [4 * BLOCK_H], vec)
    c_bars = gl.allocate_shared_memory(gl.int64, [6, 1], mbarrier.MBarrierLayout())
    q_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_bar = q_bars.index(0)     # bf16: the query's TMA; fp8: WG0's arrival once the fp16 query is written
    qt_bar = q_bars.index(1)    # fp8: the bf16 query's TMA (``kernel_hopper_heads._q_issue``)
    p_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    x_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for k in gl.static_range(6):
        mbarrier.init(c_bars.index(k), count=1)
    mbarrier.init(q_bar, count=1)
    mbarrier.init(qt_bar, count=1)
    for k in gl.static_range(2):
        mbarrier.init(p_bars.index(k), count=1)
        mbarrier.init(x_bars.index(k), count=1)
    # each warpgroup's layouts (4 warps): of the scores [64, BLOCK_N] and of its half of O [64, 256]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, _HALF, 16])
    # (the argument tuples written out: a tuple bound to a name first loses its constexprs' types, triton 3.6)
    gl.warp_specialize([
        (_pp_wg0, (q_nope_desc, q_rope_desc, kv_nope_desc, kv_rope_desc, page_table_ptr, seq_lens_ptr,
             out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, B, H, stride_pt_b,
             stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s,
             qn_smem, qr_smem, kn_bufs, kr_bufs, p_smem, m_smem, l_smem, c_bars, q_bar, qt_bar, p_bars, x_bars,
             kv_ptr, kv_scale_ptr, kv_scale, k8_bufs,
             PAGE_SIZE, RETURN_LSE, B_CHUNK, BLOCK_N, BLOCK_H, RELOAD, WG1_FIRST, s_layout, o_layout, FP8,
             KV_SCALE_FROM_PTR, INDEP, OUT32, STAMPS, plan_ptr, PART_SCALED, SM1, RA, done_ptr, PDL)),
        (_pp_wg1, (q_nope_desc, q_rope_desc, kv_nope_desc, kv_rope_desc, page_table_ptr, seq_lens_ptr,
             out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, B, H, stride_pt_b,
             stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s,
             qn_smem, qr_smem, kn_bufs, kr_bufs, p_smem, m_smem, l_smem, c_bars, q_bar, qt_bar, p_bars, x_bars,
             kv_ptr, kv_scale_ptr, kv_scale, k8_bufs,
             PAGE_SIZE, RETURN_LSE, B_CHUNK, BLOCK_N, BLOCK_H, RELOAD, WG1_FIRST, s_layout, o_layout, FP8,
             KV_SCALE_FROM_PTR, INDEP, OUT32, STAMPS, plan_ptr, PART_SCALED, SM1, RA, done_ptr, PDL)),
    ], [4], [WG1_REGS])
