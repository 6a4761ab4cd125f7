"""Triton kernels of MLA decode attention over a paged KV cache. Only ``@triton.jit`` functions live here.

Glossary of shape letters
    B   requests in the batch (decode: one query token per request)
    H   query heads; every head of a request attends to the same latent row of each token (MLA)
    N   tokens in one tile (BLOCK_N); a request of ``seq_len`` tokens has ``cdiv(seq_len, N)`` tiles
    D   576 dims of a key row: 512 latent ("nope") dims, then 64 rope dims; a value is the first 512
    C   128 latent dims, one chunk (fp8_ds_mla stores one fp32 scale per chunk)
    P   programs of the split grid per head block: a static number, independent of sequence lengths
    S   partial results: at most P + B (one per program and request it touches)

Work split (design point: one captured graph stays valid for any ``seq_lens``). All tiles of all
requests are laid end to end; program ``p`` takes the contiguous range ``[p * per, (p + 1) * per)`` with
``per = cdiv(total_tiles, P)``, computed on the device from ``seq_lens``. Every SM gets the same number of
tiles whatever the lengths and the batch size, and a request may span several programs. Each
(program, request) segment writes a partial (normalised output and log2-sum-exp) under id ``p + b``:
along the staircase of (p, b) pairs that programs visit, ``p + b`` strictly increases, so ids never
collide. A segment that covers a whole request writes the final output directly and the reduction skips
that request.

Scores (QK8 = 1, fp8 caches). The latent (and fp8 rope) scores come straight from the fp8 bytes in
shared memory: fp8 x fp8 warpgroup MMAs against a pair of fp8 copies of the query, ``hi = fp8(q * s)`` and
``lo = fp8(16 * (q * s - hi))`` with ``s`` a power of two bringing max|q| to 2**8. hi + lo / 16 holds all
8 significant bits of a bf16 query, so the two products give the bf16 score; no cache value is widened
for the scores. With QK8 = 0 the tile is widened first and both dots share it (q cast to fp16, scaled to
max 2**14 by a power of two). ``Q_LO = 0`` (``query_precision="e4m3"``, an fp8 cache's opt-in) drops the lo
half: the query is its e4m3 copy hi, one fp8 dot a chunk instead of two (QK8 = 0 keeps its fp16 query).

P.V. Values must be a 16-bit MMA operand (an fp8 MMA needs the token dimension contiguous, and the
cache stores tokens as rows), so each 128-dim chunk is widened to fp16 just before its dot, never to fp32
(fp32 conversion capped a probe at 1.5 TB/s). CONVERT 1/2: a byte shuffle plus logic operations
(``prmt``/``shr``/``and``/``or``) that yields ``value * 2**-8`` exactly, subnormals included; the factor
256 is folded into the output scale. CONVERT 0: the hardware ``cvt`` (exact value). fp8_ds_mla's per-token
chunk scales multiply the scores in fp32 and go into ``p`` (divided by the tile's largest scale, which
multiplies the product back in fp32) so that ``p * scale`` never underflows fp16.

Scores, the running max and sum, and the output accumulators are fp32. Under the interpreter every dot
runs in fp32 with ``input_precision="ieee"`` (bf16 ``tl.dot`` is wrong there, fp32 emulates tf32 by
default) and the query pair is split in fp32 (the interpreter's fp32 -> fp8 cast does not round to
nearest).

Layout: tokens sit on the M side of every ``tl.dot`` (``scores^T = K q^T``: [N, H]; ``out^T += V^T p``:
[C, H]) so that Hopper can use warpgroup MMA with only 16 heads.
"""
from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

# KV_FORMAT codes (interface.py maps the public names to these).
FMT_FP8: tl.constexpr = tl.constexpr(0)
FMT_BF16: tl.constexpr = tl.constexpr(1)
FMT_DS_MLA: tl.constexpr = tl.constexpr(2)


_E4M3_TO_HALF_ASM: tl.constexpr = tl.constexpr("""{
        .reg .b32 a, b, t, u;
        prmt.b32 a, $2, 0, 0x1404;
        prmt.b32 b, $2, 0, 0x3424;
        shr.b32 t, a, 1;
        shr.b32 u, b, 1;
        and.b32 t, t, 0x3F803F80;
        and.b32 u, u, 0x3F803F80;
        and.b32 a, a, 0x80008000;
        and.b32 b, b, 0x80008000;
        or.b32 $0, a, t;
        or.b32 $1, b, u;
        }""")


