"""Hopper (sm_90a) MLA decode kernels in Gluon: TMA tiles, asynchronous warpgroup MMAs.

Only ``@gluon.jit`` functions live here (interface_hopper.py launches them). Shape letters as in kernel.py.

Scope (measured in docs/mla_decode.md): bf16 and fp8 (per-tensor) caches whose pages hold a multiple of 64
tokens, H a multiple of 16 (``interface_hopper.FP8_AUTO`` says where ``path="auto"`` runs the fp8 ones).
Other formats, page sizes and GPUs run the portable kernel (kernel.py).

Two bf16 kernels, one per side of the MMA the heads go on, and the first fp8 tokens-on-M kernel (at the end of
the file, fp8 scores):

``_mla_decode_hopper_kernel`` (H a multiple of 64: the data-parallel-attention case, H = 128). Heads on M:
a program takes 64 heads of one request at a time, so a KV row read from global memory feeds 64 heads
(the portable kernel: 16). Per tile of BLOCK_N tokens (one TMA message pair from a page's contiguous
rows: [BLOCK_N, 512] latent + [BLOCK_N, 64] rope):

    S = Q K^T    [64 heads, BLOCK_N]: 2 async wgmmas, A = the query tile in shared memory (TMA, once per
                 request), B = the KV tile viewed K-major (a permuted descriptor, no data movement)
    softmax      in registers, log2 domain, running max and sum per head
    O += P V     [64 heads, 512]: A = P from registers (bf16), B = the same KV tile (MN-major)

8 warps = 2 warpgroups, warps_per_cta [4, 2]: the two warpgroups split the tokens of S and the 512 output
dims of O (O is 64 x 256 fp32 = 128 registers per thread); P crosses warpgroups through shared memory
(``convert_layout``). What crosses between the warpgroups each tile is the cost to cut (compiled for sm_90:
about nine block barriers a tile): PSMEM (P as the P.V wgmma's A operand from a shared tile, one barrier),
XCH (the softmax's maxima and sums in one exchange, ``_softmax_2wg``), LSUM / MAX1 (row sums as a wgmma,
maxima with one barrier) and EARLY (the next TMA issued before the score MMAs rather than after them) are
the knobs; docs/mla_decode.md has what each measured. The fp8 heads-on-M kernel (scores from 16-bit MMAs on a
tile widened once to fp16) is in kernel_hopper_heads.py; an fp8-score heads-on-M kernel (hi/lo query) lost to it
in every cell timed on the H200 (11-19% at H = 128, batch 1-64, sessions 8 and 9) and was removed in session 9
(its history: docs/mla_decode.md).

``_mla_decode_hopper_tok_kernel`` (H < 64, e.g. the tensor-parallel H = 16). Tokens on M, one warpgroup,
16 heads per program: ``S^T = K Q^T`` ([64 tokens, 16]) and ``O^T += V^T P^T`` ([512, 16]; A = the KV tile
viewed MN-major, B = P^T written to shared memory each tile). (fp8 with H < 64 from 8 requests up runs the
second tokens-on-M fp8 kernel, kernel_hopper_tok.py.)

Pipelining (both): NUM_BUF KV buffers, each with its mbarrier. The load of tile i + NUM_BUF - 1 is issued as
soon as the MMAs that read its buffer (tile i - 1) are retired, i.e. right after the wait that retires
S(i) (wgmma groups retire in order, so that wait also retires O(i - 1)); O(i) stays asynchronous until the
next tile's S wait. PIPE = 1 (heads on M) instead overlaps the softmax of tile i with P.V of tile i - 1
(FlashAttention-3's intra-warpgroup schedule) at the price of issuing the next load later: measured
slower (docs/mla_decode.md).

Work split: as kernel.py (a static grid; the tiles of all requests laid end to end and cut into equal
ranges on the device from ``seq_lens``; partials under slot ``p + b``; the same reduction kernel). One
captured graph serves any lengths.

Rows past ``seq_len`` in a request's last page are read by TMA (whole tiles) and may hold anything, NaN
included: their scores are masked to -inf, and the rows are zeroed in shared memory before P.V (0 * NaN
would poison the output), only in a request's last, partial tile.
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.language.extra.cuda import gdc_launch_dependents as _gdc_launch_dependents
from triton.language.extra.cuda import gdc_wait as _gdc_wait
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)

# Gluon's names moved between triton 3.6 and 3.9 (the CI runs both): a barrier of every thread of the
# block (``thread_barrier`` -> ``barrier``) and the TMA load (``async_copy_global_to_shared`` -> ``async_load``).
_block_barrier = getattr(gl, "thread_barrier", None) or gl.barrier
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared


# Timeline stamps (benchmarks/probes/timeline.py): a kernel that takes ``STAMPS`` (a diagnostic keyword, None in
# every launch of the library, so the stamps compile to nothing) writes, per program, STAMP_ROW int64 values: the
# global timer at entry and exit (ns, comparable across SMs), the SM id, and the SM's clock at named points.
STAMP_ROW = gl.constexpr(256)
STAMP_GT_IN, STAMP_GT_OUT, STAMP_SMID, STAMP_CLK_IN, STAMP_CLK_SPLIT, STAMP_CLK_READY, STAMP_CLK_OUT, STAMP_TILES = (
    gl.constexpr(k) for k in range(8))
STAMP_TILE0 = gl.constexpr(8)     # then per tile (or pair of tiles) k of the program, PER stamps from 8 + PER k


@gluon.jit
def _stamp(STAMPS, row, slot, what: gl.constexpr = 0):
    """Diagnostics: the SM's ``%clock64`` (``what`` 0; 1: ``%globaltimer``, 2: ``%smid``) stored at
    ``STAMPS[row * STAMP_ROW + slot]``; nothing at all when ``STAMPS`` is None."""
    if STAMPS is not None:
        if what == 2:
            v = gl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=gl.int32, is_pure=False,
                                          pack=1).to(gl.int64)
        elif what == 1:
            v = gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=gl.int64, is_pure=False,
                                          pack=1)
        else:
            v = gl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=gl.int64, is_pure=False, pack=1)
        gl.store(STAMPS + row.to(gl.int64) * STAMP_ROW + slot, v)


@gluon.jit
def _stamp_tile(STAMPS, row, k, x: gl.constexpr, PER: gl.constexpr):
    """Stamp ``x`` of the program's tile (or pair) ``k``, PER a tile, while the row has room."""
    if STAMPS is not None:
        if k < (STAMP_ROW - STAMP_TILE0) // PER:
            _stamp(STAMPS, row, STAMP_TILE0 + PER * k + x)


@gluon.jit
def _stamp_out(STAMPS, row, tiles):
    """A program's last stamps: its clock and the global timer at exit, its SM, and its tile count."""
    if STAMPS is not None:
        _stamp(STAMPS, row, STAMP_CLK_OUT)
        _stamp(STAMPS, row, STAMP_GT_OUT, 1)
        _stamp(STAMPS, row, STAMP_SMID, 2)
        gl.store(STAMPS + row.to(gl.int64) * STAMP_ROW + STAMP_TILES, tiles.to(gl.int64))


@gluon.jit
def _add(a, b):
    return a + b


@gluon.jit
def _add2(a0, a1, b0, b1):
    return a0 + b0, a1 + b1


@gluon.jit
def _sums3(a0, a1, a2, b0, b1, b2):
    return a0 + b0, a1 + b1, a2 + b2


@gluon.jit
def _sums10(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9):
    return a0 + b0, a1 + b1, a2 + b2, a3 + b3, a4 + b4, a5 + b5, a6 + b6, a7 + b7, a8 + b8, a9 + b9


@gluon.jit
def _split_sums(a0, a1, a2, a3, a4, a5, a6, b0, b1, b2, b3, b4, b5, b6):
    """The aligned split's reduction of a chunk: six sums and a maximum."""
    return a0 + b0, a1 + b1, a2 + b2, a3 + b3, a4 + b4, a5 + b5, gl.maximum(a6, b6)


@gluon.jit
def _program_ids(BLOCK_H: gl.constexpr):
    """A program of the grid ``(H // BLOCK_H, P)``: its head block and tile-range ids, P, its first head."""
    pid_h = gl.program_id(0)
    pid = gl.program_id(1)
    num_progs = gl.num_programs(1)
    h0 = pid_h * BLOCK_H
    return pid_h, pid, num_progs, h0


@gluon.jit
def _chunk_tiles(seq_lens_ptr, B, r0, offs_c, BLOCK_N: gl.constexpr):
    """Tiles of requests ``r0 + offs_c`` (none past the batch or for a length <= 0)."""
    lens = gl.load(seq_lens_ptr + r0 + offs_c, mask=r0 + offs_c < B, other=0)
    return (gl.maximum(lens, 0) + BLOCK_N - 1) // BLOCK_N


