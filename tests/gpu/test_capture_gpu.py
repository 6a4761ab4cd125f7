"""Under real torch.cuda.graph capture: the stock hazard, and graphtune never invalidating a capture."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import graphtune
from graphtune import Buckets
from graphtune.errors import UntunedError

CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in (256, 1024) for w in (4, 8)]


@triton.jit
def _axpy_kernel(x_ptr, y_ptr, out_ptr, n, B, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, 2.0 * x + y, mask=mask)


def _grid(n):
    return lambda m: (triton.cdiv(n, m["BLOCK"]),)


def _inputs(n):
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    return x, y, out


_STOCK_HAZARD = r"""
import torch, triton, triton.language as tl

@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (256, 1024) for w in (4, 8)], key=["n"])
@triton.jit
def _axpy(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

n = 1 << 20
x, y, out = (torch.randn(n, device="cuda") for _ in range(3))
g = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(g):
        _axpy[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, y, out, n)
except Exception as exc:
    print("CAPTURE FAILED:", type(exc).__name__, str(exc).splitlines()[0])
else:
    print("CAPTURE OK")
"""


def test_stock_autotune_first_call_inside_capture_breaks_capture():
    # in its own process: a failed capture leaves torch's CUDA RNG state unusable for the rest of the process
    import subprocess
    import sys
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:   # @triton.jit needs a file
        f.write(_STOCK_HAZARD)
    proc = subprocess.run([sys.executable, f.name], capture_output=True, text=True, timeout=300)
    print("stock hazard:", proc.stdout.strip()[-300:])
    assert "CAPTURE FAILED" in proc.stdout
    assert "_axpy" not in proc.stdout and "autotun" not in proc.stdout.lower()   # the error names neither


@pytest.fixture
def tuned_kernel():
    kernel = graphtune.autotune(CONFIGS, key=["B"], name="gpu_axpy", buckets={"B": Buckets.explicit([1, 8, 64])})(
        _axpy_kernel)
    yield kernel
    kernel.reset()
    graphtune.set_policy(None)


def test_warmed_buckets_capture_and_replay_with_zero_benchmarks(tuned_kernel):
    n = 1 << 18
    for b in (1, 8, 64):
        x, y, out = _inputs(n)
        tuned_kernel[_grid(n)](x, y, out, n, b)
    torch.cuda.synchronize()
    calls = tuned_kernel.bench_calls
    assert calls > 0
    graphs = []
    for b in (64, 8, 1, 5, 40):   # largest first, as servers capture; 5 and 40 pad to 8 and 64
        x, y, out = _inputs(n)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            tuned_kernel[_grid(n)](x, y, out, n, b)
        graphs.append((g, x, y, out))
    assert tuned_kernel.bench_calls == calls, "benchmarked inside capture"
    for g, x, y, out in graphs:
        out.fill_(float("nan"))
        x.copy_(torch.randn_like(x))
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, 2.0 * x + y)
    graphtune.assert_covered(["gpu_axpy"])


def test_fallback_policy_captures_and_replays_correctly(tuned_kernel):
    n = 1 << 18
    x, y, out = _inputs(n)
    tuned_kernel[_grid(n)](x, y, out, n, 1)
    calls = tuned_kernel.bench_calls
    x, y, out = _inputs(n)
    g = torch.cuda.CUDAGraph()
    with pytest.warns(RuntimeWarning, match="gpu_axpy"):
        with torch.cuda.graph(g):
            tuned_kernel[_grid(n)](x, y, out, n, 64)   # bucket 64 never tuned
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 2.0 * x + y)
    assert tuned_kernel.bench_calls == calls
    cov = graphtune.coverage(["gpu_axpy"]).to_dict()["kernels"][0]
    assert cov["misses"][0]["where"] == "capture"


def test_raise_policy_raises_before_the_capture_is_damaged(tuned_kernel):
    graphtune.set_policy("raise")
    n = 1 << 16
    x, y, out = _inputs(n)
    tuned_kernel[_grid(n)](x, y, out, n, 1)
    calls = tuned_kernel.bench_calls
    g = torch.cuda.CUDAGraph()
    with pytest.raises(UntunedError, match="gpu_axpy"):
        with torch.cuda.graph(g):
            tuned_kernel[_grid(n)](x, y, out, n, 8)
    assert tuned_kernel.bench_calls == calls
    # the stream and the process are still good: a new capture of a tuned bucket works
    g2 = torch.cuda.CUDAGraph()
    x, y, out = _inputs(n)
    with torch.cuda.graph(g2):
        tuned_kernel[_grid(n)](x, y, out, n, 1)
    g2.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 2.0 * x + y)


def test_patched_stock_kernel_is_capture_safe():
    stock = triton.autotune(configs=CONFIGS, key=["n"])(_axpy_kernel)
    with graphtune.patch_triton():
        n = 1 << 20
        x, y, out = _inputs(n)
        g = torch.cuda.CUDAGraph()
        with pytest.warns(RuntimeWarning, match="_axpy_kernel"):
            with torch.cuda.graph(g):
                stock[_grid(n)](x, y, out, n, 1)
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, 2.0 * x + y)


def test_fast_launch_matches_jit_launch_on_odd_alignment():
    kernel = graphtune.autotune(CONFIGS, key=["B"], name="gpu_axpy_align")(_axpy_kernel)
    base = torch.randn(5000, device="cuda")
    for off, n in ((0, 4096), (1, 4001), (3, 999), (0, 17)):
        x = base[off:off + n]
        y = torch.randn(n, device="cuda")
        out_full = torch.full((n + 1,), float("nan"), device="cuda")
        out = out_full[1:] if off % 2 else out_full[:n]
        for _ in range(3):   # first call tunes, later calls take the fast path
            out.fill_(float("nan"))
            kernel[_grid(n)](x, y, out, n, 1)
            torch.cuda.synchronize()
            torch.testing.assert_close(out, 2.0 * x + y)