@triton.jit
def _fp8_bytes_to_half(x, PURE: tl.constexpr):
    """uint8 e4m3 bit patterns -> fp16 holding ``value * 2**-8`` exactly (4 bytes per asm block).

    e4m3 is s.eeee.mmm with bias 7; fp16 is s.eeeee.mmmmmmmmmm with bias 15. Moving the byte so that its
    exponent field lands in the low 4 exponent bits and its mantissa in the top 3 mantissa bits gives a
    number whose exponent is short by 8 in bias: ``value * 2**-8``, for subnormals too.

    PURE lets Triton move the asm past layout conversions: it then reads the fp8 bytes from shared memory
    straight in the MMA operand's layout (no fp16 round trip through shared memory, about 16 KB less of
    it) at the price of byte-wide shared loads and more registers. Not pure: widen in the load's layout,
    then convert the fp16 tile. Both are kept as configs (CONVERT 2 and 1) because the better one depends
    on how many programs fit on an SM.
    """
    if PURE:
        y = tl.inline_asm_elementwise(asm=_E4M3_TO_HALF_ASM, constraints="=r,=r,r", args=[x], dtype=tl.float16,
                                      is_pure=True, pack=4)
    else:
        y = tl.inline_asm_elementwise(asm=_E4M3_TO_HALF_ASM, constraints="=r,=r,r", args=[x], dtype=tl.float16,
                                      is_pure=False, pack=4)
    return y


@triton.jit
def _widen(raw, CONVERT: tl.constexpr, INTERPRET: tl.constexpr):
    """fp8 e4m3 tile -> the fp16 operand of the P.V dot: ``value / 256`` with CONVERT 1 or 2, else ``value``.

    Under the interpreter: fp32 with the same scaling (so that the interpreted numerics match).
    """
    if INTERPRET:
        x = raw.to(tl.float32)
        if CONVERT != 0:
            x = x * 0.00390625
    elif CONVERT != 0:
        x = _fp8_bytes_to_half(raw.to(tl.uint8, bitcast=True), CONVERT == 2)
    else:
        x = raw.to(tl.float16)
    return x


@triton.jit
def _load_cols(kv_ptr, row, col0, valid, KV_FORMAT: tl.constexpr, COLS: tl.constexpr):
    """Columns ``[col0, col0 + COLS)`` of N cache rows, as stored: fp8 or bf16.

    ``row``: offsets in elements of ``kv_ptr``: bytes for the fp8 formats (a uint8 pointer), bf16 elements
    for a bf16 cache (a bf16 pointer).

    Rows past the sequence load as zeros so that ``p = 0`` times them stays finite.
    """
    cols = col0 + tl.arange(0, COLS)
    if KV_FORMAT == FMT_BF16:
        # kv_ptr is a bf16 pointer and row counts bf16 elements: Triton then sees 8 contiguous, 16-byte
        # aligned values per access and loads them with 16-byte cp.async. Casting a byte pointer instead
        # (byte offsets 2 * cols) hid the contiguity: 288 scalar 2-byte loads per thread per 64-token tile.
        ptrs = kv_ptr + row[:, None] + cols[None, :]
    else:
        ptrs = (kv_ptr + row[:, None] + cols[None, :]).to(tl.pointer_type(tl.float8e4nv))
    return tl.load(ptrs, mask=valid[:, None], other=0.0)


@triton.jit
def _load_rope(kv_ptr, row, valid, KV_FORMAT: tl.constexpr):
    """The 64 rope columns of N rows: fp8 in the per-tensor format, bf16 in bf16 and fp8_ds_mla."""
    if KV_FORMAT == FMT_DS_MLA:
        cols = tl.arange(0, 64)
        ptrs = (kv_ptr + row[:, None] + 528 + 2 * cols[None, :]).to(tl.pointer_type(tl.bfloat16))
        x = tl.load(ptrs, mask=valid[:, None], other=0.0)
    else:
        x = _load_cols(kv_ptr, row, 512, valid, KV_FORMAT, 64)
    return x


@triton.jit
def _load_chunk_scale(kv_ptr, row, valid, CHUNK: tl.constexpr):
    """fp8_ds_mla: the fp32 scale of latent chunk CHUNK for N rows (bytes 512 + 4 * CHUNK)."""
    ptrs = (kv_ptr + row + 512 + 4 * CHUNK).to(tl.pointer_type(tl.float32))
    return tl.load(ptrs, mask=valid, other=0.0)


@triton.jit
def _load_q_t(q_ptr, heads, head_mask, col0, COLS: tl.constexpr, stride_q_h):
    """Query columns ``[col0, col0 + COLS)`` of the program's heads, transposed: [COLS, H] fp32."""
    cols = col0 + tl.arange(0, COLS)
    ptrs = q_ptr + heads[None, :] * stride_q_h + cols[:, None]
    return tl.load(ptrs, mask=head_mask[None, :], other=0.0).to(tl.float32)


@triton.jit
def _amax(x):
    return tl.max(tl.max(tl.abs(x), axis=1), axis=0)


