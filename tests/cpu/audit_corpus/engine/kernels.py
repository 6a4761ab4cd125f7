"""Kernels that import triton and tl through engine.triton_utils, with their launches (key bindings)."""
import functools

import torch

from engine import plain
from engine.cache import CachingAutotuner, engine_cache_autotune, tokens_tuner
from engine.triton_utils import tl, triton
from vendor.tuning import my_autotune

CONFIGS = [triton.Config({"BLOCK": 64}, num_warps=4), triton.Config({"BLOCK": 128}, num_warps=8)]


def _bucket(n):
    return 1 << max(n - 1, 0).bit_length()


@triton.autotune(configs=CONFIGS, key=["n_tokens", "HEAD_DIM"])
@triton.jit
def reexport_kernel(x_ptr, y_ptr, n_tokens, HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n_tokens * HEAD_DIM))


@triton.autotune(configs=CONFIGS, key=["HEAD_DIM", "num_heads", "HAS_BIAS"])
@triton.jit
def model_keyed(x_ptr, b_ptr, num_heads, HEAD_DIM: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    pass


@triton.autotune(configs=CONFIGS, key=["SIZE_CLASS", "D"])
@triton.jit
def bucket_keyed(x_ptr, SIZE_CLASS, D, BLOCK: tl.constexpr):
    pass


@triton.autotune(configs=CONFIGS, key=["D"])
@triton.jit
def never_launched(x_ptr, D, BLOCK: tl.constexpr):
    pass


@engine_cache_autotune(configs=CONFIGS, key=["D"])
@triton.jit
def cache_wrapped(x_ptr, D, BLOCK: tl.constexpr):
    pass


@tokens_tuner
@triton.jit
def plain_wrapped(x_ptr, n_tokens, BLOCK: tl.constexpr):
    pass


@my_autotune(configs=CONFIGS, key=["n"])
@triton.jit
def unknown_wrapped(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.jit
def _applied_body(x_ptr, M, BLOCK: tl.constexpr):
    pass


applied_cached = CachingAutotuner(_applied_body, _applied_body.arg_names, CONFIGS, ["M"], None, None)


def make_kernel():
    return triton.autotune(configs=CONFIGS, key=["M"])(triton.jit(_applied_body))


@functools.lru_cache(maxsize=1)
def cached_kernel():
    return triton.autotune(configs=CONFIGS, key=["rows"])(plain.plain_body)


@triton.autotune(configs=CONFIGS, key=["rows"])
@triton.jit
def alias_launched(x_ptr, rows, BLOCK: tl.constexpr):
    pass


@triton.autotune(configs=CONFIGS, key=["rows"])
@triton.jit
def helper_launched(x_ptr, rows, BLOCK: tl.constexpr):
    pass


def launch_autotuned(kernel, grid, **kwargs):
    kernel[grid](**kwargs)


class Layer:
    def __init__(self, config):
        self.config = config

    def forward(self, x: torch.Tensor, bias=None):
        n_tokens = x.shape[0]
        grid = (triton.cdiv(x.numel(), 64),)
        reexport_kernel[grid](x, x, n_tokens, HEAD_DIM=x.shape[-1])
        model_keyed[grid](x, bias, self.config.num_heads, HEAD_DIM=x.shape[-1], HAS_BIAS=bias is not None)
        bucket_keyed[grid](x, SIZE_CLASS=_bucket(x.shape[0]), D=x.shape[1])
        cache_wrapped[grid](x, D=x.shape[1])
        kernel = alias_launched if x.is_contiguous() else helper_launched
        kernel[grid](x, rows=len(x))
        launch_autotuned(helper_launched, grid, x_ptr=x, rows=x.size(0))
        return x
