"""Host cost of a graphtune launch inside a torch.compile graph (the graphtune::launch op), per launch.

Rows (median of --repeats timings of --n calls each, microseconds per call):
  op layer, run stubbed     torch.ops.graphtune.launch with the kernel's run replaced by a no-op: what the op adds
  custom_op, same schema    the same no-op through torch.library.custom_op (the registration graphtune does not use)
  eager launch (GPU)        kernel[grid](...) on a tuned key, the hot path
  compiled launch (GPU)     a torch.compile(backend="aot_eager") function doing the same launch, no CUDA graph

    PYTHONPATH=src python benchmarks/bench_compile.py [--n 20000] [--repeats 5] [--out DIR]

Prints a table and writes benchmarks/results/compile_launch_<cpu|gpu>.json. On a CPU box the kernel rows are
skipped (the interpreter's cost would hide the host cost being measured).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import timeit
from pathlib import Path
from typing import Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import graphtune  # noqa: E402
from _common import write_result  # noqa: E402


@triton.jit
def _bench_axpy_kernel(x_ptr, y_ptr, out_ptr, n, B, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def _time(fn: Callable[[], object], n: int, repeats: int, sync: bool) -> float:
    fn()
    out = []
    for _ in range(repeats):
        if sync:
            torch.cuda.synchronize()
        t = timeit.timeit(fn, number=n)
        if sync:
            torch.cuda.synchronize()
        out.append(t / n * 1e6)
    return statistics.median(out)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    from graphtune import compiled

    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    kernel = graphtune.autotune([triton.Config({"BLOCK": b}, num_warps=4) for b in (256, 1024)], key=["B"],
                                name="bench_compile_axpy")(_bench_axpy_kernel)
    n_el = 4096
    x, y, out = (torch.randn(n_el, device=dev) for _ in range(3))
    layout = repr(((("r", 0), ("r", 1), ("m", 0), ("i", 0), ("i", 1)), (),
                   ((("BLOCK", 256),), (("BLOCK", 1024),))))
    op_args = ("bench_compile_axpy", layout, [out], [x, y], [n_el, 1], [], [16, 1, 1, 4, 1, 1])
    rows: list[tuple[str, float]] = []

    real_run = kernel.run
    kernel.run = lambda *args, grid, **kw: None     # the op layer alone
    try:
        rows.append(("op layer, run stubbed", _time(lambda: torch.ops.graphtune.launch.default(*op_args), a.n,
                                                     a.repeats, False)))
        @torch.library.custom_op("graphtune_bench::launch", mutates_args=("tensors",))
        def _alt(kernel_name: str, layout: str, tensors: list[torch.Tensor], inputs: list[torch.Tensor],
                 ints: Sequence[int], floats: Sequence[float], grids: Sequence[int]) -> None:
            compiled._launch_impl(kernel_name, layout, tensors, inputs, ints, floats, grids)
        rows.append(("custom_op, same schema", _time(lambda: _alt(*op_args), a.n, a.repeats, False)))
    finally:
        kernel.run = real_run

    if cuda:
        grid = lambda m: (triton.cdiv(n_el, m["BLOCK"]),)   # noqa: E731

        def step(x, y, out):
            kernel[grid](x, y, out, n_el, 1)
        step(x, y, out)                      # tunes the key
        rows.append(("eager launch (GPU)", _time(lambda: step(x, y, out), a.n, a.repeats, True)))
        comp = torch.compile(step, fullgraph=True, backend="aot_eager")
        rows.append(("compiled launch (GPU)", _time(lambda: comp(x, y, out), a.n, a.repeats, True)))

    print(f"{'case':<26} {'us/call':>9}")
    for name, us in rows:
        print(f"{name:<26} {us:9.2f}")
    path = write_result(f"compile_launch_{'gpu' if cuda else 'cpu'}",
                        {"n": a.n, "repeats": a.repeats, "rows": [{"case": c, "us_per_call": u} for c, u in rows]},
                        a.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
