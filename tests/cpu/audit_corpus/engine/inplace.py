"""In-place cases judged by hand: only in_place_prefix_sum and in_place_accumulate update data in place."""
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