@triton.jit
def _q_operand(q_t, q_scale, MODE: tl.constexpr, INTERPRET: tl.constexpr):
    """The B operand(s) of a score dot from fp32 ``q_t`` ([COLS, H]), as a pair ``(hi, lo)``.

    MODE 0: ``q_t * q_scale`` in fp16; 1: bf16 (unscaled); in both ``lo`` is ``hi`` and unused.
    MODE 2: fp8, ``hi = fp8(q_t * q_scale)`` and ``lo = fp8(16 * (q_t * q_scale - hi))``: hi + lo / 16
    carries all 8 significant bits of a bf16 query, so two fp8 products give the bf16 score.
    """
    if MODE == 0:
        hi = q_t * q_scale
        if not INTERPRET:
            hi = hi.to(tl.float16)
        lo = hi
    elif MODE == 1:
        hi = q_t
        if not INTERPRET:
            hi = hi.to(tl.bfloat16)
        lo = hi
    else:
        scaled = q_t * q_scale
        if INTERPRET:
            # The interpreter's fp32 -> fp8 cast does not round to nearest (31.125 -> 16): split in fp32
            # instead (Veltkamp: hi keeps 4 significant bits, rounded to nearest, as the GPU cast does).
            big = scaled * 1048577.0
            hi = big - (big - scaled)
            lo = (scaled - hi) * 16.0
        else:
            hi = scaled.to(tl.float8e4nv)
            lo = ((scaled - hi.to(tl.float32)) * 16.0).to(tl.float8e4nv)
    return hi, lo


@triton.jit
def _score(k, q_hi, q_lo, LO: tl.constexpr, INTERPRET: tl.constexpr, PREC: tl.constexpr):
    """``k q^T`` for one column chunk: [N, H] fp32. LO: k is raw fp8 and (q_hi, q_lo) an fp8 pair whose lo half
    counts (without it, an fp8 k scores against q_hi alone: the e4m3 query)."""
    if INTERPRET:
        k = k.to(tl.float32)
    s = tl.dot(k, q_hi, input_precision=PREC)
    if LO:
        s += tl.dot(k, q_lo, input_precision=PREC) * 0.0625
    return s


@triton.jit
def _score_acc(k, q_hi, q_lo, acc_hi, acc_lo, LO: tl.constexpr, INTERPRET: tl.constexpr, PREC: tl.constexpr):
    """Accumulate ``k q_hi^T`` (and ``k q_lo^T`` when LO) into running dot accumulators.

    Chaining the accumulators lets the MMAs of all chunks issue back to back; separate dots summed in
    fp32 made Triton wait for each one (10 waits per tile).
    """
    if INTERPRET:
        k = k.to(tl.float32)
    acc_hi = tl.dot(k, q_hi, acc_hi, input_precision=PREC)
    if LO:
        acc_lo = tl.dot(k, q_lo, acc_lo, input_precision=PREC)
    return acc_hi, acc_lo


@triton.jit
def _v_operand(k, PAIR: tl.constexpr, CONVERT: tl.constexpr, INTERPRET: tl.constexpr):
    """The P.V operand of a chunk: widened here, just before its dot, when the scores used raw fp8."""
    if PAIR:
        k = _widen(k, CONVERT, INTERPRET)
    return k


@triton.jit
def _pv_update(acc, v, w, alpha, cm, DOT_DTYPE: tl.constexpr, SCALED: tl.constexpr, PREC: tl.constexpr):
    """``acc^T <- acc^T * alpha + V^T w`` for one 128-dim chunk; ``cm`` multiplies the product when SCALED."""
    if SCALED:
        return acc * alpha[None, :] + tl.dot(tl.trans(v), w.to(DOT_DTYPE), input_precision=PREC) * cm
    else:
        return tl.dot(tl.trans(v), w.to(DOT_DTYPE), acc * alpha[None, :], input_precision=PREC)


@triton.jit
def _store_out_t(out_ptr, acc, inv, heads, head_mask, col0, stride_out_h):
    """Store ``acc^T * inv`` ([128, H]) into rows ``heads`` and columns ``[col0, col0 + 128)`` of out."""
    cols = col0 + tl.arange(0, 128)
    ptrs = out_ptr + heads[None, :] * stride_out_h + cols[:, None]
    tl.store(ptrs, (acc * inv[None, :]).to(out_ptr.dtype.element_ty), mask=head_mask[None, :])


