"""Hopper (sm_90a) MLA decode, bf16 cache, H < 64 (tokens on M): the KV tiles through a ring of 8 KB chunks.

Only ``@gluon.jit`` functions live here (interface_hopper.py launches them; a pinned config with ``RING = 1``
selects this kernel for a bf16 cache with H < 64). Shape letters as in kernel.py.

Why a second bf16 tokens-on-M kernel: ``kernel_hopper._mla_decode_hopper_tok_kernel`` holds two whole 72 KB tiles
(a third does not fit beside the query), and the load of tile i + 1 is issued once the MMAs of tile i - 1 have
retired, so while it computes on one tile at most one other is in flight: a tile's period is about the load's
latency. On an H200 that kernel moves 3.76 TB/s at batch 128 (FlashMLA 4.14; session 12, run 3) and is 3-10%
behind FlashMLA from batch 32 up, where the cache read is the whole cost.

Here shared memory holds NUM_SLOTS chunks of [64 tokens, 64 columns] (8 KB, one 128-byte swizzle atom wide)
beside the query: a tile is nine chunks (eight of the latent columns, the rope's), laid into the ring one after
another, so a tile's chunks need not be contiguous and the ring's capacity is not a whole number of tiles. With
25 slots (204,800 B; with the query, P and the maxima 226,088 B of the 232,448 a block may have), while tile i
computes, tile i + 1 and the first seven chunks of tile i + 2 are in flight: up to 128 KB instead of 72.

Measured on an H200 (session 13, run 5; docs/mla_decode.md): correct, and not faster. With 25 slots 1-6% slower
than the first kernel at batch 1-128, with 18 (two tiles) within 1% of it from batch 32 up: the load depth is not
what holds the first kernel at 3.77 TB/s (its TMA stream alone reached 4.37, session 9). Hence pinned only. Not yet
timed (written after that run): two programs an SM (``PROGRAMS_PER_SM = 2``, 11 slots each: two instruction streams
per SM), and ``EARLY_S = 1`` (a tile's score MMAs queued behind the previous tile's P.V, so the tensor cores do not
idle while the warps wait for P.V, refill the ring and wait for the tile).

* Each chunk is one TMA box [64, 64] of the cache viewed as [rows, 576] (columns 64k, k = 0..8); a tile's nine
  chunks complete one mbarrier (of ``NUM_SLOTS // 9 + 1``, taken in turn), whose expected bytes are the whole
  tile's, set when its first chunk is issued: the phase cannot complete until the last chunk has landed, though
  that chunk may be issued a tile later.
* A chunk is issued once the slot it takes is free, that is once every MMA of the tile that held the slot has
  retired: at the top of tile i, after the wait that retires P.V of tile i - 1, the program issues chunks up to
  ``9 i + NUM_SLOTS`` (never past its segment's last tile: a segment's first chunks go out with its query).
* ``S^T = K Q^T`` as nine wgmma groups (chunk k against the query's columns 64k..64k+63), then the softmax as the
  PIPE = 2 schedule of the first kernel (the running max across warps with one barrier, the sum per token slot),
  then ``O^T += V^T P^T`` as eight wgmmas of [64 dims, 16 heads] (chunk c's columns are output dims 64c..64c+63),
  left in flight until the next tile's top.

Rows past ``seq_len`` in a request's last tile (whole tiles are read) are masked to -inf in the scores and
zeroed in the eight latent chunks before P.V. Work split and partials as the other Hopper kernels
(``kernel_hopper._split_start`` / ``_segment``; the same reduction kernel).
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

from .kernel_hopper import (_block_barrier, _max_over_tokens, _program_ids, _segment, _split_start,
                            _store_lse_and_segment, _store_o, _tile_row, _tma_load, _zero_rows)

_CHUNKS = gl.constexpr(9)       # per tile: eight 64-column chunks of the latent part, one of the rope
_COLS = gl.constexpr(64)        # columns per chunk (128 bytes of bf16: one swizzle atom)


@gluon.jit
def _issue_chunks(kv_desc, ring, bars, pt_base, issued, it, seg_end, it0, i_first, NUM_SLOTS: gl.constexpr,
                  TILE_BARS: gl.constexpr, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr):
    """TMA of the program's chunks from ``issued`` on, as many as the ring has free slots while tile ``it`` is the
    oldest in use (up to chunk ``9 it + NUM_SLOTS``), never past the segment (``seg_end``). Chunk g: column block
    g % 9 of the segment's tile ``i_first + g // 9 - it0``, into slot g % NUM_SLOTS, on the mbarrier of tile
    g // 9. Returns the new count of chunks issued."""
    stop = gl.minimum(_CHUNKS * it + NUM_SLOTS, seg_end)
    while issued < stop:
        tile = issued // _CHUNKS
        k = issued % _CHUNKS
        row = _tile_row(pt_base, i_first + tile - it0, PAGE_SIZE, BLOCK_N)
        bar = bars.index(tile % TILE_BARS)
        if k == 0:
            mbarrier.expect(bar, _CHUNKS * kv_desc.block_type.nbytes)
        _tma_load(kv_desc, [row, k * _COLS], bar, ring.index(issued % NUM_SLOTS))
        issued += 1
    return issued


