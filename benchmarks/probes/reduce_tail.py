"""The MLA decode reduction's last round trips, timed in the decode: what ``reduction.SEG_FROM_PLAN`` and
``reduction.STREAM`` (both on as shipped from session 53) are worth on the Hopper path with a step's plan.

Launched as a programmatic dependent of the split kernel, the reduction waits for it, then reads each request's
slots and length, then the partials a step of BLOCK_S slots at a time: each a dependent round trip after the split
kernel's last program exits. SEG_FROM_PLAN has the plan kernel write the slots (the split kernels' own values, ahead
of time) and the reduction read them before its wait; STREAM has the second fp8 tokens-on-M kernel count each
request's written segments and the reduction merge a request once they are written, during the split kernel's tail
(other kernels run as ``early``; with ``--stream-gated`` the bf16 ping-pong kernel and fp8_ds_mla rows stream too,
``reduction.STREAM_PP`` / ``STREAM_DS``; fp8_ds_mla cells have no FlashMLA column, its legacy call takes no such rows). (Session 52 timed ONE_STEP, a request's slots in one step, beside them: removed in
session 53, not faster.) Per cell (cache format, heads, page size, batch; 4096-token requests, or ragged lengths
1..8191 with ``--ragged``) the public call is tuned once per way (a launch given the counters is a bucket of its
own; ``--config`` pins one config instead, so that only the reduction differs), then each way -- ``base`` (both
off), ``early`` (SEG_FROM_PLAN), ``stream`` (both on) -- is checked against ``mla_decode_reference``
(output NaN-poisoned first; 2e-3 for fp8, 1e-2 for bf16) and timed under CUDA graph replay with a plan made before
the graph, ``--rounds`` times in alternating order (the median kept), beside FlashMLA (page size 64) in each round.

    PYTHONPATH=src python benchmarks/probes/reduce_tail.py --out benchmarks/results/reduce_tail.json

Prints a line per cell and a table last; JSON with the GPU, versions and commit. Without a Hopper GPU it says so and
exits 2.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_mla_decode import (flashmla_call, git_commit, graph_time_ms, import_flashmla,  # noqa: E402
                              ragged_inputs, rel_err)

import graphtune  # noqa: E402
import triton  # noqa: E402

from graphtune.kernels import mla_decode_reference  # noqa: E402
from graphtune.kernels.mla_decode import MLADecodePlan, bench, interface, reduction  # noqa: E402

SM_SCALE = 1.0 / math.sqrt(576)
WAYS = {"base": (False, False), "early": (True, False), "stream": (True, True)}
DEFAULT_CELLS = "fp8:16:64:32,64,128 fp8:16:1:64,128 bf16:16:64:128 bf16:128:64:32,64 fp8:128:64:32,64"


def parse_cells(text: str) -> list[tuple[str, int, int, int]]:
    """``FORMAT:HEADS:PAGE:B1,B2 ...`` (space-separated) as (format, heads, page size, batch) cells."""
    cells = []
    for item in text.split():
        try:
            fmt, heads, page, batches = item.split(":")
            cells += [(fmt, int(heads), int(page), int(b)) for b in batches.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"--cells item {item!r}: expected FORMAT:HEADS:PAGE:B1,B2 (e.g. "
                                             "fp8:16:64:32,64)") from None
        if fmt not in ("fp8", "bf16", "fp8_ds_mla"):
            raise argparse.ArgumentTypeError(f"--cells item {item!r}: format {fmt!r}, expected fp8, bf16 or "
                                             "fp8_ds_mla")
    return cells


def cell_inputs(lengths: str, fmt: str, heads: int, page: int, batch: int, sets: int):
    """A cell's ``sets`` input sets (4096-token requests, or ``lengths == "ragged"``: 1..8191 at page size 64 only,
    else None), the first set's fp32 reference output and the format's bound of the relative error."""
    if lengths == "uniform":
        xs = [bench.make_inputs(bench.Problem(batch, heads, 4096, page, fmt), seed=1000 * batch + i)
              for i in range(sets)]
    elif page == 64:        # (ragged_inputs makes pages of 64)
        xs = [ragged_inputs(batch, heads, 4096, fmt, seed=39179 + i) for i in range(sets)]
    else:
        return None
    x = xs[0]
    ref = mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE,
                               kv_scale=x["kv_scale"], kv_format=fmt).float()
    # (fp8_ds_mla: the bf16 output's rounding alone is 1.6e-3 - 2.5e-3 of its fp32 reference, H200, session 10: its
    # portable bound, 1e-2, as bf16's)
    return xs, ref, 2e-3 if fmt == "fp8" else 1e-2


def checked(x: dict, fmt: str, config: dict | None, ref: torch.Tensor, before=None) -> float:
    """One call of the public path on ``x`` (tuning its bucket unless ``config`` pins it; ``before()`` runs after
    it), then the relative error of a second call's NaN-poisoned output against ``ref``."""
    decode_call(x, fmt, config)()
    torch.cuda.synchronize()
    if before is not None:
        before()
    x["out"].fill_(float("nan"))
    decode_call(x, fmt, config)()
    torch.cuda.synchronize()
    return rel_err(x["out"].float(), ref)