@gluon.jit
def _request_programs(tiles, spare, total):
    """Programs of each request in the request-aligned split: one per request with tiles, plus its share of the
    ``spare`` programs by tiles, at most one per tile."""
    return gl.where(tiles > 0, gl.minimum(tiles, 1 + (spare * tiles) // gl.maximum(total, 1)), 0)


@gluon.jit
def _launch_dependents():
    """``griddepcontrol.launch_dependents``: a kernel launched as this one's programmatic dependent (the reduction,
    from ``reduction.PDL_MIN_BATCH`` requests) may be scheduled once every program of this grid has passed
    here or exited. It still waits (``griddepcontrol.wait``) for this grid's completion and writes before its first
    load, so only its launch overlaps this kernel; without such a dependent the instruction does nothing. (Triton's
    ``gdc_launch_dependents``: until session 56 the same PTX, written out here.)"""
    _gdc_launch_dependents()


@gluon.jit
def _wait_primary():
    """``griddepcontrol.wait`` (Triton's ``gdc_wait``): in a kernel launched as the programmatic dependent of the
    kernel before it (``launch_pdl``), wait here until that kernel has completed and its writes are visible; launched
    plainly, it returns at once."""
    _gdc_wait()


# What a request's start costs a program that crosses into it, in tiles (``_split_start``'s ``SEG_COST``), for the
# fp8 kernels: its query, its first copies, its end's stores. Measured on an H200 (session 28, runs 18, 20, 21: fp8,
# 4096 tokens on average, ragged batches of lengths uniform in 1..8191, one seed for every table, the tuned path
# beside FlashMLA; `benchmarks/probes/split_cost.py --seg-cost N` on branch split-cost): H = 16 at batch 8 / 32 / 64 /
# 128 0.0217 / 0.0423 / 0.0625 / 0.1022 ms as the even split, 0.0185 / 0.0394 / 0.0584 / 0.0962 at N = 2, 0.0181 /
# 0.0363 / 0.0566 / 0.0935 at 4, 0.0181 / 0.0357 / 0.0569 / 0.0951 at 8; H = 128 at 8 / 32 / 64 0.0470 / 0.1079 /
# 0.1933 ms as the even split, 0.0398 / 0.0929 / 0.1778 at 4, 0.0401 / 0.0929 / 0.1795 at 8. On uniform batches the
# priced split was slower (H = 16 batch 8 0.0160 -> 0.0171 ms, H = 128 batch 1 0.0212 -> 0.0241): there the even split
# puts every request boundary on a program boundary, so ``_split_start`` keeps it wherever it does.
FP8_SEG_COST = gl.constexpr(4)
# The same for the bf16 kernels that the tuned path runs (the first heads-on-M and tokens-on-M kernels and the
# ping-pong kernel): 0, the even split (``benchmarks/probes/seg_cost.py --bf16 N`` times N on ragged batches). At 4
# (H200, session 33, calls M and N, lengths uniform in 1..8191, seed 39179) ragged batches from 8 requests ran 2-12%
# faster (H = 128 batch 8 / 32: 0.0385 -> 0.0336 / 0.0869 -> 0.0769 ms with the fused pass) and uniform ones up to
# 3.5% slower (the priced pass's sums: bf16 H = 16 batch 1 0.0095 -> 0.0099 ms), so it stays 0 until a uniform batch
# skips that pass (branch split-uniform: the even split by division there, not yet run on a GPU).
BF16_SEG_COST = gl.constexpr(0)


@gluon.jit
def _split_start(seq_lens_ptr, B, pid, num_progs, BLOCK_N: gl.constexpr, B_CHUNK: gl.constexpr,
                 num_warps: gl.constexpr, SEG_COST: gl.constexpr = 0, FUSED: gl.constexpr = 1,
                 MIN_TILES: gl.constexpr = 1):
    """Program pid's tile range ``[t, t_stop)`` of the batch's tiles laid end to end, the request ``b`` that
    holds tile t and ``req_end``, where the tiles of request b - 1 end, decided on the device from seq_lens.

    Two splits. Request-aligned, where it balances: when every request with tiles can have a program of its
    own, each gets one plus a share of the rest by its tiles (``_request_programs``) and its tiles in equal parts,
    so no program holds parts of two requests and a request with one program is written whole (no partials, and
    the reduction passes it by); tried where most requests get one program (more live requests than half the
    programs) and taken when its largest part is at most 1/8 above the even split's. Otherwise the
    even split of kernel.py: ``cdiv(total, P)`` tiles a program, wherever requests end (a program starting at
    request b continues into b + 1). ``SEG_COST`` > 0 (the fp8 kernels: ``FP8_SEG_COST``): where the even split
    leaves a request boundary inside a program (a ragged batch), the even split of "virtual" tiles instead, SEG_COST
    of them before each request's first, a program's virtual range mapped to the real tiles past the start costs it
    covers: a program that crosses into a request takes SEG_COST fewer tiles, so that every program's cost, not its
    tile count, is even (the even split leaves a few programs a second segment, and the kernel ends with them).

    ``FUSED`` (the default): the even split's pass takes each chunk in one scan and one reduction of several
    operands; ``FUSED = 0``: a scan a column and a reduction a sum, the form the ping-pong kernels keep (one scan and
    one reduction a chunk made the fp8 ones 1.5-3.9% slower at H = 128, batch 8 / 32: H200, session 33 call N).

    ``MIN_TILES`` > 1 (a pinned T8 config's, ``interface_hopper.MIN_TILES_PAIR``: a tile a warpgroup): the even
    split's ranges at least that many tiles (and the priced split's at least that many virtual ones), the programs past
    the batch's tiles left none: a batch of fewer tiles than MIN_TILES a program runs fewer programs, each with fewer
    partials to merge."""
    _launch_dependents()
    chunk_layout: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
    offs_c = gl.arange(0, B_CHUNK, layout=chunk_layout)
    total = 0
    live = 0
    for r0 in range(0, B, B_CHUNK):
        tiles = _chunk_tiles(seq_lens_ptr, B, r0, offs_c, BLOCK_N)
        n_tiles, n_live = gl.reduce((tiles, (tiles > 0).to(gl.int32)), 0, _add2)
        total += n_tiles
        live += n_live
    per = (total + num_progs - 1) // num_progs
    if MIN_TILES > 1:
        per = gl.maximum(per, MIN_TILES)
    t = pid * per
    t_stop = gl.minimum(t + per, total)
    b = 0
    req_end = 0
    aligned = 0
    if (live <= num_progs) & (2 * live > num_progs):
        # the aligned split's part j of the request whose programs span pid (``mine``; none past the last program
        # of the last request), each chunk's sums and maximum as one reduction (a program's start is a serial
        # chain of them). Tried only where most requests get one program: with fewer requests the even split's
        # ranges cost no more partials, and the pass cost up to 14% at batch 1 (H200, session 14 run 4)
        spare = num_progs - live
        worst = 0
        t_al = 0
        t_stop_al = 0
        b_al = 0
        req_al = 0
        base = 0
        base_p = 0
        for r0 in range(0, B, B_CHUNK):
            tiles = _chunk_tiles(seq_lens_ptr, B, r0, offs_c, BLOCK_N)
            k = _request_programs(tiles, spare, total)
            kk = gl.maximum(k, 1)
            ends, p_ends = gl.associative_scan((tiles, k), 0, _add2)
            p_ends += base_p
            starts = base + ends - tiles
            mine = (p_ends - k <= pid) & (pid < p_ends)
            j = pid - (p_ends - k)
            c_t, c_stop, c_b, c_start, c_tiles, c_k, c_worst = gl.reduce(
                (gl.where(mine, starts + (j * tiles) // kk, 0), gl.where(mine, starts + ((j + 1) * tiles) // kk, 0),
                 gl.where(mine, r0 + offs_c, 0), gl.where(mine, starts, 0), tiles, k, (tiles + kk - 1) // kk), 0,
                _split_sums)
            t_al += c_t
            t_stop_al += c_stop
            b_al += c_b
            req_al += c_start
            base += c_tiles
            base_p += c_k
            worst = gl.maximum(worst, c_worst)
        if worst <= per + per // 8:
            aligned = 1
            t = t_al
            t_stop = t_stop_al
            b = b_al
            req_end = req_al
    if aligned == 0:
        # the even split: the requests before tile t (a chunk's ends start from every earlier request's tiles,
        # ``base``: kernel.py's split says why)
        base = 0
        if SEG_COST > 0:
            # and in the same pass the priced split's (virtual tiles: ``vt``, ``*_v``; the real and virtual tiles of
            # the requests before tv_stop's: ``stop_end``, ``stop_end_v``) and the request boundaries the even split
            # leaves inside a program (``inside``: the end of a request with tiles, not the batch's last, off a
            # multiple of per)
            total_v = total + SEG_COST * live
            per_v = (total_v + num_progs - 1) // num_progs
            if MIN_TILES > 1:
                per_v = gl.maximum(per_v, MIN_TILES)
            tv = pid * per_v
            tv_stop = gl.minimum(tv + per_v, total_v)
            base_v = 0
            b_v = 0
            req_end_v = 0
            req_real = 0
            stop_end = 0
            stop_end_v = 0
            inside = 0
        if FUSED:
            for r0 in range(0, B, B_CHUNK):
                # each chunk one scan and one reduction of several operands (one exchange between the warps
                # each), not a reduction a sum: a program's start is a serial chain of them
                tiles = _chunk_tiles(seq_lens_ptr, B, r0, offs_c, BLOCK_N)
                valid = r0 + offs_c < B
                if SEG_COST > 0:
                    vt = tiles + SEG_COST * (tiles > 0).to(gl.int32)
                    ends, ends_v = gl.associative_scan((tiles, vt), 0, _add2)
                    ends += base
                    ends_v += base_v
                    done = (ends <= t) & valid
                    done_v = (ends_v <= tv) & valid
                    done_stop = (ends_v <= tv_stop) & valid
                    # (per is 0 for a batch of no tokens: a divisor of 1 then, every request masked out anyway)
                    off = (ends % gl.maximum(per, 1)) != 0
                    c_b, c_end, c_tiles, c_b_v, c_end_v, c_real, c_stop, c_stop_v, c_inside, c_vt = gl.reduce(
                        (done.to(gl.int32), gl.where(done, tiles, 0), tiles, done_v.to(gl.int32),
                         gl.where(done_v, vt, 0), gl.where(done_v, tiles, 0), gl.where(done_stop, tiles, 0),
                         gl.where(done_stop, vt, 0),
                         ((tiles > 0) & valid & (ends < total) & off).to(gl.int32), vt), 0, _sums10)
                    b_v += c_b_v
                    req_end_v += c_end_v
                    req_real += c_real
                    stop_end += c_stop
                    stop_end_v += c_stop_v
                    inside += c_inside
                    base_v += c_vt
                else:
                    ends = base + gl.associative_scan(tiles, 0, _add)
                    done = (ends <= t) & valid
                    c_b, c_end, c_tiles = gl.reduce((done.to(gl.int32), gl.where(done, tiles, 0), tiles), 0, _sums3)
                b += c_b
                req_end += c_end
                base += c_tiles
        else:
            for r0 in range(0, B, B_CHUNK):
                tiles = _chunk_tiles(seq_lens_ptr, B, r0, offs_c, BLOCK_N)
                ends = base + gl.associative_scan(tiles, 0, _add)
                valid = r0 + offs_c < B
                done = (ends <= t) & valid
                b += gl.sum(done.to(gl.int32), axis=0)
                req_end += gl.sum(gl.where(done, tiles, 0), axis=0)
                base += gl.sum(tiles, axis=0)
                if SEG_COST > 0:
                    vt = tiles + SEG_COST * (tiles > 0).to(gl.int32)
                    ends_v = base_v + gl.associative_scan(vt, 0, _add)
                    done_v = (ends_v <= tv) & valid
                    done_stop = (ends_v <= tv_stop) & valid
                    b_v += gl.sum(done_v.to(gl.int32), axis=0)
                    req_end_v += gl.sum(gl.where(done_v, vt, 0), axis=0)
                    req_real += gl.sum(gl.where(done_v, tiles, 0), axis=0)
                    stop_end += gl.sum(gl.where(done_stop, tiles, 0), axis=0)
                    stop_end_v += gl.sum(gl.where(done_stop, vt, 0), axis=0)
                    # (per is 0 for a batch of no tokens: a divisor of 1 then, every request masked out anyway)
                    off = (ends % gl.maximum(per, 1)) != 0
                    inside += gl.sum(((tiles > 0) & valid & (ends < total) & off).to(gl.int32), axis=0)
                    base_v += gl.sum(vt, axis=0)
        if SEG_COST > 0:
            if inside > 0:
                t = req_real + gl.maximum(tv - req_end_v - SEG_COST, 0)
                t_stop = stop_end + gl.maximum(tv_stop - stop_end_v - SEG_COST, 0)
                b = b_v
                req_end = req_real
    return t, t_stop, b, req_end


@gluon.jit
def _segment(seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, BLOCK_N: gl.constexpr):
    """The segment that a program starting at tile t takes: its request (b, or the first request after b with
    tokens), the request's length and tile count, where its tiles end, where the segment stops (``seg_stop``),
    its tiles as request-local indices ``[i_first, i_stop)`` (at least one), and the request's page-table row."""
    seq_len = gl.load(seq_lens_ptr + b)
    # a request of no tokens (or a negative length, outside the contract: the same) has no tiles to take and its
    # page-table row may hold anything: past it (one with tokens follows, since tile t < t_stop is someone's; the
    # reduction zeroes the skipped ones)
    while seq_len <= 0:
        b += 1
        seq_len = gl.load(seq_lens_ptr + b)
    req_tiles = (seq_len + BLOCK_N - 1) // BLOCK_N
    req_start = req_end
    req_end = req_start + req_tiles
    seg_stop = gl.minimum(t_stop, req_end)
    pt_base = page_table_ptr + b.to(gl.int64) * stride_pt_b
    return b, seq_len, req_tiles, req_end, seg_stop, t - req_start, seg_stop - req_start, pt_base


# A plan row: the program's split (t, t_stop, b, req_end as ``_split_start`` returns them) and its first segment's
# request (past requests of no tokens), that request's length and the page ids of the segment's first three tiles.
PLAN_COLS = gl.constexpr(8)


@gluon.jit
def _plan_row(plan_ptr, pid):
    row = plan_ptr + pid * PLAN_COLS
    return (gl.load(row), gl.load(row + 1), gl.load(row + 2), gl.load(row + 3), gl.load(row + 4), gl.load(row + 5),
            gl.load(row + 6), gl.load(row + 7))


@gluon.jit
def _planned_segment(page_table_ptr, stride_pt_b, b, t, t_stop, req_end, seq_len, BLOCK_N: gl.constexpr):
    """``kernel_hopper._segment``'s values for a program's first segment from its plan row (``b`` and ``req_end``
    there are the segment's request and where its tiles end, ``seq_len`` its length): no load."""
    req_tiles = (seq_len + BLOCK_N - 1) // BLOCK_N
    req_start = req_end - req_tiles
    seg_stop = gl.minimum(t_stop, req_end)
    pt_base = page_table_ptr + b.to(gl.int64) * stride_pt_b
    return b, seq_len, req_tiles, req_end, seg_stop, t - req_start, seg_stop - req_start, pt_base


@gluon.jit
def _segment_or_planned(seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, seg, p_seq, p_pg0, p_pg1,
                        PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr, plan_ptr=None):
    """A heads-on-M ping-pong warpgroup's next segment (:func:`_segment`'s values) and the page ids of its first two
    tiles: with ``plan_ptr`` the program's first segment (``seg == 0``) from its plan row (``p_seq``, ``p_pg0``,
    ``p_pg1``: :func:`_plan_row`, no load) and the later ones as without it, their page ids loaded here
    (:func:`_tile_page`); without a plan zeros, unread (each copy loads its own: :func:`_page_row` with ``LOADED``
    off)."""
    if plan_ptr is not None:
        if seg == 0:
            b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _planned_segment(
                page_table_ptr, stride_pt_b, b, t, t_stop, req_end, p_seq, BLOCK_N)
            pg_a = p_pg0
            pg_b = p_pg1
        else:
            b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _segment(
                seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, BLOCK_N)
            pg_a = _tile_page(pt_base, i_first, i_stop, PAGE_SIZE, BLOCK_N)
            pg_b = _tile_page(pt_base, i_first + 1, i_stop, PAGE_SIZE, BLOCK_N)
    else:
        b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _segment(
            seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, BLOCK_N)
        pg_a = b * 0        # (unread: without a plan each copy loads its page id, _page_row)
        pg_b = pg_a
    return b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base, pg_a, pg_b


@gluon.jit
def _page_row(pt_base, j, page, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr, LOADED: gl.constexpr = True):
    """The cache row of tile j's first token: from its page id ``page`` when loaded already (a plan's or
    :func:`_segment_or_planned`'s), else (``page`` None, or ``LOADED`` off: a launch without a plan) through one
    page-table load (:func:`_tile_row`)."""
    if page is None or not LOADED:
        row = _tile_row(pt_base, j, PAGE_SIZE, BLOCK_N)
    else:
        row = page * PAGE_SIZE + (j * BLOCK_N) % PAGE_SIZE
    return row


@gluon.jit(do_not_specialize=["B"])
def _mla_decode_plan_kernel(seq_lens_ptr, page_table_ptr, plan_ptr, B, stride_pt_b, PAGE_SIZE: gl.constexpr,
                            B_CHUNK: gl.constexpr, BLOCK_N: gl.constexpr, SEG_COST: gl.constexpr,
                            num_warps: gl.constexpr, MIN_TILES: gl.constexpr = 1, seg_ptr=None):
    """Grid ``(1, P)``, P the split kernel's programs: program p's plan row (``PLAN_COLS``), the split and the first
    segment exactly as the split kernels compute them (``_split_start``, ``_segment``, :func:`_tile_page`), so that a
    split kernel given these rows as ``plan_ptr`` on the same lengths, page table and grid starts its copies one round trip after
    its start. A program with no tiles gets its empty range and zeros. With ``seg_ptr`` also the first and last
    partial slot of each request its range touches, as the split kernels write them (:func:`_plan_slots`)."""
    pid = gl.program_id(1)
    t, t_stop, b, req_end = _split_start(seq_lens_ptr, B, pid, gl.num_programs(1), BLOCK_N, B_CHUNK, num_warps,
                                         SEG_COST, MIN_TILES=MIN_TILES)
    if seg_ptr is not None:
        _plan_slots(seq_lens_ptr, page_table_ptr, stride_pt_b, seg_ptr, pid, t, t_stop, b, req_end, BLOCK_N)
    seq_len = 0
    pg0 = 0
    pg1 = 0
    pg2 = 0
    if t < t_stop:
        b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _segment(
            seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, BLOCK_N)
        pg0 = _tile_page(pt_base, i_first, i_stop, PAGE_SIZE, BLOCK_N)
        pg1 = _tile_page(pt_base, i_first + 1, i_stop, PAGE_SIZE, BLOCK_N)
        pg2 = _tile_page(pt_base, i_first + 2, i_stop, PAGE_SIZE, BLOCK_N)
    row = plan_ptr + pid * PLAN_COLS
    gl.store(row, t)
    gl.store(row + 1, t_stop)
    gl.store(row + 2, b)
    gl.store(row + 3, req_end)
    gl.store(row + 4, seq_len)
    gl.store(row + 5, pg0)
    gl.store(row + 6, pg1)
    gl.store(row + 7, pg2)


@gluon.jit
def _plan_slots(seq_lens_ptr, page_table_ptr, stride_pt_b, seg_ptr, pid, t, t_stop, b, req_end,
                BLOCK_N: gl.constexpr):
    """Program pid's part of the reduction's ``seg`` rows: for each segment of its range ``[t, t_stop)`` (from
    request b, whose predecessors' tiles end at ``req_end``: ``_split_start``'s values), slot ``pid + b`` as the
    request's first where the segment starts the request and as its last where it ends it, the stores
    ``_store_lse_and_segment`` makes in the split kernel's head block 0. So the reduction can read them before it
    waits for the split kernel (``kernel._mla_decode_reduce_kernel``'s ``SEG_EARLY``)."""
    while t < t_stop:
        b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _segment(
            seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, BLOCK_N)
        if i_first == 0:
            gl.store(seg_ptr + 2 * b, pid + b)
        if i_stop == req_tiles:
            gl.store(seg_ptr + 2 * b + 1, pid + b)
        t = seg_stop
        b += 1


@gluon.jit
def _tile_page(pt_base, j, i_stop, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr):
    """Tile j's page id (one page a TMA tile; 0 when ``j >= i_stop``), as the split kernels load it."""
    return gl.load(pt_base + (j * BLOCK_N) // PAGE_SIZE, mask=j < i_stop, other=0)


@gluon.jit
def _store_o(o, whole, b, pid, heads, dims, out_ptr, part_o_ptr, stride_out_b, stride_out_h, stride_po_s,
             stride_po_h, mask, TRANSPOSED: gl.constexpr):
    """One segment's normalised output (or a column chunk of it: ``dims`` offset by the caller): into ``out`` when
    the segment is the whole request (``whole``), else as fp32 partials under slot ``pid + b``. ``o`` is
    [heads, dims], or [dims, heads] when ``TRANSPOSED`` (the tokens-on-M kernels)."""
    # pointers as one expression per branch, base first: offsets summed apart and then added compiled to 64-bit
    # math per element and spilled (120 local stores in the bf16 tokens-on-M kernel); this form compiles to the
    # SASS the kernels had before the helper (benchmarks/probes/sass_fingerprint.py)
    if whole:
        out_base = out_ptr + b.to(gl.int64) * stride_out_b
        if TRANSPOSED:
            out_ptrs = out_base + heads[None, :] * stride_out_h + dims[:, None]
        else:
            out_ptrs = out_base + heads[:, None] * stride_out_h + dims[None, :]
        gl.store(out_ptrs, o.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        part_base = part_o_ptr + (pid + b).to(gl.int64) * stride_po_s
        if TRANSPOSED:
            part_ptrs = part_base + heads[None, :] * stride_po_h + dims[:, None]
        else:
            part_ptrs = part_base + heads[:, None] * stride_po_h + dims[None, :]
        gl.store(part_ptrs, o.to(part_o_ptr.dtype.element_ty), mask=mask)


# The ping-pong kernels' whole-request output (OUT32, on by default there, kernel_hopper_pp.py) in whole 32-byte
# sectors. In a wgmma accumulator's layout a thread holds two adjacent columns of each 8-column group, so a warp's
# store of a 16-bit [heads, dims] output writes 16 bytes of each of 8 rows: every 32-byte sector gets two partial
# writes. This layout of [64 heads, 256 dims] (the same values moved between the lanes of a warp: shuffles, no shared
# memory) gives each thread four adjacent dims and the four lanes of a head 16, so that a store writes 32 bytes of
# each of 8 heads. Bases as [head, dim]: registers +1, +2 dims, +8 heads, +16 .. +128 dims; lanes +4, +8 dims, +1,
# +2, +4 heads; warps +16, +32 heads. On the H200 (session 21, run 2) it took the ping-pong kernels' stores at the end
# of a whole request from ~6.5 to ~2.0 us at bf16, H = 128, batch 64 (timeline probe), the decode from 0.1378 to 0.1324
# ms; the same change in the bf16 tokens-on-M kernel's transposed output (16 KB a request) measured no change.
SECTORS_HEADS_ON_M = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [0, 2], [8, 0], [0, 16], [0, 32], [0, 64], [0, 128]],
    lane_bases=[[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]], warp_bases=[[16, 0], [32, 0]], block_bases=[],
    shape=[64, 256]))


# The same for the first heads-on-M kernels' [64 heads, 512 dims] output (two warpgroups side by side on the dims:
# warps +16, +32 heads, +256 dims), for 16-bit partials.
SECTORS_HEADS_ON_M_512 = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [0, 2], [8, 0], [0, 16], [0, 32], [0, 64], [0, 128]],
    lane_bases=[[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]], warp_bases=[[16, 0], [32, 0], [0, 256]], block_bases=[],
    shape=[64, 512]))


