"""Config lists from environment variables (their defaults are counted) and module constants."""
import os

from engine.triton_utils import tl, triton

BLOCK = int(os.environ.get("ENGINE_BLOCK", "64"))
WARPS = int(os.getenv("ENGINE_WARPS", "4"))


@triton.autotune(configs=[triton.Config({"BLOCK": BLOCK}, num_warps=WARPS)], key=["n"])
@triton.jit
def env_single(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.autotune(configs=[triton.Config({"BLOCK": int(b)}) for b in os.getenv("ENGINE_BLOCKS", "64,128").split(",")],
                 key=["n"])
@triton.jit
def env_list(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.autotune(configs=[triton.Config({"BLOCK": int(os.environ["ENGINE_BLOCK"])})], key=["n"])
@triton.jit
def env_required(x_ptr, n, BLOCK: tl.constexpr):
    pass
