"""Config lists the static evaluator must count (and those it must call dynamic)."""
import itertools
import os

import triton
import triton.language as tl
from triton import Config

BLOCKS = [32, 64, 128]
WARPS = (4, 8)
GRID = [Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s)
        for m in BLOCKS for n in range(16, 80, 16) if m * n <= 4096
        for w in WARPS for s in [2, 3] if not (w == 8 and s == 2)]
FIXED = [Config({"BLOCK_M": 16, "BLOCK_N": 16}, 2, 1)]
REBOUND = [Config({"BLOCK": 1})]
REBOUND = REBOUND + [Config({"BLOCK": 2})]


def from_env():
    return [Config({"BLOCK": int(b)}) for b in os.environ.get("BLOCKS", "64").split(",")]


def literal_helper():
    """A zero-argument helper that only returns an expression is evaluated."""
    return [Config({"BLOCK": b}, num_warps=w) for b, w in itertools.product([16, 32, 64], [2, 4])]


def looped_helper():
    out = []
    for b in (64, 128):
        out.append(Config({"BLOCK": b}, num_warps=8, num_stages=4))
    return out


@triton.autotune(configs=[Config({"BLOCK": 64}), Config({"BLOCK": 128}, num_warps=8), Config({"BLOCK": 256},
                                                                                                num_stages=5)],
                 key=["n"])
@triton.jit
def literal_list(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.autotune(configs=GRID, key=["m", "n"])
@triton.jit
def nested_comprehension(x_ptr, m, n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pass


@triton.autotune(configs=GRID + FIXED + [Config({"BLOCK_M": 8, "BLOCK_N": 8}, num_warps=1)], key=["m"])
@triton.jit
def concatenated(x_ptr, m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pass


@triton.autotune(configs=[Config({"BLOCK": 2 ** i}, num_warps=max(1, 2 ** i // 64)) for i in range(5, 11, 2)],
                 key=["n"])
@triton.jit
def arithmetic(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.autotune(configs=FIXED, key=[])
@triton.jit
def positional_config(x_ptr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pass


@triton.autotune(configs=literal_helper(), key=["n"])
@triton.jit
def helper_literal(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.autotune(configs=from_env(), key=["n"])
@triton.jit
def env_dynamic(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.autotune(configs=looped_helper(), key=["n"])
@triton.jit
def loop_dynamic(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.autotune(configs=REBOUND, key=["n"])
@triton.jit
def rebound_dynamic(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.autotune(configs=[Config({"BLOCK": b}) for b in range(10 ** 9)], key=["n"])
@triton.jit
def huge_dynamic(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.autotune(configs=[Config({"BLOCK": 64}, num_warps=4)] * 3 + [], key=["n"],
                 prune_configs_by={"early_config_prune": lambda configs, nargs, **kw: configs[:1], "top_k": 1})
@triton.jit
def pruned(x_ptr, n, BLOCK: tl.constexpr):
    pass