@gluon.jit
def _scaled_partial(o, inv, whole, b, pid, heads, H, part_lse_ptr, stride_pl_s, mask, AXIS: gl.constexpr,
                    HALF: gl.constexpr):
    """A bf16 cache's partial for its fp16 store: from ``o`` (fp32, before its per-head normalisation ``inv``; dims
    along ``AXIS``, heads along the other) per head k = ceil(log2 max |o inv|) - 15 over the dims held (0 for a row
    of zeros, at least -100), its largest magnitude then in [2^14, 2^15] (``reduction.partial_layout``); unless the
    segment is the ``whole`` request (its output is stored as it is), k is stored beside the LSE in slot ``pid + b``'s
    row: at ``H + heads`` for the dims 0-255 (``HALF`` 0), ``2 H + heads`` for 256-511 (1), both when one k covers
    the row (2). Returns the multiplier ``inv`` 2^-k that stores ``o``: one pass over ``o`` (its maximum) beside the
    normalisation's multiply."""
    mx = gl.max(gl.abs(o), axis=AXIS) * inv
    k = gl.where(mx > 0.0, gl.maximum(gl.ceil(gl.log2(mx)) - 15.0, -100.0), 0.0)
    k = gl.where(whole, 0.0, k)
    if not whole:
        base = part_lse_ptr + (pid + b).to(gl.int64) * stride_pl_s + heads
        if HALF != 1:
            gl.store(base + H, k, mask=mask)
        if HALF != 0:
            gl.store(base + 2 * H, k, mask=mask)
    return inv * gl.exp2(-k)


@gluon.jit
def _store_partial_sectors(o, b, pid, h0, d0, part_o_ptr, stride_po_s, stride_po_h, layout: gl.constexpr):
    """A segment's 16-bit partial (``o`` [64 heads from ``h0``, dims from ``d0``], heads on M) in whole 32-byte sectors
    through ``layout`` (``SECTORS_HEADS_ON_M`` or ``SECTORS_HEADS_ON_M_512``): in the accumulator's layout a thread
    holds two adjacent fp16 columns, and each sector of a row took two 16-byte halves."""
    x = gl.convert_layout(o.to(part_o_ptr.dtype.element_ty), layout)
    heads = h0 + gl.arange(0, 64, layout=gl.SliceLayout(1, layout))
    dims = d0 + gl.arange(0, o.shape[1], layout=gl.SliceLayout(0, layout))
    gl.store(part_o_ptr + (pid + b).to(gl.int64) * stride_po_s + heads[:, None] * stride_po_h + dims[None, :], x)


@gluon.jit
def _store_whole_sectors(o, b, h0, d0, out_ptr, stride_out_b, stride_out_h):
    """A whole request's output half (``o`` [64 heads from ``h0``, 256 dims from ``d0``]) in the out tensor's 16-bit
    type through ``SECTORS_HEADS_ON_M``."""
    x = gl.convert_layout(o.to(out_ptr.dtype.element_ty), SECTORS_HEADS_ON_M)
    heads = h0 + gl.arange(0, 64, layout=gl.SliceLayout(1, SECTORS_HEADS_ON_M))
    dims = d0 + gl.arange(0, 256, layout=gl.SliceLayout(0, SECTORS_HEADS_ON_M))
    gl.store(out_ptr + b.to(gl.int64) * stride_out_b + heads[:, None] * stride_out_h + dims[None, :], x)


# The reduction streamed behind the split (``reduction.STREAM``): a request's reduction runs as soon as its partials
# are written rather than after the split kernel's last program, so that it overlaps the split's tail. Each split
# program adds 1 to a request's count of written segments (``done_ptr``: a step's plan's counters,
# plan.MLADecodePlan.counters, ``[2, batch, STREAM_GROUPS]`` int32, the second half the reduction's readers) for each
# segment of it that it does not hold whole, once every warp's stores of the segment were issued (a block barrier)
# with release semantics at GPU scope (the pattern of a grid barrier's arrival: the CTA's stores made visible before
# the count); the reduction waits (acquire) until the count reaches the request's slots, reads them, and its last
# reader of the request sets both counts back to zero, so each launch leaves them as it found them. Head groups of the
# split (pid_h, 16 heads each in the tokens-on-M kernels) count apart: at most STREAM_GROUPS. Only configs of at most
# STREAM_MAX_BUF buffers count (two programs an SM): with one program an SM (three buffers) the reduction's waiting
# programs fit on the SM beside the running split program, and their reads of the counts slowed it, the decode 4.7-7.3%
# slower at fp8 H = 16 batch 32 / 64 with acquire reads, 1.4-2.0% with relaxed ones (H100, session 53 calls D-F),
# where with two programs an SM a reduction program only gets an SM's room once a split program there has exited.
# The release compiles to ``MEMBAR.ALL.GPU`` before the add (one thread; its warp waits for its stores' acknowledgement,
# which the SM's other program covers).
STREAM_GROUPS = gl.constexpr(4)
STREAM_MAX_BUF = gl.constexpr(2)


