"""Hopper (sm_90a) MLA decode on a per-tensor fp8 cache, heads on M: the ping-pong schedule of kernel_hopper_pp.py
with the scores taken from the fp8 tile as it landed and each warpgroup widening only its own half of V, after the
scores and off the path between the warpgroups' hand-offs (``T8 = 1``).

Only ``@gluon.jit`` functions live here (interface_hopper.py launches them: a config with ``T8 = 1`` selects this
kernel for an fp8 cache with H a multiple of 64). Shape letters as in kernel.py.

Why: the fp8 ping-pong kernel (kernel_hopper_pp.py, ``FP8``) lands each fp8 tile in the first half of an fp16 buffer
and its owner widens all of it in place before its score MMAs can start. On the H200 (session 21, run 7) a build
that skipped the widening (wrong results, every wait and hand-off as shipped) ran the pair of tiles in 3.28 us
against 5.60 (the split kernel at batch 64: 0.1174 against 0.1955 ms). Here:

* **Scores from the fp8 tile.** S = Q K^T as fp8 wgmmas on the landed tile (K-major on both sides): the query as an
  fp8 pair ``hi = fp8(q s)``, ``lo = fp8(q s - hi)`` (s a power of two per head with max |q s| = 2^8: hi + lo holds
  the bf16 query's bits up to the e4m3 range), one accumulator for both. The rope rows land with the tile, by TMA:
  a [64, 128] box at column 512 of the cache's [rows, 576] view, whose columns 576..639 TMA fills with zeros (a
  128-byte-swizzled tile: the fp8 kernels keep every fp8 wgmma operand so, kernel_hopper._load_rope says why); the
  query's rope, [hi | lo] in one 128-column tile, multiplies the tile's first 64 columns as two 64-column wgmmas.
  (Session 23 loaded the rope rows with plain loads a tile ahead and stored them twice into the tile, behind a fence
  and a barrier a tile; a fence waits for the thread's loads in flight. By TMA: 4.7% faster at batch 64 on the H200,
  session 24 run 1.) The query pair takes the bytes of the fp16 query tile (72 KB), so shared memory is the fp16
  kernel's: two 72 KB tile buffers.
* **Each warpgroup widens its own half of V.** A buffer's fp8 tile lands in its first 32 KB (latent columns
  0..255 in bytes [0, 16 K), 256..511 in [16 K, 32 K)); V's right half (WG1's, fp16 bytes [32 K, 64 K)) is written
  by WG1 from the second 16 K, overlapping nothing; V's left half (WG0's, fp16 bytes [0, 32 K)) is widened in place
  once the tile's score MMAs retired and WG1 has read its 16 K (``rsrc``, one arrival of WG1 a tile: for WG0's tiles
  once its read is done; for its own, ``WL1 = 0``, once its scores also retired, and WG0 widens the half once WG1's
  P arrived; ``WL1 = 1``, once WG1 itself widened it after its hand-off). So the owner's path from a landed tile to
  its scores holds no conversion. (WG0 widening WG1's tile's half before WG1's P, as soon as WG1's scores retired
  and under WG1's softmax, ran no faster: session 24 on an H200 and, as WE, session 38 on an H100.)
* **Copies as the fp16 kernel's, issued early.** WG0 issues each tile's TMA into a buffer's first 32 KB as soon as
  its P.V of the buffer's previous tile retired (the earliest of the two halves to be free), each copy's page-table
  load issued past the widening before it (no fence between the load and the copy that needs it): the pair's last
  copy before the next tile's score MMAs, which wait for that tile to land.

On the H200 (session 24 run 8, H = 128, 4096 tokens, batch 64) the decode takes 0.1452 ms against the fp16-widening
ping-pong kernel's 0.1798 and FlashMLA's 0.1146. Moving work between the warpgroups does not move the pair (WG0
widening WG1's tile's half before WG1's P instead of after: 2% slower), removing shared-memory wavefronts does: the
widening's registers laid out for no bank conflicts (``kernel_hopper.widen_layout``: 0.1578 -> 0.1452 ms), and, as a
diagnostic, the query's lo half dropped (the scores' 36 wgmmas a tile down to 18, ~147 KB less shared-memory traffic
a pair: 10% faster, at 4.9e-4 relative error against 1.5-1.8e-4; docs/mla_decode.md, "Issue 14, session 24").

The online softmax, the hand-offs of P and the running max, the split, the segment's sums exchange and the outputs
are kernel_hopper_pp.py's (``WG1_FIRST = 1``: WG1 runs its softmax before its P.V of both tiles of a pair). Rows
past ``seq_len`` in a request's last tile (TMA reads whole tiles; they may hold NaN) are masked to -inf in the scores
and zeroed by each warpgroup in its widened half of V.
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

from .kernel_hopper import (FP8_SEG_COST, STAMP_CLK_READY, _page_row, _segment_or_planned, _stamp, _stamp_out,
                            _stamp_tile, _tile_row, _tma_load, _zero_rows, widen_layout)
from .kernel_hopper_heads import _REINTERPRET_PUBLIC, _q_chunks
from .kernel_hopper_pp import _finish_segment, _hand_off, _pro, _softmax_step, _wg_barrier, _wg_start

_D_V = gl.constexpr(512)
_HALF = gl.constexpr(256)       # output columns (dims) per warpgroup
# the widening's registers: 16 fp8 columns (16 bytes) a thread, laid out for no shared-memory bank conflict
_WIDEN = gl.constexpr(widen_layout(64, 4))
# P8's transposition of V by transposing loads (session 46; int32 loads and eight PRMT a four registers before it,
# two shared-memory wavefronts an access: 5-8% slower at batch 32-64 with a plan). A warpgroup's half of the landed
# tile, [64 tokens, 128] in int16 units (two fp8 columns each), as ``ldmatrix.trans`` delivers it (LDSM.16.MT88.4,
# conflict-free under the tile's 128-byte swizzle): a register holds tokens t, t + 1 of one int16 column (lanes: t =
# 2 (lane % 4), the column lane / 4), its x4's second register tokens t + 8, t + 9. So each thread's four tokens of a
# column are t, t + 1, t + 8, t + 9, which is how the score wgmma's accumulator holds a row's tokens: P.V's k runs
# over the tokens in that order (k' = 16 (t // 16) + 4 ((t // 2) % 4) + 2 ((t // 8) % 2) + t % 2), in V^T's rows
# and in P's columns alike, and one PRMT makes each V^T register (two for two: ``_TR2_ASM``)
_TRL = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[1, 0], [8, 0], [0, 8], [0, 16], [0, 32], [0, 64]], lane_bases=[[2, 0], [4, 0], [0, 1], [0, 2], [0, 4]],
    warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[64, 128]))
# four int16 of tokens t, t + 1 ($2, as Triton packs two 16-bit elements a register) and t + 8, t + 9 ($3), two fp8
# columns c, c + 1 each -> column c's four tokens in k' order ($0) and column c + 1's ($1)
_TR2_ASM = gl.constexpr("prmt.b32 $0, $2, $3, 0x6420; prmt.b32 $1, $2, $3, 0x7531;")
# one of V^T's buffers ([256 columns n, 64 k'] fp8, 64-byte swizzle: byte bits 4-5 ^= bits 7-8) as int16
# [64, 128] indexed like ``_TRL``'s tensor once ``_TR2_ASM`` has run: its element (r, e) is column 2 e + (r // 8) % 2,
# k' pair 8 (r // 16) + 2 ((r // 2) % 4) + r % 2. Each entry: the logical index of one bit of the int16 offset
_VT_TR = gl.constexpr(gl.SharedLinearLayout(offset_bases=[
    [1, 0], [2, 0], [4, 0], [16, 0], [32, 0], [8, 0], [16, 1], [32, 2], [0, 4], [0, 8], [0, 16], [0, 32], [0, 64]]))
# VS (session 47, in P8's tuned space): the same with V^T's row for column n at row n with bits 0 and 3 swapped, so a store matrix's
# eight rows (columns n, n + 2, .., n + 14: the transposing load's lanes) fall in eight different 16-byte bank groups
# of the 64-byte swizzle where in ``_VT_TR`` rows n and n + 8 share one (two wavefronts an STSM matrix); P.V's column p
# then holds output dim p with bits 0 and 3 swapped, which the epilogue undoes by relabelling (``_cols_unswapped``)
_VT_TRS = gl.constexpr(gl.SharedLinearLayout(offset_bases=[
    [1, 0], [2, 0], [4, 0], [16, 0], [32, 0], [0, 4], [16, 1], [32, 2], [8, 0], [0, 8], [0, 16], [0, 32], [0, 64]]))
# a P tile ([64 heads, 64 k'] fp8, 64-byte swizzle) indexed by token: P stored in k' order
_P_TR = gl.constexpr(gl.SharedLinearLayout(offset_bases=[
    [0, 1], [0, 8], [0, 2], [0, 4], [0, 16], [0, 32], [1, 0], [2, 16], [4, 32], [8, 0], [16, 0], [32, 0]]))
# an fp8 wgmma's register operand (A, k_width 4, under the [16, 256, 32] accumulator) in int32 units with the four k
# of a register as a third dimension: P8's P tiles read as int32
_P3 = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 0, 1], [0, 0, 2], [8, 0, 0], [0, 4, 0], [0, 8, 0]], lane_bases=[[0, 1, 0], [0, 2, 0], [1, 0, 0],
                                                                                  [2, 0, 0], [4, 0, 0]],
    warp_bases=[[16, 0, 0], [32, 0, 0]], block_bases=[], shape=[64, 16, 4]))


@gluon.jit
def _view(buf, dtype: gl.constexpr, shape: gl.constexpr, layout: gl.constexpr):
    """``buf``'s bytes as another type, shape and layout."""
    if _REINTERPRET_PUBLIC:
        view = buf.reinterpret(dtype, shape, layout)
    else:
        view = buf._reinterpret(dtype, shape, layout)
    return view


