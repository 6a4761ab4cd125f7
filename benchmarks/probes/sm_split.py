"""Whether a split of the work in proportion to each SM's measured speed ends the split kernel sooner (SM_SPLIT).

Session 40's timelines (H100, the second fp8 tokens-on-M kernel at H = 16, batch 32, equal tiles a program) had the
SMs' last exits 26.7-36.4 us apart, and which SMs were slow persisted across runs with other programs on them (the
per-SM last exits of two runs correlated 0.71; SM k and k ^ 1, a TPC's pair, 0.82 within a run): the kernel ends
with SMs that are slow whatever they run. Here the kernel is pinned with ``SM_SPLIT=1`` (a program an SM, taking
its SM's range) and given plans split four ways (fp8, H = 16, page size 64, 4096 tokens a request, per batch):

- ``even``: the shipped pinned config (three buffers, RK64, PT_EARLY) with a plan, programs by program id;
- ``sm_even``: SM_SPLIT with the same even split (ranges dealt by SM id);
- ``sm_uniform``: SM_SPLIT with every SM weighted 1 (a balanced split: 15 or 16 tiles where the even one gives 16
  or none);
- ``sm_weighted``: SM_SPLIT with each SM weighted by its speed, measured here from in-kernel stamps of
  ``sm_uniform`` runs (``STAMPS``: the SM's clock when each tile landed): one over the median period of each SM's
  tile loop, averaged over ``--calib-runs`` runs on other inputs;
- ``sm_aligned_uniform`` / ``sm_aligned``: SM_SPLIT with each request's tiles over programs of its own (no program
  crosses a request, as the even split's at batch 32 / 64), equally / by the weights among them;
- ``sm2_aligned``: ``sm_aligned`` with ``SM_SPLIT=2``, a request's four programs on SMs a quarter of the chip apart
  (the slow SMs are whole GPCs, so four neighbouring SMs weigh about the same);
- ``even_again``: ``even`` once more, last (the order's effect on the times).

Each way is checked against ``mla_decode_reference`` (output NaN-poisoned first) and timed as the decode (split
kernel and reduction) under CUDA graph replay over input sets beyond the L2.

    PYTHONPATH=src python benchmarks/probes/sm_split.py --out benchmarks/results/sm_split.json

Prints a line per cell and a table last; JSON with the GPU, versions, commit, the weights and per-SM speeds.
Without a Hopper GPU it says so and exits 2.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_mla_decode import _size, comma_list, git_commit, graph_time_ms, rel_err  # noqa: E402

import triton  # noqa: E402

from graphtune.kernels import mla_decode_reference  # noqa: E402
from graphtune.kernels.mla_decode import MLADecodePlan, bench, interface, interface_hopper, kernel_hopper  # noqa: E402
from graphtune.kernels.mla_decode import plan as plan_mod, reduction  # noqa: E402

SM_SCALE = 1.0 / math.sqrt(576)
BASE = {"V2": 1, "NUM_BUF": 3, "PREFETCH": 1, "FAST_MAX": 1, "RK64": 1, "PT_EARLY": 1}
WAYS = ("even", "sm_even", "sm_uniform", "sm_weighted", "sm_aligned_uniform", "sm_aligned", "sm2_aligned",
        "even_again")
ROW = int(kernel_hopper.STAMP_ROW)
T0 = int(kernel_hopper.STAMP_TILE0)
TILES = int(kernel_hopper.STAMP_TILES)
SMID = int(kernel_hopper.STAMP_SMID)


def _runs(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number of runs, at least 1")
    return int(text)


def speeds_from_stamps(raw: list[list[int]]) -> dict[int, float]:
    """Tiles per SM-clock cycle of each SM's tile loop from one stamped run (rows of ``STAMP_ROW`` int64: the
    second tokens-on-M kernel's, a tile's landing at ``T0 + 2 k``): one over the median period between consecutive
    landings (a tile that waited long once does not count as a slow SM: call F's weights, from the span over all the
    tiles, ran 0.60-1.09 where the timelines' persistent part is about +-5%), for rows of at least three tiles."""
    out = {}
    for r in raw:
        n = min(int(r[TILES]), (ROW - T0) // 2)
        if n >= 3:
            period = statistics.median(r[T0 + 2 * k] - r[T0 + 2 * (k - 1)] for k in range(1, n))
            if period > 0:
                out[int(r[SMID])] = 1.0 / period
    return out


def weights_from_speeds(runs: list[dict[int, float]], sms: int) -> list[float]:
    """Each SM's weight: its speed relative to the median SM's, averaged over runs (an SM missing from a run
    counts as the median), clamped to [0.75, 1.33]."""
    out = []
    for s in range(sms):
        rel = []
        for run in runs:
            med = statistics.median(run.values()) if run else 1.0
            rel.append(run.get(s, med) / med)
        out.append(min(4 / 3, max(0.75, statistics.fmean(rel) if rel else 1.0)))
    return out


def strided(weights: list[float]) -> list[float]:
    """Per-SM weights in the order of SM_SPLIT 2's ranges: SM s takes range ``(s % Q) 4 + s // Q``, Q = SMs / 4."""
    q = len(weights) // 4
    out = [0.0] * len(weights)
    for s, w in enumerate(weights):
        out[(s % q) * 4 + s // q] = w
    return out


def decode(x: dict, sms: int, config: dict, plan: MLADecodePlan, stamps: torch.Tensor | None = None):
    """A zero-argument call: the pinned split kernel with ``plan`` (filled here) and the reduction,
    as the decode launches them (the reduction a programmatic dependent from ``reduction.PDL_MIN_BATCH``)."""
    batch, heads = x["q"].shape[0], x["q"].shape[1]
    args, grid, consts, scratch = interface_hopper.hopper_call(
        x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE, x["kv_scale"], "fp8", x["out"], False,
        sms=sms, config=config)
    fn, consts = interface_hopper._kernel_and_params(heads, "fp8", consts)
    rows = plan_mod.attach(plan, x["seq_lens"], x["page_table"], x["kv_cache"].shape[1], grid[1], lambda _: grid[1],
                           interface_hopper._B_CHUNK, fp8=True)
    consts = {**consts, "plan_ptr": rows}
    plan_mod.plan_hook(consts)      # (filled here, outside any graph capture: the weights go to the device)
    lse, part_o, part_lse, seg = scratch

    def call() -> None:
        if stamps is None:
            fn[grid](*args, **consts)
        else:
            fn[grid](*args, **consts, STAMPS=stamps)
        reduction.merge(batch, heads, seg, part_o, part_lse, x["out"], lse, x["seq_lens"], False,
                        pdl=batch >= reduction.PDL_MIN_BATCH)
    return call


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=comma_list(_size), default=[32, 64, 128])
    ap.add_argument("--calib-runs", type=_runs, default=6, help="stamped runs of sm_uniform the weights average")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/sm_split.json"))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("sm_split: needs a Hopper (sm_90) GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    sms = interface._sm_count(torch.device("cuda"))
    print(f"{gpu}; torch {torch.__version__}; triton {triton.__version__}; {sms} SMs; fp8 H = 16, config {BASE}",
          flush=True)
    configs = {"even": BASE, "sm_even": {**BASE, "SM_SPLIT": 1}, "sm_uniform": {**BASE, "SM_SPLIT": 1},
               "sm_weighted": {**BASE, "SM_SPLIT": 1}, "sm_aligned_uniform": {**BASE, "SM_SPLIT": 1},
               "sm_aligned": {**BASE, "SM_SPLIT": 1}, "sm2_aligned": {**BASE, "SM_SPLIT": 2}, "even_again": BASE}
    rows = []
    for batch in args.batches:
        problem = bench.Problem(batch, 16, 4096, 64, "fp8")
        sets = max(2, min(8, math.ceil(bench.ROTATE_BYTES / problem.bytes_moved())))
        xs = [bench.make_inputs(problem, seed=4000 + batch * 10 + k) for k in range(sets)]
        # the weights: sm_uniform stamped on fresh inputs, tiles per cycle of each SM's tile loop
        runs = []
        stamps = torch.zeros(sms, ROW, dtype=torch.int64, device="cuda")
        for k in range(args.calib_runs):
            xc = bench.make_inputs(problem, seed=9000 + batch * 10 + k)
            call = decode(xc, sms, configs["sm_uniform"], MLADecodePlan(sm_weights=[1.0] * sms), stamps)
            call()
            torch.cuda.synchronize()
            stamps.zero_()
            call()
            torch.cuda.synchronize()
            runs.append(speeds_from_stamps(stamps.cpu().tolist()))
            del xc
        weights = weights_from_speeds(runs, sms)
        plans = {"even": lambda: MLADecodePlan(), "sm_even": lambda: MLADecodePlan(),
                 "sm_uniform": lambda: MLADecodePlan(sm_weights=[1.0] * sms),
                 "sm_weighted": lambda: MLADecodePlan(sm_weights=weights),
                 "sm_aligned_uniform": lambda: MLADecodePlan(sm_weights=[1.0] * sms, sm_align=True),
                 "sm_aligned": lambda: MLADecodePlan(sm_weights=weights, sm_align=True),
                 "sm2_aligned": lambda: MLADecodePlan(sm_weights=strided(weights), sm_align=True),
                 "even_again": lambda: MLADecodePlan()}
        x = xs[0]
        ref = mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE,
                                   kv_scale=x["kv_scale"], kv_format="fp8").float()
        row = {"batch": batch, "weights": weights, "speed_runs": [{str(k): v for k, v in r.items()} for r in runs]}
        for way in WAYS:
            x["out"].fill_(float("nan"))
            decode(x, sms, configs[way], plans[way]())()
            torch.cuda.synchronize()
            err = rel_err(x["out"].float(), ref)
            row[f"{way}_err"] = err
            if not math.isfinite(err) or err > 2e-3:
                print(f"B={batch} {way}: relative error {err:.3e} (bound 2e-3): not timed", flush=True)
                continue
            row[f"{way}_ms"] = graph_time_ms([decode(xi, sms, configs[way], plans[way]()) for xi in xs])
        spread = [max(weights), min(weights), statistics.pstdev(weights)]
        row["weight_max_min_sd"] = spread
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k not in ("weights", "speed_runs")}), flush=True)
        del xs, x
        torch.cuda.empty_cache()
    print(f"\n{gpu}; fp8 H = 16, 4096 tokens, page size 64, {BASE} with a plan; ms under graph replay (split "
          "kernel + reduction); change = the faster aligned way against even")
    print("| B | even | sm_even | sm_uniform | sm_weighted | sm_aligned_uniform | sm_aligned | sm2_aligned | "
          "even again | change | weights max / min / sd |")
    print("| --- |" * 11)
    for r in rows:
        def ms(k: str) -> str:
            return f"{r[k + '_ms']:.4f}" if k + "_ms" in r else "-"
        a, b = r.get("even_ms"), min((r[k] for k in ("sm_aligned_ms", "sm2_aligned_ms") if k in r), default=None)
        change = f"{(b / a - 1) * 100:+.1f}%" if a and b else "-"
        mx, mn, sd = r["weight_max_min_sd"]
        print(f"| {r['batch']} | {ms('even')} | {ms('sm_even')} | {ms('sm_uniform')} | {ms('sm_weighted')} | "
              f"{ms('sm_aligned_uniform')} | {ms('sm_aligned')} | {ms('sm2_aligned')} | {ms('even_again')} | "
              f"{change} | {mx:.3f} / {mn:.3f} / {sd:.3f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "triton": triton.__version__,
                                    "commit": git_commit(), "argv": sys.argv[1:] if argv is None else argv,
                                    "sms": sms, "rows": rows}, indent=1))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