@gluon.jit
def _segment_written(done_ptr, b, pid_h):
    """Request b's count of written segments (head group pid_h) raised by one (``STREAM_GROUPS``' comment), by one
    thread with release semantics; every warp's stores of the segment issued before (the caller's block
    barrier)."""
    gl.atomic_add(done_ptr + b * STREAM_GROUPS + pid_h, 1, sem="release", scope="gpu")


@gluon.jit
def _store_lse_and_segment(lse2, whole, b, H, pid, pid_h, i_first, i_stop, req_tiles, heads, lse_ptr, part_lse_ptr,
                           seg_ptr, stride_pl_s, mask, RETURN_LSE: gl.constexpr):
    """The rest of a segment's results: its log2-sum-exp (natural-log LSE into ``lse`` when whole and asked for,
    else the partial's), and the first and last partial slots of request b (head block 0 writes them) for the
    reduction kernel."""
    if whole:
        if RETURN_LSE:
            gl.store(lse_ptr + b * H + heads, lse2 * 0.6931471805599453, mask=mask)
    else:
        gl.store(part_lse_ptr + (pid + b).to(gl.int64) * stride_pl_s + heads, lse2, mask=mask)
    if pid_h == 0:
        if i_first == 0:
            gl.store(seg_ptr + 2 * b, pid + b)
        if i_stop == req_tiles:
            gl.store(seg_ptr + 2 * b + 1, pid + b)


@gluon.jit
def _store_chunks(o0, o1, o2, o3, whole, b, pid, h0, H, out_ptr, part_o_ptr, stride_out_b, stride_out_h, stride_po_s,
                  stride_po_h, RELABELLED: gl.constexpr):
    """:func:`_store_o` of the fp8 tokens-on-M kernels' output, held as four [128 dims, heads] chunks (``RELABELLED``,
    the second kernel's: in the relabelled row order, which :func:`_in_dim_order` turns into dim order first), for
    the heads below H."""
    _store_chunk_pair(o0, o1, 0, whole, b, pid, h0, H, out_ptr, part_o_ptr, stride_out_b, stride_out_h, stride_po_s,
                      stride_po_h, RELABELLED)
    _store_chunk_pair(o2, o3, 256, whole, b, pid, h0, H, out_ptr, part_o_ptr, stride_out_b, stride_out_h, stride_po_s,
                      stride_po_h, RELABELLED)


