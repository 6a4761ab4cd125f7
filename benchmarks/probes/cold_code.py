"""What straight-line code costs the first time a program runs it: clock stamps around an unrolled block of N
dependent FFMAs, run twice by a loop that stays a loop (first pass cold, second warm), as one dependent chain or eight.

Why: session 19 found the fp8 ping-pong kernel's query conversion, which runs once a segment, taking 10.6-11.7 us on
the H200 as 1,526 unrolled instructions and 5.0 us as 617 in loops, for ~1 us of issue: if code run once cost by its
static size (instruction fetch), that would also price every kernel's prologue, epilogue and first tile. This probe
measures it apart from any MLA kernel: cycles per FFMA, first pass against second, for several N, with one program
and with one program per SM (all SMs fetching the same code at once, as a split kernel's programs do). On the H200
(session 19, runs 8-9, this probe's first form): no first-pass penalty, and 131 KB of code streamed at ~2.5 cycles an
instruction; but each measured launch followed a launch of the same binary, whose code may have stayed in the SM's
instruction caches, while the timeline probe's stamped run follows other binaries. After another 256 KB binary
(session 20, run 1): 8,192 FFMAs in 8 chains took 4.0 cycles an instruction the first time against 2.7 the second
(~1.3 cycles of fetch an instruction), none for blocks of 256-1,024 one-chain FFMAs: too little to explain the
conversion. Session 20, run 5 then found the conversion as slow with half its work (split over both warpgroups), so
``--load-mb`` times the block once more while a copy runs on another stream: whether fetches that miss wait behind
a busy memory system (the decode's SMs are streaming tiles while a segment's prologue and end run).
Timed inside the kernel (SM clock), so the launch does not count. Prints a table and writes JSON (GPU, versions,
commit) under benchmarks/results/ unless ``--out`` says otherwise. Without a GPU it says so and exits 2.

    PYTHONPATH=src python benchmarks/probes/cold_code.py --sizes 256,1024,4096 --load-mb 4096 --out /tmp/cold_code.json
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
def _cold_code_kernel(a_ptr, out_ptr, stamps_ptr, N: tl.constexpr, WIDTH: tl.constexpr, SALT: tl.constexpr = 0):
    """Each statement of the block is WIDTH / 128 independent FFMAs a thread (4 warps): 1 a dependent chain
    (4 cycles each, below any fetch limit), 8 enough independent ones to issue one a cycle. ``SALT`` changes the
    constants, so each value is another binary: the evictor that runs before a measured launch."""
    pid = tl.program_id(0)
    offs = pid * WIDTH + tl.arange(0, WIDTH)
    x = tl.load(a_ptr + offs)
    a = x * (0.5 + SALT * 0.001) + 0.25
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


_EVICT_N = 2048       # the evictor: 2,048 statements of 8 FFMAs, 16,384 instructions (256 KB of code)


def measure(n: int, programs: int, width: int, load_mb: int = 0) -> dict:
    """The block's first and second pass in a launch that follows the same binary (``after_self``: its code may
    still sit in the SM's instruction caches) and in one that follows another binary of 256 KB (``after_other``:
    as a split kernel whose code other kernels' code displaced between two of its launches); with ``load_mb``, also
    after the other binary while a copy of that many MB runs on another stream (``under_load``: the memory system
    as busy as under a decode's tile stream, when instruction fetches that miss queue behind it)."""
    a = torch.rand(programs * max(width, 1024), device="cuda")
    out = torch.empty_like(a)
    stamps = torch.zeros(programs, 4, dtype=torch.int64, device="cuda")

    def run(salt: int, n_: int, width_: int) -> None:
        _cold_code_kernel[(programs,)](a, out, stamps, N=n_, WIDTH=width_, SALT=salt, num_warps=4)

    def passes() -> tuple[float, float]:
        torch.cuda.synchronize()
        s = stamps.cpu()
        return float((s[:, 1] - s[:, 0]).double().median()), float((s[:, 3] - s[:, 2]).double().median())

    for salt, n_, w_ in ((0, n, width), (1, _EVICT_N, 1024)):      # compile both
        run(salt, n_, w_)
    run(0, n, width)
    run(0, n, width)
    self_first, self_second = passes()
    run(1, _EVICT_N, 1024)
    run(0, n, width)
    other_first, other_second = passes()
    ffmas = n * width // 128         # FFMA instructions a thread runs in one pass
    row = {"n": n, "programs": programs, "width": width, "ffmas": ffmas,
           "after_self": {"first_cycles": self_first, "second_cycles": self_second},
           "after_other": {"first_cycles": other_first, "second_cycles": other_second},
           "after_other_first_per_ffma": other_first / ffmas, "second_per_ffma": other_second / ffmas}
    if load_mb:
        src = torch.empty(load_mb << 20, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        side = torch.cuda.Stream()
        run(1, _EVICT_N, 1024)
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            dst.copy_(src)              # (milliseconds of DRAM traffic, enqueued first)
        run(0, n, width)
        load_first, load_second = passes()
        row["under_load"] = {"first_cycles": load_first, "second_cycles": load_second, "load_mb": load_mb}
        row["under_load_first_per_ffma"] = load_first / ffmas
        del src, dst
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,1024,4096", help="comma list of FFMAs per block")
    ap.add_argument("--load-mb", type=int, default=0,
                    help="also time each block while a copy of this many MB runs on another stream (0: not)")
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
    if args.load_mb < 0:
        print(f"cold_code: --load-mb {args.load_mb}: must be 0 (off) or a positive size", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("cold_code: needs a CUDA GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{gpu}; torch {torch.__version__}, triton {triton.__version__}", flush=True)
    rows = [measure(n, programs, width, args.load_mb) for width in (128, 1024) for n in sizes
            for programs in (1, sms)]
    print("| FFMAs a thread | independent chains | programs | after itself: first / second pass, cycles | after "
          "another binary: first / second | first / FFMA after another | second / FFMA |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        s_, o_ = r["after_self"], r["after_other"]
        print(f"| {r['ffmas']} | {r['width'] // 128} | {r['programs']} | {s_['first_cycles']:.0f} / "
              f"{s_['second_cycles']:.0f} | {o_['first_cycles']:.0f} / {o_['second_cycles']:.0f} | "
              f"{r['after_other_first_per_ffma']:.1f} | {r['second_per_ffma']:.1f} |"
              + (f" under a {r['under_load']['load_mb']} MB copy: first / second {r['under_load']['first_cycles']:.0f}"
                 f" / {r['under_load']['second_cycles']:.0f}, first / FFMA {r['under_load_first_per_ffma']:.1f}"
                 if "under_load" in r else ""))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "triton": triton.__version__,
                                    "commit": git_commit(), "rows": rows}, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
