"""Whether the split should follow the SMs' own speeds: the second fp8 tokens-on-M kernel pinned with a step's plan,
its plan rows in SM order and their ranges weighted per SM (``SMW``), against the even split it runs now.

Session 49's timelines (H100, fp8 H = 16, 4096-token requests, every program the same tiles): the SMs stream the cache
at rates that persist across inputs (their last exits correlate 0.84 / 0.91 / 0.94 between two runs at batch 32 / 64
/ 128), groups of neighbouring SMs run 12-18% faster than the median at batch 128, and the kernel ends with the
slowest SM, 3.9 / 5.9 / 11.0 us after a split in proportion to the SMs' rates would (about 10% of the split kernel).
A program id does not stay on one SM from launch to launch (the batch-64 run put the ids 2 SMs on from the others),
so the weights go to SM slots: each program claims a row of its own SM (``kernel_hopper._claim_row``).

Per cell (format fp8, 16 heads, page size 64, 4096-token requests, or ragged ones with ``--ragged``): (1) calibration:
the pinned even split run with timeline stamps (benchmarks/probes/timeline.py) on each input set, each SM's rate the
mean over its programs of (tiles - 1) / the clocks from their first tile's landing to their last tile's end, the
weights ``1000 x rate / median rate``; (2) the ways, each checked against ``mla_decode_reference`` (output NaN-poisoned,
relative error <= 2e-3, two calls of one plan, the plan's claim counters back at zero after them): ``even`` (as
shipped), ``claimed`` (SMW with equal weights: what the claim and the SM order cost alone), ``weighted`` (the cell's
weights), ``weighted-first`` (the first cell's weights, where this is not the first cell: whether one calibration
serves every batch); (3) each way timed under CUDA graph replay over ``--sets`` input sets (a plan per set, made
before the graph), ``--rounds`` rounds in alternating order, the median kept; FlashMLA beside them where it imports.

    PYTHONPATH=src python benchmarks/probes/sm_weights.py --out benchmarks/results/sm_weights.json

Prints a line per cell and a table last; JSON with the GPU, versions, commit, and each cell's weights. Without a
Hopper GPU it says so and exits 2.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_mla_decode import flashmla_call, git_commit, graph_time_ms, import_flashmla, rel_err  # noqa: E402
from reduce_tail import (SM_SCALE, add_medians, cell_text, change_text, for_each_cell, ms_text,  # noqa: E402
                         parse_cells, passing_ways, timed_ways)
from timeline import ROW, SMID, T0, TILES, _launcher  # noqa: E402

import triton  # noqa: E402

from graphtune.kernels.mla_decode import MLADecodePlan, interface  # noqa: E402

CONFIG = {"V2": 1, "NUM_BUF": 2, "PREFETCH": 1, "FAST_MAX": 1, "PT_EARLY": 1, "RK64": 1, "CHAIN": 1}
WAYS = ("even", "claimed", "weighted", "weighted-first")


def sm_rates(raw: list[list[int]]) -> dict[int, float]:
    """Each SM's rate in one stamped run (timeline rows): the mean over its programs of two tiles or more of (tiles -
    1) per SM clock from the first tile's landing to the last tile's end."""
    by: dict[int, list[float]] = {}
    for r in raw:
        k = min(r[TILES], (ROW - T0) // 2)
        if k < 2:
            continue
        span = r[T0 + 2 * (k - 1) + 1] - r[T0]
        if span > 0:
            by.setdefault(r[SMID], []).append((k - 1) / span)
    return {sm: statistics.fmean(v) for sm, v in by.items()}


def weights_of(runs: list[dict[int, float]], sms: int) -> list[int]:
    """Weights per SM from the rates of several runs (each SM's mean over the runs that saw it): 1000 x its rate /
    the median SM's; 1000 for an SM no run saw."""
    mean = {sm: statistics.fmean(r[sm] for r in runs if sm in r) for sm in set().union(*runs)}
    mid = statistics.median(mean.values()) if mean else 1.0
    return [max(1, round(1000 * mean[sm] / mid)) if sm in mean else 1000 for sm in range(sms)]


def calibrate(xs: list[dict], config: dict, sms: int) -> tuple[list[int], dict]:
    """The cell's weights from one stamped run of the pinned even split per input set, and the exits' spread."""
    runs, spans = [], []
    for x in xs:
        call, rows = _launcher(x, "fp8", x["q"].shape[1], sms, config=config, plan=True)
        buf = torch.zeros(rows, ROW, dtype=torch.int64, device="cuda")
        call(None)          # (compiled and the caches as in a replay)
        call(buf)
        torch.cuda.synchronize()
        raw = buf.cpu().tolist()
        runs.append(sm_rates(raw))
        t_in = min(r[0] for r in raw)
        exits = sorted(r[1] - t_in for r in raw if r[TILES] > 0)
        spans.append({"last_us": exits[-1] / 1000, "mean_us": statistics.fmean(exits) / 1000})
    return weights_of(runs, sms), {"exits": spans}


def way_call(x: dict, weights: list[int] | None):
    """A zero-argument call of the pinned config on ``x`` with a plan of its own (``weights``: SMW with them), and
    the plan."""
    if weights is None:
        plan, config = MLADecodePlan(), CONFIG
    else:
        plan = MLADecodePlan(sm_weights=torch.tensor(weights, dtype=torch.int32, device=x["q"].device))
        config = {**CONFIG, "SMW": 1}

    def call() -> None:
        interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE, x["kv_scale"], "fp8",
                          x["out"], False, plan=plan, config=triton.Config(dict(config)), path="hopper")
    return call, plan


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=parse_cells, default=parse_cells("fp8:16:64:128,64,32"),
                    help="fp8:16:PAGE:B1,B2 (the first cell's weights are also tried in the others)")
    ap.add_argument("--config", type=json.loads, default=None,
                    help=f"the pinned split config (JSON; default {json.dumps(CONFIG)})")
    ap.add_argument("--ragged", action="store_true", help="ragged lengths (1..8191) too")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sets", type=int, default=6)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/sm_weights.json"))
    args = ap.parse_args(argv)
    for name in ("rounds", "sets"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} {getattr(args, name)}: must be at least 1")
    bad = [c for c in args.cells if c[0] != "fp8" or c[1] >= 64]
    if bad:
        ap.error(f"--cells {bad}: the SM-weighted split is the second fp8 tokens-on-M kernel's (fp8, H < 64)")
    if args.config:
        CONFIG.clear()
        CONFIG.update({"V2": 1, **args.config})
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("sm_weights: needs a Hopper (sm_90) GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    sms = interface._sm_count(torch.device("cuda"))
    fm, why = import_flashmla()
    print(f"{gpu}; {sms} SMs; torch {torch.__version__}; triton {triton.__version__}; config {CONFIG}; FlashMLA "
          f"{'beside' if fm is not None else f'not importable ({why}): no column'}", flush=True)
    rows: list[dict] = []
    first: list[int] = []

    def write() -> None:
        result = dict(gpu=gpu, sms=sms, torch=torch.__version__, triton=triton.__version__, commit=git_commit(),
                      config=CONFIG, rounds=args.rounds, sets=args.sets, rows=rows)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))

    def cell(lengths: str, fmt: str, heads: int, page: int, batch: int, xs: list, ref, tol: float) -> None:
        weights, spread = calibrate(xs, CONFIG, sms)
        if not first:
            first.extend(weights)
        row = {"lengths": lengths, "format": fmt, "heads": heads, "page_size": page, "batch": batch,
               "weights": weights, "weights_first": list(first), **spread}
        given = {"even": None, "claimed": [1000] * sms, "weighted": weights,
                 "weighted-first": list(first) if first != weights else None}

        def check(way: str) -> float:
            if way == "weighted-first" and given[way] is None:
                return float("inf")
            x = xs[0]
            call, plan = way_call(x, given[way])
            call()
            x["out"].fill_(float("nan"))
            call()
            torch.cuda.synchronize()
            if given[way] is not None and int(plan.claims().count_nonzero()):
                print(f"{way}: claim counters left {plan.claims().tolist()}", flush=True)
                return float("nan")
            return rel_err(x["out"].float(), ref)

        def time_way(way: str) -> float:
            if way == "flashmla":
                return graph_time_ms([flashmla_call(fm, xi, fmt, SM_SCALE)[0] for xi in xs])
            return graph_time_ms([way_call(xi, given[way])[0] for xi in xs])
        ok = passing_ways([w for w in WAYS if w != "weighted-first" or given[w] is not None], check, tol, row,
                          f"{lengths} {cell_text(row)}")
        if fm is not None and page == 64:
            ok.append("flashmla")
        add_medians(row, timed_ways(ok, time_way, args.rounds))
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if not k.startswith("weights")}), flush=True)
        write()
    for_each_cell(args, cell)
    write()
    print(f"\n{gpu}; ms under graph replay (pinned {CONFIG}, a plan per input set made before the graph; median of "
          f"{args.rounds} rounds); changes against even; ratio: the fastest way / FlashMLA")
    print("| lengths | cell | FlashMLA | even | claimed | change | weighted | change | weighted-first | change | "
          "ratio |")
    print("|" + " --- |" * 11)
    for r in rows:
        best = min((r[f"{w}_ms"] for w in WAYS if f"{w}_ms" in r), default=None)
        ratio = f"{best / r['flashmla_ms']:.2f}" if best and r.get("flashmla_ms") else "-"
        print(f"| {r['lengths']} | {cell_text(r)} | {ms_text(r, 'flashmla')} | {ms_text(r, 'even')} | "
              f"{ms_text(r, 'claimed')} | {change_text(r, 'claimed', 'even')} | {ms_text(r, 'weighted')} | "
              f"{change_text(r, 'weighted', 'even')} | {ms_text(r, 'weighted-first')} | "
              f"{change_text(r, 'weighted-first', 'even')} | {ratio} |")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