@gluon.jit
def _store_chunk_pair(o0, o1, D0: gl.constexpr, whole, b, pid, h0, H, out_ptr, part_o_ptr, stride_out_b, stride_out_h,
                      stride_po_s, stride_po_h, RELABELLED: gl.constexpr):
    """Two adjacent [128 dims, heads] output chunks from dim ``D0`` (:func:`_store_chunks`; the two-warpgroup kernel's
    warpgroups store one such pair each)."""
    if RELABELLED:
        o0 = _in_dim_order(o0)
        o1 = _in_dim_order(o1)
    layout: gl.constexpr = o0.type.layout
    heads = h0 + gl.arange(0, o0.shape[1], layout=gl.SliceLayout(0, layout))
    dims = D0 + gl.arange(0, 128, layout=gl.SliceLayout(1, layout))
    mask = (heads < H)[None, :]
    if whole:
        out_base = out_ptr + b.to(gl.int64) * stride_out_b + heads[None, :] * stride_out_h + dims[:, None]
        gl.store(out_base, o0.to(out_ptr.dtype.element_ty), mask=mask)
        gl.store(out_base + 128, o1.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        part_base = part_o_ptr + (pid + b).to(gl.int64) * stride_po_s + heads[None, :] * stride_po_h + dims[:, None]
        gl.store(part_base, o0.to(part_o_ptr.dtype.element_ty), mask=mask)
        gl.store(part_base + 128, o1.to(part_o_ptr.dtype.element_ty), mask=mask)


@gluon.jit
def _in_dim_order(o):
    """A [128, heads] output chunk of the fp8 tokens-on-M kernels, whose row l = 64 a + 16 w + 8 s + q holds dim
    32 w + 4 q + 2 a + s (kernel_hopper_tok.py: the V^T relabelling), permuted in registers to dim order: a thread's
    four values of a head (its a, s register bits) become four adjacent dims, stored as one 16-byte (fp32) or 8-byte
    (bf16) access, each warp writing whole 32-byte sectors (stored in the relabelled order, each access wrote 4 or 2
    bytes and each sector took four accesses)."""
    gl.static_assert(o.shape[1] == 16)
    x = gl.reshape(o, [2, 4, 2, 8, 16])                    # (a, w, s, q, head)
    x = gl.permute(x, (1, 3, 0, 2, 4))                      # (w, q, a, s, head)
    # the same elements in every thread, its registers reordered so that the two dim bits come first (the permute
    # leaves head bit 0 there, and a store is vectorised over consecutive registers only)
    layout: gl.constexpr = gl.DistributedLinearLayout(
        reg_bases=[[1, 0], [2, 0], [0, 1], [0, 8]], lane_bases=[[0, 2], [0, 4], [4, 0], [8, 0], [16, 0]],
        warp_bases=[[32, 0], [64, 0]], block_bases=[], shape=[128, 16])
    return gl.convert_layout(gl.reshape(x, [128, 16]), layout)


@gluon.jit
def _store_chunks_segment(o0, o1, o2, o3, inv, m_i, l_i, h0, offs_h_s, H, b, pid, pid_h,
                          i_first, i_stop, req_tiles, out_ptr, part_o_ptr, lse_ptr, part_lse_ptr, seg_ptr,
                          stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s, RETURN_LSE: gl.constexpr,
                          RELABELLED: gl.constexpr):
    """The end of a segment in the fp8 tokens-on-M kernels: the four output chunks times ``inv`` (the scale over
    the softmax sum, per head) and the LSE (``m_i + log2(l_i)``) stored for the heads below H
    (:func:`_store_chunks`, :func:`_store_lse_and_segment`)."""
    lse2 = m_i + gl.log2(l_i)
    heads_s = h0 + offs_h_s
    h_mask_s = heads_s < H
    whole = (i_first == 0) & (i_stop == req_tiles)
    _store_chunks(o0 * inv, o1 * inv, o2 * inv, o3 * inv, whole, b, pid, h0, H, out_ptr, part_o_ptr,
                  stride_out_b, stride_out_h, stride_po_s, stride_po_h, RELABELLED)
    _store_lse_and_segment(lse2, whole, b, H, pid, pid_h, i_first, i_stop, req_tiles, heads_s, lse_ptr,
                           part_lse_ptr, seg_ptr, stride_pl_s, h_mask_s, RETURN_LSE)


@gluon.jit
def _row_max_2wg(s, mx_smem, BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, layout: gl.constexpr):
    """Row maxima of an [BLOCK_H, BLOCK_N] score tile whose two column halves sit in the two warpgroups
    (``warps_per_cta=[4, 2]``), in ``SliceLayout(1, layout)``: each warpgroup reduces its half with shuffles,
    writes it to ``mx_smem`` ([2 * BLOCK_H] fp32), one block barrier, both halves read back (compiled: one
    barrier where ``gl.max`` over the two warpgroups takes two). The buffer may be rewritten after the next
    block barrier of every warp."""
    part = gl.max(gl.reshape(s, [BLOCK_H, 2, BLOCK_N // 2]), axis=2)
    mx_smem.reshape([2, BLOCK_H]).permute((1, 0)).store(part)
    _block_barrier()
    return gl.maximum(mx_smem.slice(0, BLOCK_H).load(gl.SliceLayout(1, layout)),
                      mx_smem.slice(BLOCK_H, BLOCK_H).load(gl.SliceLayout(1, layout)))


@gluon.jit
def _softmax_2wg(s, m_i, l_i, m_smem, l_smem, BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, layout: gl.constexpr):
    """One online-softmax step of an [BLOCK_H, BLOCK_N] log2-domain score tile whose two column halves sit in
    the two warpgroups, with one block barrier: each warpgroup takes its half's row maxima m_w and
    ``p_w = exp2(s - m_w)`` and row sums l_w (shuffles only), the (m_w, l_w) pairs cross through ``m_smem`` /
    ``l_smem`` ([2 * BLOCK_H] fp32 each), then ``p = p_w * exp2(m_w - m_new)``. Returns (p, alpha, m_new,
    l_new). A half with every token masked (m_w = -inf) gets p = 0 (p_w taken against 0 instead of -inf is 0,
    and so is its factor exp2(-inf - m_new)). The buffers may be rewritten after the next block barrier of every warp."""
    rows: gl.constexpr = gl.SliceLayout(1, layout)
    s3 = gl.reshape(s, [BLOCK_H, 2, BLOCK_N // 2])
    m_part = gl.max(s3, axis=2)
    m_safe = gl.where(m_part == float("-inf"), 0.0, m_part)
    # the half's maxima back in the score layout (compiled for sm_90: no data movement)
    m_own = gl.convert_layout(gl.reshape(gl.zeros_like(s3) + gl.expand_dims(m_safe, 2), [BLOCK_H, BLOCK_N]),
                              layout)
    p = gl.exp2(s - m_own)
    l_part = gl.sum(gl.reshape(p, [BLOCK_H, 2, BLOCK_N // 2]), axis=2)
    m_smem.reshape([2, BLOCK_H]).permute((1, 0)).store(m_part)
    l_smem.reshape([2, BLOCK_H]).permute((1, 0)).store(l_part)
    _block_barrier()
    m0 = m_smem.slice(0, BLOCK_H).load(rows)
    m1 = m_smem.slice(BLOCK_H, BLOCK_H).load(rows)
    l0 = l_smem.slice(0, BLOCK_H).load(rows)
    l1 = l_smem.slice(BLOCK_H, BLOCK_H).load(rows)
    m_new = gl.maximum(m_i, gl.maximum(m0, m1))
    alpha = gl.exp2(m_i - m_new)
    f0 = gl.exp2(m0 - m_new)
    f1 = gl.exp2(m1 - m_new)
    l_new = l_i * alpha + l0 * f0 + l1 * f1
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
    p = p * gl.where((cols < BLOCK_N // 2)[None, :], f0[:, None], f1[:, None])
    return p, alpha, m_new, l_new


@gluon.jit
def _tile_row(pt_base, j, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr):
    """The cache row of tile j's first token (tile j of the request whose page-table row is ``pt_base``: its
    BLOCK_N tokens are contiguous rows of one page), through one page-table load."""
    tok0 = j * BLOCK_N
    page = gl.load(pt_base + tok0 // PAGE_SIZE)
    return page * PAGE_SIZE + tok0 % PAGE_SIZE


@gluon.jit
def _issue_tile(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, pt_base, j, stage,
                PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr, page=None):
    """TMA tile j of the current request (64 contiguous rows of one page) into buffer ``stage``; ``page``: its page
    id when loaded already (a plan's), else loaded here."""
    row = _page_row(pt_base, j, page, PAGE_SIZE, BLOCK_N)
    bar = bars.index(stage)
    mbarrier.expect(bar, kv_nope_desc.block_type.nbytes + kv_rope_desc.block_type.nbytes)
    _tma_load(kv_nope_desc, [row, 0], bar, kn_bufs.index(stage))
    _tma_load(kv_rope_desc, [row, 0], bar, kr_bufs.index(stage))


@gluon.jit
def _issue_next_tile(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, pt_base, i, i_stop, it,
                     PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUF: gl.constexpr):
    """While tile i is the ``it``-th the program consumes: :func:`_issue_tile` of tile i + NUM_BUF - 1 into the
    buffer that tile i - 1 held, if the segment has it (``i_stop``)."""
    if i + NUM_BUF - 1 < i_stop:
        _issue_tile(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, pt_base, i + NUM_BUF - 1,
                    (it + NUM_BUF - 1) % NUM_BUF, PAGE_SIZE, BLOCK_N)


@gluon.jit
def _load_query_and_first_tiles(q_nope_desc, q_rope_desc, qn_smem, qr_smem, q_bar, q_phase, b, H, h0,
                                kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, pt_base, i_first, i_stop, it,
                                PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUF: gl.constexpr, pg0=None):
    """A segment's start in the bf16 kernels: past a block barrier (every warp has retired the previous
    segment's MMAs), the query's BLOCK_H heads of request b by TMA, the first NUM_BUF - 1 tiles of the segment
    in flight, then the wait for the query. Returns the query barrier's next phase. ``pg0``: the first tile's page
    id when loaded already (a plan's: NUM_BUF 2)."""
    _block_barrier()
    q_row = b * H + h0
    mbarrier.expect(q_bar, q_nope_desc.block_type.nbytes + q_rope_desc.block_type.nbytes)
    _tma_load(q_nope_desc, [q_row, 0], q_bar, qn_smem)
    _tma_load(q_rope_desc, [q_row, 0], q_bar, qr_smem)
    if pg0 is not None:
        gl.static_assert(NUM_BUF == 2)
        _issue_tile(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, pt_base, i_first, it % NUM_BUF, PAGE_SIZE,
                    BLOCK_N, pg0)
    else:
        for k in gl.static_range(NUM_BUF - 1):
            if i_first + k < i_stop:
                _issue_tile(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, pt_base, i_first + k,
                            (it + k) % NUM_BUF, PAGE_SIZE, BLOCK_N)
    mbarrier.wait(q_bar, q_phase)
    return q_phase ^ 1


@gluon.jit
def _zero_rows(buf, n_valid, ROWS: gl.constexpr, COLS: gl.constexpr, num_warps: gl.constexpr):
    """Rows ``>= n_valid`` of a [ROWS, COLS] shared tile set to zero (finite values for P.V)."""
    # 128 bytes of columns at a time (one swizzle atom): a whole [64, 512] tile in registers would set the
    # kernel's register budget.
    CHUNK: gl.constexpr = 128 // (buf.dtype.primitive_bitwidth // 8)
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    rows = gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
    for c in gl.static_range(COLS // CHUNK):
        part = buf.slice(c * CHUNK, CHUNK, dim=1)
        x = part.load(layout)
        part.store(gl.where((rows < n_valid)[:, None], x, gl.zeros_like(x)))


@gluon.jit
def _tile_landed(kn, bar, phase, n_valid, GATHER: gl.constexpr, BLOCK_N: gl.constexpr, D_V: gl.constexpr,
                 num_warps: gl.constexpr):
    """Wait for a tile's buffer ``kn`` (barrier ``bar`` at ``phase``); ``n_valid`` of its rows belong to the
    request: a request's last, partial tile gets the rest zeroed (rows past seq_len may hold NaN; P.V must see
    zeros). Returns ``n_valid``."""
    mbarrier.wait(bar, phase)
    if GATHER:
        # cp.async wrote the tile through the generic proxy; the wgmmas read it through the async one
        fence_async_shared()
    if n_valid < BLOCK_N:
        _zero_rows(kn, n_valid, BLOCK_N, D_V, num_warps)
        fence_async_shared()
        _block_barrier()
    return n_valid


@gluon.jit
def _max_over_tokens(s, red, s16_layout: gl.constexpr):
    """Per head, the max of ``s`` [64 tokens, 16 heads] (tokens over the four warps; tokens-on-M kernels) with one block
    barrier: each warp reduces its 16 tokens by shuffles and writes 16 values to ``red`` [4, 16], then every
    thread reads the four warps' values of its own heads (Triton's generic cross-warp reduction: three
    barriers)."""
    per_warp = gl.max(gl.reshape(s, [4, 16, 16]), axis=1)                 # [warps, heads]: shuffles only
    red.store(per_warp)
    _block_barrier()
    # the 4 warps' values in registers, the heads spread over the lanes as in s16_layout's columns
    all_layout: gl.constexpr = gl.DistributedLinearLayout(
        reg_bases=[[1, 0], [2, 0], [0, 1], [0, 8]], lane_bases=[[0, 2], [0, 4], [0, 0], [0, 0], [0, 0]],
        warp_bases=[[0, 0], [0, 0]], block_bases=[], shape=[4, 16])
    return gl.convert_layout(gl.max(red.load(all_layout), axis=0), gl.SliceLayout(0, s16_layout))


@gluon.constexpr_function
def widen_layout(rows, num_warps):
    """A register layout for widening a [rows, 128] fp8 block of a 128-byte-swizzled tile into its fp16 tile
    (two 64-column blocks) with no shared-memory bank conflict: 16 columns a thread (one 16-byte fp8 load, two
    16-byte fp16 stores), the 8 lanes of each quarter-warp on 8 consecutive rows of one column group. A 128-bit
    access is served a quarter-warp at a time, one wavefront when its 8 chunks fall on distinct bank groups: the
    swizzle (16-byte chunk ^ row % 8) spreads 8 rows' chunk c over all 32 banks. The blocked layout before it
    ([1, 16] a thread, 8 lanes along a row) wrote the same chunk of two 64-column blocks from each quarter-warp:
    every fp16 store took two wavefronts (Nsight Compute, session 24 run 7: 37% of T8's shared-store wavefronts
    were bank conflicts)."""
    rows = gl._unwrap_if_constexpr(rows)
    num_warps = gl._unwrap_if_constexpr(num_warps)
    warp_rows = [8 << k for k in range(num_warps.bit_length() - 1)]
    covered = 8 * num_warps
    reps = [covered << k for k in range(max(rows // covered, 1).bit_length() - 1)]
    return gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [0, 2], [0, 4], [0, 8], [0, 64]] + [[r, 0] for r in reps],
        lane_bases=[[1, 0], [2, 0], [4, 0], [0, 16], [0, 32]],
        warp_bases=[[r, 0] if r < rows else [0, 0] for r in warp_rows], block_bases=[], shape=[rows, 128])


@gluon.jit
def _widen_cols(src, dst, n_valid, ROWS: gl.constexpr, COLS: gl.constexpr, num_warps: gl.constexpr):
    """fp8 shared tile ``src`` [ROWS, COLS] -> fp16 shared tile ``dst`` (exact: every e4m3 value is an fp16),
    rows ``>= n_valid`` written as zeros (a request's last tile: rows past seq_len may hold NaN, and P.V would
    turn 0 * NaN into NaN). 16-byte shared loads, one ``cvt`` per two values."""
    layout: gl.constexpr = gl.BlockedLayout([1, 16], [4, 8], [num_warps, 1], [1, 0])
    CHUNK: gl.constexpr = 128     # 128 bytes of fp8: one swizzle atom of the TMA tile
    for c in gl.static_range(COLS // CHUNK):
        x = src.slice(c * CHUNK, CHUNK, dim=1).load(layout).to(gl.float16)
        if n_valid < ROWS:
            rows = gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
            x = gl.where((rows < n_valid)[:, None], x, gl.zeros_like(x))
        dst.slice(c * CHUNK, CHUNK, dim=1).store(x)


@gluon.jit
def _issue_nope(kv_nope_desc, kn_bufs, bars, pt_base, j, stage, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr):
    """TMA of tile j's 512 latent columns (fp8 kernels: the rope columns go through registers)."""
    row = _tile_row(pt_base, j, PAGE_SIZE, BLOCK_N)
    bar = bars.index(stage)
    mbarrier.expect(bar, kv_nope_desc.block_type.nbytes)
    _tma_load(kv_nope_desc, [row, 0], bar, kn_bufs.index(stage))


@gluon.jit
def _load_rope(kv_ptr, pt_base, j, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr, layout: gl.constexpr):
    """Tile j's 64 fp8 rope columns [BLOCK_N, 64] in registers (plain loads: 4 KB a tile, issued a tile ahead).
    The fp8 kernels keep rope tiles padded to 128 columns (the latent tiles' 128-byte swizzle) instead of a
    64-byte-swizzled TMA tile: the first GPU run (docs/mla_decode.md) lost the rope term that way."""
    tok0 = j * BLOCK_N
    page = gl.load(pt_base + tok0 // PAGE_SIZE)
    row0 = page.to(gl.int64) * PAGE_SIZE + tok0 % PAGE_SIZE
    rows = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, 64, layout=gl.SliceLayout(0, layout))
    return gl.load(kv_ptr + (row0 + rows)[:, None] * 576 + 512 + cols[None, :])


@gluon.jit
def _load_q(q_base, heads, head_mask, stride_q_h, layout: gl.constexpr):
    """The query rows ``heads`` (zeros where not ``head_mask``) in fp32, ``layout``: the 512 latent columns, the
    64 rope ones, and each row's largest magnitude over the 576."""
    qn, qr = _load_q_raw(q_base, heads, head_mask, stride_q_h, layout)
    return _q_fp32(qn, qr)


@gluon.jit
def _load_q_raw(q_base, heads, head_mask, stride_q_h, layout: gl.constexpr):
    """:func:`_load_q`'s loads alone (the query's dtype), for a caller that issues them ahead of other loads and
    converts the values later with :func:`_q_fp32`."""
    cols = gl.arange(0, 512, layout=gl.SliceLayout(0, layout))
    cols_r = 512 + gl.arange(0, 64, layout=gl.SliceLayout(0, layout))
    rows = heads[:, None] * stride_q_h
    qn = gl.load(q_base + rows + cols[None, :], mask=head_mask[:, None], other=0.0)
    qr = gl.load(q_base + rows + cols_r[None, :], mask=head_mask[:, None], other=0.0)
    return qn, qr


@gluon.jit
def _q_fp32(qn, qr):
    qn = qn.to(gl.float32)
    qr = qr.to(gl.float32)
    amax = gl.maximum(gl.max(gl.abs(qn), axis=1), gl.max(gl.abs(qr), axis=1))
    return qn, qr, amax


@gluon.jit
def _q_pair(q_base, heads, head_mask, stride_q_h, qn_hi, qn_lo, qr_hi, qr_lo, PER_HEAD: gl.constexpr,
            LO_MUL: gl.constexpr, layout: gl.constexpr):
    """The query's fp8 hi/lo pair in shared memory from one read of its 576 columns (the portable kernel's QK8
    split: ``hi = fp8(q s)``, ``lo = fp8(LO_MUL (q s - hi))``, s a power of two with max |q s| = 2^8, per head
    or over the block). Returns s ([heads] when PER_HEAD, else a scalar). The rope pair goes into columns
    0..63 of the 128-column rope tiles."""
    qn, qr, amax = _load_q(q_base, heads, head_mask, stride_q_h, layout)
    if not PER_HEAD:
        amax = gl.max(amax, axis=0)
    q_scale = gl.exp2(8.0 - gl.ceil(gl.log2(gl.maximum(amax, 1e-30))))
    if PER_HEAD:
        sn = qn * q_scale[:, None]
        sr = qr * q_scale[:, None]
    else:
        sn = qn * q_scale
        sr = qr * q_scale
    hi = sn.to(gl.float8e4nv)
    qn_hi.store(hi)
    qn_lo.store(((sn - hi.to(gl.float32)) * LO_MUL).to(gl.float8e4nv))
    hi_r = sr.to(gl.float8e4nv)
    qr_hi.slice(0, 64, dim=1).store(hi_r)
    qr_lo.slice(0, 64, dim=1).store(((sr - hi_r.to(gl.float32)) * LO_MUL).to(gl.float8e4nv))
    return q_scale


@gluon.jit
def _pv_widened(kn, vw, c: gl.constexpr, n_valid, p_smem, acc, BLOCK_N: gl.constexpr, num_warps: gl.constexpr):
    """Chunk c (128 dims) of O^T += V^T P^T: the fp8 chunk widened into ``vw``, then an async fp16 wgmma with
    A = ``vw`` viewed MN-major and B = P^T (``p_smem``)."""
    _widen_cols(kn.slice(c * 128, 128, dim=1), vw, n_valid, BLOCK_N, 128, num_warps)
    fence_async_shared()
    _block_barrier()
    return warpgroup_mma(vw.permute((1, 0)), p_smem, acc, is_async=True)


@gluon.jit(do_not_specialize=["B"])
def _mla_decode_hopper_kernel(
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
    NUM_BUF: gl.constexpr,
    PIPE: gl.constexpr,
    num_warps: gl.constexpr,
    PSMEM: gl.constexpr = 0,
    LSUM: gl.constexpr = 0,
    MAX1: gl.constexpr = 0,
    XCH: gl.constexpr = 0,
    EARLY: gl.constexpr = 0,
    SPLIT_MAX: gl.constexpr = 0,    # the grid's programs per request at most (interface_hopper; unused in here)
    PART_SCALED: gl.constexpr = False,     # a bf16 cache's fp16 partials, scaled (reduction.partial_layout)
):
    """Grid ``(H // BLOCK_H, P)``: program (h, p) attends heads ``[h * 64, h * 64 + 64)`` over tile range p.
    PSMEM = 1 (PIPE 0 only): P reaches the P.V wgmma through a [64, BLOCK_N] shared tile (A from shared memory,
    one store and one barrier) instead of a register operand converted across the warpgroups. LSUM = 1 (with
    PSMEM): the row sums of P as one more async wgmma, ``l += P @ ones`` ([64, 16]), instead of a reduction
    across the warpgroups each tile. MAX1 = 1: the row maxima across the warpgroups with one barrier
    (``_row_max_2wg``) instead of ``gl.max``'s two. XCH = 1: the whole softmax step with one barrier
    (``_softmax_2wg``; instead of MAX1 and LSUM); XCH = 2 also issues the next TMA after that barrier,
    saving the barrier after the score wait. EARLY = 1 (PIPE 0): each tile starts by retiring O(i - 1)
    and issues the next TMA before its score MMAs (a whole tile's compute for the load to land, instead of
    the softmax's: XCH = 2's later issue measured slower)."""
    LOG2E: gl.constexpr = 1.4426950408889634
    D_V: gl.constexpr = 512
    gl.static_assert(BLOCK_H == 64)
    gl.static_assert((BLOCK_N == 64) or (BLOCK_N == 32))
    gl.static_assert(num_warps == 8)
    dtype: gl.constexpr = kv_nope_desc.dtype

    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                                       instr_shape=[16, BLOCK_N // 2, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                                       instr_shape=[16, D_V // 2, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)

    pid_h, pid, num_progs, h0 = _program_ids(BLOCK_H)

    # Shared memory: the query of the current request (once per segment) and NUM_BUF KV tiles.
    qn_smem = gl.allocate_shared_memory(dtype, [BLOCK_H, D_V], q_nope_desc.layout)
    qr_smem = gl.allocate_shared_memory(dtype, [BLOCK_H, 64], q_rope_desc.layout)
    kn_bufs = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_N, D_V], kv_nope_desc.layout)
    kr_bufs = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_N, 64], kv_rope_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    if PSMEM:
        gl.static_assert(PIPE == 0)
        p_smem = gl.allocate_shared_memory(dtype, [BLOCK_H, BLOCK_N],
                                           gl.NVMMASharedLayout.get_default_for([BLOCK_H, BLOCK_N], dtype))
    l_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                                       instr_shape=[16, 8, 16])
    if LSUM:
        gl.static_assert(PSMEM == 1)
        ones_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, 16],
                                              gl.NVMMASharedLayout.get_default_for([BLOCK_N, 16], dtype))
        # visible to the MMAs after the first tile's fence and barrier
        ones_smem.store(gl.full([BLOCK_N, 16], 1.0, dtype,
                                layout=gl.BlockedLayout([1, 2], [4, 8], [num_warps, 1], [1, 0])))
    if MAX1:
        mx_smem = gl.allocate_shared_memory(gl.float32, [2 * BLOCK_H], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    if XCH:
        gl.static_assert(LSUM + MAX1 == 0)
        m_smem = gl.allocate_shared_memory(gl.float32, [2 * BLOCK_H], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        l_smem = gl.allocate_shared_memory(gl.float32, [2 * BLOCK_H], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    for k in gl.static_range(NUM_BUF):
        mbarrier.init(bars.index(k), count=1)
    mbarrier.init(q_bar, count=1)

    # The tile list of the whole batch from seq_lens, on the device (as kernel.py).
    t, t_stop, b, req_end = _split_start(seq_lens_ptr, B, pid, num_progs, BLOCK_N, B_CHUNK, num_warps, BF16_SEG_COST)

    offs_tok = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    offs_h_o = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(1, o_layout))
    offs_d_o = gl.arange(0, D_V, layout=gl.SliceLayout(0, o_layout))
    offs_h_s = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(1, s_layout))
    qk_mul = sm_scale * LOG2E
    it = 0          # tiles consumed by this program: buffer it % NUM_BUF, barrier phase (it // NUM_BUF) & 1
    q_phase = 0
    while t < t_stop:
        b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _segment(
            seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, BLOCK_N)

        # The query's 64 heads of request b (both warpgroups have retired the previous segment's MMAs, each
        # waited for its own, once they pass the helper's barrier) and the first NUM_BUF - 1 tiles in flight.
        q_phase = _load_query_and_first_tiles(q_nope_desc, q_rope_desc, qn_smem, qr_smem, q_bar, q_phase, b, H, h0,
                                              kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, pt_base, i_first,
                                              i_stop, it, PAGE_SIZE, BLOCK_N, NUM_BUF)

        m_i = gl.full([BLOCK_H], float("-inf"), gl.float32, layout=gl.SliceLayout(1, s_layout))
        l_i = gl.zeros([BLOCK_H], gl.float32, layout=gl.SliceLayout(1, s_layout))
        # An accumulator token: the loop carries O as an in-flight MMA result.
        o = warpgroup_mma_init(gl.zeros([BLOCK_H, D_V], gl.float32, layout=o_layout))
        if LSUM:
            l_acc = warpgroup_mma_init(gl.zeros([BLOCK_H, 16], gl.float32, layout=l_layout))
        if PIPE:
            # P of the previous tile (zeros before the first: its P.V adds nothing) and the buffer it reads.
            p_op = gl.zeros([BLOCK_H, BLOCK_N], dtype, layout=p_layout)
            v_prev = kn_bufs.index(it % NUM_BUF)
        for i in range(i_first, i_stop):
            stage = it % NUM_BUF
            kn = kn_bufs.index(stage)
            kr = kr_bufs.index(stage)
            if EARLY:
                gl.static_assert(PIPE == 0)
                # O(i - 1), the last reader of buffer (it - 1) % NUM_BUF, retired in both warpgroups past the
                # barrier: the tile that goes there is issued before this tile's score MMAs
                if LSUM:
                    o, l_acc = warpgroup_mma_wait(num_outstanding=0, deps=(o, l_acc))
                else:
                    o = warpgroup_mma_wait(num_outstanding=0, deps=(o, ))
                _block_barrier()
                _issue_next_tile(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, pt_base, i, i_stop, it,
                                 PAGE_SIZE, BLOCK_N, NUM_BUF)
            # (a request's last, partial tile zeroed past seq_len: its buffer is not the one an in-flight P.V reads,
            # NUM_BUF >= 2)
            _tile_landed(kn, bars.index(stage), (it // NUM_BUF) & 1, seq_len - i * BLOCK_N, 0, BLOCK_N, D_V, num_warps)
            s = gl.zeros([BLOCK_H, BLOCK_N], gl.float32, layout=s_layout)
            s = warpgroup_mma(qn_smem, kn.permute((1, 0)), s, use_acc=False, is_async=True)
            s = warpgroup_mma(qr_smem, kr.permute((1, 0)), s, is_async=True)
            if PIPE:
                # FlashAttention-3's intra-warpgroup overlap: P.V of tile i - 1 runs on the tensor cores
                # while this tile's softmax runs on the other pipes; wgmma groups retire in order, so
                # waiting down to one outstanding group retires S(i) and leaves O(i - 1) in flight.
                o = warpgroup_mma(p_op, v_prev, o, is_async=True)
                s = warpgroup_mma_wait(num_outstanding=1, deps=(s, ))
            else:
                # Retires S(i) and, in order, O(i - 1).
                if LSUM:
                    s, o, l_acc = warpgroup_mma_wait(num_outstanding=0, deps=(s, o, l_acc))
                else:
                    s, o = warpgroup_mma_wait(num_outstanding=0, deps=(s, o))
                # Each warpgroup waits for its own MMAs only: the other one may still read the buffer the
                # next TMA overwrites until both have passed their wait. (XCH = 2: issued after the softmax's
                # barrier instead, which every warp also reaches after its wait.)
                if (XCH < 2) and (EARLY == 0):
                    _block_barrier()
                    _issue_next_tile(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, pt_base, i, i_stop, it,
                                     PAGE_SIZE, BLOCK_N, NUM_BUF)
            s = s * qk_mul
            s = gl.where((i * BLOCK_N + offs_tok < seq_len)[None, :], s, float("-inf"))
            if XCH:
                p, alpha, m_i, l_i = _softmax_2wg(s, m_i, l_i, m_smem, l_smem, BLOCK_H, BLOCK_N, s_layout)
                if XCH == 2:
                    gl.static_assert(PIPE + EARLY == 0)
                    _issue_next_tile(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, pt_base, i, i_stop, it,
                                     PAGE_SIZE, BLOCK_N, NUM_BUF)
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
            if PIPE:
                o = warpgroup_mma_wait(num_outstanding=0, deps=(o, ))
                # Both warpgroups past their wait: buffer (it - 1) % NUM_BUF is free.
                _block_barrier()
                _issue_next_tile(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, pt_base, i, i_stop, it,
                                 PAGE_SIZE, BLOCK_N, NUM_BUF)
            o = o * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
            if PSMEM:
                # p_smem's last reader, O(i - 1), retired in both warpgroups (the barrier after the S wait)
                p_smem.store(p.to(dtype))
                fence_async_shared()
                _block_barrier()
                o = warpgroup_mma(p_smem, kn, o, is_async=True)
                if LSUM:
                    l_acc = warpgroup_mma(p_smem, ones_smem, l_acc, is_async=True)
            else:
                p_op = gl.convert_layout(p.to(dtype), p_layout)
                if PIPE:
                    v_prev = kn
                    o = warpgroup_mma_init(o)
                else:
                    o = warpgroup_mma(p_op, kn, o, is_async=True)
            it += 1
        if PIPE:
            o = warpgroup_mma(p_op, v_prev, o, is_async=True)
        if LSUM:
            o, l_acc = warpgroup_mma_wait(num_outstanding=0, deps=(o, l_acc))
            l_i = gl.convert_layout(gl.max(l_acc, axis=1), gl.SliceLayout(1, s_layout))
        else:
            o = warpgroup_mma_wait(num_outstanding=0, deps=(o, ))

        inv = gl.convert_layout(1.0 / l_i, gl.SliceLayout(1, o_layout))
        whole = (i_first == 0) & (i_stop == req_tiles)
        heads_o = h0 + offs_h_o
        heads_s = h0 + offs_h_s
        if PART_SCALED:     # (a bf16 cache's fp16 partials: one k for the row, both halves)
            inv = _scaled_partial(o, inv, whole, b, pid, heads_o, H, part_lse_ptr, stride_pl_s, None, 1, 2)
        o = o * inv[:, None]
        lse2 = m_i + gl.log2(l_i)
        _store_o(o, whole, b, pid, heads_o, offs_d_o, out_ptr, part_o_ptr, stride_out_b, stride_out_h, stride_po_s,
                 stride_po_h, None, False)
        _store_lse_and_segment(lse2, whole, b, H, pid, pid_h, i_first, i_stop, req_tiles, heads_s, lse_ptr,
                               part_lse_ptr, seg_ptr, stride_pl_s, None, RETURN_LSE)
        t = seg_stop
        b += 1

    for k in gl.static_range(NUM_BUF):
        mbarrier.invalidate(bars.index(k))
    mbarrier.invalidate(q_bar)


@gluon.jit
def _tok_tile(i, it, stage, kn, kr, bars, qn_smem, qr_smem, red_bufs, p_smem, seq_len, qk_mul, o, m_i, l_i, l_acc,
              offs_tok, kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, pt_base, i_stop, s_layout: gl.constexpr,
              o_layout: gl.constexpr, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr,
              D_V: gl.constexpr, NUM_BUF: gl.constexpr, PIPE: gl.constexpr, num_warps: gl.constexpr):
    """Tile i (buffer ``stage``, the program's ``it``-th) of the bf16 tokens-on-M kernel, from its wait to its P.V
    issued (PIPE 0: the next tile's copy issued past the score wait, :func:`_issue_next_tile`, ``i_stop``)."""
    dtype: gl.constexpr = kn.dtype
    _tile_landed(kn, bars.index(stage), (it // NUM_BUF) & 1, seq_len - i * BLOCK_N, 0, BLOCK_N, D_V, num_warps)
    s = gl.zeros([BLOCK_N, BLOCK_H], gl.float32, layout=s_layout)
    s = warpgroup_mma(kn, qn_smem.permute((1, 0)), s, use_acc=False, is_async=True)
    s = warpgroup_mma(kr, qr_smem.permute((1, 0)), s, is_async=True)
    if PIPE:
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s, ))
    else:
        # Retires S(i) and O(i - 1): buffer (it - 1) % NUM_BUF and p_smem are free again.
        s, o = warpgroup_mma_wait(num_outstanding=0, deps=(s, o))
        _block_barrier()
        _issue_next_tile(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, pt_base, i, i_stop, it,
                         PAGE_SIZE, BLOCK_N, NUM_BUF)
    s = s * qk_mul
    s = gl.where((i * BLOCK_N + offs_tok < seq_len)[:, None], s, float("-inf"))
    if PIPE == 2:
        m_new = gl.maximum(m_i, _max_over_tokens(s, red_bufs.index(it % 2), s_layout))
    else:
        m_new = gl.maximum(m_i, gl.max(s, axis=0))
    alpha = gl.exp2(m_i - m_new)
    p = gl.exp2(s - m_new[None, :])
    if PIPE == 2:
        l_acc = l_acc * alpha[None, :] + p
    else:
        l_i = l_i * alpha + gl.sum(p, axis=0)
    m_i = m_new
    o = o * gl.convert_layout(alpha, gl.SliceLayout(0, o_layout))[None, :]
    p_smem.store(p.to(dtype))
    fence_async_shared()
    _block_barrier()
    o = warpgroup_mma(kn.permute((1, 0)), p_smem, o, is_async=True)
    return o, m_i, l_i, l_acc


@gluon.jit(do_not_specialize=["B"])
def _mla_decode_hopper_tok_kernel(
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
    NUM_BUF: gl.constexpr,
    PIPE: gl.constexpr,
    num_warps: gl.constexpr,
    plan_ptr=None,
    PART_SCALED: gl.constexpr = False,     # a bf16 cache's fp16 partials, scaled (reduction.partial_layout)
    PDL: gl.constexpr = 0,
):
    """H < 64 (tensor parallel): tokens on the MMA's M side, one warpgroup, 16 heads per program.

    ``S^T = K Q^T`` ([tokens, 16]; A = the KV tile in shared memory, B = the query viewed K-major) and
    ``O^T += V^T P^T`` ([512, 16]; A = the same KV tile viewed MN-major, B = P^T, written to shared memory
    each tile). Pipelining and work split as the heads-on-M kernel above; PIPE >= 1 here retires O(i - 1) at the top
    of the tile and issues the next load before waiting for tile i (PIPE = 0: after S(i)'s wait); PIPE = 2 also
    keeps the softmax denominator per token slot (reduced once per segment) and takes the running max across
    the warps with one block barrier (``_max_over_tokens``) instead of Triton's reductions (three each).
    ``plan_ptr``: a step's plan (plan.py): the split and the first segment read from its row. ``PDL``: launched as
    the programmatic dependent of the kernel before it (``interface_hopper.SPLIT_PDL``), as the second fp8
    tokens-on-M kernel's: 1 waits for that kernel before the first global load, 2 (with ``plan_ptr``) after the
    plan's row.
    """
    LOG2E: gl.constexpr = 1.4426950408889634
    D_V: gl.constexpr = 512
    gl.static_assert(BLOCK_H == 16)
    gl.static_assert(num_warps == 4)
    if PDL == 2:
        gl.static_assert(plan_ptr is not None)
    dtype: gl.constexpr = kv_nope_desc.dtype

    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_H, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_H, 16])
    p_smem_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_H], dtype)

    pid_h, pid, num_progs, h0 = _program_ids(BLOCK_H)

    qn_smem = gl.allocate_shared_memory(dtype, [BLOCK_H, D_V], q_nope_desc.layout)
    qr_smem = gl.allocate_shared_memory(dtype, [BLOCK_H, 64], q_rope_desc.layout)
    kn_bufs = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_N, D_V], kv_nope_desc.layout)
    kr_bufs = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_N, 64], kv_rope_desc.layout)
    p_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, BLOCK_H], p_smem_layout)
    if PIPE == 2:
        # per-warp maxima of the scores, double-buffered (tile i + 1 may write while a warp still reads tile i's)
        red_bufs = gl.allocate_shared_memory(gl.float32, [2, 4, BLOCK_H], gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0]))
    else:
        red_bufs = None
    bars = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for k in gl.static_range(NUM_BUF):
        mbarrier.init(bars.index(k), count=1)
    mbarrier.init(q_bar, count=1)

    if PDL == 1:
        _wait_primary()
    if plan_ptr is not None:
        _launch_dependents()
        t, t_stop, b, req_end, p_seq, p_pg0, _, _ = _plan_row(plan_ptr, pid)
    else:
        t, t_stop, b, req_end = _split_start(seq_lens_ptr, B, pid, num_progs, BLOCK_N, B_CHUNK, num_warps,
                                             BF16_SEG_COST)
    if PDL == 2:
        # (the plan's row read: every later load waits for the kernel ahead)
        _wait_primary()

    offs_tok = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s_layout))
    offs_h_s = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(0, s_layout))
    offs_h_o = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(0, o_layout))
    offs_d_o = gl.arange(0, D_V, layout=gl.SliceLayout(1, o_layout))
    qk_mul = sm_scale * LOG2E
    it = 0
    q_phase = 0
    while t < t_stop:
        if plan_ptr is not None:
            # the first segment from the plan's row, the later ones as without it
            if it == 0:
                b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _planned_segment(
                    page_table_ptr, stride_pt_b, b, t, t_stop, req_end, p_seq, BLOCK_N)
                pg0 = p_pg0
            else:
                b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _segment(
                    seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, BLOCK_N)
                pg0 = _tile_page(pt_base, i_first, i_stop, PAGE_SIZE, BLOCK_N)
        else:
            b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _segment(
                seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, BLOCK_N)
            pg0 = None

        q_phase = _load_query_and_first_tiles(q_nope_desc, q_rope_desc, qn_smem, qr_smem, q_bar, q_phase, b, H, h0,
                                              kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, pt_base, i_first,
                                              i_stop, it, PAGE_SIZE, BLOCK_N, NUM_BUF, pg0)

        m_i = gl.full([BLOCK_H], float("-inf"), gl.float32, layout=gl.SliceLayout(0, s_layout))
        l_i = gl.zeros([BLOCK_H], gl.float32, layout=gl.SliceLayout(0, s_layout))
        l_acc = gl.zeros([BLOCK_N, BLOCK_H], gl.float32, layout=s_layout)     # PIPE 2: per token slot
        o = warpgroup_mma_init(gl.zeros([D_V, BLOCK_H], gl.float32, layout=o_layout))
        for i in range(i_first, i_stop):
            stage = it % NUM_BUF
            kn = kn_bufs.index(stage)
            kr = kr_bufs.index(stage)
            if PIPE:
                # Retire O(i - 1) before waiting for tile i (wgmmas run in order: S(i) could not start before it
                # anyway), so buffer (it - 1) % NUM_BUF takes its next tile before tile i is waited for.
                o = warpgroup_mma_wait(num_outstanding=0, deps=(o, ))
                _block_barrier()
                _issue_next_tile(kv_nope_desc, kv_rope_desc, kn_bufs, kr_bufs, bars, pt_base, i, i_stop, it,
                                 PAGE_SIZE, BLOCK_N, NUM_BUF)
            o, m_i, l_i, l_acc = _tok_tile(i, it, stage, kn, kr, bars, qn_smem, qr_smem, red_bufs, p_smem,
                                           seq_len, qk_mul, o, m_i, l_i, l_acc, offs_tok, kv_nope_desc,
                                           kv_rope_desc, kn_bufs, kr_bufs, pt_base, i_stop, s_layout, o_layout,
                                           PAGE_SIZE, BLOCK_N, BLOCK_H, D_V, NUM_BUF, PIPE, num_warps)
            it += 1
        o = warpgroup_mma_wait(num_outstanding=0, deps=(o, ))

        if PIPE == 2:
            l_i = gl.sum(l_acc, axis=0)
        inv = gl.convert_layout(1.0 / l_i, gl.SliceLayout(0, o_layout))
        whole = (i_first == 0) & (i_stop == req_tiles)
        heads_o = h0 + offs_h_o
        heads_s = h0 + offs_h_s
        h_mask_o = heads_o < H
        h_mask_s = heads_s < H
        if PART_SCALED:     # (a bf16 cache's fp16 partials: one k for the row, both halves)
            inv = _scaled_partial(o, inv, whole, b, pid, heads_o, H, part_lse_ptr, stride_pl_s, h_mask_o, 0, 2)
        o = o * inv[None, :]
        lse2 = m_i + gl.log2(l_i)
        _store_o(o, whole, b, pid, heads_o, offs_d_o, out_ptr, part_o_ptr, stride_out_b, stride_out_h, stride_po_s,
                 stride_po_h, h_mask_o[None, :], True)
        _store_lse_and_segment(lse2, whole, b, H, pid, pid_h, i_first, i_stop, req_tiles, heads_s, lse_ptr,
                               part_lse_ptr, seg_ptr, stride_pl_s, h_mask_s, RETURN_LSE)
        t = seg_stop
        b += 1

    for k in gl.static_range(NUM_BUF):
        mbarrier.invalidate(bars.index(k))
    mbarrier.invalidate(q_bar)


