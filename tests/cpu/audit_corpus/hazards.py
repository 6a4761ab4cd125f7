"""One kernel per hazard code (and the informational codes)."""
import graphtune
import triton
import triton.language as tl

CONFIGS = [triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128}, num_warps=8)]


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def runtime_tuner(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.autotune(configs=CONFIGS, key=["n", "seq_len", "BLOCK"])
@triton.jit
def misspelled_key(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def in_place_direct(x_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs * stride, mask=offs < n)
    tl.store(x_ptr + offs * stride, x + 1, mask=offs < n)


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def in_place_through_locals(out_ptr, in_ptr, n, start, BLOCK: tl.constexpr):
    offs = start + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    p = out_ptr + offs
    q = p
    acc = tl.load(q, mask=offs < n) + tl.load(in_ptr + offs, mask=offs < n)
    tl.store(p, acc, mask=offs < n)


@triton.autotune(configs=CONFIGS, key=["n"], restore_value=["x_ptr"])
@triton.jit
def in_place_restored(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def atomic_accumulate(x_ptr, total_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(total_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n)))


@triton.autotune(configs=CONFIGS, key=["n"], reset_to_zero=["total_ptr"])
@triton.jit
def atomic_reset(x_ptr, total_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(total_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n)))


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def block_pointer_in_place(x_ptr, n, BLOCK: tl.constexpr):
    block = tl.make_block_ptr(base=x_ptr, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), order=(0,))
    tl.store(block, tl.load(block) + 1)


@triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def single(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)


@triton.autotune(configs=CONFIGS, key=[])
@triton.jit
def empty_key(x_ptr, BLOCK: tl.constexpr):
    pass


@triton.autotune(configs=[c for c in CONFIGS if c.num_warps == 8], key=["n"])
@triton.jit
def dynamic_triton(x_ptr, n, BLOCK: tl.constexpr):
    pass


@graphtune.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def graphtune_tuned(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)


@graphtune.autotune(configs=make_configs(), key=["n"])
@triton.jit
def graphtune_dynamic(x_ptr, n, BLOCK: tl.constexpr):
    pass
