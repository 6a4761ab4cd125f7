"""Host-side cost of one launch, in µs per call, measured in one run (GPU needed).

Compares, on the same tiny @triton.jit kernel: a bare ``kernel[grid](...)``; stock ``triton.autotune``
(already tuned); the ``CompiledKernel`` from a first launch called directly; graphtune (already tuned).

    PYTHONPATH=src python benchmarks/bench_dispatch.py [--calls 20000] [--trials 5] [--out DIR]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import graphtune  # noqa: E402
from _common import write_result  # noqa: E402


@triton.jit
def _add_one_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


CONFIGS = [triton.Config({"BLOCK": 128}, num_warps=4), triton.Config({"BLOCK": 256}, num_warps=4)]


def per_call_us(fn, calls: int) -> float:
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_dispatch needs a CUDA GPU", file=sys.stderr)
        return 2
    n = 1000
    x = torch.randn(n, device="cuda")
    grid = (triton.cdiv(n, 128),)

    stock = triton.autotune(configs=CONFIGS, key=["n"], restore_value=["x_ptr"])(_add_one_kernel)
    gt = graphtune.autotune(CONFIGS, key=["n"], name="bench_dispatch", restore_value=["x_ptr"])(_add_one_kernel)
    stock[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, n)       # tune once
    gt[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, n)
    gt_cfg = gt.best_config.kwargs["BLOCK"]
    compiled = _add_one_kernel[grid](x, n, BLOCK=128)

    def bare():
        _add_one_kernel[grid](x, n, BLOCK=128)

    def stock_call():
        stock[grid](x, n)

    def direct():
        compiled[(grid[0], 1, 1)](x, n, 128)

    def graphtune_call():
        gt[grid](x, n)

    variants = {"bare jit": bare, "stock autotune (tuned)": stock_call, "compiled kernel direct": direct,
                "graphtune (tuned)": graphtune_call}
    samples: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.trials):
        for name, fn in variants.items():   # interleaved so drift hits every variant alike
            samples[name].append(per_call_us(fn, args.calls))
    rows = []
    bare_med = statistics.median(samples["bare jit"])
    print(f"{'variant':28s} {'median us':>10s} {'min':>8s} {'max':>8s} {'x bare':>8s}")
    for name, vals in samples.items():
        med = statistics.median(vals)
        rows.append({"variant": name, "median_us": med, "min_us": min(vals), "max_us": max(vals),
                     "ratio_to_bare": med / bare_med, "samples_us": vals})
        print(f"{name:28s} {med:10.2f} {min(vals):8.2f} {max(vals):8.2f} {med / bare_med:8.2f}")
    path = write_result("dispatch", {"calls_per_trial": args.calls, "trials": args.trials,
                                     "graphtune_block": gt_cfg, "rows": rows}, args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