@gluon.jit
def _q8_group(kn, q_smem, c: gl.constexpr, s_layout: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_H: gl.constexpr):
    """``K_c q_c^T`` of 128-dim latent group c against one half of the query pair, issued (asynchronous: 4 fp8
    k-steps) into a fresh accumulator (``CHAIN`` of the first fp8 tokens-on-M kernel)."""
    return warpgroup_mma(kn.slice(c * 128, 128, dim=1), q_smem.slice(c * 128, 128, dim=1).permute((1, 0)),
                         gl.zeros([BLOCK_N, BLOCK_H], gl.float32, layout=s_layout), use_acc=False, is_async=True)


@gluon.jit(do_not_specialize=["B"])
def _mla_decode_hopper_tok_fp8_kernel(
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
    PIPE: gl.constexpr,
    WIDEN: gl.constexpr,
    num_warps: gl.constexpr,
    CHAIN: gl.constexpr = 1,
):
    """fp8 (per-tensor) cache, H < 64: the tokens-on-M kernel with fp8 scores.

    Scores: two fp8 x fp8 wgmma chains against the query's hi/lo pair (built here, per request, into
    shared memory), as the portable kernel's QK8 path: the bf16 query's accuracy without widening K. The
    latent columns come by TMA; the 64 rope columns by plain loads a tile ahead into a 128-column fp8 tile
    (zeros in 64..127), so every fp8 operand has the 128-byte swizzle.
    P.V: an fp8 wgmma cannot take V^T (MN-major), so V^T is widened to fp16 (exact), in 128-dim chunks:
    WIDEN = 0 loads each chunk from the tile into registers in the MMA's A layout (byte gathers) and widens
    there; WIDEN = 1 / 2 widen it into fp16 shared memory (four chunk buffers, all four MMAs in flight / one
    buffer, each MMA retired before the next chunk), read MN-major by the wgmma. P^T goes through shared
    memory as fp16. The per-tensor scale multiplies the scores and the output in fp32.
    CHAIN = 1: the hi scores as five fp8 chains, each in a fresh accumulator (the four 128-dim latent groups and
    the rope), folded in fp32; the lo scores (weight 1/16) stay one chain. Triton's fp8 wgmma on sm_90 keeps a
    whole chain in the tensor core's reduced-precision accumulation (maxNumImpreciseAcc 2**30), so CHAIN 0 sums
    all 576 dims there (as the second kernel's CHAIN, kernel_hopper_tok.py). In the fixed config since session 11.
    """
    LOG2E: gl.constexpr = 1.4426950408889634
    D_V: gl.constexpr = 512
    gl.static_assert(BLOCK_H == 16)
    gl.static_assert(num_warps == 4)
    dtype: gl.constexpr = kv_nope_desc.dtype

    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_H, 32])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_H, 16])
    v_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    q_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    qn_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_H, D_V], gl.float8e4nv)
    # The rope columns padded to 128 fp8 (zeros in 64..127): the 128-byte swizzle of the latent tiles.
    qr_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_H, 128], gl.float8e4nv)
    kr_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, 128], gl.float8e4nv)
    rope_layout: gl.constexpr = gl.BlockedLayout([1, 16], [8, 4], [num_warps, 1], [1, 0])
    p_smem_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_H], gl.float16)

    pid_h, pid, num_progs, h0 = _program_ids(BLOCK_H)
    if KV_SCALE_FROM_PTR:
        kv_scale = gl.load(kv_scale_ptr).to(gl.float32)

    qn_hi = gl.allocate_shared_memory(gl.float8e4nv, [BLOCK_H, D_V], qn_layout)
    qn_lo = gl.allocate_shared_memory(gl.float8e4nv, [BLOCK_H, D_V], qn_layout)
    qr_hi = gl.allocate_shared_memory(gl.float8e4nv, [BLOCK_H, 128], qr_layout)
    qr_lo = gl.allocate_shared_memory(gl.float8e4nv, [BLOCK_H, 128], qr_layout)
    kn_bufs = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_N, D_V], kv_nope_desc.layout)
    kr8 = gl.allocate_shared_memory(gl.float8e4nv, [BLOCK_N, 128], kr_layout)
    # the padding, written once (the segments rewrite columns 0..63 only)
    qr_hi.slice(64, 64, dim=1).store(gl.zeros([BLOCK_H, 64], gl.float8e4nv, layout=q_layout))
    qr_lo.slice(64, 64, dim=1).store(gl.zeros([BLOCK_H, 64], gl.float8e4nv, layout=q_layout))
    kr8.slice(64, 64, dim=1).store(gl.zeros([BLOCK_N, 64], gl.float8e4nv, layout=rope_layout))
    p_smem = gl.allocate_shared_memory(gl.float16, [BLOCK_N, BLOCK_H], p_smem_layout)
    if WIDEN != 0:
        # V^T chunks widened to fp16 in shared memory (the MMA reads them MN-major, which 16-bit wgmma allows):
        # four 16 KB buffers (WIDEN = 1: the four chunk MMAs stay in flight together) or one (WIDEN = 2:
        # each chunk's MMA retires before the next chunk is widened; 108 KB a program, two per SM).
        vw_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, 128], gl.float16)
        vw_bufs = gl.allocate_shared_memory(gl.float16, [4 if WIDEN == 1 else 1, BLOCK_N, 128], vw_layout)
    bars = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    for k in gl.static_range(NUM_BUF):
        mbarrier.init(bars.index(k), count=1)

    t, t_stop, b, req_end = _split_start(seq_lens_ptr, B, pid, num_progs, BLOCK_N, B_CHUNK, num_warps)

    offs_tok = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s_layout))
    offs_h_s = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(0, s_layout))
    heads_q = h0 + gl.arange(0, BLOCK_H, layout=gl.SliceLayout(1, q_layout))
    hmask_q = heads_q < H
    it = 0
    while t < t_stop:
        b, seq_len, req_tiles, req_end, seg_stop, i_first, i_stop, pt_base = _segment(
            seq_lens_ptr, page_table_ptr, stride_pt_b, b, t, t_stop, req_end, BLOCK_N)

        # The previous segment's MMAs (which read the query pair) are retired in every warp past this.
        _block_barrier()
        for k in gl.static_range(NUM_BUF - 1):
            if i_first + k < i_stop:
                _issue_nope(kv_nope_desc, kn_bufs, bars, pt_base, i_first + k, (it + k) % NUM_BUF, PAGE_SIZE,
                            BLOCK_N)
        q_base = q_ptr + b.to(gl.int64) * stride_q_b
        q_scale = _q_pair(q_base, heads_q, hmask_q, stride_q_h, qn_hi, qn_lo, qr_hi, qr_lo, False, 16.0, q_layout)
        kr8.slice(0, 64, dim=1).store(_load_rope(kv_ptr, pt_base, i_first, PAGE_SIZE, BLOCK_N, rope_layout))
        fence_async_shared()
        _block_barrier()
        qk_mul = sm_scale * LOG2E * kv_scale / q_scale

        m_i = gl.full([BLOCK_H], float("-inf"), gl.float32, layout=gl.SliceLayout(0, s_layout))
        l_i = gl.zeros([BLOCK_H], gl.float32, layout=gl.SliceLayout(0, s_layout))
        # o0..o2 are retired inside each tile (their A operands are registers that the next chunk reuses);
        # o3, the last, stays in flight until the next tile's score wait.
        if WIDEN == 1:
            o0 = warpgroup_mma_init(gl.zeros([128, BLOCK_H], gl.float32, layout=o_layout))
            o1 = warpgroup_mma_init(gl.zeros([128, BLOCK_H], gl.float32, layout=o_layout))
            o2 = warpgroup_mma_init(gl.zeros([128, BLOCK_H], gl.float32, layout=o_layout))
        else:
            o0 = gl.zeros([128, BLOCK_H], gl.float32, layout=o_layout)
            o1 = gl.zeros([128, BLOCK_H], gl.float32, layout=o_layout)
            o2 = gl.zeros([128, BLOCK_H], gl.float32, layout=o_layout)
        o3 = warpgroup_mma_init(gl.zeros([128, BLOCK_H], gl.float32, layout=o_layout))
        for i in range(i_first, i_stop):
            stage = it % NUM_BUF
            kn = kn_bufs.index(stage)
            # the next tile's rope rows (the last tile loads its own again: harmless, a valid page)
            rope_next = _load_rope(kv_ptr, pt_base, gl.minimum(i + 1, i_stop - 1), PAGE_SIZE, BLOCK_N, rope_layout)
            mbarrier.wait(bars.index(stage), (it // NUM_BUF) & 1)
            n_valid = seq_len - i * BLOCK_N
            if WIDEN == 0:
                if n_valid < BLOCK_N:
                    _zero_rows(kn, n_valid, BLOCK_N, D_V, num_warps)
                    fence_async_shared()
                    _block_barrier()
            if CHAIN:
                # hi: one chain per 128-dim latent group and one for the rope, each in a fresh accumulator, folded
                # in fp32; lo: one chain over all 576 dims. lo and groups 0-2 retire together (with the previous
                # tile's P.V), then the rope and group 3 run while 0-2 are folded. (Compiled for sm_90 in session 11,
                # this order spilled the fewest bytes of those tried: groups 0 and 1 retired first, or all six chains
                # retired at once; waiting on the chains in turn with all six issued made ptxas serialise every
                # wgmma, C7514.)
                s_lo = gl.zeros([BLOCK_N, BLOCK_H], gl.float32, layout=s_layout)
                s_lo = warpgroup_mma(kn, qn_lo.permute((1, 0)), s_lo, use_acc=False, is_async=True)
                s_lo = warpgroup_mma(kr8, qr_lo.permute((1, 0)), s_lo, is_async=True)
                g0 = _q8_group(kn, qn_hi, 0, s_layout, BLOCK_N, BLOCK_H)
                g1 = _q8_group(kn, qn_hi, 1, s_layout, BLOCK_N, BLOCK_H)
                g2 = _q8_group(kn, qn_hi, 2, s_layout, BLOCK_N, BLOCK_H)
                if WIDEN == 1:
                    s_lo, g0, g1, g2, o0, o1, o2, o3 = warpgroup_mma_wait(num_outstanding=0,
                                                                          deps=(s_lo, g0, g1, g2, o0, o1, o2, o3))
                else:
                    s_lo, g0, g1, g2, o3 = warpgroup_mma_wait(num_outstanding=0, deps=(s_lo, g0, g1, g2, o3))
                g3 = _q8_group(kn, qn_hi, 3, s_layout, BLOCK_N, BLOCK_H)
                r = gl.zeros([BLOCK_N, BLOCK_H], gl.float32, layout=s_layout)
                r = warpgroup_mma(kr8, qr_hi.permute((1, 0)), r, use_acc=False, is_async=True)
                s_hi = g0 + g1 + g2
                g3, r = warpgroup_mma_wait(num_outstanding=0, deps=(g3, r))
                s_hi = s_hi + g3 + r
            else:
                s_hi = gl.zeros([BLOCK_N, BLOCK_H], gl.float32, layout=s_layout)
                s_lo = gl.zeros([BLOCK_N, BLOCK_H], gl.float32, layout=s_layout)
                s_hi = warpgroup_mma(kn, qn_hi.permute((1, 0)), s_hi, use_acc=False, is_async=True)
                s_hi = warpgroup_mma(kr8, qr_hi.permute((1, 0)), s_hi, is_async=True)
                s_lo = warpgroup_mma(kn, qn_lo.permute((1, 0)), s_lo, use_acc=False, is_async=True)
                s_lo = warpgroup_mma(kr8, qr_lo.permute((1, 0)), s_lo, is_async=True)
                if WIDEN == 1:
                    s_hi, s_lo, o0, o1, o2, o3 = warpgroup_mma_wait(num_outstanding=0,
                                                                    deps=(s_hi, s_lo, o0, o1, o2, o3))
                else:
                    s_hi, s_lo, o3 = warpgroup_mma_wait(num_outstanding=0, deps=(s_hi, s_lo, o3))
            _block_barrier()
            if i + NUM_BUF - 1 < i_stop:
                _issue_nope(kv_nope_desc, kn_bufs, bars, pt_base, i + NUM_BUF - 1, (it + NUM_BUF - 1) % NUM_BUF,
                            PAGE_SIZE, BLOCK_N)
            s = (s_hi + s_lo * 0.0625) * qk_mul
            s = gl.where((i * BLOCK_N + offs_tok < seq_len)[:, None], s, float("-inf"))
            m_new = gl.maximum(m_i, gl.max(s, axis=0))
            alpha = gl.exp2(m_i - m_new)
            p = gl.exp2(s - m_new[None, :])
            l_i = l_i * alpha + gl.sum(p, axis=0)
            m_i = m_new
            alpha_o = gl.convert_layout(alpha, gl.SliceLayout(0, o_layout))[None, :]
            p_smem.store(p.to(gl.float16))
            kr8.slice(0, 64, dim=1).store(rope_next)      # S(i), its last reader, is retired
            fence_async_shared()
            _block_barrier()
            if WIDEN == 0:
                # V^T chunks from the fp8 tile, widened to fp16 in the A operand's registers.
                # (Waiting down to one MMA in flight after each issue frees the previous chunk's registers.)
                v0 = kn.slice(0, 128, dim=1).permute((1, 0)).load(v_layout).to(gl.float16)
                a0 = warpgroup_mma(v0, p_smem, o0 * alpha_o, is_async=True)
                v1 = kn.slice(128, 128, dim=1).permute((1, 0)).load(v_layout).to(gl.float16)
                a1 = warpgroup_mma(v1, p_smem, o1 * alpha_o, is_async=True)
                o0 = warpgroup_mma_wait(num_outstanding=1, deps=(a0, ))
                v2 = kn.slice(256, 128, dim=1).permute((1, 0)).load(v_layout).to(gl.float16)
                a2 = warpgroup_mma(v2, p_smem, o2 * alpha_o, is_async=True)
                o1 = warpgroup_mma_wait(num_outstanding=1, deps=(a1, ))
                v3 = kn.slice(384, 128, dim=1).permute((1, 0)).load(v_layout).to(gl.float16)
                o3 = warpgroup_mma(v3, p_smem, o3 * alpha_o, is_async=True)
                o2 = warpgroup_mma_wait(num_outstanding=1, deps=(a2, ))
            elif WIDEN == 1:
                # Each chunk widened while the previous chunks' MMAs run; all four stay in flight until the
                # next tile's score wait.
                o0 = _pv_widened(kn, vw_bufs.index(0), 0, n_valid, p_smem, o0 * alpha_o, BLOCK_N, num_warps)
                o1 = _pv_widened(kn, vw_bufs.index(1), 1, n_valid, p_smem, o1 * alpha_o, BLOCK_N, num_warps)
                o2 = _pv_widened(kn, vw_bufs.index(2), 2, n_valid, p_smem, o2 * alpha_o, BLOCK_N, num_warps)
                o3 = _pv_widened(kn, vw_bufs.index(3), 3, n_valid, p_smem, o3 * alpha_o, BLOCK_N, num_warps)
            else:
                vw = vw_bufs.index(0)
                a0 = _pv_widened(kn, vw, 0, n_valid, p_smem, o0 * alpha_o, BLOCK_N, num_warps)
                o0 = warpgroup_mma_wait(num_outstanding=0, deps=(a0, ))
                _block_barrier()
                a1 = _pv_widened(kn, vw, 1, n_valid, p_smem, o1 * alpha_o, BLOCK_N, num_warps)
                o1 = warpgroup_mma_wait(num_outstanding=0, deps=(a1, ))
                _block_barrier()
                a2 = _pv_widened(kn, vw, 2, n_valid, p_smem, o2 * alpha_o, BLOCK_N, num_warps)
                o2 = warpgroup_mma_wait(num_outstanding=0, deps=(a2, ))
                _block_barrier()
                o3 = _pv_widened(kn, vw, 3, n_valid, p_smem, o3 * alpha_o, BLOCK_N, num_warps)
            it += 1
        if WIDEN == 1:
            o0, o1, o2, o3 = warpgroup_mma_wait(num_outstanding=0, deps=(o0, o1, o2, o3))
        else:
            o3 = warpgroup_mma_wait(num_outstanding=0, deps=(o3, ))

        inv = gl.convert_layout(kv_scale / l_i, gl.SliceLayout(0, o_layout))[None, :]
        _store_chunks_segment(o0, o1, o2, o3, inv, m_i, l_i, h0, offs_h_s, H, b, pid, pid_h,
                              i_first, i_stop, req_tiles, out_ptr, part_o_ptr, lse_ptr, part_lse_ptr, seg_ptr,
                              stride_out_b, stride_out_h, stride_po_s, stride_po_h, stride_pl_s, RETURN_LSE, False)
        t = seg_stop
        b += 1

    for k in gl.static_range(NUM_BUF):
        mbarrier.invalidate(bars.index(k))

