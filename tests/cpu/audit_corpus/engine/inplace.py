"""In-place cases judged by hand: only in_place_prefix_sum, in_place_accumulate and overlapping_rows update
data in place."""
from engine.triton_utils import tl, triton

CONFIGS = [triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})]


@triton.autotune(configs=CONFIGS, key=["D"])
@triton.jit
def pointer_reuse(v, v_new, D, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    p_v = tl.make_block_ptr(v, (D,), (1,), (0,), (BLOCK,), (0,))
    b_v = tl.load(p_v)
    p_v = tl.make_block_ptr(v_new, (D,), (1,), (0,), (BLOCK,), (0,))
    tl.store(p_v, b_v * 2)
    tl.store(v_new + o, tl.load(v + o))


@triton.autotune(configs=CONFIGS, key=["D"])
@triton.jit
def integer_offsets(x, out, start, row_stride, D, BLOCK: tl.constexpr):
    o = start + tl.program_id(0) * row_stride + tl.arange(0, BLOCK)
    b = tl.load(x + o, mask=o < D)
    tl.store(out + o, b, mask=o < D)


@triton.autotune(configs=CONFIGS, key=["D"])
@triton.jit
def store_before_load(x, o, D, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(o + offs, tl.load(x + offs))
    tl.debug_barrier()
    b = tl.load(o + offs)
    tl.store(o + offs, b * 2)


@triton.autotune(configs=CONFIGS, key=["D"])
@triton.jit
def branch_writes_or_reads(x, a, y, D, COMPUTE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if COMPUTE:
        tl.store(a + offs, tl.load(x + offs))
    else:
        b = tl.load(a + offs)
        tl.store(y + offs, b)
    if COMPUTE:
        tl.store(y + offs, tl.load(a + offs))


@triton.autotune(configs=CONFIGS, key=["D"])
@triton.jit
def in_place_prefix_sum(h, NT, D, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    b_h = tl.zeros([BLOCK], dtype=tl.float32)
    for i_t in range(NT):
        p_h = h + i_t * D + o
        b_h += tl.load(p_h)
        if i_t > 0:
            tl.store(p_h, b_h)


@triton.autotune(configs=CONFIGS, key=["D"])
@triton.jit
def in_place_accumulate(c, a, D, ACC: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.load(a + offs)
    if ACC:
        acc += tl.load(c + offs)
    tl.store(c + offs, acc)


@triton.autotune(configs=CONFIGS, key=["D"])
@triton.jit
def disjoint_rows(u, T, C, D: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_T: tl.constexpr):
    # Rows below T - C are read (earlier launches wrote them), rows T - C and up are written: the regions do
    # not overlap, so running it again gives the same result (fla's parallel_deltaformer_fwd_kernel).
    pid_c = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BLOCK_C) + pid_c * BLOCK_C
    o_d = tl.arange(0, D)
    acc = tl.zeros([BLOCK_C, D], dtype=tl.float32)
    for i in range(0, T, BLOCK_T):
        o_t = i + tl.arange(0, BLOCK_T)
        m_t = o_t < T - C
        acc += tl.sum(tl.load(u + o_t[:, None] * D + o_d[None, :], mask=m_t[:, None], other=0.0), axis=0)
    o_r = T - C + rows
    tl.store(u + o_r[:, None] * D + o_d[None, :], acc, mask=o_r[:, None] < T)


@triton.autotune(configs=CONFIGS, key=["D"])
@triton.jit
def overlapping_rows(u, T, C, D: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_T: tl.constexpr):
    # As disjoint_rows, but the load reaches row T - C, which the store writes: an in-place update.
    pid_c = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BLOCK_C) + pid_c * BLOCK_C
    o_d = tl.arange(0, D)
    acc = tl.zeros([BLOCK_C, D], dtype=tl.float32)
    for i in range(0, T, BLOCK_T):
        o_t = i + tl.arange(0, BLOCK_T)
        m_t = o_t <= T - C
        b_u = tl.load(u + o_t[:, None] * D + o_d[None, :], mask=m_t[:, None], other=0.0)
        acc += tl.sum(b_u, axis=0)
    o_r = T - C + rows
    tl.store(u + o_r[:, None] * D + o_d[None, :], acc.to(u.dtype.element_ty), mask=o_r[:, None] < T)
