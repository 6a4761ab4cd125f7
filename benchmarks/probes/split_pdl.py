"""Whether the split kernel pays for starting before the kernel ahead of it ends: a split kernel that takes PDL
(the second fp8 tokens-on-M kernel pinned, or the tuned path), with a step's plan, launched as the programmatic
dependent of the kernel before it.

Each layer's decode call starts from nothing: its split kernel's programs are scheduled only once the kernel ahead
has completed, then read the plan's row (one round trip) before the first segment's query and copies (session 49's
timelines on an H100: the split 0.6 us after entry, the query ready 2.7-3.2 us later). Launched with ``launch_pdl``
(``interface_hopper.SPLIT_PDL``) the programs may be scheduled while the kernel ahead is finishing and wait in
``griddepcontrol.wait`` for its completion and writes: ``PDL = 1`` waits before the first load (only the launch and
the shared memory's set-up overlap), ``PDL = 2`` reads the plan's row first and waits before the query (the kernel
ahead must not write the plan). Ways: ``off``, ``wait-first`` (1) and ``plan-first`` (2), each checked against
``mla_decode_reference`` (output NaN-poisoned, relative error <= 2e-3) and timed under CUDA graph replay over
``--sets`` input sets (a plan made before the graph; the kernel ahead of each split is the previous call's reduction,
or with ``--ahead copy`` a copy that rewrites the query, as a projection would: checked with the query NaN-poisoned
before it), ``--rounds`` rounds in alternating order, the median kept; FlashMLA beside them where it imports.

    PYTHONPATH=src python benchmarks/probes/split_pdl.py --out benchmarks/results/split_pdl.json

Prints a line per cell and a table last; JSON with the GPU, versions and commit. Without a Hopper GPU it says so and
exits 2. ``--ways plan-first`` times the shipped way alone (each config a row; the table's last column is each row
against the cell's first config). ``--configs '[{}]'`` times the tuned path (the public call tuned per bucket by the
cell's first call; the ways then share its pick: a tuned launch reads its plan first only where the pick is made and
the plan holds its split, ``interface_hopper._tuned_split_pdl``).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_mla_decode import flashmla_call, git_commit, graph_time_ms, import_flashmla, rel_err  # noqa: E402
from reduce_tail import (SM_SCALE, add_medians, cell_text, change_text, decode_call, for_each_cell,  # noqa: E402
                         ms_text, parse_cells, passing_ways, timed_ways)
from stream_pad import parse_configs  # noqa: E402

import triton  # noqa: E402

from graphtune.kernels.mla_decode import interface_hopper  # noqa: E402

CONFIGS = ('[{"V2": 1, "NUM_BUF": 3, "PREFETCH": 1, "FAST_MAX": 1, "PT_EARLY": 1, "RK64": 1, "CHAIN": 1}, '
           '{"V2": 1, "NUM_BUF": 2, "PREFETCH": 1, "FAST_MAX": 1, "PT_EARLY": 1, "RK64": 1, "CHAIN": 1}]')
WAYS = {"off": 0, "wait-first": 1, "plan-first": 2}


def ways_list(text: str) -> list[str]:
    """``--ways``: a comma-separated subset of :data:`WAYS`, in that order."""
    ways = [w.strip() for w in text.split(",") if w.strip()]
    bad = [w for w in ways if w not in WAYS]
    if bad or not ways:
        raise argparse.ArgumentTypeError(f"--ways {text!r}: expected a comma-separated subset of {', '.join(WAYS)}")
    return [w for w in WAYS if w in ways]


def with_ahead(x: dict, call, ahead: str):
    """``call`` preceded by the kernel ahead: none, or a copy that rewrites ``x["q"]`` from a saved copy."""
    if ahead == "none":
        return call
    src = x["q"].clone()

    def both() -> None:
        x["q"].copy_(src)
        call()
    return both


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=parse_cells, default=parse_cells("fp8:16:64:32,64,128"),
                    help="FORMAT:HEADS:PAGE:B1,B2 ... (the pinned configs: fp8 and fp8_ds_mla, the second "
                         "tokens-on-M kernel; tuned, --configs '[{}]': bf16 too)")
    ap.add_argument("--configs", type=parse_configs, default=parse_configs(CONFIGS),
                    help="the split configs (a JSON list; {} the tuned path, tuned by the cell's first call)")
    ap.add_argument("--ahead", choices=("none", "copy"), default="none",
                    help="the kernel ahead of each call in the graph besides the previous call's reduction")
    ap.add_argument("--ragged", action="store_true", help="ragged lengths (1..8191) too")
    ap.add_argument("--ways", type=ways_list, default=list(WAYS),
                    help=f"the ways to time, comma-separated (default {','.join(WAYS)}; plan-first is the shipped one)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sets", type=int, default=6)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/split_pdl.json"))
    args = ap.parse_args(argv)
    for name in ("rounds", "sets"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} {getattr(args, name)}: must be at least 1")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("split_pdl: needs a Hopper (sm_90) GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    fm, why = import_flashmla()
    print(f"{gpu}; torch {torch.__version__}; triton {triton.__version__}; ahead {args.ahead}; FlashMLA "
          f"{'beside' if fm is not None else f'not importable ({why}): no column'}", flush=True)
    rows: list[dict] = []
    shipped = interface_hopper.SPLIT_PDL        # (put back after each row's ways)

    def write(rows: list[dict]) -> None:
        result = dict(gpu=gpu, torch=torch.__version__, triton=triton.__version__, commit=git_commit(),
                      ahead=args.ahead, rounds=args.rounds, sets=args.sets, rows=rows)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))

    def cell(lengths: str, fmt: str, heads: int, page: int, batch: int, xs: list, ref, tol: float) -> None:
        x = xs[0]
        fm_ms = None
        if fm is not None and fmt in ("fp8", "bf16") and page == 64:
            fm_ms = graph_time_ms([flashmla_call(fm, xi, fmt, SM_SCALE)[0] for xi in xs])
        for config in args.configs:
            row = {"lengths": lengths, "format": fmt, "heads": heads, "page_size": page, "batch": batch,
                   "config": config, "ahead": args.ahead, "flashmla_ms": fm_ms}

            def check(way: str) -> float:
                interface_hopper.SPLIT_PDL = WAYS[way]
                call = with_ahead(x, decode_call(x, fmt, config), args.ahead)
                call()
                torch.cuda.synchronize()
                x["out"].fill_(float("nan"))
                if args.ahead == "copy":
                    x["q"].fill_(float("nan"))     # (the copy ahead puts it back: read before it, NaN)
                call()
                torch.cuda.synchronize()
                return rel_err(x["out"].float(), ref)

            def time_way(way: str) -> float:
                interface_hopper.SPLIT_PDL = WAYS[way]
                return graph_time_ms([with_ahead(xi, decode_call(xi, fmt, config), args.ahead) for xi in xs])
            ok = passing_ways(args.ways, check, tol, row, f"{lengths} {fmt} B={batch} {config}")
            add_medians(row, timed_ways(ok, time_way, args.rounds))
            interface_hopper.SPLIT_PDL = shipped
            rows.append(row)
            print(json.dumps(row), flush=True)
            write(rows)     # (each row as it comes: a run cut short keeps what it timed)
    for_each_cell(args, cell)
    write(rows)
    print(f"\n{gpu}; ms under graph replay (pinned or tuned, a plan made before the graph, ahead: {args.ahead}; "
          f"median of {args.rounds} rounds); changes against off; ratio: the fastest way / FlashMLA; vs config 1: "
          "the fastest way against the cell's first config's")
    print("| lengths | cell | config | FlashMLA | off | wait-first | change | plan-first | change | ratio | "
          "vs config 1 |")
    print("|" + " --- |" * 11)
    first: dict[tuple, float | None] = {}
    for r in rows:
        best = min((r[f"{w}_ms"] for w in WAYS if f"{w}_ms" in r), default=None)
        ratio = f"{best / r['flashmla_ms']:.2f}" if best and r["flashmla_ms"] else "-"
        where = (r["lengths"], r["format"], r["heads"], r["page_size"], r["batch"])
        base = first.setdefault(where, best)
        versus = f"{(best / base - 1) * 100:+.1f}%" if best and base and r["config"] != args.configs[0] else "-"
        shown = [f"{k}={v}" for k, v in r["config"].items() if k not in ("V2", "FAST_MAX", "PREFETCH")]
        cfg = ",".join(shown) or "tuned"
        print(f"| {r['lengths']} | {cell_text(r)} | {cfg} | {ms_text(r, 'flashmla')} | {ms_text(r, 'off')} | "
              f"{ms_text(r, 'wait-first')} | {change_text(r, 'wait-first', 'off')} | {ms_text(r, 'plan-first')} | "
              f"{change_text(r, 'plan-first', 'off')} | {ratio} | {versus} |")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
