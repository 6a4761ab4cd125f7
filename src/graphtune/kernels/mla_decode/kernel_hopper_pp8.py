"""Hopper (sm_90a) MLA decode on a per-tensor fp8 cache, heads on M, two consumer warpgroups taking alternate tiles
(the ping-pong schedule of kernel_hopper_pp.py), with nothing widened in shared memory (``T8 = 1``).

Only ``@gluon.jit`` functions live here (interface_hopper.py launches them: a config with ``T8 = 1`` selects this
kernel for an fp8 cache with H a multiple of 64). Shape letters as in kernel.py.

Why: the fp8 ping-pong kernel (kernel_hopper_pp.py, ``FP8``) lands each fp8 tile in the first half of an fp16
buffer and widens it there, in place, before its score MMAs: 36 KB read and 72 KB written through shared memory
and ~18 K conversions a tile, on the owner's path. On the H200 (session 21, run 7) a build that skipped the
widening ran the pair of tiles in 3.28 us against 5.60 (split kernel at batch 64: 0.1174 against 0.1955 ms). Here
the tile is never rewritten:

* **Scores from the fp8 tile.** S = Q K^T as fp8 wgmmas reading the landed tile (K-major on both sides): the
  query as an fp8 pair ``hi = fp8(q s)``, ``lo = fp8(q s - hi)`` (s a power of two per head with max |q s| = 2^8:
  hi + lo holds the bf16 query's bits up to the e4m3 range), one accumulator for both; the rope columns as one
  128-column wgmma, [hi | lo] of the query against the tile's rope rows stored twice (128-byte rows: the fp8
  kernels keep every fp8 wgmma operand 128-byte swizzled, kernel_hopper._load_rope says why).
* **P.V with dims on M.** Each warpgroup's half of O is kept transposed, O^T [256 dims, 64 heads] fp32 (128
  registers a thread, as O was), and O^T += V^T P^T takes V^T as the wgmma's *register* A operand and P^T (P
  [heads, tokens] fp16 in shared memory) as B. A register operand has no K-major rule, so V^T needs no transpose
  in memory: each thread loads the bytes its A fragments hold straight from the fp8 tile (``V_RAW``: 8 adjacent
  dims of 16 tokens, 64-bit loads, conflict-free under the tile's swizzle) and converts them to fp16 in registers
  (exact: every e4m3 value is an fp16). The MMA's rows are a fixed relabelling of the dims (row m = 64 rep + 16 w
  + 8 h + q holds dim 64 w + 8 q + 2 rep + h: the dims a thread's fragments hold are 8 adjacent ones), undone
  when O is stored (``O_OUT``: 8 adjacent dims a thread, 16-byte bf16 stores).
* **Three stages.** Without fp16 tiles a stage is 40 KB (latent 32 KB, rope 8 KB): query pair 72 KB + 3 stages
  + two P buffers 16 KB = 208 KB. WG0 issues every TMA; a stage is free (``kfree``, two arrivals) once its
  owner's score MMAs retired and both warpgroups loaded their halves of V from it.
* **P handed over in shared memory, read by both P.V MMAs.** Two P buffers (even tiles: WG0's, odd: WG1's);
  each warpgroup arrives on the other's ``pfree`` once its MMA that read the other's P retired.

The online softmax, the split, the segment's sums exchange and the partial outputs are the ping-pong kernel's.
Rows past ``seq_len`` in a request's last tile (TMA reads whole tiles; they may hold NaN) are masked to -inf in the
scores and zeroed in registers in V^T.
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

from .kernel_hopper import (STAMP_CLK_READY, _segment, _zero_rows, _stamp, _stamp_out, _stamp_tile,
                            _store_lse_and_segment, _tma_load)
from .kernel_hopper_heads import _REINTERPRET_PUBLIC, _q_chunks
from .kernel_hopper_pp import _softmax_step, _wg_barrier, _wg_start

_D_V = gl.constexpr(512)
_HALF = gl.constexpr(256)       # output columns (dims) per warpgroup
_NS = gl.constexpr(3)           # tile stages

# A quarter of V, [64 tokens, 128 dims] of the fp8 tile (one warpgroup's half of V is two), as two of its P.V A
# fragments hold it (see the module docstring): registers +1, +2 dims (4 adjacent: one 32-bit load a token), +1, +8,
# +16, +32 tokens; lanes +2, +4 tokens, +4, +8, +16 dims; warps +32, +64 dims. A warp's load reads 32 bytes of rows
# {0, 2, 4, 6} (+ the register's offset): four rows of a 128-byte swizzle atom whose 16-byte chunks land on distinct
# banks, one wavefront.
V_RAW = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [0, 2], [1, 0], [8, 0], [16, 0], [32, 0]],
    lane_bases=[[2, 0], [4, 0], [0, 4], [0, 8], [0, 16]], warp_bases=[[0, 32], [0, 64]], block_bases=[],
    shape=[64, 128]))
# A warpgroup's output half [64 heads, 256 dims] as the O^T accumulators hold it, the relabelling undone: registers
# +1, +2, +128 dims, +1, +8, +16, +32 heads; lanes +2, +4 heads, +4, +8, +16 dims; warps +32, +64 dims.
O_OUT = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [0, 2], [0, 128], [1, 0], [8, 0], [16, 0], [32, 0]],
    lane_bases=[[2, 0], [4, 0], [0, 4], [0, 8], [0, 16]], warp_bases=[[0, 32], [0, 64]], block_bases=[],
    shape=[64, 256]))


@gluon.jit
def _as_rows(y):
    """[K, 4 w, 8 q, 2 h] -> [64 rows, K], row 16 w + 8 h + q."""
    k: gl.constexpr = y.shape[0]
    return gl.reshape(gl.permute(y, (1, 3, 2, 0)), [64, k])


@gluon.jit
def _v_raw(k8, HALF: gl.constexpr, Q: gl.constexpr):
    """Quarter Q (dims ``[128 Q, 128 Q + 128)`` of this warpgroup's half ``HALF``) of the tile's V as fp8 registers
    (``V_RAW``)."""
    return k8.slice(HALF * 256 + Q * 128, 128, dim=1).load(V_RAW)


@gluon.jit
def _quarter_chunks(raw):
    """A quarter of V (``_v_raw``) as its two row chunks' values, [tokens, 4 w, 8 q, 2 h] each."""
    y = gl.reshape(raw, [raw.shape[0], 4, 8, 2, 2])    # (k, w, q, c', h)
    return gl.split(gl.permute(y, (0, 1, 2, 4, 3)))   # (k, w, q, h, c') -> c'


@gluon.jit
def _a_operand(c8, a_layout: gl.constexpr):
    """One row chunk of the fp8 half of V ([tokens, 4 w, 8 q, 2 h], from ``_pv8``) as the P.V wgmma's fp16 A
    operand [64 rows, tokens]. (Rows past a request's end were zeroed in shared memory by the tile's owner,
    ``_issue_scores``: masked here, every chunk's conversion had a second copy, ~2,000 instructions.)"""
    return gl.convert_layout(_as_rows(c8), a_layout).to(gl.float16)


@gluon.jit
def _pv8(k8, HALF: gl.constexpr, p_view, o0, o1, o2, o3, a_layout: gl.constexpr, BLOCK_N: gl.constexpr,
         PVD: gl.constexpr):
    """O^T_c += A_c P^T for the four row chunks of this warpgroup's half of V in tile buffer ``k8`` (async; P^T =
    ``p_view``): row 16 w + 8 h + q of chunk c = 2 Q + c' holds dim 128 Q + 32 w + 4 q + 2 c' + h. Each quarter of V
    is loaded (``_v_raw``) and each chunk converted just before its MMA, at most two MMAs in flight (their A registers
    stay pinned until they retire: the four chunks' 64 registers beside O's 128 serialised the wgmmas or spilled).
    Returns once every byte of V it needs is in registers (the caller may free the buffer)."""
    # (PVD: the P.V chunks in flight, 1 or 2; N = PVD - 1 left in flight at each wait)
    N: gl.constexpr = PVD - 1
    c0, c1 = _quarter_chunks(_v_raw(k8, HALF, 0))
    o0 = warpgroup_mma(_a_operand(c0, a_layout), p_view, o0, is_async=True)
    if PVD == 1:
        o0 = warpgroup_mma_init(warpgroup_mma_wait(num_outstanding=0, deps=(o0, )))
    o1 = warpgroup_mma(_a_operand(c1, a_layout), p_view, o1, is_async=True)
    c2, c3 = _quarter_chunks(_v_raw(k8, HALF, 1))
    if PVD == 1:
        o1 = warpgroup_mma_init(warpgroup_mma_wait(num_outstanding=0, deps=(o1, )))
    else:
        o0 = warpgroup_mma_init(warpgroup_mma_wait(num_outstanding=N, deps=(o0, )))
    o2 = warpgroup_mma(_a_operand(c2, a_layout), p_view, o2, is_async=True)
    if PVD == 1:
        o2 = warpgroup_mma_init(warpgroup_mma_wait(num_outstanding=0, deps=(o2, )))
    else:
        o1 = warpgroup_mma_init(warpgroup_mma_wait(num_outstanding=N, deps=(o1, )))
    o3 = warpgroup_mma(_a_operand(c3, a_layout), p_view, o3, is_async=True)
    return o0, o1, o2, o3


@gluon.jit
def _scores8(qh, ql, qr, k8, kr, qz, s_layout: gl.constexpr, BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr):
    """S = Q K^T of one landed fp8 tile: the rope pair as one 128-column wgmma, then hi and lo of each 128-column
    latent chunk (async; ``qz`` as ``kernel_hopper_pp._scores``: 0, not provably so, so the query chunks' addresses
    are not hoisted out of the tile loop). The accumulator has the layout of fp8 wgmmas (k = 32); ``_s_retired``
    gives the retired scores ``s_layout``, the same registers."""
    hi = _q_chunks(qh, BLOCK_H, 128)
    lo = _q_chunks(ql, BLOCK_H, 128)
    s8_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, BLOCK_N, 32])
    s = warpgroup_mma(qr, kr.permute((1, 0)), gl.zeros([BLOCK_H, BLOCK_N], gl.float32, layout=s8_layout),
                      use_acc=False, is_async=True)
    for c in gl.static_range(4):
        kc = k8.slice(c * 128, 128, dim=1).permute((1, 0))
        s = warpgroup_mma(hi.index(c + qz), kc, s, is_async=True)
        s = warpgroup_mma(lo.index(c + qz), kc, s, is_async=True)
    return s


