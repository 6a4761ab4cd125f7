"""What straight-line code costs the first time a program runs it: clock stamps around an unrolled block of N
dependent FFMAs, run twice by a loop that stays a loop (first pass cold, second warm), as one dependent chain or eight.

Why: session 19 found the fp8 ping-pong kernel's query conversion, which runs once a segment, taking 10.6-11.7 us on
the H200 as 1,526 unrolled instructions and 5.0 us as 617 in loops, for ~1 us of issue: if code run once cost by its
static size (instruction fetch), that would also price every kernel's prologue, epilogue and first tile. This probe
measures it apart from any MLA kernel: cycles per FFMA, first pass against second, for several N, with one program
and with one program per SM (all SMs fetching the same code at once, as a split kernel's programs do). On the H200
(session 19, runs 8-9): no first-pass penalty; 131 KB of code streams at ~2.5 cycles an instruction. Instruction
fetch does not explain the conversion's time.
Timed inside the kernel (SM clock), so the launch does not count. Prints a table and writes JSON (GPU, versions,
commit) under benchmarks/results/ unless ``--out`` says otherwise. Without a GPU it says so and exits 2.

    PYTHONPATH=src python benchmarks/probes/cold_code.py --sizes 256,1024,4096 --out /tmp/cold_code.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_mla_decode import git_commit  # noqa: E402

@triton.jit
def _clock(x):
    """The SM's clock, read once ``x`` is computed (its input), so the FFMA chain cannot move across it."""
    return tl.inline_asm_elementwise("{ .reg .f32 t; mov.b32 t, $1; mov.u64 $0, %clock64; }", "=l,r", [x],
                                     dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _cold_code_kernel(a_ptr, out_ptr, stamps_ptr, N: tl.constexpr, WIDTH: tl.constexpr):
    """Each statement of the block is WIDTH / 128 independent FFMAs a thread (4 warps): 1 a dependent chain
    (4 cycles each, below any fetch limit), 8 enough independent ones to issue one a cycle."""
    pid = tl.program_id(0)
    offs = pid * WIDTH + tl.arange(0, WIDTH)
    x = tl.load(a_ptr + offs)
    a = x * 0.5 + 0.25
    b = x * 0.125
    for r in tl.range(0, 2, loop_unroll_factor=1):
        t0 = _clock(x)
        x = x + (t0 & 1).to(tl.float32) * 0.0          # the chain starts after the stamp
        for _k in tl.static_range(N):
            x = x * a + b
        t1 = _clock(x)
        first = tl.arange(0, WIDTH) == 0
        tl.store(stamps_ptr + pid * 4 + 2 * r + tl.zeros([WIDTH], tl.int32), t0, mask=first)
        tl.store(stamps_ptr + pid * 4 + 2 * r + 1 + tl.zeros([WIDTH], tl.int32), t1, mask=first)
    tl.store(out_ptr + offs, x)


def measure(n: int, programs: int, width: int) -> dict:
    a = torch.rand(programs * width, device="cuda")
    out = torch.empty_like(a)
    stamps = torch.zeros(programs, 4, dtype=torch.int64, device="cuda")
    for _ in range(3):          # compile, then runs whose stamps are read (each launch's first pass is its own)
        _cold_code_kernel[(programs,)](a, out, stamps, N=n, WIDTH=width, num_warps=4)
    torch.cuda.synchronize()
    s = stamps.cpu()
    cold = (s[:, 1] - s[:, 0]).double()
    warm = (s[:, 3] - s[:, 2]).double()
    ffmas = n * width // 128         # FFMA instructions a thread runs in one pass
    return {"n": n, "programs": programs, "width": width, "ffmas": ffmas, "cold_cycles": float(cold.median()),
            "warm_cycles": float(warm.median()), "cold_per_ffma": float(cold.median()) / ffmas,
            "warm_per_ffma": float(warm.median()) / ffmas}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,1024,4096", help="comma list of FFMAs per block")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "results" / "cold_code.json")
    args = ap.parse_args(argv)
    try:
        sizes = [int(v) for v in args.sizes.split(",") if v]
    except ValueError:
        print(f"cold_code: --sizes {args.sizes!r} is not a comma list of integers", file=sys.stderr)
        return 2
    bad = [n for n in sizes if n <= 0]
    if bad:
        print(f"cold_code: --sizes {bad}: each must be a positive number of FFMAs", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("cold_code: needs a CUDA GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{gpu}; torch {torch.__version__}, triton {triton.__version__}", flush=True)
    rows = [measure(n, programs, width) for width in (128, 1024) for n in sizes for programs in (1, sms)]
    print("| FFMAs a thread | independent chains | programs | first pass, cycles | second pass | first / FFMA | "
          "second / FFMA |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['ffmas']} | {r['width'] // 128} | {r['programs']} | "
              f"{r['cold_cycles']:.0f} | {r['warm_cycles']:.0f} | {r['cold_per_ffma']:.1f} | {r['warm_per_ffma']:.1f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "triton": triton.__version__,
                                    "commit": git_commit(), "rows": rows}, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