@gluon.jit
def _zero_tail(ring, g0, n_valid, NUM_SLOTS: gl.constexpr, BLOCK_N: gl.constexpr, num_warps: gl.constexpr):
    """In a request's last, partial tile (chunks g0 ..): its eight latent chunks' rows past the request zeroed (P.V
    reads them; they may hold NaN) before any MMA reads them."""
    if n_valid < BLOCK_N:
        for c in gl.static_range(8):
            _zero_rows(ring.index((g0 + c) % NUM_SLOTS), n_valid, BLOCK_N, _COLS, num_warps)
        fence_async_shared()
        _block_barrier()


@gluon.jit
def _scores(ring, qn_smem, qr_smem, g0, NUM_SLOTS: gl.constexpr, s_layout: gl.constexpr, BLOCK_N: gl.constexpr,
            BLOCK_H: gl.constexpr):
    """``S^T = K Q^T`` [BLOCK_N tokens, BLOCK_H heads] of the tile at chunks g0 .. g0 + 8, as nine async wgmma groups
    (chunk k against the query's columns 64k .. 64k + 63; the rope chunk last)."""
    s = gl.zeros([BLOCK_N, BLOCK_H], gl.float32, layout=s_layout)
    for k in gl.static_range(8):
        s = warpgroup_mma(ring.index((g0 + k) % NUM_SLOTS), qn_smem.slice(k * _COLS, _COLS, dim=1).permute((1, 0)),
                          s, use_acc=k > 0, is_async=True)
    return warpgroup_mma(ring.index((g0 + 8) % NUM_SLOTS), qr_smem.permute((1, 0)), s, is_async=True)


