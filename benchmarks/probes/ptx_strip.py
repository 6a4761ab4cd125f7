"""What the warpgroup barriers that triton 3.6 puts before mbarrier operations cost the bf16 ping-pong kernel: the same
kernel with those ``bar.sync`` lines taken out of its PTX (through triton's ``ir_override`` launch option), checked
against the fp32 reference and timed beside the kernel as compiled, FlashMLA in the same run.

Triton 3.6's shared-memory barrier analysis sees an mbarrier ``expect`` on one element of a multi-element mbarrier
allocation followed by a ``wait`` on another as a write and a read of the same memory and puts a barrier of the
warpgroup before the wait (tests/cpu/test_gluon_mbarrier_barriers.py; 12 of the ping-pong kernel's 137 ``bar.sync``
sit right before a wait, 7 before an ``expect``). An mbarrier wait is per thread and needs none; before an ``expect``
(a buffer re-armed) every thread of the warpgroup has long passed the buffer's previous wait, since the wgmma that read
the buffer, which every warp of the warpgroup issued after its wait, has retired. This probe measures the upper bound
of what removing them (by keeping each mbarrier in an allocation of its own) would give, before that rework is written:

    PYTHONPATH=src python benchmarks/probes/ptx_strip.py --batches 1,8,32,64 --out benchmarks/results/ptx_strip.json

``--before wait`` (default) strips the barriers right before a wait, ``wait,expect`` also those before an expect,
``wait,expect,copy`` also those before a TMA copy (see :func:`strip`).
Prints a line per cell and a table last; JSON with the GPU, versions, commit and the count of lines taken out. Without a
Hopper GPU it says so and exits 2.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_mla_decode import (comma_list, flashmla_call, git_commit, graph_time_ms, import_flashmla,  # noqa: E402
                              rel_err)

SM_SCALE = 1.0 / math.sqrt(576)
TOL = {"bf16": 1e-2, "fp8": 2e-3}      # (bf16: the output's rounding; fp8: the bound)
_BAR = re.compile(r"^\s*bar\.sync\s+\d+,\s*128;\s*$")
_SKIP = re.compile(r"^\s*(\.loc\b|//|\{|\.reg\b|$)")


def strip(ptx: str, before: tuple[str, ...] = ("wait", )) -> tuple[str, int]:
    """``ptx`` without the ``bar.sync N, 128`` lines whose next instruction (past ``.loc`` lines, comments and an
    inline-asm block's opening) is an mbarrier wait (``wait``) or an mbarrier expect (``expect``); and how many it took
    out; ``copy``: also those right before a TMA copy (through its ``elect.sync``), which order the warpgroup's own
    generic reads of the buffer before the copy overwrites it: safe to drop only where the warpgroup reads no buffer
    generically between its copies (the bf16 ping-pong kernel but for a request's last tile, zeroed behind a barrier
    of its own; not T8, which widens its tiles in place)."""
    lines = ptx.splitlines()
    out, taken = [], 0
    for i, line in enumerate(lines):
        if _BAR.match(line):
            j = i + 1
            while j < len(lines) and _SKIP.match(lines[j]):
                j += 1
            nxt = " ".join(lines[j:j + 3])
            if ("wait" in before and "mbarrier.try_wait" in nxt) or (
                    "expect" in before and "mbarrier.arrive.expect_tx" in lines[j]) or (
                    "copy" in before and "elect.sync" in lines[j]
                    and "cp.async.bulk.tensor" in " ".join(lines[j:j + 8])):
                taken += 1
                continue
        out.append(line)
    return "\n".join(out) + ("\n" if ptx.endswith("\n") else ""), taken


# the pinned configs: bf16 H = 128 the space's pick at batch 8-64; fp8 H = 128 T8, the tuned path's kernel at every batch
CONFIGS = {"bf16": dict(BLOCK_N=64, PP=1, RELOAD=1, WG1_FIRST=1), "fp8": dict(BLOCK_N=64, T8=1)}
_KERNEL = {"bf16": "_mla_decode_hopper_pp_kernel", "fp8": "_mla_decode_hopper_pp8_kernel"}


class Override:
    """The public pinned call (``interface._launch(..., path="hopper", config=...)``: T8's query pre-pass, the kernel,
    the reduction) with the split kernel's PTX taken from ``path`` while ``path`` is set (``ir_override``, a compile
    option: the kernel compiled apart from the plain one); ``kernel``: the plain kernel as its last launch returned
    it (``JITFunction.run``'s value)."""

    def __init__(self, fmt: str) -> None:
        from graphtune.kernels.mla_decode import interface_hopper
        self.fmt, self.path, self.kernel = fmt, None, None
        original = interface_hopper._kernel_and_params

        def kernel_and_params(heads, kv_format, consts):
            fn, consts = original(heads, kv_format, consts)
            if fn.__name__ == _KERNEL[self.fmt]:
                self._watch(fn)
                if self.path is not None:
                    consts = {**consts, "ir_override": self.path}
            return fn, consts
        interface_hopper._kernel_and_params = kernel_and_params

    def _watch(self, fn) -> None:
        """Keep the compiled kernel each launch of ``fn`` returns (its PTX is what gets stripped)."""
        if getattr(fn, "_ptx_strip_watched", False):
            return
        run = fn.run

        def watched(*args, **kwargs):
            kernel = run(*args, **kwargs)
            if "ir_override" not in kwargs:
                self.kernel = kernel
            return kernel
        fn.run = watched
        fn._ptx_strip_watched = True

    def call(self, x: dict, plan):
        """A zero-argument decode of ``x`` with a step's ``plan`` (filled by the first call, before any graph)."""
        import triton
        from graphtune.kernels.mla_decode import interface
        config = triton.Config(dict(CONFIGS[self.fmt]))

        def run() -> None:
            interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE, x["kv_scale"],
                              self.fmt, x["out"], False, config=config, path="hopper", plan=plan)
        return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=comma_list(int), default=[1, 8, 32, 64])
    ap.add_argument("--before", type=comma_list(str), default=["wait"],
                    help="the barriers to take out: before a 'wait', an 'expect', a TMA 'copy' (a comma list)")
    ap.add_argument("--format", choices=("bf16", "fp8"), default="bf16",
                    help="bf16: the ping-pong kernel; fp8: T8 (the hi/lo query)")
    ap.add_argument("--sets", type=int, default=6, help="input sets a graph rotates through (beyond the L2)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/ptx_strip.json"))
    args = ap.parse_args(argv)
    bad = sorted(set(args.before) - {"wait", "expect", "copy"})
    if bad or not args.before:
        print(f"ptx_strip: --before {','.join(args.before)}: expected a comma list of wait, expect, copy",
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("ptx_strip: needs a Hopper (sm_90) GPU", file=sys.stderr)
        return 2
    from graphtune.kernels import mla_decode_reference
    from graphtune.kernels.mla_decode import MLADecodePlan, bench
    gpu = torch.cuda.get_device_name()
    fm, why = import_flashmla()
    print(f"{gpu}; torch {torch.__version__}; {args.format} H = 128, {CONFIGS[args.format]}, barriers taken out "
          f"before: {args.before}"
          + ("" if fm else f"; FlashMLA skipped: {why}"), flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="ptx_strip_"))
    over = Override(args.format)
    rows = []
    for batch in args.batches:
        xs = [bench.make_inputs(bench.Problem(batch, 128, 4096, 64, args.format), seed=4100 * batch + i)
              for i in range(args.sets)]
        plans = [MLADecodePlan() for _ in xs]
        row: dict = {"batch": batch}
        calls = [over.call(x, p) for x, p in zip(xs, plans)]
        over.kernel = None
        for c in calls:             # (compiles the kernel, fills each plan)
            c()
        torch.cuda.synchronize()
        if over.kernel is None:
            print(f"B={batch}: no launch of {_KERNEL[args.format]} seen", file=sys.stderr)
            return 1
        stripped, taken = strip(over.kernel.asm["ptx"], tuple(args.before))
        # (named by its content: batches of one specialization share the stripped kernel and its compile)
        path = tmp / f"{hashlib.sha1(stripped.encode()).hexdigest()[:16]}.ptx"
        path.write_text(stripped)
        row["barriers_taken"] = taken
        x = xs[0]
        ref = mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE,
                                   kv_scale=x["kv_scale"], kv_format=args.format).float()
        outs = {}
        for name, override in (("compiled", None), ("stripped", str(path))):
            over.path = override
            x["out"].fill_(float("nan"))
            calls[0]()
            torch.cuda.synchronize()
            outs[name] = x["out"].clone()
            err = rel_err(x["out"].float(), ref)
            row[f"{name}_err"] = err
            if not math.isfinite(err) or err > TOL[args.format]:
                print(f"B={batch} {name}: relative error {err:.3e} (bound {TOL[args.format]}): not timed", flush=True)
            else:
                row[f"{name}_ms"] = graph_time_ms(calls)
        over.path = None
        # (the same arithmetic in the same order: any difference is a race the removed barriers had prevented)
        row["bitwise_equal"] = bool(torch.equal(outs["compiled"], outs["stripped"]))
        if fm is not None:
            row["flashmla_ms"] = graph_time_ms([flashmla_call(fm, xi, args.format, SM_SCALE)[0] for xi in xs])
        rows.append(row)
        print(json.dumps(row), flush=True)
        del xs, x, calls
        torch.cuda.empty_cache()
    print(f"\n{gpu}; {args.format} H = 128, 4096 tokens, page size 64, a plan; ms under graph replay (the decode: "
          "T8's pre-pass, the kernel, the reduction)")
    print("| B | FlashMLA | compiled | barriers taken out | stripped | change | bitwise equal |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        a, b = r.get("compiled_ms"), r.get("stripped_ms")
        change = f"{(b / a - 1) * 100:+.1f}%" if a and b else "-"
        print(f"| {r['batch']} | {r.get('flashmla_ms', float('nan')):.4f} | {a or float('nan'):.4f} | "
              f"{r['barriers_taken']} | {b or float('nan'):.4f} | {change} | {r['bitwise_equal']} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "commit": git_commit(),
                                    "argv": sys.argv[1:] if argv is None else argv, "config": CONFIGS[args.format],
                                    "before": args.before, "rows": rows}, indent=1))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