# B is not specialised (no recompile for B == 1 or B % 16 == 0): one binary per config serves every batch.
@triton.jit(do_not_specialize=["B"])
def _mla_decode_split_kernel(
    q_ptr, kv_ptr, page_table_ptr, seq_lens_ptr, kv_scale_ptr, q_descale_ptr,
    out_ptr, lse_ptr, part_o_ptr, part_lse_ptr, seg_ptr,
    sm_scale, kv_scale, q_descale,
    B, H,
    stride_q_b, stride_q_h,
    stride_kv_page, stride_kv_tok,
    stride_pt_b,
    stride_out_b, stride_out_h,
    stride_po_s, stride_po_h,
    stride_pl_s,
    PAGE_SIZE: tl.constexpr,
    KV_FORMAT: tl.constexpr,
    KV_SCALE_FROM_PTR: tl.constexpr,
    RETURN_LSE: tl.constexpr,
    INTERPRET: tl.constexpr,
    B_CHUNK: tl.constexpr,
    Q_LO: tl.constexpr,             # 1: the query's lo half scores too (bf16 precision); 0: its e4m3 hi half alone
    Q_DESCALE_FROM_PTR: tl.constexpr,   # an e4m3 q (read as it is) scaled by a device tensor, else by q_descale
    # The tuned config: these must stay the last parameters (graphtune appends them positionally).
    BLOCK_N: tl.constexpr,
    BLOCK_H: tl.constexpr,
    CONVERT: tl.constexpr,
    QK8: tl.constexpr,
    PROGRAMS_PER_SM: tl.constexpr,  # sizes the grid in interface.py; unused in here
):
    """Grid ``(cdiv(H, BLOCK_H), P)``: each program attends its heads over a contiguous range of tiles."""
    LOG2E: tl.constexpr = 1.4426950408889634
    pid_h = tl.program_id(0)
    pid = tl.program_id(1)
    num_progs = tl.num_programs(1)

    # The interpreter emulates tf32 for fp32 dots unless told otherwise; 16-bit dots ignore the setting.
    if INTERPRET:
        PREC: tl.constexpr = "ieee"
    else:
        PREC: tl.constexpr = "tf32"
    IS_FP8: tl.constexpr = KV_FORMAT != FMT_BF16
    # PAIR: latent (and fp8 rope) scores straight from the fp8 bytes against an fp8 hi/lo query pair;
    # only P.V widens the cache. Otherwise both dots share one widened (fp16) or bf16 tile.
    PAIR: tl.constexpr = IS_FP8 and QK8 == 1
    # LO: the pair's lo half scores too (query_precision "bf16"); without it the query is its e4m3 hi half alone
    # ("e4m3": one fp8 dot a chunk instead of two)
    LO: tl.constexpr = PAIR and Q_LO == 1
    if INTERPRET:
        V_DTYPE: tl.constexpr = tl.float32
    elif IS_FP8:
        V_DTYPE: tl.constexpr = tl.float16
    else:
        V_DTYPE: tl.constexpr = tl.bfloat16
    if IS_FP8 and CONVERT != 0:
        V_UNIT: tl.constexpr = 256.0
    else:
        V_UNIT: tl.constexpr = 1.0
    if PAIR:
        S_UNIT: tl.constexpr = 1.0
        Q_MODE: tl.constexpr = 2
        Q_TARGET: tl.constexpr = 8.0     # max |q| * q_scale <= 2**8: hi and 16 * residual stay below 448
    elif IS_FP8:
        S_UNIT: tl.constexpr = V_UNIT
        Q_MODE: tl.constexpr = 0
        Q_TARGET: tl.constexpr = 14.0    # fp16 without overflow, and bf16's 8 bits kept down to 2**-14
    else:
        S_UNIT: tl.constexpr = 1.0
        Q_MODE: tl.constexpr = 1
        Q_TARGET: tl.constexpr = 0.0
    # The rope dims: fp8 like the latent ones in the per-tensor format, bf16 otherwise.
    if KV_FORMAT == FMT_FP8:
        ROPE_MODE: tl.constexpr = Q_MODE
    else:
        ROPE_MODE: tl.constexpr = 1

    heads = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    head_mask = heads < H
    if KV_FORMAT == FMT_FP8:
        if KV_SCALE_FROM_PTR:
            kv_scale = tl.load(kv_scale_ptr).to(tl.float32)
    else:
        kv_scale = 1.0
    if Q_DESCALE_FROM_PTR:
        q_descale = tl.load(q_descale_ptr).to(tl.float32)

    # The tile list of the whole batch, computed from seq_lens on the device (capture-safe), in chunks of
    # B_CHUNK requests so that no constexpr depends on the batch size (one compile serves every B).
    offs_c = tl.arange(0, B_CHUNK)
    total = 0
    for r0 in range(0, B, B_CHUNK):
        lens = tl.load(seq_lens_ptr + r0 + offs_c, mask=r0 + offs_c < B, other=0)
        total += tl.sum((tl.maximum(lens, 0) + BLOCK_N - 1) // BLOCK_N, axis=0)
    per = (total + num_progs - 1) // num_progs
    t = pid * per
    t_stop = tl.minimum(t + per, total)
    # b: the first request whose tiles end after t; req_end: where the tiles of request b - 1 end. A chunk's
    # ends start from the tiles of every request before it (``base``), not from req_end: with a request that
    # spans tile t in one chunk, req_end stops before it, and short requests of the next chunks would count as done
    # (wrong for batches of more than B_CHUNK requests until session 13).
    b = 0
    req_end = 0
    base = 0
    for r0 in range(0, B, B_CHUNK):
        lens = tl.load(seq_lens_ptr + r0 + offs_c, mask=r0 + offs_c < B, other=0)
        tiles = (tl.maximum(lens, 0) + BLOCK_N - 1) // BLOCK_N
        ends = base + tl.cumsum(tiles, axis=0)
        done = (ends <= t) & (r0 + offs_c < B)
        b += tl.sum(done.to(tl.int32), axis=0)
        req_end += tl.sum(tl.where(done, tiles, 0), axis=0)
        base += tl.sum(tiles, axis=0)

    offs_n = tl.arange(0, BLOCK_N)
    while t < t_stop:
        seq_len = tl.load(seq_lens_ptr + b)
        # a request of no tokens (or a negative length, outside the contract: the same) has no tiles and its
        # page-table row may hold anything: past it (one with tokens follows, since tile t < t_stop is someone's;
        # the reduction zeroes the skipped ones)
        while seq_len <= 0:
            b += 1
            seq_len = tl.load(seq_lens_ptr + b)
        req_tiles = (seq_len + BLOCK_N - 1) // BLOCK_N
        req_start = req_end
        req_end = req_start + req_tiles
        seg_stop = tl.minimum(t_stop, req_end)
        i_first = t - req_start
        i_stop = seg_stop - req_start

        # The query of request b, transposed ([dims, H]) so that heads sit on the dot's N side.
        q_base = q_ptr + b.to(tl.int64) * stride_q_b
        q0 = _load_q_t(q_base, heads, head_mask, 0, 128, stride_q_h)
        q1 = _load_q_t(q_base, heads, head_mask, 128, 128, stride_q_h)
        q2 = _load_q_t(q_base, heads, head_mask, 256, 128, stride_q_h)
        q3 = _load_q_t(q_base, heads, head_mask, 384, 128, stride_q_h)
        qr = _load_q_t(q_base, heads, head_mask, 512, 64, stride_q_h)
        if IS_FP8:
            # A power of two: exact to apply, divided back out of the scores in fp32.
            q_amax = tl.maximum(tl.maximum(_amax(q0), _amax(q1)), tl.maximum(_amax(q2), _amax(q3)))
            if KV_FORMAT == FMT_FP8:
                q_amax = tl.maximum(q_amax, _amax(qr))
            q_scale = tl.exp2(Q_TARGET - tl.ceil(tl.log2(tl.maximum(q_amax, 1e-30))))
        else:
            q_scale = 1.0
        q0, q0_lo = _q_operand(q0, q_scale, Q_MODE, INTERPRET)
        q1, q1_lo = _q_operand(q1, q_scale, Q_MODE, INTERPRET)
        q2, q2_lo = _q_operand(q2, q_scale, Q_MODE, INTERPRET)
        q3, q3_lo = _q_operand(q3, q_scale, Q_MODE, INTERPRET)
        qr, qr_lo = _q_operand(qr, q_scale, ROPE_MODE, INTERPRET)
        # Scores in log2 units: latent dots times nope_mul; fp8_ds_mla's bf16 rope dot times rope_mul.
        # (an e4m3 query, loaded as it is, is q * q_descale: a factor of the scores; 1 for a bf16 query)
        nope_mul = sm_scale * LOG2E * S_UNIT * kv_scale * q_descale / q_scale
        rope_mul = sm_scale * LOG2E * q_descale

        m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_H], tl.float32)
        acc0 = tl.zeros([128, BLOCK_H], tl.float32)
        acc1 = tl.zeros([128, BLOCK_H], tl.float32)
        acc2 = tl.zeros([128, BLOCK_H], tl.float32)
        acc3 = tl.zeros([128, BLOCK_H], tl.float32)
        pt_base = page_table_ptr + b.to(tl.int64) * stride_pt_b
        for i in range(i_first, i_stop):
            tok = i * BLOCK_N + offs_n
            valid = tok < seq_len
            page = tl.load(pt_base + tok // PAGE_SIZE, mask=valid, other=0)
            row = page.to(tl.int64) * stride_kv_page + (tok % PAGE_SIZE) * stride_kv_tok
            k0 = _load_cols(kv_ptr, row, 0, valid, KV_FORMAT, 128)
            k1 = _load_cols(kv_ptr, row, 128, valid, KV_FORMAT, 128)
            k2 = _load_cols(kv_ptr, row, 256, valid, KV_FORMAT, 128)
            k3 = _load_cols(kv_ptr, row, 384, valid, KV_FORMAT, 128)
            kr = _load_rope(kv_ptr, row, valid, KV_FORMAT)
            if not PAIR:
                # One widened (or bf16) tile feeds both dots.
                if IS_FP8:
                    k0 = _widen(k0, CONVERT, INTERPRET)
                    k1 = _widen(k1, CONVERT, INTERPRET)
                    k2 = _widen(k2, CONVERT, INTERPRET)
                    k3 = _widen(k3, CONVERT, INTERPRET)
                    if KV_FORMAT == FMT_FP8:
                        kr = _widen(kr, CONVERT, INTERPRET)
                elif INTERPRET:
                    k0, k1, k2, k3 = k0.to(tl.float32), k1.to(tl.float32), k2.to(tl.float32), k3.to(tl.float32)
            if KV_FORMAT == FMT_DS_MLA:
                c0 = _load_chunk_scale(kv_ptr, row, valid, 0)
                c1 = _load_chunk_scale(kv_ptr, row, valid, 1)
                c2 = _load_chunk_scale(kv_ptr, row, valid, 2)
                c3 = _load_chunk_scale(kv_ptr, row, valid, 3)
                s = (_score(k0, q0, q0_lo, LO, INTERPRET, PREC) * c0[:, None]
                     + _score(k1, q1, q1_lo, LO, INTERPRET, PREC) * c1[:, None]
                     + _score(k2, q2, q2_lo, LO, INTERPRET, PREC) * c2[:, None]
                     + _score(k3, q3, q3_lo, LO, INTERPRET, PREC) * c3[:, None]) * nope_mul
                s += _score(kr, qr, qr_lo, False, INTERPRET, PREC) * rope_mul
            else:
                # fp8 per-tensor and bf16: one scale for all 576 dims, so all chunks share accumulators.
                s_hi = tl.zeros([BLOCK_N, BLOCK_H], tl.float32)
                s_lo = tl.zeros([BLOCK_N, BLOCK_H], tl.float32)
                s_hi, s_lo = _score_acc(k0, q0, q0_lo, s_hi, s_lo, LO, INTERPRET, PREC)
                s_hi, s_lo = _score_acc(k1, q1, q1_lo, s_hi, s_lo, LO, INTERPRET, PREC)
                s_hi, s_lo = _score_acc(k2, q2, q2_lo, s_hi, s_lo, LO, INTERPRET, PREC)
                s_hi, s_lo = _score_acc(k3, q3, q3_lo, s_hi, s_lo, LO, INTERPRET, PREC)
                s_hi, s_lo = _score_acc(kr, qr, qr_lo, s_hi, s_lo, LO, INTERPRET, PREC)
                if LO:
                    s_hi += s_lo * 0.0625
                s = s_hi * nope_mul
            s = tl.where(valid[:, None], s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=0))
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(s - m_new[None, :])
            l_i = l_i * alpha + tl.sum(p, axis=0)
            m_i = m_new
            if KV_FORMAT == FMT_DS_MLA:
                # Per-token chunk scales go into p; dividing by the tile's largest keeps p * c in [0, 1]
                # for the fp16 cast, and the product is multiplied back in fp32.
                cm0 = tl.max(c0, axis=0)
                cm1 = tl.max(c1, axis=0)
                cm2 = tl.max(c2, axis=0)
                cm3 = tl.max(c3, axis=0)
                acc0 = _pv_update(acc0, _v_operand(k0, PAIR, CONVERT, INTERPRET), p * (c0 / tl.maximum(cm0, 1e-30))[:, None], alpha, cm0, V_DTYPE, True, PREC)
                acc1 = _pv_update(acc1, _v_operand(k1, PAIR, CONVERT, INTERPRET), p * (c1 / tl.maximum(cm1, 1e-30))[:, None], alpha, cm1, V_DTYPE, True, PREC)
                acc2 = _pv_update(acc2, _v_operand(k2, PAIR, CONVERT, INTERPRET), p * (c2 / tl.maximum(cm2, 1e-30))[:, None], alpha, cm2, V_DTYPE, True, PREC)
                acc3 = _pv_update(acc3, _v_operand(k3, PAIR, CONVERT, INTERPRET), p * (c3 / tl.maximum(cm3, 1e-30))[:, None], alpha, cm3, V_DTYPE, True, PREC)
            else:
                acc0 = _pv_update(acc0, _v_operand(k0, PAIR, CONVERT, INTERPRET), p, alpha, 1.0, V_DTYPE, False, PREC)
                acc1 = _pv_update(acc1, _v_operand(k1, PAIR, CONVERT, INTERPRET), p, alpha, 1.0, V_DTYPE, False, PREC)
                acc2 = _pv_update(acc2, _v_operand(k2, PAIR, CONVERT, INTERPRET), p, alpha, 1.0, V_DTYPE, False, PREC)
                acc3 = _pv_update(acc3, _v_operand(k3, PAIR, CONVERT, INTERPRET), p, alpha, 1.0, V_DTYPE, False, PREC)

        # a segment has at least one tile and every tile a valid token, so l_i > 0 for every head.
        if KV_FORMAT == FMT_DS_MLA:
            inv = V_UNIT / l_i
        else:
            inv = V_UNIT * kv_scale / l_i
        lse2 = m_i + tl.log2(l_i)
        if (i_first == 0) & (i_stop == req_tiles):
            o_base = out_ptr + b.to(tl.int64) * stride_out_b
            _store_out_t(o_base, acc0, inv, heads, head_mask, 0, stride_out_h)
            _store_out_t(o_base, acc1, inv, heads, head_mask, 128, stride_out_h)
            _store_out_t(o_base, acc2, inv, heads, head_mask, 256, stride_out_h)
            _store_out_t(o_base, acc3, inv, heads, head_mask, 384, stride_out_h)
            if RETURN_LSE:
                tl.store(lse_ptr + b * H + heads, lse2 * 0.6931471805599453, mask=head_mask)
        else:
            slot = (pid + b).to(tl.int64)
            part_base = part_o_ptr + slot * stride_po_s
            _store_out_t(part_base, acc0, inv, heads, head_mask, 0, stride_po_h)
            _store_out_t(part_base, acc1, inv, heads, head_mask, 128, stride_po_h)
            _store_out_t(part_base, acc2, inv, heads, head_mask, 256, stride_po_h)
            _store_out_t(part_base, acc3, inv, heads, head_mask, 384, stride_po_h)
            tl.store(part_lse_ptr + slot * stride_pl_s + heads, lse2, mask=head_mask)
        # The reduction reads which partial ids hold request b (a whole segment writes first == last).
        if pid_h == 0:
            tl.store(seg_ptr + 2 * b, pid + b, mask=i_first == 0)
            tl.store(seg_ptr + 2 * b + 1, pid + b, mask=i_stop == req_tiles)
        t = seg_stop
        b += 1