@gluon.jit
def _s_retired(s, s_layout: gl.constexpr):
    """The score MMAs retired, their accumulator in ``s_layout`` (the same registers as the fp8 wgmmas' layout)."""
    return gl.convert_layout(warpgroup_mma_wait(num_outstanding=0, deps=(s, )), s_layout)


@gluon.jit
def _no_scores(qr, BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr):
    """Where no tile follows: an MMA of the score accumulator's type (the query's rope pair against itself), never
    read. Every path then defines the loop's score accumulator by a wgmma: a path that left it as it was (or set it
    otherwise) made ptxas serialise every wgmma of the kernel (C7515)."""
    s8_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, BLOCK_N, 32])
    return warpgroup_mma(qr, qr.permute((1, 0)), gl.zeros([BLOCK_H, BLOCK_N], gl.float32, layout=s8_layout),
                         use_acc=False, is_async=True)


@gluon.jit
def _issue_scores(qh, ql, qr, k8_bufs, kr_bufs, land, g, kv_ptr, pt_base, j, n_valid, PAGE_SIZE: gl.constexpr,
                  s_layout: gl.constexpr, BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr):
    """The score MMAs of tile j (the program's g-th; async), once it landed, its rope rows loaded and stored first.
    (Issued a tile ahead of their softmax, off the path between the warpgroups' hand-offs: the rope's load latency
    is not waited for there, and its registers are not held across the tile loop, as a prefetch would.)"""
    rope_layout: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    rope = _load_rope32(kv_ptr, pt_base, j, PAGE_SIZE, BLOCK_N, rope_layout)
    st = g % _NS
    mbarrier.wait(land.index(st), (g // _NS) & 1)
    if n_valid < BLOCK_N:
        # rows past the request's end (TMA reads whole tiles: they may hold NaN, which P's zeros would not clear)
        # zeroed before anyone reads V from them: both warpgroups' P.V of this tile come after this warpgroup's
        # hand-off of its P
        _zero_rows(k8_bufs.index(st), n_valid, BLOCK_N, _D_V, 4)
    _store_rope(kr_bufs.index(st), rope)
    return _scores8(qh, ql, qr, k8_bufs.index(st), kr_bufs.index(st), j >> 30, s_layout, BLOCK_H, BLOCK_N)


@gluon.jit
def _load_rope32(kv_ptr, pt_base, j, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr, layout: gl.constexpr):
    """Tile j's 64 fp8 rope columns as [BLOCK_N, 16] 32-bit words (plain loads, issued a tile ahead; as words, not
    bytes: held as fp8 across the loop ptxas split them into 16-bit pieces and spilled them)."""
    tok0 = j * BLOCK_N
    page = gl.load(pt_base + tok0 // PAGE_SIZE)
    row0 = page.to(gl.int64) * PAGE_SIZE + tok0 % PAGE_SIZE
    rows = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, 16, layout=gl.SliceLayout(0, layout))
    words = kv_ptr.to(gl.pointer_type(gl.int32), bitcast=True)
    return gl.load(words + (row0 + rows)[:, None] * 144 + 128 + cols[None, :])


@gluon.jit
def _store_rope(kr, rope):
    """The tile's rope rows (``_load_rope32``'s words) twice into its fp8 [BLOCK_N, 128] rope tile (the query's rope
    is [hi | lo]); visible to this warpgroup's wgmmas after it returns."""
    w_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    if _REINTERPRET_PUBLIC:
        kw = kr.reinterpret(gl.int32, [kr.shape[0], 32], w_layout)
    else:
        kw = kr._reinterpret(gl.int32, [kr.shape[0], 32], w_layout)
    kw.slice(0, 16, dim=1).store(rope)
    kw.slice(16, 16, dim=1).store(rope)
    fence_async_shared()
    _wg_barrier()


@gluon.jit
def _issue8(kv_nope_desc, k8_bufs, land, kfree, pt_base, j, g, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr):
    """TMA of tile j (the program's g-th) into stage g % 3 on ``land``, once the stage's previous tile (g - 3) is
    free: its owner's score MMAs retired and both halves of its V loaded."""
    st = g % _NS
    if g >= _NS:
        mbarrier.wait(kfree.index(st), ((g - _NS) // _NS) & 1)
    tok0 = j * BLOCK_N
    page = gl.load(pt_base + tok0 // PAGE_SIZE)
    row = page * PAGE_SIZE + tok0 % PAGE_SIZE
    bar = land.index(st)
    mbarrier.expect(bar, kv_nope_desc.block_type.nbytes)
    _tma_load(kv_nope_desc, [row, 0], bar, k8_bufs.index(st))


@gluon.jit
def _arrive_wg(bar):
    """One arrival on ``bar`` once every thread of this warpgroup got here."""
    _wg_barrier()
    mbarrier.arrive(bar, count=1)


@gluon.jit
def _wait_free(kfree, g):
    """The buffer of the program's g-th tile free: its previous tile's (g - 3) readers done with it."""
    if g >= _NS:
        mbarrier.wait(kfree.index(g % _NS), ((g - _NS) // _NS) & 1)


@gluon.jit
def _q8_staged(q_nope_desc, q_rope_desc, row, qt_bar, phase, k8_bufs, kr_bufs, kfree, it, qh, ql, qr,
               BLOCK_H: gl.constexpr):
    """The query's fp8 hi/lo pair in shared memory: ``hi = fp8(q s)``, ``lo = fp8(q s - hi)``, s a power of two per
    head with max |q s| = 2^8; the rope's into ``qr`` as [hi | lo]. Returns s. The bf16 query rows ``[row, row +
    64)`` come by TMA (one round trip) into the tile buffers of the program's tiles ``it + 1`` and ``it + 2`` (the
    latent halves into their fp8 tiles' 32 KB, the rope into the first one's rope tile), which take those tiles
    after this returns; two passes over them there (the head maxima, then the pair), as loops over 128-column chunks
    that stay loops (runs once a segment, from a cold instruction cache: unrolled, the prologue's 3,800
    instructions took ~20 us after the work split on the H200, session 22 runs 4-5)."""
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    bf: gl.constexpr = gl.bfloat16
    _wait_free(kfree, it + 1)
    _wait_free(kfree, it + 2)
    n0 = _staging(k8_bufs, (it + 1) % _NS, q_nope_desc, BLOCK_H)
    n1 = _staging(k8_bufs, (it + 2) % _NS, q_nope_desc, BLOCK_H)
    if _REINTERPRET_PUBLIC:
        nr = kr_bufs.index((it + 1) % _NS).reinterpret(bf, [BLOCK_H, 64], q_rope_desc.layout)
    else:
        nr = kr_bufs.index((it + 1) % _NS)._reinterpret(bf, [BLOCK_H, 64], q_rope_desc.layout)
    fence_async_shared()        # (the generic proxy's reads of those buffers before the TMA's writes)
    mbarrier.expect(qt_bar, 2 * q_nope_desc.block_type.nbytes + q_rope_desc.block_type.nbytes)
    _tma_load(q_nope_desc, [row, 0], qt_bar, n0)
    _tma_load(q_nope_desc, [row, 256], qt_bar, n1)
    _tma_load(q_rope_desc, [row, 0], qt_bar, nr)
    mbarrier.wait(qt_bar, phase)
    xr = nr.load(layout).to(gl.float32)
    amax = gl.max(gl.abs(xr), axis=1)
    for c in tl.range(0, 4, loop_unroll_factor=1):
        x = _q_chunks(_staging(k8_bufs, (it + 1 + c // 2) % _NS, q_nope_desc, BLOCK_H), BLOCK_H,
                      128).index(c % 2).load(layout)
        amax = gl.maximum(amax, gl.max(gl.abs(x.to(gl.float32)), axis=1))
    q_scale = gl.exp2(8.0 - gl.ceil(gl.log2(gl.maximum(amax, 1e-30))))
    hi_c = _q_chunks(qh, BLOCK_H, 128)
    lo_c = _q_chunks(ql, BLOCK_H, 128)
    for c in tl.range(0, 4, loop_unroll_factor=1):
        x = _q_chunks(_staging(k8_bufs, (it + 1 + c // 2) % _NS, q_nope_desc, BLOCK_H), BLOCK_H,
                      128).index(c % 2).load(layout)
        _q8_chunk(x, q_scale, hi_c.index(c), lo_c.index(c))
    _q8_chunk(xr, q_scale, qr.slice(0, 64, dim=1), qr.slice(64, 64, dim=1))
    fence_async_shared()
    _wg_barrier()               # (every thread's reads of the staging done before those buffers' TMAs)
    return q_scale


@gluon.jit
def _staging(k8_bufs, st, q_nope_desc, BLOCK_H: gl.constexpr):
    """Tile buffer ``st``'s 32 KB as a bf16 [BLOCK_H, 256] box of the query (``q_nope_desc``'s: the same 128-byte
    swizzle)."""
    if _REINTERPRET_PUBLIC:
        view = k8_bufs.index(st).reinterpret(gl.bfloat16, [BLOCK_H, 256], q_nope_desc.layout)
    else:
        view = k8_bufs.index(st)._reinterpret(gl.bfloat16, [BLOCK_H, 256], q_nope_desc.layout)
    return view


@gluon.jit
def _q8_chunk(x, q_scale, hi_smem, lo_smem):
    y = x.to(gl.float32) * q_scale[:, None]
    h = y.to(gl.float8e4nv)
    hi_smem.store(h)
    lo_smem.store((y - h.to(gl.float32)).to(gl.float8e4nv))


@gluon.jit
def _finish8(WG: gl.constexpr, o0, o1, o2, o3, m_i, l_i, l_smem, x_bars, seg, b, pid, pid_h, h0, H, i_first, i_stop,
             req_tiles, out_ptr, part_o_ptr, lse_ptr, part_lse_ptr, seg_ptr, stride_out_b, stride_out_h,
             stride_po_s, stride_po_h, stride_pl_s, out_mul, RETURN_LSE: gl.constexpr, s_layout: gl.constexpr,
             BLOCK_H: gl.constexpr):
    """End of a segment (``kernel_hopper_pp._finish_segment`` for the transposed O half): the two partial row sums
    added, O^T's relabelling undone (``O_OUT``) and the half stored (a whole request in the out tensor's type, else
    fp32 partials under slot ``pid + b``), LSE and the segment slots by WG0."""
    rows: gl.constexpr = gl.SliceLayout(1, s_layout)
    if seg % 2 == 0:
        l_smem.slice(WG * BLOCK_H, BLOCK_H).store(l_i)
    else:
        l_smem.slice((2 + WG) * BLOCK_H, BLOCK_H).store(l_i)
    _wg_barrier()
    mbarrier.arrive(x_bars.index(WG), count=1)
    mbarrier.wait(x_bars.index(1 - WG), seg & 1)
    if seg % 2 == 0:
        l_other = l_smem.slice((1 - WG) * BLOCK_H, BLOCK_H).load(rows)
    else:
        l_other = l_smem.slice((3 - WG) * BLOCK_H, BLOCK_H).load(rows)
    l_tot = l_i + l_other
    # (row 16 w + 8 h + q of chunk c = 2 Q + c' holds dim 128 Q + 32 w + 4 q + 2 c' + h)
    x = gl.join(gl.join(o0, o1), gl.join(o2, o3))               # [64 rows, 64 heads, c', Q]
    x = gl.reshape(x, [4, 2, 8, 64, 2, 2])                      # (w, h, q, head, c', Q)
    x = gl.convert_layout(gl.reshape(gl.permute(x, (3, 5, 0, 2, 4, 1)), [64, 256]), O_OUT)
    x = x * gl.convert_layout(out_mul / l_tot, gl.SliceLayout(1, O_OUT))[:, None]
    heads = h0 + gl.arange(0, BLOCK_H, layout=gl.SliceLayout(1, O_OUT))
    dims = WG * _HALF + gl.arange(0, _HALF, layout=gl.SliceLayout(0, O_OUT))
    whole = (i_first == 0) & (i_stop == req_tiles)
    if whole:
        out_base = out_ptr + b.to(gl.int64) * stride_out_b
        gl.store(out_base + heads[:, None] * stride_out_h + dims[None, :], x.to(out_ptr.dtype.element_ty))
    else:
        part_base = part_o_ptr + (pid + b).to(gl.int64) * stride_po_s
        gl.store(part_base + heads[:, None] * stride_po_h + dims[None, :], x)
    if WG == 0:
        heads_s = h0 + gl.arange(0, BLOCK_H, layout=rows)
        _store_lse_and_segment(m_i + gl.log2(l_tot), whole, b, H, pid, pid_h, i_first, i_stop, req_tiles, heads_s,
                               lse_ptr, part_lse_ptr, seg_ptr, stride_pl_s, None, RETURN_LSE)


@gluon.jit
def _scale4(o0, o1, o2, o3, f, ot_layout: gl.constexpr):
    """The four O^T chunks [rows, heads] times a per-head factor (``f`` in the scores' row layout)."""
    fc = gl.convert_layout(f, gl.SliceLayout(0, ot_layout))[None, :]
    return o0 * fc, o1 * fc, o2 * fc, o3 * fc


@gluon.jit
def _retire4(o0, o1, o2, o3):
    """This warpgroup's P.V MMAs retired: the four O^T chunks as tensors."""
    return warpgroup_mma_wait(num_outstanding=0, deps=(o0, o1, o2, o3))


@gluon.jit
def _init4(ot_layout: gl.constexpr, ZPIN: gl.constexpr):
    """The four O^T chunks set to zero, as the P.V wgmmas' accumulators. (Where no wgmma is in flight: zeros written
    while a segment's first score MMAs ran made ptxas serialise every wgmma of the kernel, C7515.)"""
    # ZPIN = 1: each zero through an instruction with side effects, so that the compiler cannot move them past the
    # score MMAs that follow, as it moves plain constants (compiled for sm_90: no serialised wgmma, but O spilled in
    # the tile loops); ZPIN = 0: plain zeros (ptxas serialises every wgmma, C7515, few spills)
    z = gl.zeros([64, 64], gl.float32, layout=ot_layout)
    if ZPIN:
        o = (warpgroup_mma_init(_pinned(z)), warpgroup_mma_init(_pinned(z)), warpgroup_mma_init(_pinned(z)),
             warpgroup_mma_init(_pinned(z)))
    else:
        o = (warpgroup_mma_init(z), warpgroup_mma_init(z), warpgroup_mma_init(z), warpgroup_mma_init(z))
    return o


@gluon.jit
def _pinned(x):
    return gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=gl.float32, is_pure=False, pack=1)


@gluon.jit
def _pp8_wg0(q_nope_desc, q_rope_desc, kv_nope_desc, kv_ptr, kv_scale_ptr, page_table_ptr, seq_lens_ptr,
             out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, kv_scale, B, H,
             stride_pt_b, stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s,
             qh, ql, qr, k8_bufs, kr_bufs, p_bufs, m_smem, l_smem, land, kfree, pfree, q_bar, qt_bar, p_bars, x_bars,
             PAGE_SIZE: gl.constexpr, KV_SCALE_FROM_PTR: gl.constexpr, RETURN_LSE: gl.constexpr,
             B_CHUNK: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr, s_layout: gl.constexpr,
             ot_layout: gl.constexpr, ZPIN: gl.constexpr, PVD: gl.constexpr, STAMPS):
    """Warpgroup 0: the even tiles of each segment, output dims 0..255; writes the query pair and issues every
    tile's TMA."""
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=ot_layout, k_width=2)
    rows_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    pid_h, pid, h0, qk_mul, offs_tok, t, t_stop, b, req_end, srow = _wg_start(seq_lens_ptr, sm_scale, B, STAMPS, 0,
                                                                              s_layout, B_CHUNK, BLOCK_N, BLOCK_H)
    if KV_SCALE_FROM_PTR:
        kv_scale = gl.load(kv_scale_ptr).to(gl.float32)
    it = 0          # tiles of this program before the segment: tile r of the segment is its (it + r)-th
    seg = 0
    p1_phase = 0
    n_even = 0      # even tiles whose P this warpgroup wrote (the phases of pfree[0])
    while t < t_stop:
        b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _segment(
            seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, BLOCK_N)
        n = i_stop - i_first
        # (past the previous segment's exchange: both warpgroups' MMAs of it are retired) The first tile's copy, then
        # the bf16 query's into the buffers of the next two (free once their previous tiles are), converted there,
        # then those tiles' copies
        _issue8(kv_nope_desc, k8_bufs, land, kfree, pt_base, i_first, it, PAGE_SIZE, BLOCK_N)
        q_scale = _q8_staged(q_nope_desc, q_rope_desc, b * H + h0, qt_bar, seg & 1, k8_bufs, kr_bufs, kfree, it,
                             qh, ql, qr, BLOCK_H)
        for u in gl.static_range(1, _NS):
            if u < n:
                _issue8(kv_nope_desc, k8_bufs, land, kfree, pt_base, i_first + u, it + u, PAGE_SIZE, BLOCK_N)
        qk_vec = gl.convert_layout(qk_mul * kv_scale / q_scale, rows_s)
        if seg % 2 == 0:
            l_smem.slice(BLOCK_H, BLOCK_H).store(qk_vec)
        else:
            l_smem.slice(3 * BLOCK_H, BLOCK_H).store(qk_vec)
        fence_async_shared()
        _arrive_wg(q_bar)
        qk = qk_vec[:, None]
        if seg == 0:
            _stamp(STAMPS, srow, STAMP_CLK_READY)

        m_i = gl.full([BLOCK_H], float("-inf"), gl.float32, layout=rows_s)
        l_i = gl.zeros([BLOCK_H], gl.float32, layout=rows_s)
        o0, o1, o2, o3 = _init4(ot_layout, ZPIN)
        # Scores a tile early: S(r) is in flight at the top of pair r / 2, so that the softmax of tile r starts as
        # soon as it is needed (the first tile's here, after O's zeros: see _init4; tile r + 2's once P(r) V_L(r) is
        # issued, before WG1's P(r + 1) is waited for)
        s = _issue_scores(qh, ql, qr, k8_bufs, kr_bufs, land, it, kv_ptr, pt_base, i_first,
                          seq_len - i_first * BLOCK_N, PAGE_SIZE, s_layout,
                          BLOCK_H, BLOCK_N)
        for k in range(0, (n + 1) // 2):
            r = 2 * k
            g = it + r
            st = g % _NS
            j = i_first + r
            n_valid = seq_len - j * BLOCK_N
            _stamp_tile(STAMPS, srow, g // 2, 0, 4)
            # S(r) retired, and with it P(r - 1) V_L(r - 1): WG1 may write its next P
            sv = _s_retired(s, s_layout)
            o0, o1, o2, o3 = _retire4(o0, o1, o2, o3)
            if k > 0:
                _arrive_wg(pfree.index(1))
            _stamp_tile(STAMPS, srow, g // 2, 1, 4)
            p, alpha, m_i, l_i = _softmax_step(sv, m_i, l_i, j * BLOCK_N + offs_tok < seq_len, qk)
            o0, o1, o2, o3 = _scale4(o0, o1, o2, o3, alpha, ot_layout)
            # P(r) into the even buffer once WG1's MMA that read P(r - 2) retired
            if n_even > 0:
                mbarrier.wait(pfree.index(0), (n_even - 1) & 1)
            n_even += 1
            p_bufs.index(0).store(p.to(gl.float16))
            m_smem.slice(0, BLOCK_H).store(m_i)
            fence_async_shared()
            _arrive_wg(p_bars.index(0))
            _stamp_tile(STAMPS, srow, g // 2, 2, 4)
            o0, o1, o2, o3 = _pv8(k8_bufs.index(st), 0, p_bufs.index(0).permute((1, 0)), o0, o1, o2, o3,
                                  a_layout, BLOCK_N, PVD)
            _arrive_wg(kfree.index(st))
            if r + 1 < n:
                g1 = g + 1
                st1 = g1 % _NS
                if r + 2 < n:
                    s = _issue_scores(qh, ql, qr, k8_bufs, kr_bufs, land, g + 2, kv_ptr, pt_base, j + 2,
                                      n_valid - 2 * BLOCK_N, PAGE_SIZE,
                                      s_layout, BLOCK_H, BLOCK_N)
                else:
                    s = _no_scores(qr, BLOCK_H, BLOCK_N)
                mbarrier.wait(land.index(st1), (g1 // _NS) & 1)
                mbarrier.wait(p_bars.index(1), p1_phase)
                _stamp_tile(STAMPS, srow, g // 2, 3, 4)
                p1_phase ^= 1
                m_o = m_smem.slice(BLOCK_H, BLOCK_H).load(rows_s)
                beta = gl.exp2(m_i - m_o)
                l_i = l_i * beta
                m_i = m_o
                if r + 3 < n:
                    # (tile r's buffer: free once WG1 loaded its half of V, right after it handed P(r + 1) over)
                    _issue8(kv_nope_desc, k8_bufs, land, kfree, pt_base, j + 3, g + 3, PAGE_SIZE, BLOCK_N)
                # P(r) V_L(r) retired, and S(r + 2) with it (WG1's P(r + 1), just waited for, came after the softmax
                # of tile r + 1: S(r + 2) has had that long)
                o0, o1, o2, o3 = _retire4(o0, o1, o2, o3)
                o0, o1, o2, o3 = _scale4(o0, o1, o2, o3, beta, ot_layout)
                o0, o1, o2, o3 = _pv8(k8_bufs.index(st1), 0, p_bufs.index(1).permute((1, 0)),
                                      o0, o1, o2, o3, a_layout, BLOCK_N, PVD)
                _arrive_wg(kfree.index(st1))
                if r + 4 < n:
                    _issue8(kv_nope_desc, k8_bufs, land, kfree, pt_base, j + 4, g + 4, PAGE_SIZE, BLOCK_N)
            else:
                s = _no_scores(qr, BLOCK_H, BLOCK_N)
        o0, o1, o2, o3 = _retire4(o0, o1, o2, o3)
        if n % 2 == 0:
            _arrive_wg(pfree.index(1))      # (the segment's last odd tile, read by the MMA just retired)
        out_mul = kv_scale
        _finish8(0, o0, o1, o2, o3, m_i, l_i, l_smem, x_bars, seg, b, pid, pid_h, h0, H, i_first, i_stop, req_tiles,
                 out_ptr, part_o_ptr, lse_ptr, part_lse_ptr, seg_ptr, stride_out_b, stride_out_h, stride_po_s,
                 stride_po_h, stride_pl_s, out_mul, RETURN_LSE, s_layout, BLOCK_H)
        it += n
        seg += 1
        t = seg_stop
        b += 1
    _stamp_out(STAMPS, srow, it)


@gluon.jit
def _pp8_wg1(q_nope_desc, q_rope_desc, kv_nope_desc, kv_ptr, kv_scale_ptr, page_table_ptr, seq_lens_ptr,
             out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, kv_scale, B, H,
             stride_pt_b, stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s,
             qh, ql, qr, k8_bufs, kr_bufs, p_bufs, m_smem, l_smem, land, kfree, pfree, q_bar, qt_bar, p_bars, x_bars,
             PAGE_SIZE: gl.constexpr, KV_SCALE_FROM_PTR: gl.constexpr, RETURN_LSE: gl.constexpr,
             B_CHUNK: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr, s_layout: gl.constexpr,
             ot_layout: gl.constexpr, ZPIN: gl.constexpr, PVD: gl.constexpr, STAMPS):
    """Warpgroup 1: the odd tiles of each segment, output dims 256..511. Per pair: WG0's P(r) first (its V half,
    the MMA), then its own tile's scores, softmax and P."""
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=ot_layout, k_width=2)
    s8_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, BLOCK_N, 32])
    rows_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    pid_h, pid, h0, qk_mul, offs_tok, t, t_stop, b, req_end, srow = _wg_start(seq_lens_ptr, sm_scale, B, STAMPS, 1,
                                                                              s_layout, B_CHUNK, BLOCK_N, BLOCK_H)
    if KV_SCALE_FROM_PTR:
        kv_scale = gl.load(kv_scale_ptr).to(gl.float32)
    it = 0
    seg = 0
    p0_phase = 0
    n_odd = 0       # odd tiles whose P this warpgroup wrote (the phases of pfree[1])
    while t < t_stop:
        b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _segment(
            seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, BLOCK_N)
        n = i_stop - i_first
        mbarrier.wait(q_bar, seg & 1)
        if seg % 2 == 0:
            qk = l_smem.slice(BLOCK_H, BLOCK_H).load(rows_s)[:, None]
        else:
            qk = l_smem.slice(3 * BLOCK_H, BLOCK_H).load(rows_s)[:, None]
        _wg_barrier()       # every thread has its multipliers before any thread's exchange reuses the slot
        if seg == 0:
            _stamp(STAMPS, srow, STAMP_CLK_READY)

        m_i = gl.full([BLOCK_H], float("-inf"), gl.float32, layout=rows_s)
        l_i = gl.zeros([BLOCK_H], gl.float32, layout=rows_s)
        o0, o1, o2, o3 = _init4(ot_layout, ZPIN)
        # Scores a tile early (as WG0): S(r + 1) is in flight at the top of pair r / 2
        if n > 1:
            s = _issue_scores(qh, ql, qr, k8_bufs, kr_bufs, land, it + 1, kv_ptr, pt_base, i_first + 1,
                              seq_len - (i_first + 1) * BLOCK_N, PAGE_SIZE,
                              s_layout, BLOCK_H, BLOCK_N)
        else:
            s = _no_scores(qr, BLOCK_H, BLOCK_N)
        for k in range(0, (n + 1) // 2):
            r = 2 * k
            g = it + r
            st = g % _NS
            j = i_first + r
            n_valid = seq_len - j * BLOCK_N
            _stamp_tile(STAMPS, srow, g // 2, 0, 4)
            mbarrier.wait(land.index(st), (g // _NS) & 1)
            mbarrier.wait(p_bars.index(0), p0_phase)
            _stamp_tile(STAMPS, srow, g // 2, 3, 4)
            p0_phase ^= 1
            m_e = m_smem.slice(0, BLOCK_H).load(rows_s)
            alpha = gl.exp2(m_i - m_e)
            if r + 1 < n:
                g1 = g + 1
                st1 = g1 % _NS
                # this warpgroup's tile first: its softmax from WG0's max, its P handed over, then both P.V
                sv = _s_retired(s, s_layout)
                o0, o1, o2, o3 = _retire4(o0, o1, o2, o3)
                _stamp_tile(STAMPS, srow, g // 2, 1, 4)
                p, beta, m_i, l_i = _softmax_step(sv, m_e, l_i * alpha, (j + 1) * BLOCK_N + offs_tok < seq_len, qk)
                if n_odd > 0:
                    mbarrier.wait(pfree.index(1), (n_odd - 1) & 1)
                n_odd += 1
                p_bufs.index(1).store(p.to(gl.float16))
                m_smem.slice(BLOCK_H, BLOCK_H).store(m_i)
                fence_async_shared()
                _arrive_wg(p_bars.index(1))
                _stamp_tile(STAMPS, srow, g // 2, 2, 4)
                # O relative to WG0's max, P(r) V_R(r), retired, then to this tile's, P(r + 1) V_R(r + 1)
                o0, o1, o2, o3 = _scale4(o0, o1, o2, o3, alpha, ot_layout)
                o0, o1, o2, o3 = _pv8(k8_bufs.index(st), 1, p_bufs.index(0).permute((1, 0)), o0, o1, o2,
                                      o3, a_layout, BLOCK_N, PVD)
                _arrive_wg(kfree.index(st))
                o0, o1, o2, o3 = _retire4(o0, o1, o2, o3)
                _arrive_wg(pfree.index(0))          # (P(r) read: WG0 may write P(r + 2))
                o0, o1, o2, o3 = _scale4(o0, o1, o2, o3, beta, ot_layout)
                o0, o1, o2, o3 = _pv8(k8_bufs.index(st1), 1, p_bufs.index(1).permute((1, 0)),
                                      o0, o1, o2, o3, a_layout, BLOCK_N, PVD)
                _arrive_wg(kfree.index(st1))
                if r + 3 < n:
                    s = _issue_scores(qh, ql, qr, k8_bufs, kr_bufs, land, g + 3, kv_ptr, pt_base, j + 3,
                                      n_valid - 3 * BLOCK_N, PAGE_SIZE,
                                      s_layout, BLOCK_H, BLOCK_N)
                else:
                    s = _no_scores(qr, BLOCK_H, BLOCK_N)
            else:
                o0, o1, o2, o3 = _retire4(o0, o1, o2, o3)
                m_i = m_e
                l_i = l_i * alpha
                o0, o1, o2, o3 = _scale4(o0, o1, o2, o3, alpha, ot_layout)
                o0, o1, o2, o3 = _pv8(k8_bufs.index(st), 1, p_bufs.index(0).permute((1, 0)), o0, o1, o2,
                                      o3, a_layout, BLOCK_N, PVD)
                _arrive_wg(kfree.index(st))
                s = _no_scores(qr, BLOCK_H, BLOCK_N)
        o0, o1, o2, o3 = _retire4(o0, o1, o2, o3)
        if n % 2 == 1:
            _arrive_wg(pfree.index(0))      # (the segment's last even tile, read by the MMA just retired)
        _finish8(1, o0, o1, o2, o3, m_i, l_i, l_smem, x_bars, seg, b, pid, pid_h, h0, H, i_first, i_stop, req_tiles,
                 out_ptr, part_o_ptr, lse_ptr, part_lse_ptr, seg_ptr, stride_out_b, stride_out_h, stride_po_s,
                 stride_po_h, stride_pl_s, kv_scale, RETURN_LSE, s_layout, BLOCK_H)
        it += n
        seg += 1
        t = seg_stop
        b += 1
    _stamp_out(STAMPS, srow, it)


@gluon.jit(do_not_specialize=["B"])
def _mla_decode_hopper_pp8_kernel(
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
    T8: gl.constexpr,
    num_warps: gl.constexpr,
    WG1_REGS: gl.constexpr = 256,
    ZPIN: gl.constexpr = 1,
    PVD: gl.constexpr = 1,
    STAMPS=None,
):
    """Grid ``(H // 64, P)``; the arguments of the fp8 heads-on-M kernel
    (``kernel_hopper_heads._mla_decode_hopper_fp8w_kernel``: the query by pointer, ``kv_nope_desc`` [64, 512] fp8
    boxes, ``kv_ptr`` for the rope rows). ``num_warps = 4`` (WG0, the default partition) plus a 4-warp worker
    (WG1, ``WG1_REGS`` registers a thread)."""
    gl.static_assert(T8 == 1)
    gl.static_assert(BLOCK_H == 64)
    gl.static_assert(BLOCK_N == 64)
    gl.static_assert(num_warps == 4)
    gl.static_assert(kv_nope_desc.block_type.shape[1] == _D_V)
    f8: gl.constexpr = gl.float8e4nv
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_H, _D_V], f8)
    r_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, 128], f8)
    qh = gl.allocate_shared_memory(f8, [BLOCK_H, _D_V], q_layout)
    ql = gl.allocate_shared_memory(f8, [BLOCK_H, _D_V], q_layout)
    qr = gl.allocate_shared_memory(f8, [BLOCK_H, 128], r_layout)
    k8_bufs = gl.allocate_shared_memory(f8, [_NS, BLOCK_N, _D_V], kv_nope_desc.layout)
    kr_bufs = gl.allocate_shared_memory(f8, [_NS, BLOCK_N, 128], r_layout)
    p_bufs = gl.allocate_shared_memory(gl.float16, [2, BLOCK_H, BLOCK_N],
                                       gl.NVMMASharedLayout.get_default_for([BLOCK_H, BLOCK_N], gl.float16))
    vec: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    m_smem = gl.allocate_shared_memory(gl.float32, [2 * BLOCK_H], vec)
    l_smem = gl.allocate_shared_memory(gl.float32, [4 * BLOCK_H], vec)
    land = gl.allocate_shared_memory(gl.int64, [_NS, 1], mbarrier.MBarrierLayout())
    kfree = gl.allocate_shared_memory(gl.int64, [_NS, 1], mbarrier.MBarrierLayout())
    pfree = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    p_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    x_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_bar = q_bars.index(0)     # WG0's arrival once the query pair is written
    qt_bar = q_bars.index(1)    # the bf16 query's TMA
    for k in gl.static_range(_NS):
        mbarrier.init(land.index(k), count=1)
        mbarrier.init(kfree.index(k), count=2)
    for k in gl.static_range(2):
        mbarrier.init(pfree.index(k), count=1)
        mbarrier.init(p_bars.index(k), count=1)
        mbarrier.init(x_bars.index(k), count=1)
    mbarrier.init(q_bar, count=1)
    mbarrier.init(qt_bar, count=1)
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    ot_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, BLOCK_H, 16])
    gl.warp_specialize([
        (_pp8_wg0, (q_nope_desc, q_rope_desc, kv_nope_desc, kv_ptr, kv_scale_ptr, page_table_ptr, seq_lens_ptr,
                    out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, kv_scale, B, H,
                    stride_pt_b, stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s,
                    qh, ql, qr, k8_bufs, kr_bufs, p_bufs, m_smem, l_smem, land, kfree, pfree, q_bar, qt_bar, p_bars,
                    x_bars,
                    PAGE_SIZE, KV_SCALE_FROM_PTR, RETURN_LSE, B_CHUNK, BLOCK_N, BLOCK_H, s_layout, ot_layout, ZPIN,
                    PVD, STAMPS)),
        (_pp8_wg1, (q_nope_desc, q_rope_desc, kv_nope_desc, kv_ptr, kv_scale_ptr, page_table_ptr, seq_lens_ptr,
                    out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, kv_scale, B, H,
                    stride_pt_b, stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s,
                    qh, ql, qr, k8_bufs, kr_bufs, p_bufs, m_smem, l_smem, land, kfree, pfree, q_bar, qt_bar, p_bars,
                    x_bars,
                    PAGE_SIZE, KV_SCALE_FROM_PTR, RETURN_LSE, B_CHUNK, BLOCK_N, BLOCK_H, s_layout, ot_layout, ZPIN,
                    PVD, STAMPS)),
    ], [4], [WG1_REGS])
