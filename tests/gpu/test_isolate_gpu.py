"""Isolated evaluation on the GPU: a space with one config that writes far out of bounds (an illegal memory
access, which poisons the CUDA context of the process that launches it) is tuned with isolate=True; the
process afterwards still runs kernels correctly and captures and replays a graph; the bad config is excluded
with its reason, and a later start remembers both outcomes without a worker."""
from __future__ import annotations

import time

import torch
import triton
import triton.language as tl

import graphtune

@triton.jit
def _maybe_faulting_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, BAD: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if BAD:
        tl.store(out_ptr + offs.to(tl.int64) + (1 << 40), x * 2.0, mask=mask)   # far outside any allocation
    else:
        tl.store(out_ptr + offs, x * 2.0, mask=mask)


CONFIGS = [triton.Config({"BLOCK": 256, "BAD": 0}, num_warps=4), triton.Config({"BLOCK": 512, "BAD": 1}, num_warps=4),
           triton.Config({"BLOCK": 1024, "BAD": 0}, num_warps=4)]
isolated_kernel = graphtune.autotune(CONFIGS, key=["n"], name="iso_gpu_faulting", isolate=True)(_maybe_faulting_kernel)


def _launch(x, out):
    isolated_kernel[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, out, x.numel())


def test_a_faulting_config_never_runs_here_and_the_process_keeps_working(capsys):
    n = 100_000
    x = torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    t0 = time.perf_counter()
    _launch(x, out)
    torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    torch.testing.assert_close(out, 2 * x)
    cov = graphtune.coverage(["iso_gpu_faulting"]).to_dict()["kernels"][0]
    excluded = [c for e in cov["excluded"] for c in e["configs"]]
    assert [c["config"] for c in excluded] == ["BAD=1,BLOCK=512,num_warps=4,num_stages=3"], excluded
    assert excluded[0]["reason"].startswith("isolate:"), excluded
    assert cov["tuned"][0]["config"] != "BAD=1,BLOCK=512,num_warps=4,num_stages=3"

    # the process still works: other kernels, and a captured graph of the tuned kernel
    y = torch.randn(n, device="cuda")
    torch.testing.assert_close(y + 1, y.add(1))
    static_x = torch.randn(n, device="cuda")
    static_out = torch.full_like(static_x, float("nan"))
    _launch(static_x, static_out)   # tuned: a hit
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        _launch(static_x, static_out)
    static_x.copy_(torch.randn(n, device="cuda"))
    static_out.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(static_out, 2 * static_x)

    # a later start tuning a new key (n is the key): the outcomes are remembered, no worker is started, the bad
    # config is still excluded (the tuned key itself would come from the database without any tuning)
    isolated_kernel.reset()
    x2 = torch.randn(n // 2 + 3, device="cuda")
    out2 = torch.full_like(x2, float("nan"))
    t0 = time.perf_counter()
    _launch(x2, out2)
    torch.cuda.synchronize()
    later_s = time.perf_counter() - t0
    torch.testing.assert_close(out2, 2 * x2)
    cov = graphtune.coverage(["iso_gpu_faulting"]).to_dict()["kernels"][0]
    reasons = [c["reason"] for e in cov["excluded"] for c in e["configs"]]
    assert len(reasons) == 1 and "remembered" in reasons[0], reasons
    with capsys.disabled():
        print(f"\nisolation on {torch.cuda.get_device_name()}: first tuning with a worker {first_s:.2f} s "
              f"(3 configs, 1 faulting), later start {later_s:.2f} s; excluded: {reasons[0]}")