@triton.jit
def _request_slots(seq_lens_ptr, seg_ptr, b):
    """Request b's length and its first and last partial slot: three loads issued together (one round trip)."""
    return tl.load(seq_lens_ptr + b), tl.load(seg_ptr + 2 * b), tl.load(seg_ptr + 2 * b + 1)


# kernel_hopper.STREAM_GROUPS (the streamed reduction's counts: per request, per head group of the split)
STREAM_GROUPS: tl.constexpr = tl.constexpr(4)


# The streamed reduction's reads of a count before it falls back to waiting for the whole split kernel (about half a
# second at the ~0.5 us a read and a sleep take): the counts reach the slots in every launch whose plan matches its
# split (tests/gpu/test_mla_decode_gpu.py); a plan that does not (its seq_lens changed in place after it was filled,
# outside the contract) then stalls the step instead of hanging the GPU.
STREAM_MAX_READS: tl.constexpr = tl.constexpr(1 << 20)


@triton.jit
def _wait_count(count_ptr, need, PDL: tl.constexpr):
    """Spin (acquire reads at GPU scope, a short sleep apart) until the count at ``count_ptr`` reaches ``need``, after
    which the partials' loads follow; past ``STREAM_MAX_READS`` reads, wait for the split kernel's completion instead
    (``PDL``; launched plainly the reduction runs after it anyway). (Relaxed reads with one acquire read after them
    put that read's round trip on the path of the step's last request: session 53 call E, H100.)"""
    seen = tl.atomic_add(count_ptr, 0, sem="acquire", scope="gpu")
    reads = 1
    while (seen < need) & (reads < STREAM_MAX_READS):
        tl.inline_asm_elementwise("nanosleep.u32 128; // $0", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
        seen = tl.atomic_add(count_ptr, 0, sem="acquire", scope="gpu")
        reads += 1
    if seen < need:
        if PDL:
            gdc_wait()


@triton.jit
def _count_read(count_ptr, readers_offset, readers):
    """One more of the ``readers`` programs that merge this count's request and head group is done; the last sets
    the count and the readers' count (``readers_offset`` past it) back to zero."""
    done = tl.atomic_add(count_ptr + readers_offset, 1, sem="relaxed", scope="gpu")
    if done == readers - 1:
        tl.store(count_ptr, 0)
        tl.store(count_ptr + readers_offset, 0)


@triton.jit
def _mla_decode_reduce_kernel(
    seg_ptr, part_o_ptr, part_lse_ptr, out_ptr, lse_ptr, seq_lens_ptr,
    H,
    stride_po_s, stride_po_h,
    stride_pl_s,
    stride_out_b, stride_out_h,
    RETURN_LSE: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_H: tl.constexpr = 1,
    PDL: tl.constexpr = False,
    SCALED: tl.constexpr = False,
    SEG_EARLY: tl.constexpr = False,
    done_ptr=None,
    SPLIT_BH: tl.constexpr = 16,
    WRITERS: tl.constexpr = 1,
):
    """Grid ``(B, H // BLOCK_H, 512 // BLOCK_D)``: merge the partials ``[first, last]`` of request b, heads ``[h0, h0 +
    BLOCK_H)``, output columns ``[d0, d0 + BLOCK_D)``, ``BLOCK_S`` slots at a time; skip a whole segment. A request of
    no tokens (a padding slot of a captured batch) gets zeros and an LSE of -inf, the attention over an empty set: the
    split kernels pass it by, so its segment slots are never written (read here, unused). The first column block writes
    the LSE. ``PDL`` (launched as a programmatic dependent of the split kernel, sm_90+): waits for the split kernel's
    writes before anything else, so only its launch overlaps the split kernel's tail. ``SCALED``: each partial half-row
    (256 columns) was stored times 2^-k, k at ``H`` (columns 0-255) or ``2 H`` (256-511) past its LSE in the slot's row
    (reduction.py). ``SEG_EARLY`` (with ``PDL``): ``seg_ptr`` is a step's plan's copy of the slots (plan.py), written
    before the split kernel started, so it and the lengths are read before the wait and only the partials' loads follow
    it (one round trip fewer after the split kernel's last program). ``done_ptr`` (the reduction streamed,
    ``reduction.STREAM``; with ``SEG_EARLY``'s slots, a step's plan's): no wait for the whole split kernel first; each
    request waits for its own count of written segments (``kernel_hopper.STREAM_GROUPS``: counted per head group of
    ``SPLIT_BH`` heads of the split, ``WRITERS`` counts a segment: the ping-pong kernel's two warpgroups each count
    their half) to reach its slots, reads the partials past the L1 (``.cg``: written while this grid runs), and its last
    reader sets the counts back to zero; with ``PDL`` each program still waits for the split kernel's completion before
    it exits, so that what runs after the reduction in the stream also follows the split kernel."""
    b = tl.program_id(0)
    STREAM: tl.constexpr = done_ptr is not None
    CACHE: tl.constexpr = ".cg" if STREAM else ""
    if SEG_EARLY:
        seq_len, first, last = _request_slots(seq_lens_ptr, seg_ptr, b)
    if PDL and not STREAM:
        gdc_wait()
    h0 = tl.program_id(1) * BLOCK_H
    offs_h = tl.arange(0, BLOCK_H)      # (head offsets from the scalar h0: with one head, a constant 0)
    d0 = tl.program_id(2) * BLOCK_D
    offs_d = d0 + tl.arange(0, BLOCK_D)
    if not SEG_EARLY:
        seq_len, first, last = _request_slots(seq_lens_ptr, seg_ptr, b)
    out_ptrs = (out_ptr + b.to(tl.int64) * stride_out_b + h0 * stride_out_h
                + offs_h[:, None] * stride_out_h + offs_d[None, :])
    lse_ptrs = lse_ptr + b * H + h0 + offs_h
    if seq_len <= 0:     # (a negative length, outside the contract, the same)
        tl.store(out_ptrs, tl.zeros([BLOCK_H, BLOCK_D], tl.float32).to(out_ptr.dtype.element_ty))
        if RETURN_LSE:
            if d0 == 0:
                tl.store(lse_ptrs, tl.full([BLOCK_H], float("-inf"), tl.float32))
    elif first != last:
        if STREAM:
            count_ptr = done_ptr + b * STREAM_GROUPS + h0 // SPLIT_BH
            _wait_count(count_ptr, (last - first + 1) * WRITERS, PDL)
        po_base = part_o_ptr + h0 * stride_po_h
        pl_base = part_lse_ptr + h0
        m = tl.full([BLOCK_H], float("-inf"), tl.float32)
        l_sum = tl.zeros([BLOCK_H], tl.float32)
        acc = tl.zeros([BLOCK_H, BLOCK_D], tl.float32)
        for s0 in range(first, last + 1, BLOCK_S):
            slots = s0 + tl.arange(0, BLOCK_S)
            smask = slots <= last
            o = tl.load(po_base + slots.to(tl.int64)[:, None, None] * stride_po_s
                        + offs_h[None, :, None] * stride_po_h + offs_d[None, None, :],
                        mask=smask[:, None, None], other=0.0, cache_modifier=CACHE).to(tl.float32)
            if BLOCK_H == 1:
                lse1 = tl.load(pl_base + slots.to(tl.int64) * stride_pl_s, mask=smask, other=float("-inf"),
                               cache_modifier=CACHE)
                m_new = tl.maximum(m, tl.max(lse1, axis=0))
                w1 = tl.exp2(lse1 - m_new)
                w = w1[:, None]
            else:
                lse2 = tl.load(pl_base + slots.to(tl.int64)[:, None] * stride_pl_s + offs_h[None, :],
                               mask=smask[:, None], other=float("-inf"), cache_modifier=CACHE)
                m_new = tl.maximum(m, tl.max(lse2, axis=0))
                w = tl.exp2(lse2 - m_new[None, :])
            alpha = tl.exp2(m - m_new)
            l_sum = l_sum * alpha + tl.sum(w, axis=0)
            if SCALED:      # (the partial's weight times its half-row's 2^k; the sum of weights without it)
                k_ptrs = pl_base + H + slots.to(tl.int64)[:, None] * stride_pl_s + offs_h[None, :]
                if BLOCK_D <= 256:
                    k = tl.load(k_ptrs + H * (d0 // 256), mask=smask[:, None], other=0.0, cache_modifier=CACHE)
                    acc = acc * alpha[:, None] + tl.sum(o * (w * tl.exp2(k))[:, :, None], axis=0)
                else:       # whole rows: each column's half picks its factor
                    f0 = w * tl.exp2(tl.load(k_ptrs, mask=smask[:, None], other=0.0, cache_modifier=CACHE))
                    f1 = w * tl.exp2(tl.load(k_ptrs + H, mask=smask[:, None], other=0.0, cache_modifier=CACHE))
                    f = tl.where((offs_d < 256)[None, None, :], f0[:, :, None], f1[:, :, None])
                    acc = acc * alpha[:, None] + tl.sum(o * f, axis=0)
            else:
                acc = acc * alpha[:, None] + tl.sum(o * w[:, :, None], axis=0)
            m = m_new
        tl.store(out_ptrs, (acc / l_sum[:, None]).to(out_ptr.dtype.element_ty))
        if RETURN_LSE:
            if d0 == 0:
                tl.store(lse_ptrs, (m + tl.log2(l_sum)) * 0.6931471805599453)
        if STREAM:
            # (this group's readers: its heads' blocks of BLOCK_H times the column blocks)
            group_heads = tl.minimum(SPLIT_BH, H - (h0 // SPLIT_BH) * SPLIT_BH)
            _count_read(count_ptr, tl.num_programs(0) * STREAM_GROUPS, (group_heads // BLOCK_H) * tl.num_programs(2))
    if STREAM:
        if PDL:
            gdc_wait()
