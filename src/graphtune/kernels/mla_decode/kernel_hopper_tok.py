"""Hopper (sm_90a) MLA decode, fp8 (per-tensor) cache, H < 64 (tensor parallel, H = 16): the second tokens-on-M
fp8 kernel, in Gluon. Only ``@gluon.jit`` functions live here (interface_hopper.py launches them); shape letters
and the work split are kernel_hopper.py's.

What it changes against ``kernel_hopper._mla_decode_hopper_tok_fp8_kernel`` (WIDEN 0), each read from the sm_90
SASS compiled on a CPU (docs/mla_decode.md, "tokens on M, fp8, second kernel"):

- **V^T into the P.V operand by 32-bit loads.** The 16-bit wgmma's A operand (V^T chunk [128 dims, 64 tokens])
  pairs two tokens of one dim in a register; the tile stores a token's dims contiguously, so loading straight
  into that layout is a byte gather (the first kernel: 256 ``LDS.U8`` and ~450 ``PRMT`` per thread per tile).
  The dims of a 128-dim chunk are only row labels of the MMA, so the kernel relabels them: logical row
  ``l = 64 a + 16 w + 8 s + q`` (a, s: the two register bits of the operand's M; w: the warp; q: the lane row)
  holds physical dim ``p = 32 w + 4 q + 2 a + s``. Each thread's four rows of a chunk are then four adjacent
  bytes of a token's row: one ``LDS.32`` per token pair half, widened by ``F2FP`` and paired across tokens by
  one ``PRMT`` per register (16 LDS + 32 F2FP + 32 PRMT per chunk, no shared-memory round trip). The output rows
  come back in the same relabelled order; ``kernel_hopper._in_dim_order`` puts them in dim order in registers before
  the store (each thread then writes four adjacent dims of a head in one access).
- **One score chain.** The query's fp8 hi/lo pair is one [32, 640] B operand (rows 0..15 hi, 16..31 lo, one
  power-of-two scale per head), so ``S = K [hi | lo]^T`` is one chain of 20 ``QGMMA.64x32x32`` that reads each
  KV tile once (the first kernel: two chains of 20 ``64x16x32``, the tile read twice); hi and lo are split in
  registers (the accumulator's column bit 4 is a register bit: free).
- **Rope columns by TMA.** A tile is five [64, 128] TMA boxes of the cache viewed [rows, 576]: four latent, and
  one at column 512 whose columns 576..639 lie outside the tensor, which TMA fills with zeros: the 128-column,
  128-byte-swizzled rope tile the first kernel built through registers, with no loads in the loop.
- **No cross-warp sum per tile.** The softmax denominator is kept per token slot ([64, 16], rescaled with the
  output) and reduced once per segment; only the running max crosses warps each tile.

**fp8_ds_mla (``DS`` 1; written in session 9, run on the H200 in session 10).** DeepSeek's 656-byte rows
(512 fp8 latent values in four 128-dim groups, four fp32 group scales at bytes 512..527, 64 bf16 rope values at
528..655; 656 = 41 x 16 bytes, a legal TMA row stride). A tile is three TMA boxes of the rows under three views:
the [64, 512] fp8 latent at column 0 (as above), the [64, 64] bf16 rope at bf16 column 264, the [64, 4] fp32
scales at fp32 column 128. Scores: a group's scale multiplies its tokens' rows after the MMAs, so each group is its
own chain (4 ``QGMMA.64x32x32`` against the [hi | lo] query's group columns), folded into S two chains at a time
(``_group_scores``), plus the rope's 4 ``HGMMA.64x16x16.BF16`` against the bf16 query rope (times the query's power-of-
two scale: exact). P.V: V^T chunk c is group c, so chunk c's P tile is ``256 p scale_c[token]`` in fp16 (four P
tiles; chunk 3's double-buffered as P.V(i - 1)'s last chunk may still read it); the 256 is divided out with the
softmax sum. TMA loader, ``LOOK`` 0 and the fp16 P.V only (static_assert).

Pipelining: NUM_BUF tiles of 40 KB in flight. A tile's buffer is free once S(i) has retired and every warp has
loaded its V^T chunks (P.V reads registers, not the buffer), so tile i + NUM_BUF is issued at the end of tile i,
before tile i + 1's wait (the first kernel: tile i + NUM_BUF - 1 after S(i)'s wait, as its P.V read the buffer).
P^T is double-buffered so that no barrier is needed between S(i)'s wait and its store.

Schedule knobs (session 9; none beat the shipped config on the H200, docs/mla_decode.md "Issue 14, session 9"):
``LOOK`` 1 / 2 issues S(i + 1) before tile i's softmax / between its P.V chunks 1 and 2; ``RK64`` runs the rope's
score MMAs over its 64 columns (not the zero padding); ``PT_EARLY`` loads the next tile's page ids a tile ahead of
the TMA / row gather that needs them. ``COPY_FIRST`` (session 58; the tuned space's two-buffer rows) issues a
segment's first copies before its query's loads: issued after them, ptxas held the copies behind the query's maxima,
which wait for those loads (the SASS, sm_90a), so the first wave went out when the query had landed (2.6 us after the
split at batch 32 on an H100); pinned with a plan, 0.2-0.9% faster with two buffers, 0-1% slower with three (session
58 call C, docs/mla_decode.md "Issue 14, session 58").
P.V as fp8 MMAs (``PV8``) and the timing probes that fed P.V zero-extended or constant V^T (``PROBE``) were removed in
session 10: on the H200 at H = 16, B 32 / 64 / 128, PV8 ran 0.0387 / 0.0585 / 0.0974 ms against the shipped 0.0384 /
0.0583 / 0.0977 at 3x its error (2.4e-3 against 7.7e-4), and P.V with no V^T loads or conversions at all ran 0.0375 /
0.0574 / 0.0977: the V^T path does not bound this kernel (docs/mla_decode.md, "PV8").
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)

from . import kernel_hopper_tok2
from .kernel_hopper import (FP8_SEG_COST, STAMP_CLK_IN, STREAM_MAX_BUF, STAMP_CLK_READY, STAMP_CLK_SPLIT, STAMP_GT_IN,
                            _block_barrier, _launch_dependents, _load_q_raw, _plan_row, _planned_segment, _program_ids,
                            _segment, _segment_written, _split_start, _stamp, _stamp_out, _stamp_tile,
                            _store_chunks_segment, _tile_landed, _tile_page, _wait_primary, _zero_rows)
# (one tile's math, shared with the two-warpgroup form, kernel_hopper_tok2.py)
from .kernel_hopper_tok_tile import (_cp_async, _hilo, _issue_tile2_at, _q_cat, _scores_v2, _softmax_v2, _v_chunk,
                                     v_load_layout, wgmma_layout)


@gluon.jit
def _issue_tile2(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, pt_base, j, stage, PAGE_SIZE: gl.constexpr,
                 ROPE_COL: gl.constexpr, BLOCK_N: gl.constexpr, kv_sc_desc=None, sc_bufs=None):
    """TMA of tile j into buffer ``stage``: the [BLOCK_N, 512] latent box and the rope box at column ``ROPE_COL``
    (the fp8 kernel: [BLOCK_N, 128] at column 512, whose columns 576..639 are outside the tensor: TMA writes zeros
    there; a bf16 [BLOCK_N, 64] box over the rope columns' own view: column 0; fp8_ds_mla: the bf16 rope box at
    column 264 of the rows viewed as bf16, and ``kv_sc_desc``'s [BLOCK_N, 4] fp32 box of the group scales)."""
    page = gl.load(pt_base + (j * BLOCK_N) // PAGE_SIZE)
    _issue_tile2_at(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, page, j, stage, PAGE_SIZE, ROPE_COL, BLOCK_N,
                    kv_sc_desc, sc_bufs)


@gluon.jit
def _gather_tile(kv_ptr, kn_bufs, kr_bufs, bars, pt_base, j, stage, seq_len, PAGE_SIZE: gl.constexpr,
                 BLOCK_N: gl.constexpr, num_warps: gl.constexpr, sc_bufs=None):
    """Tile j into buffer ``stage`` row by row (any page size, page size 1 included, where TMA's boxes cannot
    reach): 16-byte cp.async copies addressed through the page table into the same swizzled tiles the TMA path
    fills, the rope tile's columns 64..127 zero-filled (masked copies), each thread's copies arriving on the
    tile's barrier (initialised for every thread) when they land. Rows past ``seq_len`` read page 0 (the page
    table may hold anything there); their scores are masked and their P.V rows zeroed as on the TMA path."""
    page = _tile_pages(pt_base, j, j + 1, seq_len, PAGE_SIZE, BLOCK_N, 1, num_warps)
    _gather_tile_at(kv_ptr, kn_bufs, kr_bufs, bars, page, j, stage, PAGE_SIZE, BLOCK_N, num_warps, sc_bufs)


@gluon.jit
def _tile_pages(pt_base, j, i_stop, seq_len, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr, GATHER: gl.constexpr,
                num_warps: gl.constexpr):
    """Tile j's page ids (0 past ``seq_len`` or when ``j >= i_stop``): a scalar (TMA: one page per tile) or, with
    ``GATHER``, one per row in the row gather's layout."""
    if GATHER:
        layout: gl.constexpr = gl.BlockedLayout([1, 16], [4, 8], [num_warps, 1], [1, 0])
        tok = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, layout))
        page = gl.load(pt_base + tok // PAGE_SIZE, mask=(tok < seq_len) & (j < i_stop), other=0)
    else:
        page = _tile_page(pt_base, j, i_stop, PAGE_SIZE, BLOCK_N)
    return page


@gluon.jit
def _segment_pages(seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, PAGE_SIZE: gl.constexpr,
                   BLOCK_N: gl.constexpr, GATHER: gl.constexpr, NUM_BUF: gl.constexpr, num_warps: gl.constexpr):
    """``kernel_hopper._segment``'s values and the page ids of the segment's first tiles (:func:`_tile_pages`; the
    third's only with more than two buffers, else the second's again, unused)."""
    b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _segment(
        seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, BLOCK_N)
    pg0 = _tile_pages(pt_base, i_first, i_stop, seq_len, PAGE_SIZE, BLOCK_N, GATHER, num_warps)
    pg1 = _tile_pages(pt_base, i_first + 1, i_stop, seq_len, PAGE_SIZE, BLOCK_N, GATHER, num_warps)
    if NUM_BUF > 2:
        pg2 = _tile_pages(pt_base, i_first + 2, i_stop, seq_len, PAGE_SIZE, BLOCK_N, GATHER, num_warps)
    else:
        pg2 = pg1
    return b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base, pg0, pg1, pg2


@gluon.jit
def _gather_tile_at(kv_ptr, kn_bufs, kr_bufs, bars, page, j, stage, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr,
                    num_warps: gl.constexpr, sc_bufs=None):
    """:func:`_gather_tile` with tile j's page ids already loaded (:func:`_tile_pages`). With ``sc_bufs``
    (fp8_ds_mla: ``kv_ptr`` the 656-byte rows as fp8): the latent as above, the bf16 rope (bytes 528..655) into the
    [BLOCK_N, 64] bf16 tile and the four fp32 scales (bytes 512..527) into the [BLOCK_N, 4] one."""
    ROW: gl.constexpr = 576 if sc_bufs is None else 656
    layout: gl.constexpr = gl.BlockedLayout([1, 16], [4, 8], [num_warps, 1], [1, 0])
    rows = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, 128, layout=gl.SliceLayout(0, layout))
    tok = j * BLOCK_N + rows
    src = kv_ptr + (page.to(gl.int64) * PAGE_SIZE + tok % PAGE_SIZE)[:, None] * ROW + cols[None, :]
    kn = kn_bufs.index(stage)
    for c in gl.static_range(4):
        _cp_async(kn.slice(c * 128, 128, dim=1), src + c * 128)
    if sc_bufs is None:
        _cp_async(kr_bufs.index(stage), src + 512, mask=(cols < 64)[None, :])
    else:
        # rope: 8 bf16 (16 bytes) a copy, [BLOCK_N, 64]; scales: 2 fp32 a copy, [BLOCK_N, 4] over all the threads
        r_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
        c_layout: gl.constexpr = gl.BlockedLayout([1, 2], [32, 1], [num_warps // 2, 2], [1, 0])
        _cp_async(kr_bufs.index(stage), _ds_row_ptrs(kv_ptr, page, j, 528, 64, gl.bfloat16, r_layout, PAGE_SIZE,
                                                     BLOCK_N))
        _cp_async(sc_bufs.index(stage), _ds_row_ptrs(kv_ptr, page, j, 512, 4, gl.float32, c_layout, PAGE_SIZE,
                                                     BLOCK_N))
    async_copy.mbarrier_arrive(bars.index(stage), increment_count=False)


@gluon.jit
def _ds_row_ptrs(kv_ptr, page, j, BYTE: gl.constexpr, COLS: gl.constexpr, dtype: gl.constexpr, layout: gl.constexpr,
                 PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr):
    """fp8_ds_mla row gather: [BLOCK_N, COLS] ``dtype`` pointers to the tile's rows from byte ``BYTE`` on (656-byte
    rows; ``page``: the row gather's per-row page ids, moved to ``layout``)."""
    rows = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, COLS, layout=gl.SliceLayout(0, layout))
    row = gl.convert_layout(page, gl.SliceLayout(1, layout)).to(gl.int64) * PAGE_SIZE + (j * BLOCK_N + rows) % PAGE_SIZE
    base = (kv_ptr + row * 656 + BYTE).to(gl.pointer_type(dtype), bitcast=True)
    return base[:, None] + cols[None, :]


@gluon.jit
def _issue_v2(kv_nope_desc, kv_rope_desc, kv_ptr, kn_bufs, kr_bufs, bars, pt_base, j, stage, seq_len,
              PAGE_SIZE: gl.constexpr, ROPE_COL: gl.constexpr, BLOCK_N: gl.constexpr, GATHER: gl.constexpr,
              num_warps: gl.constexpr, kv_sc_desc=None, sc_bufs=None):
    """Tile j into buffer ``stage`` by TMA, or row by row when ``GATHER`` (fp8_ds_mla: with ``sc_bufs``)."""
    if GATHER:
        _gather_tile(kv_ptr, kn_bufs, kr_bufs, bars, pt_base, j, stage, seq_len, PAGE_SIZE, BLOCK_N, num_warps,
                     sc_bufs)
    else:
        _issue_tile2(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, pt_base, j, stage, PAGE_SIZE, ROPE_COL,
                     BLOCK_N, kv_sc_desc, sc_bufs)


@gluon.jit
def _issue_v2_at(kv_nope_desc, kv_rope_desc, kv_ptr, kn_bufs, kr_bufs, bars, page, j, stage, PAGE_SIZE: gl.constexpr,
                 ROPE_COL: gl.constexpr, BLOCK_N: gl.constexpr, GATHER: gl.constexpr, num_warps: gl.constexpr,
                 kv_sc_desc=None, sc_bufs=None):
    """:func:`_issue_v2` with tile j's page ids already loaded (:func:`_tile_pages`)."""
    if GATHER:
        _gather_tile_at(kv_ptr, kn_bufs, kr_bufs, bars, page, j, stage, PAGE_SIZE, BLOCK_N, num_warps, sc_bufs)
    else:
        _issue_tile2_at(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, page, j, stage, PAGE_SIZE, ROPE_COL,
                        BLOCK_N, kv_sc_desc, sc_bufs)


@gluon.jit
def _init_tile_barriers(bars, NUM_BUF: gl.constexpr, GATHER: gl.constexpr, num_warps: gl.constexpr):
    for k in gl.static_range(NUM_BUF):
        if GATHER:   # one arrival per thread, when its copies have landed
            mbarrier.init(bars.index(k), count=num_warps * 32)
        else:        # the TMA transaction count
            mbarrier.init(bars.index(k), count=1)


@gluon.jit
def _ds_group(kn, qn_smem, g: gl.constexpr, s_layout: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr):
    """``K_g [hi | lo]^T`` of 128-dim group g, issued (asynchronous: 4 fp8 k-steps), in its own accumulator:
    fp8_ds_mla's group scale multiplies its rows after the MMAs; with ``CHAIN`` the groups are folded in fp32."""
    return warpgroup_mma(kn.slice(g * 128, 128, dim=1), qn_smem.slice(g * 128, 128, dim=1).permute((1, 0)),
                         gl.zeros([BLOCK_N, 2 * BLOCK_H], gl.float32, layout=s_layout), use_acc=False, is_async=True)


@gluon.jit
def _group_scores(g0, g1, o3, kn, kr, qn_smem, qr_smem, sc0, sc1, sc2, sc3, s_layout: gl.constexpr,
                  r_layout: gl.constexpr, s16_layout: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr,
                  DS: gl.constexpr, RK64: gl.constexpr):
    """The tile's scores folded in fp32 from one fp8 MMA chain per 128-dim group and one for the rope
    ([BLOCK_N, BLOCK_H], unscaled by the softmax's multiplier), from groups 0 and 1 already issued (after ``o3``,
    the previous tile's last P.V chunk: the three retire together, as a ``wait_group 1`` behind a score chain made
    ptxas serialise every wgmma). Group 2 runs while 0 and 1 are folded, group 3 and the rope while 2 is (all five
    accumulators live at once spilled: 344 bytes of stack). ``DS`` (fp8_ds_mla): ``sum_g scale_g[token]
    (K_g . q_g) + K_rope . q_rope`` with the bf16 rope ``K_rope (q_rope s)^T`` (4 bf16 k-steps, accumulator in
    ``r_layout``); else (``CHAIN``, the per-tensor fp8 cache): ``sum_g K_g . q_g`` and the fp8 [hi | lo] rope chain
    (``r_layout`` = ``s_layout``; ``RK64``: over its 64 columns). Returns ``(s, o3)``."""
    g0, g1, o3 = warpgroup_mma_wait(num_outstanding=0, deps=(g0, g1, o3))
    g2 = _ds_group(kn, qn_smem, 2, s_layout, BLOCK_N, BLOCK_H)
    if DS:
        s = (_hilo(g0, s16_layout, BLOCK_N, BLOCK_H) * sc0[:, None]
             + _hilo(g1, s16_layout, BLOCK_N, BLOCK_H) * sc1[:, None])
    else:
        s = _hilo(g0, s16_layout, BLOCK_N, BLOCK_H) + _hilo(g1, s16_layout, BLOCK_N, BLOCK_H)
    g3 = _ds_group(kn, qn_smem, 3, s_layout, BLOCK_N, BLOCK_H)
    if DS:
        r = warpgroup_mma(kr, qr_smem.permute((1, 0)), gl.zeros([BLOCK_N, BLOCK_H], gl.float32, layout=r_layout),
                          use_acc=False, is_async=True)
    elif RK64:
        r = warpgroup_mma(kr.slice(0, 64, dim=1), qr_smem.slice(0, 64, dim=1).permute((1, 0)),
                          gl.zeros([BLOCK_N, 2 * BLOCK_H], gl.float32, layout=r_layout), use_acc=False, is_async=True)
    else:
        r = warpgroup_mma(kr, qr_smem.permute((1, 0)), gl.zeros([BLOCK_N, 2 * BLOCK_H], gl.float32, layout=r_layout),
                          use_acc=False, is_async=True)
    g2 = warpgroup_mma_wait(num_outstanding=2, deps=(g2, ))
    if DS:
        s += _hilo(g2, s16_layout, BLOCK_N, BLOCK_H) * sc2[:, None]
    else:
        s += _hilo(g2, s16_layout, BLOCK_N, BLOCK_H)
    g3, r = warpgroup_mma_wait(num_outstanding=0, deps=(g3, r))
    if DS:
        s += _hilo(g3, s16_layout, BLOCK_N, BLOCK_H) * sc3[:, None]
        s = s + gl.convert_layout(r, s16_layout)
    else:
        s += _hilo(g3, s16_layout, BLOCK_N, BLOCK_H)
        s = s + _hilo(r, s16_layout, BLOCK_N, BLOCK_H)
    return s, o3


@gluon.jit
def _ds_scales(sc_buf, n_valid, s16_layout: gl.constexpr, BLOCK_N: gl.constexpr):
    """fp8_ds_mla: the tile's four group scales per token ([BLOCK_N] each, token rows of ``s16_layout``), zero for
    rows past ``n_valid`` (the cache may hold NaN there: a zero scale keeps them out of P)."""
    # each thread reads all four scales of the token rows it holds in s16_layout (rows 8 apart: two 16-byte loads);
    # lanes that differ in their two low bits (s16_layout's columns) read the same rows. The columns split off
    # below are then s16_layout's row slices as they are: the conversions move no data.
    sc_layout: gl.constexpr = gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [0, 2], [8, 0]], lane_bases=[[0, 0], [0, 0], [1, 0], [2, 0], [4, 0]],
        warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[BLOCK_N, 4])
    sc = sc_buf.load(sc_layout)                                                   # [tokens, 4 groups]
    tok = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, sc_layout))
    sc = gl.where((tok < n_valid)[:, None], sc, 0.0)
    even, odd = gl.split(gl.reshape(sc, [BLOCK_N, 2, 2]))                          # groups (0, 2), (1, 3)
    c0, c2 = gl.split(even)
    c1, c3 = gl.split(odd)
    row: gl.constexpr = gl.SliceLayout(1, s16_layout)
    return (gl.convert_layout(c0, row), gl.convert_layout(c1, row), gl.convert_layout(c2, row),
            gl.convert_layout(c3, row))