@gluon.jit(do_not_specialize=["B"])
def _mla_decode_hopper_tok_ring_kernel(
    q_nope_desc, q_rope_desc, kv_desc, kv_rope_desc,
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
    RING: gl.constexpr,
    num_warps: gl.constexpr,
    NUM_SLOTS: gl.constexpr = 25,
    PROGRAMS_PER_SM: gl.constexpr = 1,
    EARLY_S: gl.constexpr = 0,
):
    """Grid ``(H // 16, P)``, the arguments of ``kernel_hopper._mla_decode_hopper_tok_kernel`` except that
    ``kv_desc`` has [BLOCK_N, 64] boxes over all 576 columns (``kv_rope_desc`` is not read). PROGRAMS_PER_SM: the
    grid's programs per SM, a key of the config that only the launcher reads (two fit an SM with NUM_SLOTS <= 11:
    111,384 B each; ``interface_hopper._check_ring`` refuses more slots). EARLY_S = 1:
    tile i's score MMAs issued before P.V of tile i - 1 is retired, so the tensor cores do not wait for the chunk
    issue and the tile's barrier between them (needs a tile in flight ahead: NUM_SLOTS >= 18)."""
    LOG2E: gl.constexpr = 1.4426950408889634
    gl.static_assert(RING == 1)
    gl.static_assert(BLOCK_H == 16)
    gl.static_assert(BLOCK_N == 64)
    gl.static_assert(num_warps == 4)
    gl.static_assert(NUM_SLOTS >= _CHUNKS)
    gl.static_assert((EARLY_S == 0) | (NUM_SLOTS >= 2 * _CHUNKS))
    gl.static_assert(kv_desc.block_type.shape[1] == _COLS)
    TILE_BARS: gl.constexpr = NUM_SLOTS // _CHUNKS + 1
    dtype: gl.constexpr = kv_desc.dtype

    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_H, 16])
    o_layout: gl.constexpr = s_layout     # each P.V result is [64 dims, 16 heads], as S^T is [64 tokens, 16 heads]
    p_smem_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_H], dtype)

    pid_h, pid, num_progs, h0 = _program_ids(BLOCK_H)

    qn_smem = gl.allocate_shared_memory(dtype, [BLOCK_H, 512], q_nope_desc.layout)
    qr_smem = gl.allocate_shared_memory(dtype, [BLOCK_H, 64], q_rope_desc.layout)
    ring = gl.allocate_shared_memory(dtype, [NUM_SLOTS, BLOCK_N, _COLS], kv_desc.layout)
    p_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, BLOCK_H], p_smem_layout)
    # per-warp maxima of the scores, double-buffered (tile i + 1 may write while a warp still reads tile i's)
    red_bufs = gl.allocate_shared_memory(gl.float32, [2, 4, BLOCK_H], gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0]))
    bars = gl.allocate_shared_memory(gl.int64, [TILE_BARS, 1], mbarrier.MBarrierLayout())
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for k in gl.static_range(TILE_BARS):
        mbarrier.init(bars.index(k), count=1)
    mbarrier.init(q_bar, count=1)

    t, t_stop, b, req_end = _split_start(seq_lens_ptr, B, pid, num_progs, BLOCK_N, B_CHUNK, num_warps)

    offs_tok = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s_layout))
    offs_h_s = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(0, s_layout))
    offs_h_o = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(0, o_layout))
    offs_d_o = gl.arange(0, _COLS, layout=gl.SliceLayout(1, o_layout))
    qk_mul = sm_scale * LOG2E
    it = 0          # the program's tiles so far (all segments): tile it's chunks are 9 it .. 9 it + 8
    issued = 0      # the program's chunks issued so far
    q_phase = 0
    while t < t_stop:
        b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _segment(
            seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, BLOCK_N)
        seg_end = _CHUNKS * (it + i_stop - i_first)       # one past the segment's last chunk
        it0 = it

        # every warp has retired the previous segment's MMAs (its query and every slot are free)
        _block_barrier()
        mbarrier.expect(q_bar, q_nope_desc.block_type.nbytes + q_rope_desc.block_type.nbytes)
        _tma_load(q_nope_desc, [b * H + h0, 0], q_bar, qn_smem)
        _tma_load(q_rope_desc, [b * H + h0, 0], q_bar, qr_smem)
        issued = _issue_chunks(kv_desc, ring, bars, pt_base, issued, it, seg_end, it0, i_first,
                               NUM_SLOTS, TILE_BARS, PAGE_SIZE, BLOCK_N)
        mbarrier.wait(q_bar, q_phase)
        q_phase ^= 1

        m_i = gl.full([BLOCK_H], float("-inf"), gl.float32, layout=gl.SliceLayout(0, s_layout))
        l_acc = gl.zeros([BLOCK_N, BLOCK_H], gl.float32, layout=s_layout)     # the softmax sum per token slot
        o0 = warpgroup_mma_init(gl.zeros([_COLS, BLOCK_H], gl.float32, layout=o_layout))
        o1 = warpgroup_mma_init(gl.zeros([_COLS, BLOCK_H], gl.float32, layout=o_layout))
        o2 = warpgroup_mma_init(gl.zeros([_COLS, BLOCK_H], gl.float32, layout=o_layout))
        o3 = warpgroup_mma_init(gl.zeros([_COLS, BLOCK_H], gl.float32, layout=o_layout))
        o4 = warpgroup_mma_init(gl.zeros([_COLS, BLOCK_H], gl.float32, layout=o_layout))
        o5 = warpgroup_mma_init(gl.zeros([_COLS, BLOCK_H], gl.float32, layout=o_layout))
        o6 = warpgroup_mma_init(gl.zeros([_COLS, BLOCK_H], gl.float32, layout=o_layout))
        o7 = warpgroup_mma_init(gl.zeros([_COLS, BLOCK_H], gl.float32, layout=o_layout))
        for i in range(i_first, i_stop):
            if EARLY_S:
                # S(i) queued behind P.V(i - 1) (its chunks went out a tile ago), so the tensor cores go from one to
                # the other without the chunk issue and the tile's wait between them; then one wait for both (a
                # wait that left S(i) in flight made ptxas serialise every wgmma of the kernel: C7514), the freed
                # slots refilled, the tail zeroed (the score MMAs read those rows, but their scores are masked)
                mbarrier.wait(bars.index(it % TILE_BARS), (it // TILE_BARS) & 1)
                g0 = _CHUNKS * it
                n_valid = seq_len - i * BLOCK_N
                s = _scores(ring, qn_smem, qr_smem, g0, NUM_SLOTS, s_layout, BLOCK_N, BLOCK_H)
                s, o0, o1, o2, o3, o4, o5, o6, o7 = warpgroup_mma_wait(num_outstanding=0,
                                                                       deps=(s, o0, o1, o2, o3, o4, o5, o6, o7))
                _block_barrier()
                issued = _issue_chunks(kv_desc, ring, bars, pt_base, issued, it, seg_end, it0, i_first,
                                       NUM_SLOTS, TILE_BARS, PAGE_SIZE, BLOCK_N)
                _zero_tail(ring, g0, n_valid, NUM_SLOTS, BLOCK_N, num_warps)
            else:
                # Retire P.V of the tile before (the wgmmas retire in order): its slots are free, and the chunks
                # that fit go out before this tile is waited for.
                o0, o1, o2, o3, o4, o5, o6, o7 = warpgroup_mma_wait(num_outstanding=0,
                                                                    deps=(o0, o1, o2, o3, o4, o5, o6, o7))
                _block_barrier()
                issued = _issue_chunks(kv_desc, ring, bars, pt_base, issued, it, seg_end, it0, i_first,
                                       NUM_SLOTS, TILE_BARS, PAGE_SIZE, BLOCK_N)
                mbarrier.wait(bars.index(it % TILE_BARS), (it // TILE_BARS) & 1)
                g0 = _CHUNKS * it
                n_valid = seq_len - i * BLOCK_N
                _zero_tail(ring, g0, n_valid, NUM_SLOTS, BLOCK_N, num_warps)
                s = _scores(ring, qn_smem, qr_smem, g0, NUM_SLOTS, s_layout, BLOCK_N, BLOCK_H)
                s = warpgroup_mma_wait(num_outstanding=0, deps=(s, ))
            s = s * qk_mul
            s = gl.where((i * BLOCK_N + offs_tok < seq_len)[:, None], s, float("-inf"))
            m_new = gl.maximum(m_i, _max_over_tokens(s, red_bufs.index(it % 2), s_layout))
            alpha = gl.exp2(m_i - m_new)
            p = gl.exp2(s - m_new[None, :])
            l_acc = l_acc * alpha[None, :] + p
            m_i = m_new
            a = gl.convert_layout(alpha, gl.SliceLayout(0, o_layout))[None, :]
            o0, o1, o2, o3, o4, o5, o6, o7 = o0 * a, o1 * a, o2 * a, o3 * a, o4 * a, o5 * a, o6 * a, o7 * a
            p_smem.store(p.to(dtype))
            fence_async_shared()
            _block_barrier()
            o0 = warpgroup_mma(ring.index((g0 + 0) % NUM_SLOTS).permute((1, 0)), p_smem, o0, is_async=True)
            o1 = warpgroup_mma(ring.index((g0 + 1) % NUM_SLOTS).permute((1, 0)), p_smem, o1, is_async=True)
            o2 = warpgroup_mma(ring.index((g0 + 2) % NUM_SLOTS).permute((1, 0)), p_smem, o2, is_async=True)
            o3 = warpgroup_mma(ring.index((g0 + 3) % NUM_SLOTS).permute((1, 0)), p_smem, o3, is_async=True)
            o4 = warpgroup_mma(ring.index((g0 + 4) % NUM_SLOTS).permute((1, 0)), p_smem, o4, is_async=True)
            o5 = warpgroup_mma(ring.index((g0 + 5) % NUM_SLOTS).permute((1, 0)), p_smem, o5, is_async=True)
            o6 = warpgroup_mma(ring.index((g0 + 6) % NUM_SLOTS).permute((1, 0)), p_smem, o6, is_async=True)
            o7 = warpgroup_mma(ring.index((g0 + 7) % NUM_SLOTS).permute((1, 0)), p_smem, o7, is_async=True)
            it += 1
        o0, o1, o2, o3, o4, o5, o6, o7 = warpgroup_mma_wait(num_outstanding=0, deps=(o0, o1, o2, o3, o4, o5, o6, o7))

        l_i = gl.sum(l_acc, axis=0)
        inv = gl.convert_layout(1.0 / l_i, gl.SliceLayout(0, o_layout))[None, :]
        lse2 = m_i + gl.log2(l_i)
        heads_o = h0 + offs_h_o
        heads_s = h0 + offs_h_s
        mask_o = (heads_o < H)[None, :]
        whole = (i_first == 0) & (i_stop == req_tiles)
        outs = (o0, o1, o2, o3, o4, o5, o6, o7)
        for c in gl.static_range(8):       # chunk c of O^T: output dims 64c .. 64c + 63
            _store_o(outs[c] * inv, whole, b, pid, heads_o, offs_d_o + c * _COLS, out_ptr, part_o_ptr, stride_out_b,
                     stride_out_h, stride_po_s, stride_po_h, mask_o, True)
        _store_lse_and_segment(lse2, whole, b, H, pid, pid_h, i_first, i_stop, req_tiles, heads_s, lse_ptr,
                               part_lse_ptr, seg_ptr, stride_pl_s, (heads_s < H), RETURN_LSE)
        t = seg_stop
        b += 1

    for k in gl.static_range(TILE_BARS):
        mbarrier.invalidate(bars.index(k))
    mbarrier.invalidate(q_bar)