@contextlib.contextmanager
def way_flags(way: str, gated: bool = False):
    """``reduction.SEG_FROM_PLAN`` and ``STREAM`` as ``way`` sets them (``gated``: ``STREAM_PP`` and ``STREAM_DS``
    with ``STREAM``, the streams that are off until timed: the bf16 ping-pong kernel, fp8_ds_mla rows), restored
    after."""
    before = (reduction.SEG_FROM_PLAN, reduction.STREAM, reduction.STREAM_PP, reduction.STREAM_DS)
    reduction.SEG_FROM_PLAN, reduction.STREAM = WAYS[way]
    reduction.STREAM_PP = reduction.STREAM_DS = gated and reduction.STREAM
    try:
        yield
    finally:
        reduction.SEG_FROM_PLAN, reduction.STREAM, reduction.STREAM_PP, reduction.STREAM_DS = before


def decode_call(x: dict, fmt: str, config: dict | None = None):
    """A zero-argument call of the public path on ``x`` with a plan of its own (filled by its first call), tuned or
    pinned to ``config`` (the Hopper path)."""
    plan = MLADecodePlan()
    pinned = dict(config=triton.Config(dict(config)), path="hopper") if config else {}

    def call() -> None:
        interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE, x["kv_scale"], fmt,
                          x["out"], False, plan=plan, **pinned)
    return call


def for_each_cell(args, body) -> None:
    """``body(lengths, fmt, heads, page, batch, xs, ref, tol)`` for every cell of ``args.cells``, uniform lengths and
    with ``args.ragged`` ragged ones, on the cell's fresh inputs (:func:`cell_inputs`, ``args.sets`` sets; a cell
    without ragged inputs is left out); the inputs are released and the CUDA cache emptied after each cell."""
    for lengths in ("uniform", "ragged") if args.ragged else ("uniform",):
        for fmt, heads, page, batch in args.cells:
            made = cell_inputs(lengths, fmt, heads, page, batch, args.sets)
            if made is None:
                continue
            body(lengths, fmt, heads, page, batch, *made)
            made = None
            torch.cuda.empty_cache()


def ms_text(row: dict, way: str) -> str:
    """A way's median in a table cell (ms, or '-' where it was not timed)."""
    return f"{row[way + '_ms']:.4f}" if row.get(way + "_ms") else "-"


def change_text(row: dict, way: str, against: str) -> str:
    """A way's median against another's in a table cell (a signed percentage, or '-')."""
    a, b = row.get(f"{against}_ms"), row.get(f"{way}_ms")
    return f"{(b / a - 1) * 100:+.1f}%" if a and b else "-"


def cell_text(row: dict) -> str:
    """A row's cell in a table: format, heads, page size, batch."""
    return f"{row['format']} H={row['heads']} ps={row['page_size']} B={row['batch']}"


def passing_ways(ways, check, tol: float, row: dict, where: str) -> list[str]:
    """The ``ways`` whose error ``check(way)`` is finite and within ``tol`` (each error into ``row`` as
    ``{way}_err``); a line for each other, which is not timed."""
    ok = []
    for way in ways:
        err = check(way)
        row[f"{way}_err"] = err
        if math.isfinite(err) and err <= tol:
            ok.append(way)
        else:
            print(f"{where} {way}: relative error {err:.3e} (bound {tol}): not timed", flush=True)
    return ok


def timed_ways(ways: list[str], time_way, rounds: int) -> dict[str, list[float]]:
    """Each way's ``time_way(way)`` (ms) in ``rounds`` rounds, every other round in reverse order (so neither way
    always runs first): ``{way: [ms, ...]}``."""
    times: dict[str, list[float]] = {way: [] for way in ways}
    for r in range(rounds):
        for way in ways if r % 2 == 0 else ways[::-1]:
            times[way].append(time_way(way))
    return times