@gluon.jit
def _scores8(qh, ql, qr, k8, kr, qz, s_layout: gl.constexpr, BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr,
             Q_LO: gl.constexpr):
    """S = Q K^T of one landed fp8 tile: the rope pair as two 64-column wgmmas, then hi and lo of each 128-column
    latent chunk (async; ``qz`` as ``kernel_hopper_pp._scores``: 0, not provably so, so the query chunks' addresses
    are not hoisted out of the tile loop); ``Q_LO = 0`` (``query_precision="e4m3"``): the hi halves alone. The
    accumulator has the layout of fp8 wgmmas (k = 32); ``_s_retired`` gives the retired scores ``s_layout``, the same
    registers."""
    hi = _q_chunks(qh, BLOCK_H, 128)
    lo = _q_chunks(ql, BLOCK_H, 128)
    s8_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, BLOCK_N, 32])
    # the tile's rope rows landed by TMA as [rope | 0] (columns 576..639 lie outside the cache's rows): hi and lo of
    # the query's rope each against the first 64 columns
    kt = kr.slice(0, 64, dim=1).permute((1, 0))
    s = warpgroup_mma(qr.slice(0, 64, dim=1), kt, gl.zeros([BLOCK_H, BLOCK_N], gl.float32, layout=s8_layout),
                      use_acc=False, is_async=True)
    if Q_LO:
        s = warpgroup_mma(qr.slice(64, 64, dim=1), kt, s, is_async=True)
    for c in gl.static_range(4):
        kc = k8.slice(c * 128, 128, dim=1).permute((1, 0))
        s = warpgroup_mma(hi.index(c + qz), kc, s, is_async=True)
        if Q_LO:
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
def _q8_chunk(x, q_scale, hi_smem, lo_smem, Q_LO: gl.constexpr):
    """One chunk of the query pair: ``hi = e4m3(x s)`` and, with ``Q_LO``, ``lo = e4m3(x s - hi)``."""
    y = x.to(gl.float32) * q_scale[:, None]
    h = y.to(gl.float8e4nv)
    hi_smem.store(h)
    if Q_LO:
        lo_smem.store((y - h.to(gl.float32)).to(gl.float8e4nv))


@gluon.jit
def _arrive_wg(bar):
    """One arrival on ``bar`` once every thread of this warpgroup got here."""
    _wg_barrier()
    mbarrier.arrive(bar, count=1)


@gluon.jit
def _o_zeros(o_layout: gl.constexpr, BLOCK_H: gl.constexpr):
    """A warpgroup's O half set to zero as the P.V wgmmas' accumulator, each zero through an instruction with side
    effects: as plain constants the compiler moved them past the score MMAs issued next, and ptxas serialised every
    wgmma of the kernel (C7515, compiled for sm_90)."""
    z = gl.zeros([BLOCK_H, _HALF], gl.float32, layout=o_layout)
    return warpgroup_mma_init(gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [z], dtype=gl.float32,
                                                        is_pure=False, pack=1))


@gluon.jit
def _issue8(kv_nope_desc, kv_rope_desc, k8_bufs, kr_bufs, land, row, stage):
    """TMA of the tile at cache row ``row`` on ``land[stage]``: its 512 fp8 latent columns into the first 32 KB of
    buffer ``stage``, its rope rows as the [64, 128] box at column 512 (columns 576.. zeros) into rope tile
    ``stage``."""
    bar = land.index(stage)
    mbarrier.expect(bar, kv_nope_desc.block_type.nbytes + kv_rope_desc.block_type.nbytes)
    _tma_load(kv_rope_desc, [row, _D_V], bar, kr_bufs.index(stage))
    _tma_load(kv_nope_desc, [row, 0], bar, k8_bufs.index(stage).slice(0, _D_V, dim=1))


