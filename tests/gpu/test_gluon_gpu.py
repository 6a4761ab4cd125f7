"""Gluon kernels tuned by graphtune on a GPU (sm_90 / sm_100): descriptors rebuilt per config by pre-hooks,
tuned per bucket with ``graphtune.warmup``, then captured into CUDA graphs and replayed.

NOT YET RUN ON A GPU: written in a CPU-only session (branch issue-gluon); the kernels (tests/_gluon_kernels.py)
compile for sm_90 there (tests/cpu/test_gluon.py) but have never been launched. Inputs are fresh random
tensors of awkward sizes (rows not a multiple of any tile, 96 columns: partial tiles in both dimensions),
outputs are NaN-poisoned so an element no program writes cannot pass, and fp32 x 2 is exact, so results are
compared bit for bit.
"""
from __future__ import annotations

import pytest
import torch
import triton

import _gluon_kernels as gk
import graphtune
from graphtune import Buckets

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] not in (9, 10),
                                reason="the Gluon TMA kernels need an sm_90 or sm_100 GPU")

SIZES = [1, 2, 4, 8]
COLS = 96
SCALE = 2.0
KERNELS = {"tma": gk._tma_scale_kernel, "warp-specialised": gk._ws_scale_kernel}


def _rows(b: int) -> int:
    return 37 * b + 3


def _buffers(b: int):
    x = torch.randn(_rows(b), COLS, device="cuda")
    out = torch.full_like(x, float("nan"))
    return x, out


def _step(kernel):
    """The server's step: one launch; the descriptors are whatever the caller built (a pre-hook fixes them)."""
    def step(in_desc, out_desc, b, scale):
        m, n = in_desc.base.shape
        kernel[gk.grid(m, n)](in_desc, out_desc, b, scale)
    return step


def _make_args(b: int):
    x, out = _buffers(b)
    # built with a tile no config uses: each launch's pre-hook must rebuild them
    return gk.descriptor(x, [16, 16]), gk.descriptor(out, [16, 16]), b, SCALE


def _capture_and_replay(step, chosen_block):
    """Capture one graph per size (largest first, as servers do), replay each twice with fresh inputs and a
    poisoned output, and compare with eager launches on the same inputs."""
    graphs = []
    for b in sorted(SIZES, reverse=True):
        x, out = _buffers(b)
        in_desc, out_desc = gk.descriptor(x, [16, 16]), gk.descriptor(out, [16, 16])
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step(in_desc, out_desc, b, SCALE)
        if chosen_block is not None:
            assert tuple(in_desc.block_shape) == chosen_block(b), f"B={b}: descriptors not rebuilt at capture"
        graphs.append((b, g, x, out))
    for b, g, x, out in graphs:
        for _ in range(2):
            x.copy_(torch.randn_like(x))
            out.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            torch.testing.assert_close(out, x * SCALE, rtol=0, atol=0, msg=f"B={b}: replay")
            eager = torch.full_like(out, float("nan"))
            step(gk.descriptor(x, [16, 16]), gk.descriptor(eager, [16, 16]), b, SCALE)
            torch.cuda.synchronize()
            torch.testing.assert_close(out, eager, rtol=0, atol=0, msg=f"B={b}: replay != eager")


@pytest.mark.parametrize("which", list(KERNELS))
def test_tuned_per_bucket_with_descriptor_pre_hooks_then_captured_and_replayed(which):
    name = f"gpu_gluon_{which}"
    kernel = graphtune.autotune(gk.configs_with_hooks(), key=["B"], buckets={"B": Buckets.explicit(SIZES)},
                                name=name, policy="raise")(KERNELS[which])
    step = _step(kernel)
    graphtune.warmup(step, SIZES, _make_args)
    assert kernel.tune_count == len(SIZES)
    calls = kernel.bench_calls
    assert calls > 0
    for key, choice in kernel._cache.items():
        assert choice.source == "tuned" and not choice.result.failures, (key, choice.result.failures)
        if which == "warp-specialised":
            # the device check counted the worker warp (padded to a warpgroup): 8 warps, not the config's 4
            assert all(r["resources"]["threads"] == 256 for r in choice.result.rows), choice.result.rows
    chosen = {key[0]: (choice.config.kwargs["BM"], choice.config.kwargs["BN"]) for key, choice in kernel._cache.items()}
    _capture_and_replay(step, lambda b: chosen[b])
    assert kernel.bench_calls == calls, "benchmarked inside capture"
    graphtune.assert_covered([name])


def test_gluon_kernel_without_pre_hooks_takes_the_fast_path_and_replays():
    # the tile is fixed by the caller (descriptors and BM, BN passed as arguments); only warps are tuned
    configs = [triton.Config({}, num_warps=w) for w in (4, 8)]
    kernel = graphtune.autotune(configs, key=["B"], buckets={"B": Buckets.explicit(SIZES)}, name="gpu_gluon_fast",
                                policy="raise")(gk._tma_scale_kernel)
    assert kernel._fast is not None

    def step(in_desc, out_desc, b, scale):
        m, n = in_desc.base.shape
        kernel[lambda meta: (triton.cdiv(m, 64), triton.cdiv(n, 64))](in_desc, out_desc, b, scale, 64, 64)

    def make_args(b):
        x, out = _buffers(b)
        return gk.descriptor(x, [64, 64]), gk.descriptor(out, [64, 64]), b, SCALE
    graphtune.warmup(step, SIZES, make_args)
    hits = {key: choice.hits for key, choice in kernel._cache.items()}
    for b in SIZES:
        x, out = _buffers(b)
        step(gk.descriptor(x, [64, 64]), gk.descriptor(out, [64, 64]), b, SCALE)
        step(gk.descriptor(x, [64, 64]), gk.descriptor(out, [64, 64]), b, SCALE)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x * SCALE, rtol=0, atol=0)
    assert kernel._fast.cache, "no direct launch was remembered"
    # the second launch of each size is a direct launch: it counts a hit on the cached choice without run()
    assert all(kernel._cache[key].hits >= n + 2 for key, n in hits.items())

    def fixed(in_desc, out_desc, b, scale):   # the capture helper builds 16 x 16 descriptors: rebuild at 64
        step(gk.descriptor(in_desc.base, [64, 64]), gk.descriptor(out_desc.base, [64, 64]), b, scale)
    _capture_and_replay(fixed, None)
    graphtune.assert_covered(["gpu_gluon_fast"])


@pytest.mark.parametrize("which", list(KERNELS))
def test_inspect_device_target_matches_the_loaded_kernel(which):
    fn = KERNELS[which]
    x, out = _buffers(2)
    args = dict(in_desc=gk.descriptor(x, [16, 16]), out_desc=gk.descriptor(out, [16, 16]), B=2, scale=SCALE)
    configs = gk.configs_with_hooks()
    rows = graphtune.inspect(fn, target="device", args=args, configs=configs)
    for config, row in zip(configs, rows):
        assert row.fits, row.reason
        config.pre_hook({**args, **config.all_kwargs()})
        compiled = fn.warmup(*args.values(), grid=(1,), **config.all_kwargs())
        compiled._init_handles()
        assert row.registers == compiled.n_regs
        assert row.total_warps == compiled.metadata.num_warps == (8 if which == "warp-specialised" else 4)
        assert row.shared_dynamic == compiled.metadata.shared
