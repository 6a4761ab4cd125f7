"""Hopper (sm_90a) MLA decode, fp8 (per-tensor) cache, H < 64: one tokens-on-M tile's math, as both forms of the
second fp8 tokens-on-M kernel use it -- the one-warpgroup kernel (kernel_hopper_tok.py) and its two-warpgroup form
(``WG2``, kernel_hopper_tok2.py, which kernel_hopper_tok.py's kernel hands its launches to): a tile's copies by TMA,
the query as its fp8 [hi | lo] pair, the score chain against it, the online softmax, the V^T chunks in the P.V
operand's relabelled rows, and those kernels' register layouts. Only ``@gluon.jit`` / constexpr functions live here;
the design notes are kernel_hopper_tok.py's docstring.
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, warpgroup_mma

from .kernel_hopper import _max_over_tokens, _q_fp32, _tma_load

# cp.async's Gluon name: async_load in triton 3.9 (the 3.6 name raises there)
_cp_async = getattr(async_copy, "async_load", None) or async_copy.async_copy_global_to_shared


@gluon.constexpr_function
def wgmma_layout(n, k):
    """The accumulator layout of one warpgroup's [64, n] wgmma with k-steps of k (the tokens-on-M kernels' scores,
    k 32: fp8; their P.V output chunks, n = heads, k 16: fp16)."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                     instr_shape=[16, gl._unwrap_if_constexpr(n), gl._unwrap_if_constexpr(k)])


@gluon.constexpr_function
def v_load_layout(block_n):
    """The V^T chunk's load layout (:func:`_v_chunk`, [block_n tokens, 128 dims] of fp8): the P.V operand's bases with
    the dims relabelled (rows (a, w, s, q) -> dims (w, q, a, s)) and the registers reordered so that each thread's 4
    adjacent dims of a token come first: one 32-bit shared load."""
    return gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [0, 2], [1, 0], [8, 0], [16, 0], [32, 0]],
        lane_bases=[[2, 0], [4, 0], [0, 4], [0, 8], [0, 16]],
        warp_bases=[[0, 32], [0, 64]], block_bases=[], shape=[gl._unwrap_if_constexpr(block_n), 128])


@gluon.jit
def _issue_tile2_at(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, page, j, stage, PAGE_SIZE: gl.constexpr,
                    ROPE_COL: gl.constexpr, BLOCK_N: gl.constexpr, kv_sc_desc=None, sc_bufs=None):
    """:func:`_issue_tile2` with tile j's page id already loaded."""
    row = page * PAGE_SIZE + (j * BLOCK_N) % PAGE_SIZE
    bar = bars.index(stage)
    if kv_sc_desc is None:
        mbarrier.expect(bar, kv_nope_desc.block_type.nbytes + kv_rope_desc.block_type.nbytes)
    else:
        # fp8_ds_mla: the group scales (bytes 512..527 of a row: fp32 column 128) as a third box
        mbarrier.expect(bar, kv_nope_desc.block_type.nbytes + kv_rope_desc.block_type.nbytes +
                        kv_sc_desc.block_type.nbytes)
        _tma_load(kv_sc_desc, [row, 128], bar, sc_bufs.index(stage))
    _tma_load(kv_nope_desc, [row, 0], bar, kn_bufs.index(stage))
    _tma_load(kv_rope_desc, [row, ROPE_COL], bar, kr_bufs.index(stage))


@gluon.jit
def _q_cat(qn, qr, qn_smem, qr_smem, BLOCK_H: gl.constexpr, DS: gl.constexpr = 0):
    """The query (``kernel_hopper._load_q_raw``'s values) as its fp8 hi/lo pair in [2 BLOCK_H, 512] latent and
    [2 BLOCK_H, 128] rope tiles: rows
    ``[0, BLOCK_H)`` ``hi = fp8(q s)``, rows ``[BLOCK_H, 2 BLOCK_H)`` ``lo = fp8(16 (q s - hi))``, s a power of
    two per head with max |q s| = 2^8 (the portable kernel's QK8 split: hi + lo / 16 holds a bf16 query
    exactly). Rope columns 64..127 stay zero (written once by the caller). ``DS`` (fp8_ds_mla, whose rope is
    bf16): the rope as one bf16 [BLOCK_H, 64] tile ``q s`` (exact: s is a power of two). Returns s per head."""
    qn, qr, amax = _q_fp32(qn, qr)
    q_scale = gl.exp2(8.0 - gl.ceil(gl.log2(gl.maximum(amax, 1e-30))))
    sn = qn * q_scale[:, None]
    sr = qr * q_scale[:, None]
    hi = sn.to(gl.float8e4nv)
    qn_smem.slice(0, BLOCK_H, dim=0).store(hi)
    qn_smem.slice(BLOCK_H, BLOCK_H, dim=0).store(((sn - hi.to(gl.float32)) * 16.0).to(gl.float8e4nv))
    if DS:
        qr_smem.store(sr.to(gl.bfloat16))
    else:
        hi_r = sr.to(gl.float8e4nv)
        qr_smem.slice(0, BLOCK_H, dim=0).slice(0, 64, dim=1).store(hi_r)
        qr_smem.slice(BLOCK_H, BLOCK_H, dim=0).slice(0, 64, dim=1).store(
            ((sr - hi_r.to(gl.float32)) * 16.0).to(gl.float8e4nv))
    return q_scale