@gluon.jit
def _issue_scores(qh, ql, qr, k8_bufs, kr_bufs, land, g, qz, s_layout: gl.constexpr, BLOCK_H: gl.constexpr,
                  BLOCK_N: gl.constexpr, Q_LO: gl.constexpr):
    """The score MMAs of the program's g-th tile (async) once it landed (latent and rope rows by one barrier)."""
    st = g % 2
    mbarrier.wait(land.index(st), (g // 2) & 1)
    return _scores8(qh, ql, qr, k8_bufs.index(st).slice(0, _D_V, dim=1), kr_bufs.index(st), qz, s_layout, BLOCK_H,
                    BLOCK_N, Q_LO)


@gluon.jit
def _widen_left(k8, kn, n_valid, BLOCK_N: gl.constexpr, layout: gl.constexpr):
    """WG0's half of V in place: fp8 latent columns 0..255 (``k8`` [BLOCK_N, 512], bytes [0, 16 K)) to fp16 columns
    0..255 of ``kn`` (bytes [0, 32 K)); rows ``>= n_valid`` zeroed. The caller has the tile's score MMAs retired and
    WG1's read of bytes [16 K, 32 K) waited for. Columns 128..255 first (fp16 bytes [16 K, 32 K) overlap no fp8 byte
    of this half), then past a barrier of the warpgroup (every thread's reads of fp8 bytes [8 K, 16 K) done) columns
    0..127. Visible to this warpgroup's wgmmas after it returns."""
    kn.slice(128, 128, dim=1).store(k8.slice(128, 128, dim=1).load(layout).to(gl.float16))
    x0 = k8.slice(0, 128, dim=1).load(layout)
    _wg_barrier()
    kn.slice(0, 128, dim=1).store(x0.to(gl.float16))
    if n_valid < BLOCK_N:
        fence_async_shared()
        _wg_barrier()
        _zero_rows(kn.slice(0, _HALF, dim=1), n_valid, BLOCK_N, _HALF, 4)
    fence_async_shared()
    _wg_barrier()


@gluon.jit
def _t_load(k8_bufs, stage, half: gl.constexpr, n_valid, BLOCK_N: gl.constexpr):
    """P8: one warpgroup's half of V (``half`` 0 the left's 256 columns, 1 the right's) of the landed tile in buffer
    ``stage`` in registers as int16 [64 tokens, 128] (two fp8 columns each) in ``_TRL`` (transposing loads), rows
    ``>= n_valid`` zeros (rows past seq_len may hold NaN, and 0 * NaN is NaN in P.V)."""
    if n_valid < BLOCK_N:
        # (zeroed in the tile itself, whose score MMAs mask those rows anyway: masks in registers, a branch's 16-bit
        # values joined after it, cost a move of each register on every tile)
        k32 = _view(k8_bufs, gl.int32, [2, BLOCK_N, _D_V // 4], gl.NVMMASharedLayout(128, 32)).index(stage)
        _zero_rows(k32.slice(64 * half, 64, dim=1), n_valid, BLOCK_N, 64, 4)
        _wg_barrier()
    k16 = _view(k8_bufs, gl.int16, [2, BLOCK_N, _D_V // 2], gl.NVMMASharedLayout(128, 16)).index(stage)
    return k16.slice(128 * half, 128, dim=1).load(_TRL)


@gluon.jit
def _t_store(vt_bufs, idx, x, FENCE: gl.constexpr = 1, VS: gl.constexpr = 0):
    """P8: the half's V^T [256 columns, 64 tokens] (tokens contiguous: K-major, as an fp8 wgmma's B operand must be;
    in k' order) from ``_t_load``'s ``x`` into ``vt_bufs[idx]``; with ``FENCE`` visible to this warpgroup's wgmmas
    after it returns (without, a later proxy fence and warpgroup barrier, a hand-off's, must come before the P.V that
    reads it). ``VS``: V^T's rows in ``_VT_TRS``'s order."""
    y = gl.inline_asm_elementwise(_TR2_ASM, "=r,=r,r,r", [x], dtype=gl.int16, is_pure=True, pack=4)
    if VS:
        _view(vt_bufs.index(idx), gl.int16, [64, 128], _VT_TRS).store(y)
    else:
        _view(vt_bufs.index(idx), gl.int16, [64, 128], _VT_TR).store(y)
    if FENCE:
        fence_async_shared()
        _wg_barrier()


@gluon.jit
def _p_store(p8_smem, idx):
    """P8: P tile ``idx`` indexed by token as P is stored into it (its columns in k' order)."""
    return _view(p8_smem.index(idx), gl.float8e4nv, [64, 64], _P_TR)


@gluon.jit
def _p8_row(p8_smem, idx):
    """P8: fp8 P tile ``idx`` as int32 (four k a register), the layout of an fp8 wgmma's register operand (``_P3``) in
    int32 units."""
    tiles: gl.constexpr = p8_smem.shape[0]
    return _view(p8_smem, gl.int32, [tiles, 64, 16], gl.NVMMASharedLayout(64, 32)).index(idx).load(gl.SliceLayout(2, _P3))


@gluon.jit
def _p3_operand(x32, layout: gl.constexpr):
    """A P tile as ``_p8_row`` reads it, each int32 broadcast over its four k, in ``layout`` (an fp8 wgmma's register
    operand): what an inline asm of pack four takes as one register a four values."""
    return gl.convert_layout(gl.reshape(gl.expand_dims(x32, 2) + gl.zeros([64, 16, 4], gl.int32, _P3), [64, 64]), layout)


@gluon.jit
def _p8_scaled(x32, beta, layout: gl.constexpr):
    """P8: the P tile ``x32`` (``_p8_row``) times its row's ``beta`` in [0, 1], rounded to e4m3 again, as an fp8
    wgmma's register operand in ``layout``: per register (four values) two widenings to f16x2, two f16x2 multiplies,
    two roundings. (Each int32 is broadcast over its four k, which the asm's pack of four takes as one register; in
    Triton's own conversions each byte went to a register of its own and back, ~15 instructions a register.)"""
    x = _p3_operand(x32, layout)
    b = gl.convert_layout(beta, gl.SliceLayout(1, layout))[:, None] + gl.zeros([64, 64], gl.float32, layout)
    return gl.inline_asm_elementwise(
        """{ .reg .b16 lo, hi, bh; .reg .b32 h0, h1, b2;
        mov.b32 {lo, hi}, $1;
        cvt.rn.f16x2.e4m3x2 h0, lo; cvt.rn.f16x2.e4m3x2 h1, hi;
        cvt.rn.f16.f32 bh, $5; mov.b32 b2, {bh, bh};
        mul.rn.f16x2 h0, h0, b2; mul.rn.f16x2 h1, h1, b2;
        cvt.rn.satfinite.e4m3x2.f16x2 lo, h0; cvt.rn.satfinite.e4m3x2.f16x2 hi, h1;
        mov.b32 $0, {lo, hi}; }""",
        "=r,r,r,r,r,r,r,r,r", [x, b], dtype=gl.float8e4nv, is_pure=True, pack=4)


@gluon.jit
def _p8_scaled_pair(h32, l32, beta, layout: gl.constexpr):
    """PL: the P tile's pair (``hi``, ``lo``: ``_p8_row`` of both tiles) times its row's ``beta`` in [0, 1], split into
    a pair again, as two fp8 wgmma register operands in ``layout``: per register (four values) hi + lo in f16x2 (hi's
    four significant bits and lo's, lo under hi's half ulp: fp16's eleven hold the sum to 2^-11), times beta, rounded
    to e4m3 (hi'), the remainder rounded to e4m3 (lo'). hi' passes through its 32-bit output before it is widened
    again (read straight from the 16-bit register it was rounded into, ptxas 12.8 read that register before the PRMT
    that fills it: NaN in session 47's call B; ``graphtune.sass.conversions_of_unwritten_registers`` finds it)."""
    x = _p3_operand(h32, layout)
    y = _p3_operand(l32, layout)
    b = gl.convert_layout(beta, gl.SliceLayout(1, layout))[:, None] + gl.zeros([64, 64], gl.float32, layout)
    return gl.inline_asm_elementwise(
        """{ .reg .b16 a0, a1, c0, c1, bh; .reg .b32 h0, h1, l0, l1, b2;
        mov.b32 {a0, a1}, $2; mov.b32 {c0, c1}, $6;
        cvt.rn.f16x2.e4m3x2 h0, a0; cvt.rn.f16x2.e4m3x2 h1, a1;
        cvt.rn.f16x2.e4m3x2 l0, c0; cvt.rn.f16x2.e4m3x2 l1, c1;
        add.rn.f16x2 h0, h0, l0; add.rn.f16x2 h1, h1, l1;
        cvt.rn.f16.f32 bh, $10; mov.b32 b2, {bh, bh};
        mul.rn.f16x2 h0, h0, b2; mul.rn.f16x2 h1, h1, b2;
        cvt.rn.satfinite.e4m3x2.f16x2 a0, h0; cvt.rn.satfinite.e4m3x2.f16x2 a1, h1;
        mov.b32 $0, {a0, a1}; mov.b32 {a0, a1}, $0;
        cvt.rn.f16x2.e4m3x2 l0, a0; cvt.rn.f16x2.e4m3x2 l1, a1;
        sub.rn.f16x2 l0, h0, l0; sub.rn.f16x2 l1, h1, l1;
        cvt.rn.satfinite.e4m3x2.f16x2 c0, l0; cvt.rn.satfinite.e4m3x2.f16x2 c1, l1;
        mov.b32 $1, {c0, c1}; }""",
        "=r,=r,r,r,r,r,r,r,r,r,r,r,r,r", [x, y, b], dtype=(gl.float8e4nv, gl.float8e4nv), is_pure=True, pack=4)


@gluon.jit
def _p_pair_store(p, p8_smem, lo_idx):
    """PL: P (times 2^8, in [0, 2^8]) as an e4m3 pair: lo = e4m3(P - hi) into tile ``lo_idx``; returns hi = e4m3(P),
    which the hand-off stores. Per four values one asm: hi by two f32-pair roundings, passed through its 32-bit output
    before it is widened again (as ``_p8_scaled_pair``'s hi', and for the same ptxas fault, which Triton's own
    ``p.to(float8e4nv).to(float32)`` compiled to as well), P - hi in f16x2 (P's f16 rounding 2^-11 of it), lo by two
    roundings. Values of P from 2^-10 keep lo normal (lo >= 2^-6 up to hi's rounding): the pair holds P to 2^-8 of
    itself at worst (5.0e-4 error in a decode against exact P, bf16's P 1.3e-3: benchmarks/probes/p_rounding.py),
    where the e4m3 P alone holds 2^-4."""
    hi, lo = gl.inline_asm_elementwise(
        """{ .reg .b16 a0, a1, c0, c1; .reg .b32 h0, h1, y0, y1;
        cvt.rn.satfinite.e4m3x2.f32 a0, $3, $2; cvt.rn.satfinite.e4m3x2.f32 a1, $5, $4;
        mov.b32 $0, {a0, a1}; mov.b32 {a0, a1}, $0;
        cvt.rn.f16x2.e4m3x2 h0, a0; cvt.rn.f16x2.e4m3x2 h1, a1;
        cvt.rn.f16x2.f32 y0, $3, $2; cvt.rn.f16x2.f32 y1, $5, $4;
        sub.rn.f16x2 y0, y0, h0; sub.rn.f16x2 y1, y1, h1;
        cvt.rn.satfinite.e4m3x2.f16x2 c0, y0; cvt.rn.satfinite.e4m3x2.f16x2 c1, y1;
        mov.b32 $1, {c0, c1}; }""",
        "=r,=r,r,r,r,r", [p], dtype=(gl.float8e4nv, gl.float8e4nv), is_pure=True, pack=4)
    _p_store(p8_smem, lo_idx).store(lo)
    return hi


@gluon.jit
def _read_right(k8, layout: gl.constexpr):
    """WG1: the fp8 bytes of its half of V (latent columns 256..511, bytes [16 K, 32 K)) in registers."""
    return k8.slice(256, 128, dim=1).load(layout), k8.slice(384, 128, dim=1).load(layout)


@gluon.jit
def _write_right(kn, x0, x1, n_valid, BLOCK_N: gl.constexpr):
    """WG1: its half of V widened into fp16 columns 256..511 (bytes [32 K, 64 K)), rows ``>= n_valid`` zeroed;
    visible to this warpgroup's wgmmas after it returns."""
    kn.slice(256, 128, dim=1).store(x0.to(gl.float16))
    kn.slice(384, 128, dim=1).store(x1.to(gl.float16))
    if n_valid < BLOCK_N:
        fence_async_shared()
        _wg_barrier()
        _zero_rows(kn.slice(_HALF, _HALF, dim=1), n_valid, BLOCK_N, _HALF, 4)
    fence_async_shared()
    _wg_barrier()


@gluon.jit
def _q8(q_nope_desc, q_rope_desc, row, qt_bar, phase, kb_halves, kb_chunks, p_smem, s0, qh, ql, qr,
        BLOCK_H: gl.constexpr, STAMPS, srow, seg, Q_LO: gl.constexpr):
    """The query's fp8 hi/lo pair in shared memory: ``hi = fp8(q s)``, ``lo = fp8(q s - hi)``, s a power of two per
    head with max |q s| = 2^8; the rope's into ``qr`` as [hi | lo] (``Q_LO = 0``: hi alone, ``ql`` and the rope's lo
    half left unwritten and unread). Returns s. The bf16 query rows ``[row, row +
    64)`` come by TMA (one round trip) into bytes [32 K, 64 K) of both tile buffers (its columns 0..255 into buffer
    ``s0``'s, 256..511 into the other's: V's right halves, written by WG1 only after the query bar) and its rope into
    the P tile (free until this warpgroup's first hand-off); two passes over them (the head maxima,
    then the pair) as loops over 128-column chunks that stay loops (this runs once a segment, from a cold
    instruction cache: unrolled, the T8 prologue's 3,800 instructions took ~20 us after the work split on the H200,
    session 22 runs 4-5). ``kb_halves`` / ``kb_chunks``: both buffers as bf16 [64, 256] halves (buffer s, half h:
    2 s + h) and [64, 128] chunks (buffer s, columns 128 c: 4 s + c)."""
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    bf: gl.constexpr = gl.bfloat16
    nr = _view(p_smem, bf, [BLOCK_H, 64], gl.NVMMASharedLayout.get_default_for([BLOCK_H, 64], bf))
    fence_async_shared()        # (the generic proxy's earlier accesses to those bytes before the TMA's writes)
    mbarrier.expect(qt_bar, 2 * q_nope_desc.block_type.nbytes + q_rope_desc.block_type.nbytes)
    _tma_load(q_nope_desc, [row, 0], qt_bar, kb_halves.index(2 * s0 + 1))
    _tma_load(q_nope_desc, [row, 256], qt_bar, kb_halves.index(2 * (1 - s0) + 1))
    _tma_load(q_rope_desc, [row, 0], qt_bar, nr)
    mbarrier.wait(qt_bar, phase)
    _pro(STAMPS, srow, seg, 3)
    xr = nr.load(layout).to(gl.float32)
    amax = gl.max(gl.abs(xr), axis=1)
    for c in tl.range(0, 4, loop_unroll_factor=1):
        x = kb_chunks.index(4 * ((s0 + c // 2) % 2) + 2 + c % 2).load(layout)
        amax = gl.maximum(amax, gl.max(gl.abs(x.to(gl.float32)), axis=1))
    q_scale = gl.exp2(8.0 - gl.ceil(gl.log2(gl.maximum(amax, 1e-30))))
    hi_c = _q_chunks(qh, BLOCK_H, 128)
    lo_c = _q_chunks(ql, BLOCK_H, 128)
    for c in tl.range(0, 4, loop_unroll_factor=1):
        x = kb_chunks.index(4 * ((s0 + c // 2) % 2) + 2 + c % 2).load(layout)
        _q8_chunk(x, q_scale, hi_c.index(c), lo_c.index(c), Q_LO)
    _q8_chunk(xr, q_scale, qr.slice(0, 64, dim=1), qr.slice(64, 64, dim=1), Q_LO)
    fence_async_shared()
    _wg_barrier()               # (every thread's reads of the staging done before those bytes are written again)
    return q_scale


@gluon.jit
def _q8_load(q_pair_desc, q_rope_desc, q8_scale_ptr, row, qt_bar, phase, qh, ql, qr, BLOCK_H: gl.constexpr,
             Q_LO: gl.constexpr):
    """``Q8PRE = 1``: the query pair as ``query8.query_pair`` made it before this kernel (rows ``[row, row + 64)`` of
    its [B H, 1024] pair, hi then lo, and [B H, 128] rope pair, as [64, 128] TMA boxes straight into ``qh`` / ``ql``
    / ``qr``), and its scale (what ``_q8`` returns). ``Q_LO = 0``: the four hi boxes and the rope box only (the
    pre-pass made no lo half; the rope box's lo columns land unread)."""
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    hi_c = _q_chunks(qh, BLOCK_H, 128)
    lo_c = _q_chunks(ql, BLOCK_H, 128)
    fence_async_shared()        # (the generic proxy's earlier accesses to those bytes before the TMA's writes)
    mbarrier.expect(qt_bar, (8 if Q_LO else 4) * q_pair_desc.block_type.nbytes + q_rope_desc.block_type.nbytes)
    for c in gl.static_range(4):
        _tma_load(q_pair_desc, [row, c * 128], qt_bar, hi_c.index(c))
        if Q_LO:
            _tma_load(q_pair_desc, [row, _D_V + c * 128], qt_bar, lo_c.index(c))
    _tma_load(q_rope_desc, [row, 0], qt_bar, qr)
    q_scale = gl.load(q8_scale_ptr + row + gl.arange(0, BLOCK_H, layout=gl.SliceLayout(1, layout)))
    mbarrier.wait(qt_bar, phase)
    return q_scale


@gluon.jit
def _grid_dependency_wait():
    """``griddepcontrol.wait``: the kernel this one was launched as a programmatic dependent of (``query8``'s) has
    completed and its writes are visible."""
    gl.inline_asm_elementwise("griddepcontrol.wait; // $0", "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _q8_in(q_desc, row, qt_bar, phase, qh, qr, q_descale, BLOCK_H: gl.constexpr):
    """``Q_FP8 = 1``: the query handed over in e4m3 (``mla_decode``'s fp8 ``q``, its value ``q * q_scale``), rows
    ``[row, row + 64)`` of its [B H, 576] view copied by TMA straight into the hi tiles: its four 128-column latent
    chunks, and a [64, 128] box at column 512 into ``qr`` (the rope, then 64 columns TMA fills with zeros: ``qr``'s lo
    half, which ``Q_LO = 0`` leaves unread). Returns what ``_q8`` returns, the factor the scores are divided by:
    ``1 / q_scale``."""
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    hi_c = _q_chunks(qh, BLOCK_H, 128)
    fence_async_shared()        # (the generic proxy's earlier accesses to those bytes before the TMA's writes)
    mbarrier.expect(qt_bar, 5 * q_desc.block_type.nbytes)
    for c in gl.static_range(4):
        _tma_load(q_desc, [row, c * 128], qt_bar, hi_c.index(c))
    _tma_load(q_desc, [row, _D_V], qt_bar, qr)
    mbarrier.wait(qt_bar, phase)
    return gl.full([BLOCK_H], 1.0, gl.float32, layout=gl.SliceLayout(1, layout)) / q_descale


@gluon.jit
def _pp8_wg0(q_nope_desc, q_rope_desc, kv_nope_desc, kv_rope_desc, kv_scale_ptr, page_table_ptr, seq_lens_ptr,
             out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, kv_scale, B, H,
             stride_pt_b, stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s,
             qh, ql, qr, kn_bufs, k8_bufs, kb_halves, kb_chunks, kr_bufs, p_smem, m_smem, l_smem, land, rsrc, q_bar,
             qt_bar, p_bars, x_bars,
             PAGE_SIZE: gl.constexpr, KV_SCALE_FROM_PTR: gl.constexpr, RETURN_LSE: gl.constexpr,
             B_CHUNK: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr, s_layout: gl.constexpr,
             o_layout: gl.constexpr, WL1: gl.constexpr, STAMPS, Q8PRE: gl.constexpr, q8_scale_ptr,
             Q_LO: gl.constexpr, Q_FP8: gl.constexpr, q_descale_ptr, q_descale, Q_DESCALE_FROM_PTR: gl.constexpr,
             plan_ptr=None, vt_bufs=None, p8_smem=None, P8: gl.constexpr = 0, EI: gl.constexpr = 0,
             TE: gl.constexpr = 0, NF: gl.constexpr = 0, VS: gl.constexpr = 0, PL: gl.constexpr = 0,
             MIN_TILES: gl.constexpr = 1):
    """Warpgroup 0: the even tiles of each segment, output columns 0..255; writes the query pair and issues every
    tile's TMA. Per pair: its tile's softmax (scores issued at the previous pair's end), P handed over, its half of V
    widened and multiplied; WG1's tile's half widened under WG1's softmax, then multiplied by WG1's P; the next
    tile's scores."""
    # (P8: P in e4m3 as an fp8 wgmma's register operand, four bytes of k a register)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2 + 2 * P8)
    rows_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    rows_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    pid_h, pid, h0, qk_mul, offs_tok, t, t_stop, b, req_end, srow, p_seq, p_pg0, p_pg1 = _wg_start(
        seq_lens_ptr, sm_scale, B, STAMPS, 0, s_layout, B_CHUNK, BLOCK_N, BLOCK_H, FP8_SEG_COST, plan_ptr, MIN_TILES)
    if KV_SCALE_FROM_PTR:
        kv_scale = gl.load(kv_scale_ptr).to(gl.float32)
    if Q_DESCALE_FROM_PTR:
        q_descale = gl.load(q_descale_ptr).to(gl.float32)
    out_mul = kv_scale
    if P8:
        out_mul = kv_scale * 0.00390625     # (P times 2^8)
    it = 0          # tiles of this program before the segment: tile r of the segment is its (it + r)-th, in buffer
    seg = 0         # (it + r) % 2
    p1_phase = 0
    while t < t_stop:
        b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base, pg_a, pg_b = _segment_or_planned(
            seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, seg, p_seq, p_pg0, p_pg1, PAGE_SIZE,
            BLOCK_N, plan_ptr)
        n = i_stop - i_first
        _pro(STAMPS, srow, seg, 0)
        s0 = it % 2
        # (past the previous segment's exchange: both warpgroups' MMAs of it are retired) The first two tiles'
        # copies, then the query's
        _issue8(kv_nope_desc, kv_rope_desc, k8_bufs, kr_bufs, land,
                _page_row(pt_base, i_first, pg_a, PAGE_SIZE, BLOCK_N, plan_ptr is not None), s0)
        if n > 1:
            _issue8(kv_nope_desc, kv_rope_desc, k8_bufs, kr_bufs, land,
                    _page_row(pt_base, i_first + 1, pg_b, PAGE_SIZE, BLOCK_N, plan_ptr is not None),
                    1 - s0)
        _pro(STAMPS, srow, seg, 1)
        if Q_FP8:
            q_scale = _q8_in(q_nope_desc, b * H + h0, qt_bar, seg & 1, qh, qr, q_descale, BLOCK_H)
        elif Q8PRE:
            if seg == 0:
                _grid_dependency_wait()
            q_scale = _q8_load(q_nope_desc, q_rope_desc, q8_scale_ptr, b * H + h0, qt_bar, seg & 1, qh, ql, qr,
                               BLOCK_H, Q_LO)
        else:
            q_scale = _q8(q_nope_desc, q_rope_desc, b * H + h0, qt_bar, seg & 1, kb_halves, kb_chunks, p_smem,
                          s0, qh, ql, qr, BLOCK_H, STAMPS, srow, seg, Q_LO)
        _pro(STAMPS, srow, seg, 4)
        qk_vec = gl.convert_layout(qk_mul * kv_scale / q_scale, rows_s)
        # (WG1's row-sum slot of the segment's parity: free until WG1's exchange, which it reads them before)
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
        o = _o_zeros(o_layout, BLOCK_H)
        s = _issue_scores(qh, ql, qr, k8_bufs, kr_bufs, land, it, i_first >> 30, s_layout, BLOCK_H, BLOCK_N, Q_LO)
        for k in range(0, (n + 1) // 2):
            r = 2 * k
            g = it + r
            stage = g % 2
            kn = kn_bufs.index(stage)
            j = i_first + r
            n_valid = seq_len - j * BLOCK_N
            _stamp_tile(STAMPS, srow, g // 2, 0, 4)
            if EI:
                # (EI: tiles r + 2 and r + 3's cache rows, their page-table loads in flight under the scores' wait)
                row2 = _tile_row(pt_base, gl.minimum(j + 2, i_stop - 1), PAGE_SIZE, BLOCK_N)
                row3 = _tile_row(pt_base, gl.minimum(j + 3, i_stop - 1), PAGE_SIZE, BLOCK_N)
            if TE:
                # TE: its half of V(r) transposed under S(r)'s MMAs (the tile landed before they were issued; reads
                # alone, so WG1's reading its half is not waited for)
                x0 = _t_load(k8_bufs, stage, 0, n_valid, BLOCK_N)
                _t_store(vt_bufs, 2 * stage, x0, NF == 0, VS=VS)
            # S(r) retired (P(r - 1) V_L(r - 1), issued before it, was retired at the previous pair's end)
            s_done, o = warpgroup_mma_wait(num_outstanding=0, deps=(s, o))
            sv = gl.convert_layout(s_done, s_layout)
            _stamp_tile(STAMPS, srow, g // 2, 1, 4)
            p, alpha, m_i, l_i = _softmax_step(sv, m_i, l_i, j * BLOCK_N + offs_tok < seq_len, qk)
            o = o * gl.convert_layout(alpha, rows_o)[:, None]
            # p_smem's last reader (this warpgroup's P.V of tile r - 1) is retired; WG1 read its previous content
            # (P of tile r - 2) before it wrote that of tile r - 1
            if P8:
                # (WG0's P in its own tile, which its P.V then reads: its last reader, WG1, reads it before it hands
                # off the P that WG0 waits for before it writes the tile again)
                p_hand = p * 256.0
                if PL:
                    p_hand = _p_pair_store(p_hand, p8_smem, 3)  # (PL: P as an e4m3 pair, lo in tile 3)
                _hand_off(p_hand, m_i, _p_store(p8_smem, 1), m_smem.slice(0, BLOCK_H), p_bars.index(0))
            else:
                _hand_off(p, m_i, p_smem, m_smem.slice(0, BLOCK_H), p_bars.index(0))
            _stamp_tile(STAMPS, srow, g // 2, 2, 4)
            # V_L(r), once WG1 read its half's fp8 bytes (which the widening overwrites; P8: its V^T goes to the
            # buffer's bytes [32 K, 48 K), whose other reader, WG1's P.V of the tile before, is retired by then too)
            mbarrier.wait(rsrc.index(stage), (g // 2) & 1)
            if P8:
                if TE == 0:
                    x0 = _t_load(k8_bufs, stage, 0, n_valid, BLOCK_N)
                    _t_store(vt_bufs, 2 * stage, x0, VS=VS)
                # (EI: no proxy fence before the copy: the generic reads of the buffer, WG1's, are ordered before it by
                # rsrc's arrival and wait, as a consumer's release before a TMA producer's reuse)
                if EI and (r + 2 < n):
                    # EI: the buffer takes tile r + 2 now: its scores retired and both halves of V read (P8's V^T has
                    # buffers of its own, where T8's P.V reads the widened V in place until it retires)
                    _issue8(kv_nope_desc, kv_rope_desc, k8_bufs, kr_bufs, land, row2, stage)
            else:
                _widen_left(k8_bufs.index(stage).slice(0, _D_V, dim=1), kn, n_valid, BLOCK_N, _WIDEN)
            if EI == 0:
                # tile r + 2's cache row: its page-table load issued here, past the widening's fences (a fence,
                # MEMBAR.ALL.CTA in the SASS, waits for the thread's loads in flight), in flight under the P.V
                row2 = _tile_row(pt_base, gl.minimum(j + 2, i_stop - 1), PAGE_SIZE, BLOCK_N)
            if P8:
                # (P as the wgmma's shared operand: from registers, converted to the fp8 operand's layout, rows of
                # WG0's outputs came out NaN at random on an H100, session 43 calls F-G)
                o = warpgroup_mma(p8_smem.index(1), vt_bufs.index(2 * stage).permute((1, 0)), o, is_async=True)
                if PL:
                    o = warpgroup_mma(p8_smem.index(3), vt_bufs.index(2 * stage).permute((1, 0)), o, is_async=True)
            else:
                o = warpgroup_mma(gl.convert_layout(p.to(gl.float16), p_layout), kn.slice(0, _HALF, dim=1), o,
                                  is_async=True)
            if r + 1 < n:
                g1 = g + 1
                kn_o = kn_bufs.index(1 - stage)
                # P(r) V_L(r) retired: the buffer's first 32 KB takes tile r + 2
                o = warpgroup_mma_wait(num_outstanding=0, deps=(o, ))
                if (r + 2 < n) and (EI == 0):
                    _issue8(kv_nope_desc, kv_rope_desc, k8_bufs, kr_bufs, land, row2, stage)
                mbarrier.wait(p_bars.index(1), p1_phase)
                _stamp_tile(STAMPS, srow, g // 2, 3, 4)
                p1_phase ^= 1
                m_o = m_smem.slice(BLOCK_H, BLOCK_H).load(rows_s)
                beta = gl.exp2(m_i - m_o)
                l_i = l_i * beta
                m_i = m_o
                o = o * gl.convert_layout(beta, rows_o)[:, None]
                # V_L(r + 1): WL1 = 1 widened by WG1 after its hand-off; 0 here, once WG1's score MMAs of the tile
                # retired and its half's bytes are read (widened before WG1's P is waited for, under WG1's softmax:
                # 2% slower at batch 64, the two warpgroups' shared-memory traffic overlapping; H200, session 24 run 2)
                mbarrier.wait(rsrc.index(1 - stage), (g1 // 2) & 1)
                if WL1 == 0:
                    if P8:
                        x0 = _t_load(k8_bufs, 1 - stage, 0, n_valid - BLOCK_N, BLOCK_N)
                        _t_store(vt_bufs, 2 * (1 - stage), x0, VS=VS)
                        if EI and (r + 3 < n):
                            _issue8(kv_nope_desc, kv_rope_desc, k8_bufs, kr_bufs, land, row3, 1 - stage)
                    else:
                        _widen_left(k8_bufs.index(1 - stage).slice(0, _D_V, dim=1), kn_o, n_valid - BLOCK_N, BLOCK_N,
                                    _WIDEN)
                elif EI and (r + 3 < n):
                    _issue8(kv_nope_desc, kv_rope_desc, k8_bufs, kr_bufs, land, row3, 1 - stage)
                if EI == 0:
                    row3 = _tile_row(pt_base, gl.minimum(j + 3, i_stop - 1), PAGE_SIZE, BLOCK_N)
                if P8:
                    o = warpgroup_mma(p8_smem.index(0), vt_bufs.index(2 * (1 - stage)).permute((1, 0)), o,
                                      is_async=True)
                    if PL:
                        o = warpgroup_mma(p8_smem.index(2), vt_bufs.index(2 * (1 - stage)).permute((1, 0)), o,
                                          is_async=True)
                else:
                    o = warpgroup_mma(p_smem, kn_o.slice(0, _HALF, dim=1), o, is_async=True)
                # P(r + 1) V_L(r + 1) retired at once: the first 32 KB of its buffer takes tile r + 3 before the next
                # tile's score MMAs wait for that tile to land (WG1 needs tile r + 3 first thing next pair; issued after
                # them, the decode took 12% longer at batch 64: H200, session 23 run 3)
                o = warpgroup_mma_init(warpgroup_mma_wait(num_outstanding=0, deps=(o, )))
                if (r + 3 < n) and (EI == 0):
                    _issue8(kv_nope_desc, kv_rope_desc, k8_bufs, kr_bufs, land, row3, 1 - stage)
                if r + 2 < n:
                    s = _issue_scores(qh, ql, qr, k8_bufs, kr_bufs, land, g + 2, j >> 30, s_layout, BLOCK_H,
                                      BLOCK_N, Q_LO)
                else:
                    s = _no_scores(qr, BLOCK_H, BLOCK_N)
            else:
                s = _no_scores(qr, BLOCK_H, BLOCK_N)
        o = warpgroup_mma_wait(num_outstanding=0, deps=(o, ))
        _finish_segment(0, o, m_i, l_i, l_smem, x_bars, seg, b, pid, pid_h, h0, H, i_first, i_stop, req_tiles,
                        out_ptr, part_o_ptr, lse_ptr, part_lse_ptr, seg_ptr, stride_out_b, stride_out_h, stride_po_s,
                        stride_po_h, stride_pl_s, out_mul, RETURN_LSE, s_layout, o_layout, BLOCK_H, 1, STAMPS, srow,
                        COLS_SWAP=VS)
        it += n
        seg += 1
        t = seg_stop
        b += 1
    _stamp_out(STAMPS, srow, it)


@gluon.jit
def _pp8_wg1(q_nope_desc, q_rope_desc, kv_nope_desc, kv_rope_desc, kv_scale_ptr, page_table_ptr, seq_lens_ptr,
             out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, kv_scale, B, H,
             stride_pt_b, stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s,
             qh, ql, qr, kn_bufs, k8_bufs, kb_halves, kb_chunks, kr_bufs, p_smem, m_smem, l_smem, land, rsrc, q_bar,
             qt_bar, p_bars, x_bars,
             PAGE_SIZE: gl.constexpr, KV_SCALE_FROM_PTR: gl.constexpr, RETURN_LSE: gl.constexpr,
             B_CHUNK: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr, s_layout: gl.constexpr,
             o_layout: gl.constexpr, WL1: gl.constexpr, STAMPS, Q_LO: gl.constexpr, plan_ptr=None, vt_bufs=None,
             p8_smem=None, P8: gl.constexpr = 0, NF: gl.constexpr = 0, VS: gl.constexpr = 0,
             PL: gl.constexpr = 0, MIN_TILES: gl.constexpr = 1):
    """Warpgroup 1: the odd tiles of each segment, output columns 256..511. Per pair: both tiles' halves of V
    widened (WG0's first: its fp8 bytes read, then WG0 may widen its own half over them) with its own tile's score
    MMAs in flight; then WG0's P and max, its softmax from that max, its P handed over, and both P.V."""
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2 + 2 * P8)
    rows_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    rows_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    pid_h, pid, h0, qk_mul, offs_tok, t, t_stop, b, req_end, srow, p_seq, p_pg0, p_pg1 = _wg_start(
        seq_lens_ptr, sm_scale, B, STAMPS, 1, s_layout, B_CHUNK, BLOCK_N, BLOCK_H, FP8_SEG_COST, plan_ptr, MIN_TILES)
    if KV_SCALE_FROM_PTR:
        kv_scale = gl.load(kv_scale_ptr).to(gl.float32)
    out_mul = kv_scale
    if P8:
        out_mul = kv_scale * 0.00390625     # (P times 2^8)
    it = 0
    seg = 0
    p0_phase = 0
    while t < t_stop:
        b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base, pg_a, pg_b = _segment_or_planned(
            seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, seg, p_seq, p_pg0, p_pg1, PAGE_SIZE,
            BLOCK_N, plan_ptr)
        n = i_stop - i_first
        _pro(STAMPS, srow, seg, 0)
        mbarrier.wait(q_bar, seg & 1)
        _pro(STAMPS, srow, seg, 4)
        if seg % 2 == 0:
            qk = l_smem.slice(BLOCK_H, BLOCK_H).load(rows_s)[:, None]
        else:
            qk = l_smem.slice(3 * BLOCK_H, BLOCK_H).load(rows_s)[:, None]
        _wg_barrier()       # every thread has its multipliers before any thread's exchange reuses the slot
        if seg == 0:
            _stamp(STAMPS, srow, STAMP_CLK_READY)

        m_i = gl.full([BLOCK_H], float("-inf"), gl.float32, layout=rows_s)
        l_i = gl.zeros([BLOCK_H], gl.float32, layout=rows_s)
        o = _o_zeros(o_layout, BLOCK_H)
        for k in range(0, (n + 1) // 2):
            r = 2 * k
            g = it + r
            stage = g % 2               # tile r (WG0's); tile r + 1 (this warpgroup's) is in 1 - stage
            kn = kn_bufs.index(stage)
            kn_o = kn_bufs.index(1 - stage)
            j = i_first + r
            n_valid = seq_len - j * BLOCK_N
            _stamp_tile(STAMPS, srow, g // 2, 0, 4)
            # P(r - 2) V_R(r - 2) and P(r - 1) V_R(r - 1) retired: both buffers' right halves are free
            o_done = warpgroup_mma_wait(num_outstanding=0, deps=(o, ))
            # V_R(r): its fp8 bytes read (WG0 may then widen its half over them), written
            mbarrier.wait(land.index(stage), (g // 2) & 1)
            if P8:
                x0 = _t_load(k8_bufs, stage, 1, n_valid, BLOCK_N)
                _arrive_wg(rsrc.index(stage))
                # (NF: fenced by the hand-off's fence, or below where the segment's last tile is WG0's)
                _t_store(vt_bufs, 2 * stage + 1, x0, NF == 0, VS=VS)
            else:
                x0, x1 = _read_right(k8_bufs.index(stage).slice(0, _D_V, dim=1), _WIDEN)
                _arrive_wg(rsrc.index(stage))
                _write_right(kn, x0, x1, n_valid, BLOCK_N)
            if r + 1 < n:
                # this warpgroup's tile: its score MMAs, V_R(r + 1) widened under them
                s = _issue_scores(qh, ql, qr, k8_bufs, kr_bufs, land, g + 1, j >> 30, s_layout, BLOCK_H,
                                  BLOCK_N, Q_LO)
                if P8:
                    y0 = _t_load(k8_bufs, 1 - stage, 1, n_valid - BLOCK_N, BLOCK_N)
                    _t_store(vt_bufs, 2 * (1 - stage) + 1, y0, NF == 0, VS=VS)
                else:
                    x0, x1 = _read_right(k8_bufs.index(1 - stage).slice(0, _D_V, dim=1), _WIDEN)
                    _write_right(kn_o, x0, x1, n_valid - BLOCK_N, BLOCK_N)
                mbarrier.wait(p_bars.index(0), p0_phase)
                _stamp_tile(STAMPS, srow, g // 2, 3, 4)
                p0_phase ^= 1
                m_e = m_smem.slice(0, BLOCK_H).load(rows_s)
                alpha = gl.exp2(m_i - m_e)
                sv = _s_retired(s, s_layout)
                if WL1 == 0:
                    _arrive_wg(rsrc.index(1 - stage))
                _stamp_tile(STAMPS, srow, g // 2, 1, 4)
                p, beta, m_i, l_i = _softmax_step(sv, m_e, l_i * alpha, (j + 1) * BLOCK_N + offs_tok < seq_len, qk)
                # P(r) read back from p_smem (before this warpgroup's P overwrites it), scaled by this tile's max
                # step: O is rescaled once for both tiles
                if P8:
                    # (P(r) as WG0 handed it, 2^8 P in e4m3, rounded again to e4m3 once scaled)
                    pe32 = _p8_row(p8_smem, 1)
                    if PL:
                        pl32 = _p8_row(p8_smem, 3)
                    beta_pe = beta
                else:
                    pe = (p_smem.load(s_layout).to(gl.float32) * beta[:, None]).to(gl.float16)
                _wg_barrier()          # every thread has read P(r) before P(r + 1) overwrites it
                o_done = o_done * gl.convert_layout(alpha * beta, rows_o)[:, None]
                if P8:
                    # (both P.V issued after the branches join, below: a copy of P(r) V_R(r) in each branch of the
                    # pair loop compiled, with ptxas 12.8, to a wgmma whose descriptor only the other branch sets)
                    p_hand = p * 256.0
                    if PL:
                        p_hand = _p_pair_store(p_hand, p8_smem, 2)      # (lo in tile 2)
                    _hand_off(p_hand, m_i, _p_store(p8_smem, 0), m_smem.slice(BLOCK_H, BLOCK_H), p_bars.index(1))
                    _stamp_tile(STAMPS, srow, g // 2, 2, 4)
                    # (its own P as a shared operand, the tile it handed off: converted from registers beside the
                    # store, ptxas stored the P tile's rows h % 16 < 8 from registers written only later in the pair,
                    # session 43 call L and the SASS)
                    own_op = p8_smem.index(0)
                else:
                    _hand_off(p, m_i, p_smem, m_smem.slice(BLOCK_H, BLOCK_H), p_bars.index(1))
                    _stamp_tile(STAMPS, srow, g // 2, 2, 4)
                    o = warpgroup_mma(gl.convert_layout(pe, p_layout), kn.slice(_HALF, _HALF, dim=1), o_done,
                                      is_async=True)
                    o = warpgroup_mma(gl.convert_layout(p.to(gl.float16), p_layout), kn_o.slice(_HALF, _HALF, dim=1),
                                      o, is_async=True)
                # V_L(r + 1) for WG0, in place under those MMAs (its score MMAs retired, its right half's bytes read
                # above), then WG0 told
                if WL1 and (P8 == 0):
                    _widen_left(k8_bufs.index(1 - stage).slice(0, _D_V, dim=1), kn_o, n_valid - BLOCK_N, BLOCK_N,
                                _WIDEN)
                    _arrive_wg(rsrc.index(1 - stage))
            else:
                # the segment's last tile is WG0's: its P from p_smem
                mbarrier.wait(p_bars.index(0), p0_phase)
                _stamp_tile(STAMPS, srow, g // 2, 3, 4)
                p0_phase ^= 1
                m_e = m_smem.slice(0, BLOCK_H).load(rows_s)
                alpha = gl.exp2(m_i - m_e)
                o_done = o_done * gl.convert_layout(alpha, rows_o)[:, None]
                if P8:
                    pe32 = _p8_row(p8_smem, 1)
                    if PL:
                        pl32 = _p8_row(p8_smem, 3)
                    beta_pe = gl.full([BLOCK_H], 1.0, gl.float32, rows_s)
                    if NF:
                        fence_async_shared()
                        _wg_barrier()
                    own_op = p8_smem.index(0)
                else:
                    o = warpgroup_mma(p_smem, kn.slice(_HALF, _HALF, dim=1), o_done, is_async=True)
                m_i = m_e
                l_i = l_i * alpha
            if P8:
                # (P(r) times beta made here, past the branches' join: a value of 8-bit elements joined from two
                # branches is one register a byte, unpacked before and packed again after)
                if PL:
                    pe_op, pl_op = _p8_scaled_pair(pe32, pl32, beta_pe, p_layout)
                    o = warpgroup_mma(pe_op, vt_bufs.index(2 * stage + 1).permute((1, 0)), o_done, is_async=True)
                    o = warpgroup_mma(pl_op, vt_bufs.index(2 * stage + 1).permute((1, 0)), o, is_async=True)
                else:
                    pe_op = _p8_scaled(pe32, beta_pe, p_layout)
                    o = warpgroup_mma(pe_op, vt_bufs.index(2 * stage + 1).permute((1, 0)), o_done, is_async=True)
                if r + 1 < n:
                    o = warpgroup_mma(own_op, vt_bufs.index(2 * (1 - stage) + 1).permute((1, 0)), o, is_async=True)
                    if PL:
                        o = warpgroup_mma(p8_smem.index(2), vt_bufs.index(2 * (1 - stage) + 1).permute((1, 0)), o,
                                          is_async=True)
                    if WL1:
                        # V_L(r + 1) for WG0 under those MMAs, then WG0 told
                        y0 = _t_load(k8_bufs, 1 - stage, 0, n_valid - BLOCK_N, BLOCK_N)
                        _t_store(vt_bufs, 2 * (1 - stage), y0, VS=VS)
                        _arrive_wg(rsrc.index(1 - stage))
        o = warpgroup_mma_wait(num_outstanding=0, deps=(o, ))
        _finish_segment(1, o, m_i, l_i, l_smem, x_bars, seg, b, pid, pid_h, h0, H, i_first, i_stop, req_tiles,
                        out_ptr, part_o_ptr, lse_ptr, part_lse_ptr, seg_ptr, stride_out_b, stride_out_h, stride_po_s,
                        stride_po_h, stride_pl_s, out_mul, RETURN_LSE, s_layout, o_layout, BLOCK_H, 1, STAMPS, srow,
                        COLS_SWAP=VS)
        it += n
        seg += 1
        t = seg_stop
        b += 1
    _stamp_out(STAMPS, srow, it)


@gluon.jit(do_not_specialize=["B"])
def _mla_decode_hopper_pp8_kernel(
    q_nope_desc, q_rope_desc, kv_nope_desc, kv_rope_desc, kv_scale_ptr,
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
    WL1: gl.constexpr = 0,
    STAMPS=None,
    Q8PRE: gl.constexpr = 0,
    q8_scale_ptr=None,
    Q_LO: gl.constexpr = 1,
    SPLIT_MAX: gl.constexpr = 0,    # the grid's programs per request at most (interface_hopper; unused in here)
    Q_FP8: gl.constexpr = 0,
    q_descale_ptr=None,
    q_descale=1.0,
    Q_DESCALE_FROM_PTR: gl.constexpr = 0,
    plan_ptr=None,
    P8: gl.constexpr = 0,
    EI: gl.constexpr = 0,
    TE: gl.constexpr = 0,
    NF: gl.constexpr = 0,
    VS: gl.constexpr = 0,
    PL: gl.constexpr = 0,
    MIN_TILES: gl.constexpr = 1,    # a program's range at least this many tiles (``kernel_hopper._split_start``)
):
    """Grid ``(H // 64, P)``; the arguments of the fp8 heads-on-M kernel
    (``kernel_hopper_heads._mla_decode_hopper_fp8w_kernel``) with the query as two TMA descriptors ([64, 256] and
    [64, 64] bf16 boxes) for its pointer and strides, ``kv_nope_desc`` [64, 512] fp8 boxes and ``kv_rope_desc``
    [64, 128] fp8 boxes at column 512 (the rope rows, 64 zero columns) for the cache pointer; ``Q_LO`` (a launch
    constexpr): 1 scores against the query's hi/lo pair, 0 (``query_precision="e4m3"``) against hi alone.
    ``num_warps = 4`` (WG0, the default partition) plus a 4-warp worker (WG1, ``WG1_REGS`` registers a thread).
    Shared memory: the query pair 72 KB (hi alone, 36 KB, with ``Q_LO = 0``), two 64 KB fp16 tile buffers (each
    tile's fp8 copy in the first 32 KB), two 8 KB fp8 rope tiles, an 8 KB fp16 P tile."""
    gl.static_assert(T8 == 1)
    gl.static_assert(Q_FP8 == 0 or Q_LO == 0)       # an e4m3 query has no lo half
    # P8 (FlashMLA's accuracy class): with the e4m3 query alone, whose pair comes made (the in-kernel conversion
    # stages the bf16 query in the bytes P8's V^T takes)
    gl.static_assert(P8 == 0 or (Q_LO == 0 and (Q8PRE == 1 or Q_FP8 == 1)))
    gl.static_assert(EI == 0 or P8 == 1)     # (T8's P.V reads the widened V in the tile's own buffer)
    gl.static_assert(TE == 0 or P8 == 1)     # (T8's widening overwrites WG1's half)
    gl.static_assert(NF == 0 or (P8 == 1 and TE == 1))   # (WG0's transposition fenced by its hand-off: before it)
    gl.static_assert(VS == 0 or P8 == 1)     # (V^T's row order: T8's P.V reads V widened in place)
    gl.static_assert(PL == 0 or P8 == 1)     # (P's e4m3 pair: P8's fp8 P.V)
    gl.static_assert(BLOCK_H == 64)
    gl.static_assert(BLOCK_N == 64)
    gl.static_assert(num_warps == 4)
    gl.static_assert(kv_nope_desc.block_type.shape[1] == _D_V)
    f8: gl.constexpr = gl.float8e4nv
    f16: gl.constexpr = gl.float16
    bf: gl.constexpr = gl.bfloat16
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_H, _D_V], f8)
    r_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, 128], f8)
    qh = gl.allocate_shared_memory(f8, [BLOCK_H, _D_V], q_layout)
    ql = gl.allocate_shared_memory(f8, [BLOCK_H, _D_V], q_layout)      # (with Q_LO = 0 never accessed: not allocated)
    qr = gl.allocate_shared_memory(f8, [BLOCK_H, 128], r_layout)
    if P8:
        # P8: the fp8 tiles as they land (the first 32 KB of each of T8's buffers), each buffer's halves of V^T [256
        # columns, 64 tokens] (tokens contiguous; 2 s the left half's of buffer s, 2 s + 1 the right half's) and two fp8
        # P tiles (0 WG1's tiles' P, 1 WG0's) as allocations of their own: the same bytes as T8's fp16 buffers and P
        # tile. (As views of those, with a swizzle other than theirs, WG0's P.V read rows of P it was not given: NaN
        # rows in its outputs, session 43 calls F-H.) The names T8's other paths take stand in for what P8 has not.
        k8_bufs = gl.allocate_shared_memory(f8, [2, BLOCK_N, _D_V],
                                            gl.NVMMASharedLayout.get_default_for([BLOCK_N, _D_V], f8))
        vt_bufs = gl.allocate_shared_memory(f8, [4, _HALF, BLOCK_N],
                                            gl.NVMMASharedLayout.get_default_for([_HALF, BLOCK_N], f8))
        p8_smem = gl.allocate_shared_memory(f8, [2 + 2 * PL, BLOCK_H, BLOCK_N],
                                            gl.NVMMASharedLayout.get_default_for([BLOCK_H, BLOCK_N], f8))
        kn_bufs = k8_bufs
        kb_halves = k8_bufs
        kb_chunks = k8_bufs
    else:
        kn_bufs = gl.allocate_shared_memory(f16, [2, BLOCK_N, _D_V],
                                            gl.NVMMASharedLayout.get_default_for([BLOCK_N, _D_V], f16))
        # the same bytes as fp8 [64, 1024] per buffer (eight 8 KB blocks of 128 columns, the fp16 tile's 64-column
        # blocks two by two: the TMA lands in the first four), as bf16 [64, 256] halves (the query's staging) and
        # [64, 128] chunks (its conversion's loads)
        k8_bufs = _view(kn_bufs, f8, [2, BLOCK_N, 2 * _D_V],
                        gl.NVMMASharedLayout.get_default_for([BLOCK_N, 2 * _D_V], f8))
        kb_halves = _view(kn_bufs, bf, [4, BLOCK_N, _HALF], gl.NVMMASharedLayout.get_default_for([BLOCK_N, _HALF], bf))
        kb_chunks = _view(kn_bufs, bf, [8, BLOCK_N, 128], gl.NVMMASharedLayout.get_default_for([BLOCK_N, 128], bf))
    kr_bufs = gl.allocate_shared_memory(f8, [2, BLOCK_N, 128], r_layout)
    if P8:
        p_smem = p8_smem
    else:
        p_smem = gl.allocate_shared_memory(f16, [BLOCK_H, BLOCK_N],
                                           gl.NVMMASharedLayout.get_default_for([BLOCK_H, BLOCK_N], f16))
        vt_bufs = p_smem
        p8_smem = p_smem
    vec: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    m_smem = gl.allocate_shared_memory(gl.float32, [2 * BLOCK_H], vec)
    l_smem = gl.allocate_shared_memory(gl.float32, [4 * BLOCK_H], vec)
    land = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    rsrc = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    p_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    x_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_bar = q_bars.index(0)     # WG0's arrival once the query pair is written
    qt_bar = q_bars.index(1)    # the bf16 query's TMA
    for k in gl.static_range(2):
        mbarrier.init(land.index(k), count=1)
        mbarrier.init(rsrc.index(k), count=1)
        mbarrier.init(p_bars.index(k), count=1)
        mbarrier.init(x_bars.index(k), count=1)
    mbarrier.init(q_bar, count=1)
    mbarrier.init(qt_bar, count=1)
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    # (P8: P.V as fp8 wgmmas, k = 32; the accumulator's registers the same)
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, _HALF, 16 + 16 * P8])
    gl.warp_specialize([
        (_pp8_wg0, (q_nope_desc, q_rope_desc, kv_nope_desc, kv_rope_desc, kv_scale_ptr, page_table_ptr,
                    seq_lens_ptr,
                    out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, kv_scale, B, H,
                    stride_pt_b, stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s,
                    qh, ql, qr, kn_bufs, k8_bufs, kb_halves, kb_chunks, kr_bufs, p_smem, m_smem, l_smem, land, rsrc,
                    q_bar, qt_bar, p_bars, x_bars,
                    PAGE_SIZE, KV_SCALE_FROM_PTR, RETURN_LSE, B_CHUNK, BLOCK_N, BLOCK_H, s_layout, o_layout, WL1,
                    STAMPS, Q8PRE, q8_scale_ptr, Q_LO, Q_FP8, q_descale_ptr,
                    q_descale, Q_DESCALE_FROM_PTR, plan_ptr, vt_bufs, p8_smem, P8, EI, TE, NF, VS, PL, MIN_TILES)),
        (_pp8_wg1, (q_nope_desc, q_rope_desc, kv_nope_desc, kv_rope_desc, kv_scale_ptr, page_table_ptr,
                    seq_lens_ptr,
                    out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr, sm_scale, kv_scale, B, H,
                    stride_pt_b, stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s,
                    qh, ql, qr, kn_bufs, k8_bufs, kb_halves, kb_chunks, kr_bufs, p_smem, m_smem, l_smem, land, rsrc,
                    q_bar, qt_bar, p_bars, x_bars,
                    PAGE_SIZE, KV_SCALE_FROM_PTR, RETURN_LSE, B_CHUNK, BLOCK_N, BLOCK_H, s_layout, o_layout, WL1,
                    STAMPS, Q_LO, plan_ptr, vt_bufs, p8_smem, P8, NF, VS, PL, MIN_TILES)),
    ], [4], [WG1_REGS])
