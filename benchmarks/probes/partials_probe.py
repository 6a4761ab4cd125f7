"""What the dtype of the Hopper split kernels' partial outputs costs and buys with a bf16 cache (a probe).

The split kernels store each (program, request) segment's normalised partial output (``reduction.partial_layout``):
at H = 128, 64 heads x 512 dims a segment, written by the split kernel and read back by the reduction. A bf16 cache's
values are bounded only by its own largest one, so fp16 partials are stored scaled per half-row (times 2^-k, k beside
the LSE: shipped since session 37 for the ping-pong kernel up to ``interface_hopper.PP_PART16_MAX_BATCH`` requests,
fp32 elsewhere); fp32, fp16 unscaled (right only while the values stay within fp16's range, as the probe's random
ones do: what the scaling costs) and fp16 scaled are forced for every kernel here, one way at a time. This times the public
call (tuned per bucket, given a step's plan made before the graph, FlashMLA beside) each way (the layout swapped in
``reduction.partial_layout`` for the run: every kernel stores and the reduction reads as the layout says), and records
each way's relative error against ``mla_decode_reference`` on the timed inputs (NaN-poisoned output first), uniform
4096-token requests and ragged lengths 1..8191.

    PYTHONPATH=src python benchmarks/probes/partials_probe.py --heads 128 --batches 8,32,64

Prints a line per cell and a table last; JSON with the GPU, versions and commit. Without a Hopper GPU it says so and
exits 2.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_mla_decode import (comma_list, flashmla_call, git_commit, graph_time_ms, import_flashmla,  # noqa: E402
                              ragged_inputs, rel_err)
from plan_probe import SM_SCALE, decode_call  # noqa: E402

from graphtune.kernels import mla_decode_reference  # noqa: E402
from graphtune.kernels.mla_decode import bench, reduction  # noqa: E402

# way: (dtype, scaled) of a bf16 cache's partials; "scaled": as shipped
WAYS = {"fp32": (torch.float32, False), "fp16": (torch.float16, False), "scaled": (torch.float16, True),
        "scaled-rows": (torch.float16, True)}     # (scaled, merged by whole rows: reduction.SCALED_HALF_ROWS off)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=comma_list(int), default=[8, 32, 64])
    ap.add_argument("--heads", type=int, default=128)
    ap.add_argument("--sets", type=int, default=6, help="input sets a graph rotates through (beyond the L2)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/partials_probe.json"))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("partials_probe: needs a Hopper (sm_90) GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    print(f"{gpu}; torch {torch.__version__}; bf16 H = {args.heads}", flush=True)
    fm, why = import_flashmla()
    if fm is None:
        print(f"FlashMLA column skipped: {why}", flush=True)
    shipped = reduction.partial_layout
    shipped_rows = reduction.SCALED_HALF_ROWS
    rows = []
    try:
        for lengths in ("uniform", "ragged"):
            for batch in args.batches:
                if lengths == "uniform":
                    xs = [bench.make_inputs(bench.Problem(batch, args.heads, 4096, 64, "bf16"), seed=1000 * batch + i)
                          for i in range(args.sets)]
                else:
                    xs = [ragged_inputs(batch, args.heads, 4096, "bf16", seed=39179 + i) for i in range(args.sets)]
                x = xs[0]
                ref = mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE,
                                           kv_format="bf16").float()
                row = {"lengths": lengths, "batch": batch}
                for way, layout in WAYS.items():
                    reduction.partial_layout = (lambda kv_format, kv_scale, scaled=False, d=layout:
                                                d if kv_format == "bf16" else shipped(kv_format, kv_scale, scaled))
                    reduction.SCALED_HALF_ROWS = way != "scaled-rows"
                    x["out"].fill_(float("nan"))
                    decode_call(x, "tuned_plan", "bf16")()
                    torch.cuda.synchronize()
                    err = rel_err(x["out"].float(), ref)
                    row[f"{way}_err"] = err
                    if not math.isfinite(err) or err > 1e-2:
                        print(f"{lengths} B={batch} {way}: relative error {err:.3e}: not timed", flush=True)
                        continue
                    row[f"{way}_ms"] = graph_time_ms([decode_call(xi, "tuned_plan", "bf16") for xi in xs])
                reduction.partial_layout = shipped
                reduction.SCALED_HALF_ROWS = shipped_rows
                if fm is not None:
                    row["flashmla_ms"] = graph_time_ms([flashmla_call(fm, xi, "bf16", SM_SCALE)[0] for xi in xs])
                    call, get = flashmla_call(fm, x, "bf16", SM_SCALE)
                    call()
                    row["flashmla_err"] = rel_err(get().float(), ref)
                rows.append(row)
                print(json.dumps(row), flush=True)
                del xs, x
                torch.cuda.empty_cache()
    finally:
        reduction.partial_layout = shipped
        reduction.SCALED_HALF_ROWS = shipped_rows
    print(f"\n{gpu}; bf16 H = {args.heads}; ms under graph replay, the public call tuned per bucket with a step's "
          "plan; partials in fp32 / fp16 unscaled / fp16 scaled per half-row, merged by half rows (as shipped) and by "
          "whole rows; relative error against the fp32 reference")
    print("| lengths | B | FlashMLA | fp32 | fp16 | change | scaled | change | scaled-rows | change | scaled / FlashMLA "
          "| errors: FlashMLA, fp32, fp16, scaled, scaled-rows |")
    print("|" + " --- |" * 12)
    for r in rows:
        def ms(k: str) -> str:
            return f"{r[k + '_ms']:.4f}" if k + "_ms" in r else "-"

        def change(way: str) -> str:
            a, b = r.get("fp32_ms"), r.get(f"{way}_ms")
            return f"{(b / a - 1) * 100:+.1f}%" if a and b else "-"
        vs = f"{r['scaled_ms'] / r['flashmla_ms']:.2f}" if "scaled_ms" in r and "flashmla_ms" in r else "-"
        errs = ", ".join(f"{r[k]:.2e}" if k in r else "-"
                         for k in ("flashmla_err", "fp32_err", "fp16_err", "scaled_err", "scaled-rows_err"))
        print(f"| {r['lengths']} | {r['batch']} | {ms('flashmla')} | {ms('fp32')} | {ms('fp16')} | {change('fp16')} | "
              f"{ms('scaled')} | {change('scaled')} | {ms('scaled-rows')} | {change('scaled-rows')} | {vs} | {errs} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "commit": git_commit(),
                                    "argv": sys.argv[1:] if argv is None else argv, "rows": rows}, indent=1))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
