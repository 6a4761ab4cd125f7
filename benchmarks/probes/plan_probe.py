"""What a per-step plan of the work split is worth to the second fp8 tokens-on-M kernel (fp8 cache, H = 16).

Each split kernel call computes its programs' tile ranges from ``seq_lens`` (``kernel_hopper._split_start``) and then
its first segment's request and page ids, two or three dependent round trips before the first tile's copy is issued,
while the memory idles. ``PLAN = 1`` reads the same values from a plan made beforehand by one small launch
(``interface_hopper.v2_plan``; a decode step would make it once for all its layers, as FlashMLA's metadata is). This
probe, per batch (uniform 4096-token requests and ragged lengths 1..8191, page size 64) and per config (two and three
buffers), checks the PLAN decode against ``mla_decode_reference`` (output NaN-poisoned first), then times the split
kernel with its reduction under CUDA graph replay without and with PLAN (the plan made outside the graph, as the
benchmark makes FlashMLA's metadata), and FlashMLA in the same run when it imports.

    PYTHONPATH=src python benchmarks/probes/plan_probe.py --out benchmarks/results/plan_probe.json

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

from bench_mla_decode import (comma_list, flashmla_call, git_commit, graph_time_ms, import_flashmla,  # noqa: E402
                              ragged_inputs, rel_err)

from graphtune.kernels import mla_decode_reference  # noqa: E402
from graphtune.kernels.mla_decode import bench, interface_hopper, reduction  # noqa: E402

SM_SCALE = 1.0 / math.sqrt(576)
CONFIGS = {"b2": dict(V2=1, NUM_BUF=2, PREFETCH=1, FAST_MAX=1), "b3": dict(V2=1, NUM_BUF=3, PREFETCH=1, FAST_MAX=1)}


def decode_call(x: dict, config: dict, plan: bool, sms: int):
    """A zero-argument call of the pinned split kernel and its reduction on ``x`` (``plan``: with PLAN, its plan made
    here, outside whatever times the call)."""
    heads = x["q"].shape[1]
    args, grid, consts, (lse, part_o, part_lse, seg) = interface_hopper.hopper_call(
        x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE, x["kv_scale"], "fp8", x["out"], False,
        sms=sms, config={**config, "PLAN": int(plan)})
    fn, consts = interface_hopper._kernel_and_params(heads, "fp8", consts)
    if plan:
        consts = {**consts, "plan_ptr": interface_hopper.v2_plan(x["seq_lens"], x["page_table"],
                                                                 x["kv_cache"].shape[1], grid[1])}
    batch = x["q"].shape[0]

    def call() -> None:
        fn[grid](*args, **consts)
        reduction.merge(batch, heads, seg, part_o, part_lse, x["out"], lse, x["seq_lens"], False,
                        pdl=batch >= reduction.PDL_MIN_BATCH)
    return call


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=comma_list(int), default=[1, 8, 32, 64, 128])
    ap.add_argument("--sets", type=int, default=6, help="input sets a graph rotates through (beyond the L2)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/plan_probe.json"))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("plan_probe: needs a Hopper (sm_90) GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{gpu}; torch {torch.__version__}", flush=True)
    fm, why = import_flashmla()
    if fm is None:
        print(f"FlashMLA column skipped: {why}", flush=True)
    rows = []
    for lengths in ("uniform", "ragged"):
        for batch in args.batches:
            if lengths == "uniform":
                xs = [bench.make_inputs(bench.Problem(batch, 16, 4096, 64, "fp8"), seed=1000 * batch + i)
                      for i in range(args.sets)]
            else:
                xs = [ragged_inputs(batch, 16, 4096, "fp8", seed=39179 + i) for i in range(args.sets)]
            x = xs[0]
            ref = mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE,
                                       kv_scale=x["kv_scale"], kv_format="fp8").float()
            row = {"lengths": lengths, "batch": batch}
            for name, cfg in CONFIGS.items():
                for plan in (False, True):
                    key = f"{name}{'_plan' if plan else ''}"
                    x["out"].fill_(float("nan"))
                    decode_call(x, cfg, plan, sms)()
                    torch.cuda.synchronize()
                    err = rel_err(x["out"].float(), ref)
                    row[f"{key}_err"] = err
                    if not math.isfinite(err) or err > 2e-3:
                        print(f"{lengths} B={batch} {key}: relative error {err:.3e} (bound 2e-3): not timed",
                              flush=True)
                        continue
                    row[f"{key}_ms"] = graph_time_ms([decode_call(xi, cfg, plan, sms) for xi in xs])
            if fm is not None:
                row["flashmla_ms"] = graph_time_ms([flashmla_call(fm, xi, "fp8", SM_SCALE)[0] for xi in xs])
            rows.append(row)
            print(json.dumps(row), flush=True)
            del xs, x
            torch.cuda.empty_cache()
    print(f"\n{gpu}; ms under graph replay (split kernel + reduction), change = with PLAN against without")
    print("| lengths | B | FlashMLA | b2 | b2 PLAN | change | b3 | b3 PLAN | change | best PLAN / FlashMLA |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        def ms(k: str) -> str:
            return f"{r[k]:.4f}" if k in r else "-"

        def change(name: str) -> str:
            a, b = r.get(f"{name}_ms"), r.get(f"{name}_plan_ms")
            return f"{(b / a - 1) * 100:+.1f}%" if a and b else "-"
        best = min([r[k] for k in ("b2_plan_ms", "b3_plan_ms") if k in r], default=None)
        vs = f"{best / r['flashmla_ms']:.2f}" if best and "flashmla_ms" in r else "-"
        print(f"| {r['lengths']} | {r['batch']} | {ms('flashmla_ms')} | {ms('b2_ms')} | {ms('b2_plan_ms')} | "
              f"{change('b2')} | {ms('b3_ms')} | {ms('b3_plan_ms')} | {change('b3')} | {vs} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "commit": git_commit(), "rows": rows},
                                   indent=1))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