def add_medians(row: dict, times: dict[str, list[float]]) -> None:
    """Each way's median into ``row`` as ``{way}_ms`` and its timings as ``{way}_all_ms`` (ways never timed: left
    out)."""
    for way, ts in times.items():
        if ts:
            row[f"{way}_ms"] = statistics.median(ts)
            row[f"{way}_all_ms"] = ts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=parse_cells, default=parse_cells(DEFAULT_CELLS),
                    help=f"FORMAT:HEADS:PAGE:B1,B2 ... (default {DEFAULT_CELLS!r})")
    ap.add_argument("--ragged", action="store_true", help="ragged lengths (1..8191) too")
    ap.add_argument("--rounds", type=int, default=2, help="timings of every way a cell, alternating order")
    ap.add_argument("--sets", type=int, default=6, help="input sets a graph rotates through (beyond the L2)")
    ap.add_argument("--config", type=json.loads, default=None,
                    help='pin the split kernel to this config in every cell (JSON, e.g. \'{"V2": 1, "NUM_BUF": 3}\')')
    ap.add_argument("--stream-gated", action="store_true",
                    help="in the stream way, also the streams that are off until timed (reduction.STREAM_PP: the bf16 "
                         "ping-pong kernel; STREAM_DS: fp8_ds_mla rows)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/reduce_tail.json"))
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.sets < 1:
        ap.error(f"--rounds {args.rounds} / --sets {args.sets}: each at least 1")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("reduce_tail: needs a Hopper (sm_90) GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    print(f"{gpu}; torch {torch.__version__}; triton {triton.__version__}; ways {WAYS}", flush=True)
    fm, why = import_flashmla()
    if fm is None:
        print(f"FlashMLA column skipped: {why}", flush=True)
    rows = []

    def cell(lengths: str, fmt: str, heads: int, page: int, batch: int, xs: list, ref, tol: float) -> None:
        row = {"lengths": lengths, "format": fmt, "heads": heads, "page_size": page, "batch": batch}

        def check(way: str) -> float:
            with way_flags(way, args.stream_gated):
                return checked(xs[0], fmt, args.config, ref)

        def time_way(way: str) -> float:
            if way == "flashmla":
                return graph_time_ms([flashmla_call(fm, xi, fmt, SM_SCALE)[0] for xi in xs])
            with way_flags(way, args.stream_gated):
                return graph_time_ms([decode_call(xi, fmt, args.config) for xi in xs])
        ok = passing_ways(WAYS, check, tol, row, f"{lengths} {fmt} H={heads} ps={page} B={batch}")
        if fm is not None and page == 64 and fmt != "fp8_ds_mla":      # (FlashMLA's legacy call: no DS rows)
            ok.append("flashmla")
        add_medians(row, timed_ways(ok, time_way, args.rounds))
        rows.append(row)
        print(json.dumps(row), flush=True)
    for_each_cell(args, cell)
    how = f"pinned to {args.config}" if args.config else "the public call tuned per bucket"
    print(f"\n{gpu}; ms under graph replay ({how}, a plan made before the graph; median of {args.rounds} rounds), "
          f"early's change against base, stream's against early")
    print("| lengths | cell | FlashMLA | base | early | change | stream | change | best / FlashMLA |")
    print("|" + " --- |" * 9)
    for r in rows:
        best = min((r[f"{w}_ms"] for w in WAYS if f"{w}_ms" in r), default=None)
        vs = f"{best / r['flashmla_ms']:.2f}" if best and "flashmla_ms" in r else "-"
        print(f"| {r['lengths']} | {cell_text(r)} | {ms_text(r, 'flashmla')} | {ms_text(r, 'base')} | "
              f"{ms_text(r, 'early')} | {change_text(r, 'early', 'base')} | {ms_text(r, 'stream')} | "
              f"{change_text(r, 'stream', 'early')} | {vs} |")
    picks = graphtune.coverage().to_dict()["kernels"]
    print("\nthe tuned picks (kernel, bucket key, config; the tuner's timing of each candidate):")
    for kernel in picks:
        for row in kernel["tuned"]:
            print(f"  {kernel['name']} {row['key'][:4]}{' +' + str(len(row['key']) - 4) if len(row['key']) > 4 else ''}: "
                  f"{row['config']}")
            for t in row.get("timings", []):
                ms = "-" if t["median_ms"] is None else f"{t['median_ms']:.4f} ms"
                print(f"      {ms} (n={t['n']}): {t['config']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "triton": triton.__version__,
                                    "commit": git_commit(), "argv": sys.argv[1:] if argv is None else argv,
                                    "rows": rows, "picks": picks}, indent=1, default=str))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
