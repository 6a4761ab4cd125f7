"""What a decode step's plan of the work split (``mla_decode(..., plan=MLADecodePlan())``) is worth on the Hopper
path: an fp8 cache with H = 16 (the second tokens-on-M kernel) by default, ``--format bf16 --heads 128`` the bf16
ping-pong kernel, ``--heads 128`` (fp8) T8 from batch 16 (the kernels that read a plan; a batch whose tuned kernel
does not read it times the same kernel twice).

Each split kernel call computes its programs' tile ranges from ``seq_lens`` (``kernel_hopper._split_start``) and then
its first segment's request and page ids, two or three dependent round trips before the first tile's copy is issued,
while the memory idles. With a plan (plan.py) those values are made by one small launch the first time a call of the
step needs them. Per batch (uniform 4096-token requests and ragged lengths 1..8191, page size 64) this checks the
public call with a plan against ``mla_decode_reference`` (output NaN-poisoned first), then times under CUDA graph
replay, beside FlashMLA in the same run: the public call tuned per bucket (as shipped) without a plan; with a plan made
before the graph (filled by the warm call outside it: what FlashMLA's metadata, made outside its timed call, is);
with a plan made in every call (its launch inside each timed call: a step of one layer, the most a step can pay);
and (fp8, H = 16) pinned configs of two and three buffers without and with a plan (made before the graph).

    PYTHONPATH=src python benchmarks/probes/plan_probe.py --out benchmarks/results/plan_probe.json

Prints a line per cell and a table last; JSON with the GPU, versions and commit. Without a Hopper GPU it says so and
exits 2.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_mla_decode import (comma_list, flashmla_call, git_commit, graph_time_ms, import_flashmla,  # noqa: E402
                              ragged_inputs, rel_err)

import triton  # noqa: E402

from graphtune.kernels import mla_decode_reference  # noqa: E402
from graphtune.kernels.mla_decode import MLADecodePlan, bench, interface, interface_hopper  # noqa: E402
from graphtune.kernels.mla_decode import plan as plan_mod  # noqa: E402

SM_SCALE = 1.0 / math.sqrt(576)
PINNED = {"b2": dict(V2=1, NUM_BUF=2, PREFETCH=1, FAST_MAX=1), "b3": dict(V2=1, NUM_BUF=3, PREFETCH=1, FAST_MAX=1)}
WAYS = ["tuned", "tuned_plan", "tuned_plan_per_call", "b2", "b2_plan", "b3", "b3_plan"]


def _config_overlay(text: str) -> dict[str, int]:
    """``KEY=VALUE,...`` as a dict of int config values (``--b3``)."""
    try:
        return {k.strip(): int(v) for k, v in (item.split("=") for item in text.split(","))}
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=INT[,KEY=INT...]") from None


def decode_call(x: dict, way: str, fmt: str = "fp8", query_precision: str | None = None):
    """A zero-argument call of the public path on ``x``: ``way`` as in ``WAYS`` (a plan made once here, filled by the
    first call, or one per call); ``query_precision`` as the call's."""
    pinned = PINNED.get(way.split("_")[0])
    config = triton.Config(dict(pinned)) if pinned else None
    path = "hopper" if pinned else "auto"
    plan = MLADecodePlan() if way.endswith("_plan") else None

    def call() -> None:
        interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE, x["kv_scale"], fmt,
                          x["out"], False, config=config, path=path, query_precision=query_precision,
                          plan=MLADecodePlan() if way.endswith("per_call") else plan)
    return call


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=comma_list(int), default=[1, 8, 32, 64, 128])
    ap.add_argument("--sets", type=int, default=6, help="input sets a graph rotates through (beyond the L2)")
    ap.add_argument("--format", choices=("fp8", "bf16"), default="fp8")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--query-precision", choices=("bf16", "e4m3"), default=None,
                    help="the call's query_precision (fp8: 'e4m3', the opt-in of FlashMLA's accuracy class, checked "
                         "against 1e-2 instead of 2e-3)")
    ap.add_argument("--third-min-batch", type=int, default=None,
                    help="run the class's third kernel (fp8, H a multiple of 64: T8) from this batch up instead of "
                         "interface_hopper.T8_MIN_BATCH (a probe of where it should start)")
    ap.add_argument("--plan-bf16-seg-cost", type=int, default=None,
                    help="the price of a request's start in a plan's split for the bf16 kernels "
                         "(plan.BF16_PLAN_SEG_COST; their own split has none)")
    ap.add_argument("--t8-split-max", type=int, default=None,
                    help="SPLIT_MAX on every config of T8's space (fp8, H a multiple of 64: at most that many programs "
                         "a request, e.g. 32: a pair of tiles a program at batch 1 and 2 instead of ~one)")
    ap.add_argument("--b2", type=_config_overlay, default=None,
                    help="the b2 columns' pinned config as KEY=VALUE,... (default: fp8 H = 16's two-buffer one), which "
                         "also times the pinned columns for any format and heads, e.g. --format bf16 --heads 128 --b2 "
                         "PP=1,RELOAD=1,WG1_FIRST=1 --b3 QWAIT=1")
    ap.add_argument("--b3", type=_config_overlay, default=None,
                    help="the b3 columns' pinned config instead of three buffers, as KEY=VALUE,... over the b2 one, "
                         "e.g. PROGRAMS_PER_SM=4: a grid of two waves of two programs an SM")
    ap.add_argument("--tol", type=float, default=None,
                    help="the relative error a way may have and still be timed (default 2e-3 for fp8, 1e-2 for bf16 "
                         "and the e4m3 query; T8's P8, FlashMLA's accuracy class, needs ~4e-2)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/plan_probe.json"))
    args = ap.parse_args(argv)
    if args.b2 is not None:
        PINNED["b2"] = dict(args.b2)
    if args.b3 is not None:
        PINNED["b3"] = {**PINNED["b2"], **args.b3}
    if args.plan_bf16_seg_cost is not None:
        plan_mod.BF16_PLAN_SEG_COST = args.plan_bf16_seg_cost
    if args.t8_split_max is not None:
        key = (True, "fp8")
        third = interface_hopper.THIRD[key]
        interface_hopper.THIRD[key] = dataclasses.replace(
            third, space=[{**c, "SPLIT_MAX": args.t8_split_max} for c in third.space])
    if args.third_min_batch is not None:
        key = (True, "fp8")
        interface_hopper.THIRD[key] = dataclasses.replace(interface_hopper.THIRD[key],
                                                          min_batch=args.third_min_batch)
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("plan_probe: needs a Hopper (sm_90) GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    print(f"{gpu}; torch {torch.__version__}; {args.format} H = {args.heads}, query_precision "
          f"{args.query_precision or 'default'}, the third kernel from batch "
          f"{interface_hopper.THIRD[(True, 'fp8')].min_batch}, a bf16 plan's start price {plan_mod.BF16_PLAN_SEG_COST}, "
          f"T8's space {interface_hopper.THIRD[(True, 'fp8')].space}, b2 {PINNED['b2']}, b3 {PINNED['b3']}", flush=True)
    fm, why = import_flashmla()
    if fm is None:
        print(f"FlashMLA column skipped: {why}", flush=True)
    fmt = args.format
    # (the pinned configs are the fp8 tokens-on-M kernel's; bf16 is checked against the bf16 tests' bound)
    ways = WAYS if (fmt, args.heads) == ("fp8", 16) or args.b2 is not None else WAYS[:3]
    tol = args.tol or (2e-3 if fmt == "fp8" and args.query_precision != "e4m3" else 1e-2)
    rows = []
    for lengths in ("uniform", "ragged"):
        for batch in args.batches:
            if lengths == "uniform":
                xs = [bench.make_inputs(bench.Problem(batch, args.heads, 4096, 64, fmt), seed=1000 * batch + i)
                      for i in range(args.sets)]
            else:
                xs = [ragged_inputs(batch, args.heads, 4096, fmt, seed=39179 + i) for i in range(args.sets)]
            x = xs[0]
            ref = mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE,
                                       kv_scale=x["kv_scale"], kv_format=fmt).float()
            row = {"lengths": lengths, "batch": batch}
            for way in ways:
                x["out"].fill_(float("nan"))
                decode_call(x, way, fmt, args.query_precision)()
                torch.cuda.synchronize()
                err = rel_err(x["out"].float(), ref)
                row[f"{way}_err"] = err
                if not math.isfinite(err) or err > tol:
                    print(f"{lengths} B={batch} {way}: relative error {err:.3e} (bound {tol}): not timed", flush=True)
                    continue
                row[f"{way}_ms"] = graph_time_ms([decode_call(xi, way, fmt, args.query_precision) for xi in xs])
            if fm is not None:
                row["flashmla_ms"] = graph_time_ms([flashmla_call(fm, xi, fmt, SM_SCALE)[0] for xi in xs])
            rows.append(row)
            print(json.dumps(row), flush=True)
            del xs, x
            torch.cuda.empty_cache()
    print(f"\n{gpu}; ms under graph replay (split kernel + reduction; the plan made before the graph unless said), "
          "change = against the same way without a plan")
    print("| lengths | B | FlashMLA | tuned | tuned, plan | change | plan in every call | change | b2 | b2, plan | "
          "change | b3 | b3, plan | change | tuned, plan / FlashMLA |")
    print("|" + " --- |" * 15)
    for r in rows:
        def ms(k: str) -> str:
            return f"{r[k + '_ms']:.4f}" if k + "_ms" in r else "-"

        def change(base: str, way: str) -> str:
            a, b = r.get(f"{base}_ms"), r.get(f"{way}_ms")
            return f"{(b / a - 1) * 100:+.1f}%" if a and b else "-"
        vs = (f"{r['tuned_plan_ms'] / r['flashmla_ms']:.2f}" if "tuned_plan_ms" in r and "flashmla_ms" in r
              else "-")
        print(f"| {r['lengths']} | {r['batch']} | {ms('flashmla')} | {ms('tuned')} | {ms('tuned_plan')} | "
              f"{change('tuned', 'tuned_plan')} | {ms('tuned_plan_per_call')} | {change('tuned', 'tuned_plan_per_call')}"
              f" | {ms('b2')} | {ms('b2_plan')} | {change('b2', 'b2_plan')} | {ms('b3')} | {ms('b3_plan')} | "
              f"{change('b3', 'b3_plan')} | {vs} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "commit": git_commit(),
                                    "argv": sys.argv[1:] if argv is None else argv, "rows": rows}, indent=1))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