@gluon.jit
def _v2_tile(i, it, kn, stage, kr_bufs, bars, sc_bufs, qn_smem, qr_smem, red_bufs, p_bufs, seq_len, qk_mul, o0, o1,
             o2, o3, m_i, l_acc, offs_tok, STAMPS, srow, s_layout: gl.constexpr, s16_layout: gl.constexpr,
             o_layout: gl.constexpr, v_layout: gl.constexpr, ld_layout: gl.constexpr, r_layout: gl.constexpr,
             NUM_BUF: gl.constexpr, GATHER: gl.constexpr, BLOCK_N: gl.constexpr, D_V: gl.constexpr,
             BLOCK_H: gl.constexpr, DS: gl.constexpr, CHAIN: gl.constexpr, PREFETCH: gl.constexpr,
             FAST_MAX: gl.constexpr, RK64: gl.constexpr, num_warps: gl.constexpr):
    """Tile i of the second kernel's LOOK 0 loop (buffer ``stage``, the program's tile count ``it``): its wait, scores,
    softmax and P.V, up to and with the barrier past which its buffer may take another tile."""
    n_valid = _tile_landed(kn, bars.index(stage), (it // NUM_BUF) & 1, seq_len - i * BLOCK_N, GATHER,
                           BLOCK_N, D_V, num_warps)
    _stamp_tile(STAMPS, srow, it, 0, 2)
    if DS:
        g0 = _ds_group(kn, qn_smem, 0, s_layout, BLOCK_N, BLOCK_H)
        g1 = _ds_group(kn, qn_smem, 1, s_layout, BLOCK_N, BLOCK_H)
        sc0, sc1, sc2, sc3 = _ds_scales(sc_bufs.index(stage), n_valid, s16_layout, BLOCK_N)
    elif CHAIN:
        g0 = _ds_group(kn, qn_smem, 0, s_layout, BLOCK_N, BLOCK_H)
        g1 = _ds_group(kn, qn_smem, 1, s_layout, BLOCK_N, BLOCK_H)
    else:
        s2 = _scores_v2(kn, kr_bufs.index(stage), qn_smem, qr_smem, s_layout, BLOCK_N, BLOCK_H, RK64)
    if PREFETCH:
        # V^T chunks 0 and 1 into registers while the score MMAs run (they read only the tile)
        v0 = _v_chunk(kn, 0, ld_layout, v_layout)
        v1 = _v_chunk(kn, 1, ld_layout, v_layout)
    if DS:
        # S = sum_g scale_g[token] (K_g . q_g) + K_rope . q_rope; P.V chunk c is group c: its P tile
        # carries scale_c[token] (the softmax sum does not)
        # (retires P.V(i - 1), the reader of the other chunk-3 P buffer, with group 0)
        s, o3 = _group_scores(g0, g1, o3, kn, kr_bufs.index(stage), qn_smem, qr_smem, sc0, sc1, sc2, sc3,
                              s_layout, r_layout, s16_layout, BLOCK_N, BLOCK_H, 1, 0)
        p, alpha_o, m_i, l_acc = _softmax_v2(s, qk_mul, n_valid, m_i, l_acc, red_bufs.index(it % 2),
                                             offs_tok, s16_layout, o_layout, BLOCK_N, BLOCK_H, FAST_MAX, 0)
        pc0 = p_bufs.index(0)
        pc1 = p_bufs.index(1)
        pc2 = p_bufs.index(2)
        pc3 = p_bufs.index(3 + it % 2)
        # 256 p scale_c in fp16 (divided out with the softmax sum): full fp16 precision down to group
        # scales of ~2^-22 / p, finite up to scales of 255 (latent amax 114,000; DeepSeek's are O(1))
        pc0.store((p * (sc0 * 256.0)[:, None]).to(gl.float16))
        pc1.store((p * (sc1 * 256.0)[:, None]).to(gl.float16))
        pc2.store((p * (sc2 * 256.0)[:, None]).to(gl.float16))
        pc3.store((p * (sc3 * 256.0)[:, None]).to(gl.float16))
    else:
        if CHAIN:
            # the scores folded in fp32 every 128 dims (retires P.V(i - 1) with groups 0 and 1)
            s2, o3 = _group_scores(g0, g1, o3, kn, kr_bufs.index(stage), qn_smem, qr_smem, None, None,
                                   None, None, s_layout, s_layout, s16_layout, BLOCK_N, BLOCK_H, 0, RK64)
        else:
            # Retires S(i) and P.V(i - 1) (the reader of the other P buffer).
            s2, o3 = warpgroup_mma_wait(num_outstanding=0, deps=(s2, o3))
        p, alpha_o, m_i, l_acc = _softmax_v2(s2, qk_mul, n_valid, m_i, l_acc, red_bufs.index(it % 2),
                                             offs_tok, s16_layout, o_layout, BLOCK_N, BLOCK_H, FAST_MAX,
                                             1 - CHAIN)
        pc0 = p_bufs.index(it % 2)
        pc0.store(p.to(gl.float16))
        pc1 = pc0
        pc2 = pc0
        pc3 = pc0
    fence_async_shared()
    _block_barrier()
    # (Waiting down to one MMA in flight after each issue frees the previous chunk's registers.)
    if not PREFETCH:
        v0 = _v_chunk(kn, 0, ld_layout, v_layout)
    a0 = warpgroup_mma(v0, pc0, o0 * alpha_o, is_async=True)
    if not PREFETCH:
        v1 = _v_chunk(kn, 1, ld_layout, v_layout)
    a1 = warpgroup_mma(v1, pc1, o1 * alpha_o, is_async=True)
    o0 = warpgroup_mma_wait(num_outstanding=1, deps=(a0, ))
    a2 = warpgroup_mma(_v_chunk(kn, 2, ld_layout, v_layout), pc2, o2 * alpha_o, is_async=True)
    o1 = warpgroup_mma_wait(num_outstanding=1, deps=(a1, ))
    o3 = warpgroup_mma(_v_chunk(kn, 3, ld_layout, v_layout), pc3, o3 * alpha_o, is_async=True)
    o2 = warpgroup_mma_wait(num_outstanding=1, deps=(a2, ))
    # The tile's last readers were S(i) (retired) and the chunk loads above (done in every warp past
    # the barrier; P.V reads registers): its buffer takes tile i + NUM_BUF now.
    _block_barrier()
    return o0, o1, o2, o3, m_i, l_acc


@gluon.jit(do_not_specialize=["B"])
def _mla_decode_hopper_tok_fp8_v2_kernel(
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
    NUM_BUF: gl.constexpr,
    PREFETCH: gl.constexpr,
    FAST_MAX: gl.constexpr,
    num_warps: gl.constexpr,
    GATHER: gl.constexpr = 0,
    LOOK: gl.constexpr = 0,
    RK64: gl.constexpr = 0,
    PT_EARLY: gl.constexpr = 0,
    DS: gl.constexpr = 0,
    CHAIN: gl.constexpr = 0,
    STAMPS=None,
    Q_FP8: gl.constexpr = 0,
    q_descale_ptr=None,
    q_descale=1.0,
    Q_DESCALE_FROM_PTR: gl.constexpr = 0,
    plan_ptr=None,
    done_ptr=None,
    PDL: gl.constexpr = 0,
    COPY_FIRST: gl.constexpr = 0,
    WG2: gl.constexpr = 0,
    WG1_REGS: gl.constexpr = 232,
):
    """fp8 (per-tensor) cache, H < 64: tokens on M, one warpgroup, 16 heads per program (module docstring).
    ``kv_nope_desc`` / ``kv_rope_desc``: the cache as [rows, 576] fp8 with [BLOCK_N, 512] / [BLOCK_N, 128]
    boxes (the first kernel's argument list, with the rope descriptor where it takes the cache pointer);
    ``kv_ptr``: the same cache, read row by row when ``GATHER`` (:func:`_gather_tile`: page size 1).

    ``DS`` (fp8_ds_mla: 656-byte rows, module docstring): ``kv_nope_desc`` the rows viewed as fp8 [rows, 656]
    ([BLOCK_N, 512] boxes at column 0), ``kv_rope_desc`` as bf16 [rows, 328] ([BLOCK_N, 64] boxes at column 264),
    and ``kv_scale_ptr`` is the cache's scales as a descriptor: the rows as fp32 [rows, 164] ([BLOCK_N, 4] boxes at
    column 128: the four group scales; ``KV_SCALE_FROM_PTR`` 0, ``kv_scale`` 1).

    ``Q_FP8`` (``mla_decode``'s e4m3 query, its value ``q * q_descale``; ``q_descale`` a float or, with
    ``Q_DESCALE_FROM_PTR``, read from ``q_descale_ptr``): ``q_ptr`` holds e4m3 values, read as they are; their pair
    is exact (``hi = e4m3(q s)`` with s a power of two, ``lo = 0``) and the scale goes into the scores' multiplier.

    ``done_ptr`` (a step's plan's counters, ``reduction.STREAM``): with at most ``STREAM_MAX_BUF`` buffers each
    partial segment is counted once its stores are visible, so that the reduction merges a request as soon as its
    partials are written (``kernel_hopper.STREAM_GROUPS``).

    ``PDL`` (launched as the programmatic dependent of the kernel before it, ``interface_hopper.SPLIT_PDL``): 1 waits
    for that kernel (``griddepcontrol.wait``) before its first global load, so only the launch and the shared memory's
    set-up overlap it; 2 (with ``plan_ptr`` and the scales given as floats) reads the plan's row first and waits right
    after it (before the first segment's page ids, query and copies), so the kernel before it must not write the
    plan."""
    LOG2E: gl.constexpr = 1.4426950408889634
    D_V: gl.constexpr = 512
    gl.static_assert(BLOCK_H == 16)
    gl.static_assert(BLOCK_N == 64)
    gl.static_assert(num_warps == 4)
    gl.static_assert(kv_nope_desc.block_type.shape[0] == BLOCK_N)
    gl.static_assert(kv_nope_desc.block_type.shape[1] == D_V)
    gl.static_assert(kv_rope_desc.block_type.shape[0] == BLOCK_N)
    if DS:
        # the 4-group scales fold into the scores and into P per chunk; only the TMA loader and LOOK 0
        gl.static_assert(kv_rope_desc.block_type.shape[1] == 64)
        gl.static_assert(kv_scale_ptr.block_type.shape[1] == 4)
        gl.static_assert(LOOK == 0)
    else:
        gl.static_assert(kv_rope_desc.block_type.shape[1] == 128)
    if CHAIN:
        # the score chains' fp32 fold: the loop of LOOK 0 (DS has it always)
        gl.static_assert(LOOK == 0)
        gl.static_assert(DS == 0)

    s_layout: gl.constexpr = wgmma_layout(2 * BLOCK_H, 32)
    s16_layout: gl.constexpr = wgmma_layout(BLOCK_H, 32)
    o_layout: gl.constexpr = wgmma_layout(BLOCK_H, 16)
    v_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    ld_layout: gl.constexpr = v_load_layout(BLOCK_N)
    q_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    kn_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, D_V], gl.float8e4nv)
    # the rope columns padded to 128 fp8 (zeros in 64..127): the 128-byte swizzle of the latent tiles
    kr_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, 128], gl.float8e4nv)
    qn_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([2 * BLOCK_H, D_V], gl.float8e4nv)
    if DS:
        qr_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_H, 64], gl.bfloat16)
        # the bf16 rope scores' accumulator ([BLOCK_N, BLOCK_H], the registers of s16_layout)
        r_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, BLOCK_H, 16])
    else:
        qr_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([2 * BLOCK_H, 128], gl.float8e4nv)
        r_layout: gl.constexpr = s_layout       # (unread without DS)
    p_smem_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_H], gl.float16)

    if PDL == 2:
        # (its scales as floats: a scale read from memory before the wait could be the kernel ahead's to write)
        gl.static_assert(plan_ptr is not None)
        gl.static_assert(KV_SCALE_FROM_PTR == 0)
        gl.static_assert(Q_DESCALE_FROM_PTR == 0)
    pid_h, pid, num_progs, h0 = _program_ids(BLOCK_H)
    srow = pid_h * num_progs + pid      # (the program's row of STAMPS: timeline probe only)
    if WG2 == 0:        # (WG2: a row a warpgroup, stamped in kernel_hopper_tok2)
        _stamp(STAMPS, srow, STAMP_GT_IN, 1)
        _stamp(STAMPS, srow, STAMP_CLK_IN)
    if PDL == 1:
        _wait_primary()
    if KV_SCALE_FROM_PTR:
        kv_scale = gl.load(kv_scale_ptr).to(gl.float32)
    score_scale = kv_scale          # (the scores' multiplier besides sm_scale and the query's power of two)
    if Q_FP8:
        if Q_DESCALE_FROM_PTR:
            q_descale = gl.load(q_descale_ptr).to(gl.float32)
        score_scale = kv_scale * q_descale
    if WG2:
        # two consumer warpgroups and a producer warp on one pool of buffers (kernel_hopper_tok2.py; TMA tiles of
        # the per-tensor fp8 cache, LOOK 0, no streamed counts; STAMPS a row a warpgroup)
        gl.static_assert((GATHER == 0) & (DS == 0) & (LOOK == 0))
        # (its configs are never counted: more buffers than the streamed reduction's, done_ptr unread)
        gl.static_assert(NUM_BUF > STREAM_MAX_BUF)
        kernel_hopper_tok2.run(q_ptr, kv_nope_desc, kv_rope_desc, page_table_ptr, seq_lens_ptr, out_ptr, lse_ptr,
                               part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, score_scale, kv_scale, B, H, stride_q_b,
                               stride_q_h, stride_pt_b, stride_out_b, stride_out_h, stride_po_s, stride_po_h,
                               stride_pl_s, PAGE_SIZE, RETURN_LSE, B_CHUNK, BLOCK_N, BLOCK_H, NUM_BUF, FAST_MAX, RK64,
                               WG1_REGS, plan_ptr, PDL, num_warps, STAMPS)
        return
    if DS:
        kv_sc_desc = kv_scale_ptr
    else:
        kv_sc_desc = None

    qn_smem = gl.allocate_shared_memory(gl.float8e4nv, [2 * BLOCK_H, D_V], qn_layout)
    kn_bufs = gl.allocate_shared_memory(gl.float8e4nv, [NUM_BUF, BLOCK_N, D_V], kn_layout)
    if DS:
        qr_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_H, 64], qr_layout)
        kr_bufs = gl.allocate_shared_memory(gl.bfloat16, [NUM_BUF, BLOCK_N, 64], kv_rope_desc.layout)
        sc_bufs = gl.allocate_shared_memory(gl.float32, [NUM_BUF, BLOCK_N, 4], kv_sc_desc.layout)
        # P^T per chunk (P times chunk c's group scale): chunks 0..2 retire inside their tile, chunk 3's P.V stays
        # in flight into the next tile: buffers 0, 1, 2 and 3 + it % 2
        p_bufs = gl.allocate_shared_memory(gl.float16, [5, BLOCK_N, BLOCK_H], p_smem_layout)
    else:
        qr_smem = gl.allocate_shared_memory(gl.float8e4nv, [2 * BLOCK_H, 128], qr_layout)
        kr_bufs = gl.allocate_shared_memory(gl.float8e4nv, [NUM_BUF, BLOCK_N, 128], kr_layout)
        sc_bufs = None
        # P^T, double-buffered: P.V(i - 1) may still read one while tile i writes the other
        p_bufs = gl.allocate_shared_memory(gl.float16, [2, BLOCK_N, BLOCK_H], p_smem_layout)
    if not DS:
        # the query's rope padding, written once (the segments rewrite columns 0..63)
        qr_smem.slice(64, 64, dim=1).store(gl.zeros([2 * BLOCK_H, 64], gl.float8e4nv, layout=q_layout))
    # per-warp maxima of the scores (FAST_MAX), double-buffered (tile i + 1 may write while a warp still reads
    # tile i's)
    red_bufs = gl.allocate_shared_memory(gl.float32, [2, 4, BLOCK_H], gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0]))
    bars = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    _init_tile_barriers(bars, NUM_BUF, GATHER, num_warps)

    # (fp8_ds_mla: its segments' costs not measured, the even split)
    if plan_ptr is not None:
        # the program's split and first segment as the plan kernel left them (one round trip of independent loads)
        _launch_dependents()
        t, t_stop, b, req_end, p_seq, p_pg0, p_pg1, p_pg2 = _plan_row(plan_ptr, pid)
    else:
        t, t_stop, b, req_end = _split_start(seq_lens_ptr, B, pid, num_progs, BLOCK_N, B_CHUNK, num_warps,
                                             FP8_SEG_COST * (1 - DS))
    _stamp(STAMPS, srow, STAMP_CLK_SPLIT)
    if PDL == 2:
        # (the plan's row read: every later load waits for the kernel ahead)
        _wait_primary()

    offs_tok = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s16_layout))
    offs_h_s = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(0, s16_layout))
    heads_q = h0 + gl.arange(0, BLOCK_H, layout=gl.SliceLayout(1, q_layout))
    hmask_q = heads_q < H
    it = 0
    while t < t_stop:
        # The page ids of the segment's first tiles, then the query's loads, then the tiles' copies. The query's loads
        # issued behind the tiles waited for the whole first wave of tiles of every program (H200, session 18: 6.2
        # us from the split to the query at batch 32, then 0.5 us to the first tile), and the memory idled while each
        # program then worked through its first tile. (ptxas computes the query's maxima, which wait for its loads,
        # before the copies' issue whatever the order in the source: with the page ids loaded first, the two waits
        # overlap.)
        if plan_ptr is not None:
            if it == 0:
                b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _planned_segment(
                    page_table_ptr, stride_pt_b, b, t, t_stop, req_end, p_seq, BLOCK_N)
                if GATHER:
                    # (the row gather's page ids, one a row, are not the plan's: loaded here, the split and the
                    # segment's request and length read from the plan)
                    pg0 = _tile_pages(pt_base, i_first, i_stop, seq_len, PAGE_SIZE, BLOCK_N, GATHER, num_warps)
                    pg1 = _tile_pages(pt_base, i_first + 1, i_stop, seq_len, PAGE_SIZE, BLOCK_N, GATHER, num_warps)
                    if NUM_BUF > 2:
                        pg2 = _tile_pages(pt_base, i_first + 2, i_stop, seq_len, PAGE_SIZE, BLOCK_N, GATHER,
                                          num_warps)
                    else:
                        pg2 = pg1
                else:
                    pg0 = p_pg0
                    pg1 = p_pg1
                    pg2 = p_pg2
            else:
                b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base, pg0, pg1, pg2 = _segment_pages(
                    seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, PAGE_SIZE, BLOCK_N, GATHER,
                    NUM_BUF, num_warps)
        else:
            b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base, pg0, pg1, pg2 = _segment_pages(
                seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, PAGE_SIZE, BLOCK_N, GATHER, NUM_BUF,
                num_warps)
        if COPY_FIRST == 0:
            # (COPY_FIRST: the query's loads after the copies, docstring)
            qn, qr = _load_q_raw(q_ptr + b.to(gl.int64) * stride_q_b, heads_q, hmask_q, stride_q_h, q_layout)
        # The previous segment's MMAs (which read the query tile) are retired in every warp past this.
        _block_barrier()
        for k in gl.static_range(NUM_BUF):
            if i_first + k < i_stop:
                if k < 3:
                    if k == 0:
                        pg = pg0
                    elif k == 1:
                        pg = pg1
                    else:
                        pg = pg2
                    _issue_v2_at(kv_nope_desc, kv_rope_desc, kv_ptr, kn_bufs, kr_bufs, bars, pg, i_first + k,
                                 (it + k) % NUM_BUF, PAGE_SIZE, 264 if DS else 512, BLOCK_N, GATHER, num_warps,
                                 kv_sc_desc, sc_bufs)
                else:       # (buffers past the third: their page ids loaded here)
                    _issue_v2(kv_nope_desc, kv_rope_desc, kv_ptr, kn_bufs, kr_bufs, bars, pt_base, i_first + k,
                              (it + k) % NUM_BUF, seq_len, PAGE_SIZE, 264 if DS else 512, BLOCK_N, GATHER, num_warps,
                              kv_sc_desc, sc_bufs)
        if COPY_FIRST:
            qn, qr = _load_q_raw(q_ptr + b.to(gl.int64) * stride_q_b, heads_q, hmask_q, stride_q_h, q_layout)
        q_scale = _q_cat(qn, qr, qn_smem, qr_smem, BLOCK_H, DS)
        fence_async_shared()
        _block_barrier()
        if it == 0:
            _stamp(STAMPS, srow, STAMP_CLK_READY)
        qk_mul = gl.convert_layout(sm_scale * LOG2E * score_scale / q_scale, gl.SliceLayout(0, s16_layout))

        m_i = gl.full([BLOCK_H], float("-inf"), gl.float32, layout=gl.SliceLayout(0, s16_layout))
        # the softmax denominator per token slot: reduced over tokens once, after the segment
        l_acc = gl.zeros([BLOCK_N, BLOCK_H], gl.float32, layout=s16_layout)
        # o0..o2 are retired inside each tile (their A operands are registers that the next chunk reuses);
        # o3, the last, stays in flight until the next tile's score wait.
        o0 = gl.zeros([128, BLOCK_H], gl.float32, layout=o_layout)
        o1 = gl.zeros([128, BLOCK_H], gl.float32, layout=o_layout)
        o2 = gl.zeros([128, BLOCK_H], gl.float32, layout=o_layout)
        o3 = warpgroup_mma_init(gl.zeros([128, BLOCK_H], gl.float32, layout=o_layout))
        if LOOK == 0:
            for i in range(i_first, i_stop):
                stage = it % NUM_BUF
                kn = kn_bufs.index(stage)
                if PT_EARLY:
                    # the page ids of the tile this buffer takes next, loaded a tile ahead of their use (the TMA's
                    # coordinates wait on this load)
                    page_nx = _tile_pages(pt_base, i + NUM_BUF, i_stop, seq_len, PAGE_SIZE, BLOCK_N, GATHER, num_warps)
                o0, o1, o2, o3, m_i, l_acc = _v2_tile(
                    i, it, kn, stage, kr_bufs, bars, sc_bufs, qn_smem, qr_smem, red_bufs, p_bufs, seq_len, qk_mul,
                    o0, o1, o2, o3, m_i, l_acc, offs_tok, STAMPS, srow, s_layout, s16_layout, o_layout, v_layout,
                    ld_layout, r_layout, NUM_BUF, GATHER, BLOCK_N, D_V, BLOCK_H, DS, CHAIN, PREFETCH, FAST_MAX, RK64,
                    num_warps)
                if i + NUM_BUF < i_stop:
                    if PT_EARLY:
                        _issue_v2_at(kv_nope_desc, kv_rope_desc, kv_ptr, kn_bufs, kr_bufs, bars, page_nx, i + NUM_BUF,
                                     stage, PAGE_SIZE, 264 if DS else 512, BLOCK_N, GATHER, num_warps, kv_sc_desc,
                                     sc_bufs)
                    else:
                        _issue_v2(kv_nope_desc, kv_rope_desc, kv_ptr, kn_bufs, kr_bufs, bars, pt_base, i + NUM_BUF,
                                  stage, seq_len, PAGE_SIZE, 264 if DS else 512, BLOCK_N, GATHER, num_warps,
                                  kv_sc_desc, sc_bufs)
                _stamp_tile(STAMPS, srow, it, 1, 2)
                it += 1
            o3 = warpgroup_mma_wait(num_outstanding=0, deps=(o3, ))
        else:
            # S one tile ahead: S(i + 1) is issued before tile i's softmax (LOOK 1) or between its P.V chunks 1
            # and 2 (LOOK 2), so the tensor core runs it under work of tile i. The issue is unconditional (after
            # a segment's last tile it reads a buffer no copy is writing; the result is dropped), so that no
            # wgmma in flight crosses a branch.
            st0 = it % NUM_BUF
            mbarrier.wait(bars.index(st0), (it // NUM_BUF) & 1)
            if GATHER:
                fence_async_shared()
            s_nx = _scores_v2(kn_bufs.index(st0), kr_bufs.index(st0), qn_smem, qr_smem, s_layout, BLOCK_N, BLOCK_H,
                              RK64)
            # (retired here: the loop carries S(i) retired, as each tile's P.V waits retire S(i + 1))
            s_nx = warpgroup_mma_wait(num_outstanding=0, deps=(s_nx, ))
            for i in range(i_first, i_stop):
                stage = it % NUM_BUF
                nstage = (it + 1) % NUM_BUF
                kn = kn_bufs.index(stage)
                if PT_EARLY:
                    page_nx = _tile_pages(pt_base, i + NUM_BUF, i_stop, seq_len, PAGE_SIZE, BLOCK_N, GATHER, num_warps)
                # S(i) retired with tile i - 1's chunk waits (or before the loop). P.V(i - 1)'s last chunk: retired
                # here under LOOK 1 (retiring it behind S(i + 1), with wait_group 1, made ptxas serialise every
                # wgmma: C7514); under LOOK 2 it stays in flight through this tile's softmax (it reads the other P
                # buffer) and retires before o3 is rescaled.
                s2 = s_nx
                if LOOK == 1:
                    o3 = warpgroup_mma_wait(num_outstanding=0, deps=(o3, ))
                n_valid = seq_len - i * BLOCK_N
                if n_valid < BLOCK_N:
                    # rows past seq_len zeroed for P.V (S(i) has retired; its masked scores ignore them; P.V(i - 1)
                    # reads registers and the other P buffer)
                    _zero_rows(kn, n_valid, BLOCK_N, D_V, num_warps)
                    fence_async_shared()
                    _block_barrier()
                if LOOK == 1:
                    if i + 1 < i_stop:
                        mbarrier.wait(bars.index(nstage), ((it + 1) // NUM_BUF) & 1)
                        if GATHER:
                            fence_async_shared()
                    s_nx = _scores_v2(kn_bufs.index(nstage), kr_bufs.index(nstage), qn_smem, qr_smem, s_layout,
                                      BLOCK_N, BLOCK_H, RK64)
                if PREFETCH:
                    v0 = _v_chunk(kn, 0, ld_layout, v_layout)
                    v1 = _v_chunk(kn, 1, ld_layout, v_layout)
                p, alpha_o, m_i, l_acc = _softmax_v2(s2, qk_mul, n_valid, m_i, l_acc, red_bufs.index(it % 2), offs_tok,
                                                     s16_layout, o_layout, BLOCK_N, BLOCK_H, FAST_MAX)
                p_smem = p_bufs.index(it % 2)
                p_smem.store(p.to(gl.float16))
                fence_async_shared()
                _block_barrier()
                if LOOK == 2:
                    o3 = warpgroup_mma_wait(num_outstanding=0, deps=(o3, ))
                if not PREFETCH:
                    v0 = _v_chunk(kn, 0, ld_layout, v_layout)
                a0 = warpgroup_mma(v0, p_smem, o0 * alpha_o, is_async=True)
                if not PREFETCH:
                    v1 = _v_chunk(kn, 1, ld_layout, v_layout)
                a1 = warpgroup_mma(v1, p_smem, o1 * alpha_o, is_async=True)
                if LOOK == 2:
                    if i + 1 < i_stop:
                        mbarrier.wait(bars.index(nstage), ((it + 1) // NUM_BUF) & 1)
                        if GATHER:
                            fence_async_shared()
                    s_nx = _scores_v2(kn_bufs.index(nstage), kr_bufs.index(nstage), qn_smem, qr_smem, s_layout,
                                      BLOCK_N, BLOCK_H, RK64)
                # wgmmas retire in order: LOOK 1 has S(i + 1) before a0 (both retire here), LOOK 2 after a1
                if LOOK == 1:
                    o0, s_nx = warpgroup_mma_wait(num_outstanding=1, deps=(a0, s_nx))
                else:
                    o0 = warpgroup_mma_wait(num_outstanding=2, deps=(a0, ))
                a2 = warpgroup_mma(_v_chunk(kn, 2, ld_layout, v_layout), p_smem, o2 * alpha_o, is_async=True)
                o1 = warpgroup_mma_wait(num_outstanding=LOOK, deps=(a1, ))
                o3 = warpgroup_mma(_v_chunk(kn, 3, ld_layout, v_layout), p_smem, o3 * alpha_o, is_async=True)
                if LOOK == 1:
                    o2 = warpgroup_mma_wait(num_outstanding=1, deps=(a2, ))
                else:
                    o2, s_nx = warpgroup_mma_wait(num_outstanding=1, deps=(a2, s_nx))
                # tile i's buffer: S(i) retired, its chunks loaded in every warp past the barrier
                _block_barrier()
                if i + NUM_BUF < i_stop:
                    if PT_EARLY:
                        _issue_v2_at(kv_nope_desc, kv_rope_desc, kv_ptr, kn_bufs, kr_bufs, bars, page_nx, i + NUM_BUF,
                                     stage, PAGE_SIZE, 512, BLOCK_N, GATHER, num_warps)
                    else:
                        _issue_v2(kv_nope_desc, kv_rope_desc, kv_ptr, kn_bufs, kr_bufs, bars, pt_base, i + NUM_BUF,
                                  stage, seq_len, PAGE_SIZE, 512, BLOCK_N, GATHER, num_warps)
                it += 1
            o3 = warpgroup_mma_wait(num_outstanding=0, deps=(o3, ))

        l_i = gl.sum(l_acc, axis=0)
        if DS:   # (P scaled by 256: the fp16 P times a group scale)
            inv = gl.convert_layout(kv_scale / (256.0 * l_i), gl.SliceLayout(0, o_layout))[None, :]
        else:
            inv = gl.convert_layout(kv_scale / l_i, gl.SliceLayout(0, o_layout))[None, :]
        _store_chunks_segment(o0, o1, o2, o3, inv, m_i, l_i, h0, offs_h_s, H, b, pid, pid_h,
                              i_first, i_stop, req_tiles, out_ptr, part_o_ptr, lse_ptr, part_lse_ptr, seg_ptr,
                              stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s, RETURN_LSE, True)
        if done_ptr is not None:
            if NUM_BUF <= STREAM_MAX_BUF:       # (kernel_hopper.STREAM_GROUPS)
                if (i_first != 0) | (i_stop != req_tiles):
                    _block_barrier()
                    _segment_written(done_ptr, b, pid_h)
        t = seg_stop
        b += 1
    _stamp_out(STAMPS, srow, it)

    for k in gl.static_range(NUM_BUF):
        mbarrier.invalidate(bars.index(k))


@gluon.jit(do_not_specialize=["B"])
def _kv_stream_kernel(kv_nope_desc, kv_rope_desc, kv_ptr, page_table_ptr, seq_lens_ptr, out_ptr, B, stride_pt_b,
                      PAGE_SIZE: gl.constexpr, ROPE_COL: gl.constexpr, B_CHUNK: gl.constexpr,
                      BLOCK_N: gl.constexpr, NUM_BUF: gl.constexpr, num_warps: gl.constexpr, GATHER: gl.constexpr = 0,
                      STAMPS=None):
    """The bandwidth ceiling of the decode kernels' load path (a measurement, not a decode): the same work split
    and page-table walk, the same loads NUM_BUF deep (TMA boxes, or with ``GATHER`` the second fp8 kernel's row
    gather, fp8 only), and no math (each tile is waited for and its buffer refilled at once). ``out[p]``: the
    tiles program p waited for. ``STAMPS`` (benchmarks/probes/timeline.py, a cell with ``STREAM=1``): the decode
    kernels' stamps, a tile landed when its wait ended and done once its buffer's next copy is issued."""
    kn_bufs = gl.allocate_shared_memory(kv_nope_desc.dtype, [NUM_BUF] + kv_nope_desc.block_type.shape,
                                        kv_nope_desc.layout)
    kr_bufs = gl.allocate_shared_memory(kv_rope_desc.dtype, [NUM_BUF] + kv_rope_desc.block_type.shape,
                                        kv_rope_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    _init_tile_barriers(bars, NUM_BUF, GATHER, num_warps)
    pid = gl.program_id(0)
    _stamp(STAMPS, pid, STAMP_GT_IN, 1)
    _stamp(STAMPS, pid, STAMP_CLK_IN)
    t, t_stop, b, req_end = _split_start(seq_lens_ptr, B, pid, gl.num_programs(0), BLOCK_N, B_CHUNK, num_warps)
    _stamp(STAMPS, pid, STAMP_CLK_SPLIT)
    _stamp(STAMPS, pid, STAMP_CLK_READY)      # (no query: ready at the split)
    it = 0
    while t < t_stop:
        b, seq_len, _, req_end, seg_stop, i_first, i_stop, pt_base = _segment(
            seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, BLOCK_N)
        for k in gl.static_range(NUM_BUF):
            if i_first + k < i_stop:
                _issue_v2(kv_nope_desc, kv_rope_desc, kv_ptr, kn_bufs, kr_bufs, bars, pt_base, i_first + k,
                          (it + k) % NUM_BUF, seq_len, PAGE_SIZE, ROPE_COL, BLOCK_N, GATHER, num_warps)
        for i in range(i_first, i_stop):
            stage = it % NUM_BUF
            mbarrier.wait(bars.index(stage), (it // NUM_BUF) & 1)
            _stamp_tile(STAMPS, pid, it, 0, 2)
            if i + NUM_BUF < i_stop:
                _issue_v2(kv_nope_desc, kv_rope_desc, kv_ptr, kn_bufs, kr_bufs, bars, pt_base, i + NUM_BUF, stage,
                          seq_len, PAGE_SIZE, ROPE_COL, BLOCK_N, GATHER, num_warps)
            _stamp_tile(STAMPS, pid, it, 1, 2)
            it += 1
        t = seg_stop
        b += 1
    _stamp_out(STAMPS, pid, it)
    gl.store(out_ptr + pid, it)
    for k in gl.static_range(NUM_BUF):
        mbarrier.invalidate(bars.index(k))