@gluon.jit
def _v_chunk(kn, c: gl.constexpr, ld_layout: gl.constexpr, v_layout: gl.constexpr, n_valid=None):
    """Chunk c (dims ``[128 c, 128 c + 128)``) of the tile as V^T in the P.V wgmma's A layout, fp16, rows in the
    relabelled order (module docstring): loaded as 4 adjacent bytes of one token per register, widened, the
    dims' bit fields moved to the rows' ((a, w, s, q) from (w, q, a, s)), then a register-only permutation. With
    ``n_valid`` (kernel_hopper_tok2's warpgroups, which leave the tile in shared memory as it landed) the tokens
    from ``n_valid`` on are set to zero in registers (a request's last tile: the cache may hold NaN there)."""
    raw = kn.slice(c * 128, 128, dim=1).load(ld_layout)                        # [64 tokens, 128 dims]
    if n_valid is not None:
        if n_valid < raw.shape[0]:
            tok = gl.arange(0, raw.shape[0], layout=gl.SliceLayout(1, ld_layout))
            raw = gl.where((tok < n_valid)[:, None], raw, gl.zeros_like(raw))
    x = raw.to(gl.float16)
    x = gl.reshape(x, [64, 4, 8, 2, 2])                                         # dim p = (w, q, a, s)
    x = gl.permute(x, (3, 1, 4, 2, 0))                                          # (a, w, s, q, token)
    x = gl.reshape(x, [128, 64])
    return gl.convert_layout(x, v_layout)


@gluon.jit
def _scores_v2(kn, kr, qn_smem, qr_smem, s_layout: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr,
               RK64: gl.constexpr):
    """S = K [hi | lo]^T of one tile, issued (asynchronous): 16 latent k-steps and the rope's, 4 over the
    zero-padded [64, 128] rope tile, or with ``RK64`` 2 over its first 64 columns (the other two multiply the
    zero padding)."""
    s2 = gl.zeros([BLOCK_N, 2 * BLOCK_H], gl.float32, layout=s_layout)
    s2 = warpgroup_mma(kn, qn_smem.permute((1, 0)), s2, use_acc=False, is_async=True)
    if RK64:
        s2 = warpgroup_mma(kr.slice(0, 64, dim=1), qr_smem.slice(0, 64, dim=1).permute((1, 0)), s2, is_async=True)
    else:
        s2 = warpgroup_mma(kr, qr_smem.permute((1, 0)), s2, is_async=True)
    return s2


@gluon.jit
def _hilo(s2, s16_layout: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr):
    """``hi + lo / 16`` of [hi | lo] scores ([BLOCK_N, 2 BLOCK_H] -> [BLOCK_N, BLOCK_H])."""
    # columns [0, 16) hi, [16, 32) lo: bit 4 of the column is a register bit of s_layout (no data moves)
    s_hi, s_lo = gl.split(gl.permute(gl.reshape(s2, [BLOCK_N, 2, BLOCK_H]), (0, 2, 1)))
    return gl.convert_layout(s_hi, s16_layout) + gl.convert_layout(s_lo, s16_layout) * 0.0625


@gluon.jit
def _softmax_v2(s2, qk_mul, n_valid, m_i, l_acc, red, offs_tok, s16_layout: gl.constexpr, o_layout: gl.constexpr,
                BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr, FAST_MAX: gl.constexpr, HILO: gl.constexpr = 1):
    """One tile's online softmax from the [hi | lo] scores (``HILO`` 0: from scores already combined, [BLOCK_N,
    BLOCK_H] in ``s16_layout``): ``(p, alpha as an O-layout row, m, l_acc)``."""
    if HILO:
        s = _hilo(s2, s16_layout, BLOCK_N, BLOCK_H)
    else:
        s = s2
    s = s * qk_mul[None, :]
    s = gl.where((offs_tok < n_valid)[:, None], s, float("-inf"))
    if FAST_MAX:
        m_new = gl.maximum(m_i, _max_over_tokens(s, red, s16_layout))
    else:
        m_new = gl.maximum(m_i, gl.max(s, axis=0))
    alpha = gl.exp2(m_i - m_new)
    p = gl.exp2(s - m_new[None, :])
    l_acc = l_acc * alpha[None, :] + p
    alpha_o = gl.convert_layout(alpha, gl.SliceLayout(0, o_layout))[None, :]
    return p, alpha_o, m_new, l_acc
