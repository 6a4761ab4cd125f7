"""Where a Hopper split kernel's time goes, program by program: a timeline from in-kernel clock stamps.

The second fp8 tokens-on-M kernel and the ping-pong kernels take a diagnostic keyword, ``STAMPS`` (None in every
launch of the library: the stamps then compile to nothing). Given an int64 buffer, each program (each warpgroup of
a ping-pong program) writes the global timer at entry and exit, its SM, and its SM's clock at named points
(kernel_hopper.STAMP_*): after the work split, when the query is ready, and per tile (tokens on M: when the tile
landed and when the program was done with it) or per pair of tiles (ping-pong: loop top, own scores retired, own P
handed off, the other warpgroup's P arrived).

For each cell (format, heads, batch, and keys of its own over ``--overlay``'s; 4096 tokens a request, page size 64,
a pinned config) this times the kernel without and with the stamps (CUDA graph replay over rotating input sets
larger than the L2, so the stamps' cost shows), then runs it stamped on the last input set and prints: the kernel's
span (first entry to last exit, by the global timer), how entries and exits spread, and per program (medians over
programs, in ns from the SM clock): the work split, the query's preparation, the first tile's wait, the steady tile
period, how much of it the program waited for data, and the end (last tile to exit); and per SM (session 20, run 11:
SMs with equal work finished 2.5-4 us apart, the kernel ending with the last) the first, median and last SM's last
exit, how far apart the rows of one SM exit, and how many rows got no tiles, and from a second stamped run on other
inputs whether the same SMs are slow (session 40: they were, ``sm_persistence``). ``--lengths`` also times the split
kernel alone and the decode (public call) at other request lengths, so that a line through the times gives each
cell's fixed cost. Tokens-on-M cells also print their landing profile (``landing_profile``: per 2 us, the tiles
landed, requested and waiting, and programs computing; session 57), ``STREAM=1`` in a cell's keys stamps the stream
kernel instead (the same split and copies, no math), and ``--from`` prints the profiles of a saved run without a GPU.

    PYTHONPATH=src python benchmarks/probes/timeline.py --out benchmarks/results/timeline.json
    PYTHONPATH=src python benchmarks/probes/timeline.py --from benchmarks/results/mla_timeline_fixed_h100_session49_callA.json.gz

Without a GPU (and without ``--from``) it says so and exits 2.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_mla_decode import _int_setting, comma_list, git_commit, graph_time_ms, stream_launch  # noqa: E402

from graphtune.kernels.mla_decode import MLADecodePlan, bench, interface, interface_hopper, kernel_hopper  # noqa: E402
from graphtune.kernels.mla_decode import plan as plan_mod  # noqa: E402

ROW = int(kernel_hopper.STAMP_ROW)
T0 = int(kernel_hopper.STAMP_TILE0)
TILES = int(kernel_hopper.STAMP_TILES)
SMID = int(kernel_hopper.STAMP_SMID)
PP_CONFIG = {"BLOCK_N": 64, "PP": 1, "RELOAD": 1, "WG1_FIRST": 1}


def _cell_spec(text: str) -> tuple[str, int, int]:
    """``FORMAT:HEADS:BATCH`` (e.g. ``fp8:16:32``)."""
    parts = text.split(":")
    if len(parts) != 3 or parts[0] not in ("bf16", "fp8") or not all(p.isdigit() for p in parts[1:]):
        raise argparse.ArgumentTypeError(f"--cells item {text!r}: expected FORMAT:HEADS:BATCH with FORMAT bf16 or "
                                         f"fp8 (e.g. fp8:16:32)")
    return parts[0], int(parts[1]), int(parts[2])


def _cell_with_keys(text: str) -> tuple[str, int, int, dict]:
    """``FORMAT:HEADS:BATCH[:KEY=VALUE/KEY=VALUE...]`` (e.g. ``bf16:128:64:SM1=1/RA=1``): a cell and the keys set on
    its pinned config over ``--overlay``'s, so that one run times several configs of a cell in one process (across
    calls the machines' clocks differ: session 42's call D ran at 1.71 GHz, call F at 1.76)."""
    if text.count(":") < 3:
        return (*_cell_spec(text), {})
    head, _, keys = text.rpartition(":")
    try:
        return (*_cell_spec(head), dict(_int_setting(item) for item in keys.split("/")))
    except (argparse.ArgumentTypeError, ValueError):
        raise argparse.ArgumentTypeError(f"--cells item {text!r}: expected FORMAT:HEADS:BATCH[:KEY=VALUE/...] with "
                                         f"FORMAT bf16 or fp8 (e.g. bf16:128:64:SM1=1/RA=1)") from None


def _config(fmt: str, heads: int, batch: int, overlay: dict | None = None) -> dict:
    """The pinned config of a cell, with ``overlay``'s keys set (``--overlay``, e.g. RELOAD=0): H >= 64 the ping-pong
    kernel, or where the tuned path runs the class's third kernel (fp8 from ``interface_hopper.T8_MIN_BATCH``) the
    first config of that kernel's space."""
    if heads >= 64:
        if interface_hopper.third_applies(heads, fmt, batch):
            return {**interface_hopper.THIRD[(True, fmt)].space[0], **(overlay or {})}
        return {**PP_CONFIG, **(overlay or {})}
    if fmt == "fp8":
        return {"V2": 1, **interface_hopper.HOPPER_TOK_FP8_V2_CONFIG, **(overlay or {})}
    raise SystemExit("timeline: bf16 with H < 64 runs a kernel without stamps (the tokens-on-M bf16 kernel)")


def _launcher(x: dict, fmt: str, heads: int, sms: int, overlay: dict | None = None, config: dict | None = None,
              plan: bool = False):
    """The pinned split kernel on inputs ``x`` (``config``, else the cell's with ``overlay``): a call taking the
    stamp buffer (or None) and the rows it needs (the ping-pong kernels, T8 included: one a warpgroup). ``plan``: the
    kernel given a step's plan of its split (``plan_ptr``), made here, before any call (outside the timed graph).
    ``STREAM=1`` in the config: the stream kernel instead, with the config's ``NUM_BUF`` (tokens on M)."""
    sm_scale = 1.0 / math.sqrt(576)
    batch = x["q"].shape[0]
    config = config if config is not None else _config(fmt, heads, batch, overlay)
    if config.get("STREAM"):
        # the load path alone (kernel_hopper_tok._kv_stream_kernel: the same split and copies, no math; no plan)
        num_buf = config.get("NUM_BUF", 2)
        return stream_launch(x, fmt, num_buf, config.get("PROGRAMS_PER_SM") or (2 if num_buf == 2 else 1), sms=sms)
    args, grid, consts, _ = interface_hopper.hopper_call(
        x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], sm_scale, x["kv_scale"], fmt, x["out"], False,
        sms=sms, config=config)
    fn, consts = interface_hopper._kernel_and_params(heads, fmt, consts)
    rows = grid[0] * grid[1] * (2 if consts.get("PP") or consts.get("T8") or consts.get("WG2") else 1)
    if plan:
        step = plan_mod.attach(MLADecodePlan(), x["seq_lens"], x["page_table"], x["kv_cache"].shape[1], grid[1],
                               lambda _: grid[1], interface_hopper._B_CHUNK, fp8=fmt == "fp8")
        consts = {**consts, "plan_ptr": step}
        plan_mod.plan_hook(consts)

    def call(stamps: torch.Tensor | None) -> None:
        if stamps is None:
            fn[grid](*args, **consts)
        else:
            fn[grid](*args, **consts, STAMPS=stamps)
    return call, rows


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))] if values else float("nan")


def analyse(raw: torch.Tensor, pp: bool, wg2: bool = False) -> dict:
    """The summary of one stamped run (``raw``: rows x ROW int64). ``pp``: rows of two warpgroups with four marks a pair
    (the ping-pong kernels, and ``wg2``: the fp8 tokens-on-M kernel's WG2 form, whose warpgroups both take the other's P
    after their own hand-off)."""
    rows = raw.tolist()
    # (ping-pong: rows 2 p and 2 p + 1 are program p's warpgroups 0 and 1)
    live = [(i % 2 if pp else 0, r) for i, r in enumerate(rows) if r[TILES] > 0]
    t_in = min(r[0] for r in rows)
    ghz = statistics.median((r[6] - r[3]) / max(1, r[1] - r[0]) for _, r in live)

    def ns(clocks: float) -> float:
        return clocks / ghz

    def med(values: list[float]) -> float:
        return statistics.median(values) if values else float("nan")

    per = 4 if pp else 2
    out = {"programs": len(rows), "live": len(live), "sm_ghz": ghz,
           "span_ns": max(r[1] for r in rows) - t_in,
           "entry_ns": {q: _pct([r[0] - t_in for r in rows], q) for q in (0.5, 0.9, 1.0)},
           "exit_ns": {q: _pct([r[1] - t_in for _, r in live], q) for q in (0.0, 0.5, 0.9, 1.0)},
           # (where a perfectly balanced split would end: the live rows' mean exit; session 49)
           "exit_mean_ns": statistics.mean([r[1] - t_in for _, r in live]) if live else float("nan"),
           "split_ns": med([ns(r[4] - r[3]) for _, r in live]),
           "ready_ns": med([ns(r[5] - r[4]) for _, r in live])}
    # per SM (global timer): the last exit of its rows with tiles, and how far apart those rows exit (two programs
    # an SM, or a ping-pong program's two warpgroups); rows without tiles (an even split's idle programs)
    by_sm: dict[int, list[int]] = {}
    for _, r in live:
        by_sm.setdefault(r[SMID], []).append(r[1] - t_in)
    last = [max(v) for v in by_sm.values()]
    out.update({"idle_rows": len(rows) - len(live), "sms": len(by_sm),
                "sm_last_exit_ns": {q: _pct(last, q) for q in (0.0, 0.5, 1.0)},
                "sm_exit_gap_ns": med([max(v) - min(v) for v in by_sm.values() if len(v) > 1])})
    firsts, periods, waits, ends, busy = [], [], [], [], []
    # ping-pong, per warpgroup: loop top -> own scores retired -> own P handed off; the other's P: WG0 waits for it
    # after its hand-off, WG1 (WG1_FIRST) before its scores' wait
    steps: dict[str, list[float]] = {f"wg{w}_{k}": [] for w in (0, 1) for k in ("scores", "softmax", "other_p")}
    for wg, r in live:
        n = r[TILES]
        k_max = min((n + 1) // 2 if pp else n, (ROW - T0) // per)
        marks = [r[T0 + per * k: T0 + per * k + per] for k in range(k_max)]
        if not marks:
            continue
        firsts.append(ns(marks[0][1 if pp else 0] - r[5]))
        ends.append(ns(r[6] - marks[-1][0 if pp else 1]))
        for k in range(1, len(marks)):
            periods.append(ns(marks[k][0] - marks[k - 1][0]))
            if not pp:
                waits.append(ns(marks[k][0] - marks[k - 1][1]))
                busy.append(ns(marks[k][1] - marks[k][0]))
        if pp and len(marks) < (ROW - 4 - T0) // per and r[ROW - 4] > 0:
            # the segment's end (kernel_hopper_pp.STAMP_FINISH: entered, sums exchanged, output stored), from the
            # last pair's top
            for x, key in enumerate(("finish_in", "exchanged", "stored")):
                steps.setdefault(f"wg{wg}_{key}", []).append(ns(r[ROW - 4 + x] - marks[-1][0]))
        if pp and len(marks) < (ROW - 12 - T0) // per:
            # the first segment's prologue marks (kernel_hopper_pp.STAMP_PRO: segment found, copies issued, fp8
            # rope rows requested, query landed, fp8 query converted), from the split; 0 = not stamped by this kernel
            for x in range(5):
                if r[ROW - 12 + x] > 0:
                    steps.setdefault(f"wg{wg}_pro{x}", []).append(ns(r[ROW - 12 + x] - r[4]))
        if pp:
            for top, scores, handed, other in marks[:-1]:
                steps[f"wg{wg}_scores"].append(ns(scores - top))
                steps[f"wg{wg}_softmax"].append(ns(handed - scores))
                steps[f"wg{wg}_other_p"].append(ns(other - handed) if wg == 0 or wg2 else ns(other - top))
    out.update({"first_tile_ns": med(firsts), "period_ns": med(periods), "period_p90_ns": _pct(periods, 0.9),
                "end_ns": med(ends)})
    if pp:
        out.update({f"{k}_ns": med(v) for k, v in steps.items()})
    else:
        out.update({"wait_ns": med(waits), "wait_p90_ns": _pct(waits, 0.9), "busy_ns": med(busy)})
    return out


def landing_profile(raw: list[list[int]], ghz: float, num_buf: int, bucket_ns: int = 2000) -> dict:
    """A tokens-on-M kernel's stamped run (rows as ``analyse`` takes them) over time, in ``bucket_ns`` windows from the
    first entry: the tiles whose wait ended in each window (``landed``: the program had its data, no sooner than it
    looked), and the window's mean of the tiles requested but not yet taken (``waiting``: a tile counts from its
    copy's issue, the split's end for a program's first ``num_buf`` tiles and the end of the tile ``num_buf`` before it
    for the others, to its landing; an upper bound on the copies in flight) and of the programs computing a tile
    (``computing``: from a tile's landing to the end of its work); and per window, over the tiles that landed in it, the
    medians of a tile's work (``busy_ns``: landing to done), of its program's wait for it (``wait_ns``: from the end of
    the program's previous tile, or from its query being ready for its first, to the landing) and of its copy's issue
    to its landing (``issue_ns``; None where no tile landed). Session 57 read session 49's batch-32 run with it, session
    58 the medians (the docs' "Issue 14, session 57" / "session 58")."""
    t_in = min(r[0] for r in raw)
    waiting: list[tuple[float, int]] = []
    computing: list[tuple[float, int]] = []
    per_tile: list[tuple[float, float, float, float]] = []     # (landing, busy, wait, issue -> landing)
    for r in raw:
        n = min(r[TILES], (ROW - T0) // 2)
        if n <= 0:
            continue

        def at(clock: int, r=r) -> float:   # (an SM clock stamp as ns from the first entry, by the global timer)
            return (r[1] - t_in) - (r[6] - clock) / ghz
        land = [at(r[T0 + 2 * k]) for k in range(n)]
        done = [at(r[T0 + 2 * k + 1]) for k in range(n)]
        for k in range(n):
            issue = at(r[4]) if k < num_buf else done[k - num_buf]
            per_tile.append((land[k], done[k] - land[k], land[k] - (done[k - 1] if k else at(r[5])), land[k] - issue))
            waiting += [(issue, 1), (land[k], -1)]
            computing += [(land[k], 1), (done[k], -1)]
    span = max(r[1] for r in raw) - t_in
    windows = int(span // bucket_ns) + 1

    def means(events: list[tuple[float, int]]) -> list[float]:
        out, level, i, events = [], 0, 0, sorted(events)
        for w in range(windows):
            lo, hi, area = w * bucket_ns, (w + 1) * bucket_ns, 0.0
            last = lo
            while i < len(events) and events[i][0] < hi:
                t, step = events[i]
                if t > last:
                    area += level * (t - last)
                    last = t
                level += step
                i += 1
            out.append(round((area + level * (hi - last)) / bucket_ns, 2))
        return out
    by_window: list[list[tuple[float, float, float, float]]] = [[] for _ in range(windows)]
    for tile in per_tile:
        by_window[min(windows - 1, max(0, int(tile[0] // bucket_ns)))].append(tile)

    def medians(x: int) -> list[float | None]:
        return [round(statistics.median(t[x] for t in w)) if w else None for w in by_window]
    return {"bucket_ns": bucket_ns, "landed": [len(w) for w in by_window], "waiting": means(waiting),
            "computing": means(computing),
            "busy_ns": medians(1), "wait_ns": medians(2), "issue_ns": medians(3)}


def cell(fmt: str, heads: int, batch: int, lengths: list[int], overlay: dict | None = None,
         plan: bool = False) -> dict:
    sms = interface._sm_count(torch.device("cuda"))
    problem = bench.Problem(batch, heads, 4096, 64, fmt)
    sets = max(2, min(8, math.ceil(bench.ROTATE_BYTES / problem.bytes_moved())))
    xs = [bench.make_inputs(problem, seed=batch + k) for k in range(sets)]
    calls = [_launcher(x, fmt, heads, sms, overlay, plan=plan) for x in xs]
    rows = calls[0][1]
    buf = torch.zeros(rows, ROW, dtype=torch.int64, device="cuda")
    row: dict = {"kv_format": fmt, "heads": heads, "batch": batch, "config": _config(fmt, heads, batch, overlay),
                 "rows": rows, "sets": sets, "plan": plan}
    row["plain_ms"] = graph_time_ms([lambda c=c: c(None) for c, _ in calls])
    row["stamped_ms"] = graph_time_ms([lambda c=c: c(buf) for c, _ in calls])
    for c, _ in calls:            # the last set's data out of the L2 as in the timed replays
        c(None)
    buf.zero_()
    calls[-1][0](buf)
    torch.cuda.synchronize()
    wg2 = bool(row["config"].get("WG2"))
    pairs = heads >= 64 or wg2      # (rows of two warpgroups, four marks a pair)
    row["timeline"] = analyse(buf.cpu(), pairs, wg2)
    if not pairs:
        row["profile"] = landing_profile(buf.cpu().tolist(), row["timeline"]["sm_ghz"], row["config"]["NUM_BUF"])
    # a second stamped run on other inputs (other programs on each SM): how much of the SMs' spread is the SM's own
    first = buf.cpu()
    buf.zero_()
    calls[-2 if len(calls) > 1 else -1][0](buf)
    torch.cuda.synchronize()
    row["sm_persistence"] = sm_persistence(first, buf.cpu())
    used = int(buf[:, TILES].max().item())
    per = 4 if pairs else 2
    width = min(ROW, T0 + per * ((used + 1) // 2 if pairs else used))
    row["raw"] = buf[:, :width].cpu().tolist()
    # (the ping-pong kernels' segment-end and prologue marks sit at the row's end: STAMP_PRO .. STAMP_FINISH + 2)
    row["raw_tail"] = buf[:, ROW - 12:].cpu().tolist()
    if lengths:
        row["lengths"] = []
        for tokens in lengths:
            p = bench.Problem(batch, heads, tokens, 64, fmt)
            n = max(2, min(8, math.ceil(bench.ROTATE_BYTES / p.bytes_moved())))
            ins = [bench.make_inputs(p, seed=tokens + k) for k in range(n)]
            split = [_launcher(x, fmt, heads, sms, overlay, plan=plan)[0] for x in ins]
            decode = [bench.run_inputs(x, fmt, None, path="hopper") for x in ins]
            row["lengths"].append({"tokens": tokens, "split_ms": graph_time_ms([lambda c=c: c(None) for c in split]),
                                   "decode_ms": graph_time_ms(decode)})
    return row


def sm_persistence(a: torch.Tensor, b: torch.Tensor) -> dict:
    """Whether the SMs that end last in one stamped run (``a``) end last in another (``b``, other inputs, so other
    programs on each SM): over the SMs with the same number of rows with tiles in both, the correlation of their last
    exits (from each run's first entry), and the second run's mean last exit of the first run's fastest and slowest
    thirds (ns). Session 40 (H100, fp8 H = 16 batch 32): 0.71, 31.0 against 33.4 us."""
    def last_exits(raw: torch.Tensor) -> dict[int, tuple[int, int]]:
        rows = raw.tolist()
        t_in = min(r[0] for r in rows)
        by: dict[int, list[int]] = {}
        for r in rows:
            if r[TILES] > 0:
                by.setdefault(r[SMID], []).append(r[1] - t_in)
        return {sm: (len(v), max(v)) for sm, v in by.items()}
    ea, eb = last_exits(a), last_exits(b)
    sms = sorted(sm for sm in ea if sm in eb and ea[sm][0] == eb[sm][0])
    if len(sms) < 6:
        return {"sms": len(sms)}
    xa, xb = [ea[sm][1] for sm in sms], [eb[sm][1] for sm in sms]
    ma, mb = statistics.fmean(xa), statistics.fmean(xb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(xa, xb))
    var = math.sqrt(sum((x - ma) ** 2 for x in xa) * sum((y - mb) ** 2 for y in xb))
    order = sorted(range(len(sms)), key=lambda i: xa[i])
    third = len(order) // 3
    return {"sms": len(sms), "correlation": cov / var if var else float("nan"),
            "fast_third_ns": statistics.fmean(xb[i] for i in order[:third]),
            "slow_third_ns": statistics.fmean(xb[i] for i in order[-third:])}


def profile_lines(row: dict) -> list[str]:
    """A cell's landing profile (``row["profile"]``) as lines of numbers a window (the medians, in ns, where the
    profile has them: runs saved before session 58 are read again with ``--from``)."""
    p = row["profile"]
    us = p["bucket_ns"] / 1000
    lines = [f"  per {us:g} us from the first entry: tiles landed {p['landed']}",
             f"    tiles requested and not yet taken (mean) {p['waiting']}",
             f"    programs computing a tile (mean) {p['computing']}"]
    for key, what in (("busy_ns", "a tile's work, landing to done"), ("wait_ns", "its program's wait for it"),
                      ("issue_ns", "its copy's issue to its landing")):
        if key in p:
            lines.append(f"    median ns, {what}: {['-' if v is None else v for v in p[key]]}")
    return lines


def print_saved_profiles(path: Path) -> int:
    """``--from``: the landing profiles of a saved run's tokens-on-M cells (rows with ``raw`` stamps)."""
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as f:
            saved = json.load(f)
        rows = saved["rows"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"timeline: --from {path}: not a saved timeline run ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    print(f"{saved.get('gpu', '?')}; commit {saved.get('commit', '?')}")
    for r in rows:
        if r.get("heads", 64) >= 64 or not r.get("raw") or r["config"].get("WG2"):
            continue        # (rows of two warpgroups: no landing profile)
        r["profile"] = landing_profile(r["raw"], r["timeline"]["sm_ghz"], r["config"]["NUM_BUF"])
        print(f"\n{r['kv_format']} H={r['heads']} B={r['batch']} {r['config']}: {sum(r['profile']['landed'])} tiles")
        print("\n".join(profile_lines(r)))
    return 0


def _fit(points: list[dict], key: str) -> tuple[float, float]:
    """Least-squares ``ms = a + b tokens``: (a in us, b as us per 1,000 tokens)."""
    xs = [p["tokens"] for p in points]
    ys = [p[key] * 1e3 for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / max(1e-9, sum((x - mx) ** 2 for x in xs))
    return my - b * mx, b * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=comma_list(_cell_with_keys),
                    default=[_cell_with_keys(c) for c in ("fp8:16:32", "fp8:16:64", "fp8:16:128", "bf16:128:32",
                                                          "bf16:128:64", "fp8:128:64")])
    ap.add_argument("--lengths", type=comma_list(int), default=[],
                    help="also time the split kernel and the decode at these request lengths (tokens)")
    ap.add_argument("--overlay", type=comma_list(_int_setting), default=[],
                    help="keys set on every cell's pinned config, e.g. RELOAD=0")
    ap.add_argument("--plan", action="store_true",
                    help="give the pinned split kernel a step's plan of its split (mla_decode's plan=), made before "
                         "the graph")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/timeline.json"))
    ap.add_argument("--from", dest="saved", type=Path, default=None,
                    help="print the tile landing profiles (landing_profile) of the tokens-on-M cells of a saved run "
                         "(its JSON, or .json.gz) instead of running; no GPU needed")
    args = ap.parse_args(argv)
    if args.saved is not None:
        return print_saved_profiles(args.saved)
    if not torch.cuda.is_available():
        print("timeline: needs a CUDA GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    print(f"{gpu}; torch {torch.__version__}", flush=True)
    rows = []
    for fmt, heads, batch, own in args.cells:
        r = cell(fmt, heads, batch, args.lengths, {**dict(args.overlay), **own}, args.plan)
        rows.append(r)
        t = r["timeline"]
        print(f"\n{fmt} H={heads} B={batch} {r['config']}: {r['rows']} rows ({t['live']} with tiles), SM "
              f"{t['sm_ghz']:.2f} GHz; plain {r['plain_ms']:.4f} ms, stamped {r['stamped_ms']:.4f} ms; one stamped "
              f"run spans {t['span_ns'] / 1e3:.1f} us")
        print(f"  entries +{t['entry_ns'][0.5] / 1e3:.2f} / +{t['entry_ns'][0.9] / 1e3:.2f} / "
              f"+{t['entry_ns'][1.0] / 1e3:.2f} us (median / p90 / last); exits "
              + " / ".join(f"{t['exit_ns'][q] / 1e3:.1f}" for q in (0.0, 0.5, 0.9, 1.0)) + " us (first / median / "
              f"p90 / last), mean {t['exit_mean_ns'] / 1e3:.1f} us")
        print(f"  per SM ({t['sms']} with tiles, {t['idle_rows']} rows without): last exits "
              + " / ".join(f"{t['sm_last_exit_ns'][q] / 1e3:.1f}" for q in (0.0, 0.5, 1.0))
              + f" us (first / median / last SM); the rows of one SM exit a median {t['sm_exit_gap_ns'] / 1e3:.1f} us "
              "apart")
        per = r["sm_persistence"]
        if "correlation" in per:
            print(f"  the same SMs slow in a second run on other inputs? last exits correlate {per['correlation']:.2f} "
                  f"over {per['sms']} SMs; the first run's fastest / slowest third then "
                  f"{per['fast_third_ns'] / 1e3:.1f} / {per['slow_third_ns'] / 1e3:.1f} us")
        line = (f"  per program (median): split {t['split_ns']:.0f} ns, query ready {t['ready_ns']:.0f}, first tile "
                f"{t['first_tile_ns']:.0f}, period {t['period_ns']:.0f} (p90 {t['period_p90_ns']:.0f}), end "
                f"{t['end_ns']:.0f}")
        wg2 = bool(r["config"].get("WG2"))
        if heads >= 64 or wg2:
            for w in (0, 1):
                line += (f"; WG{w} in a pair: top -> own scores retired {t[f'wg{w}_scores_ns']:.0f}, -> P handed "
                         f"{t[f'wg{w}_softmax_ns']:.0f}, other's P waited {t[f'wg{w}_other_p_ns']:.0f}"
                         + (" (after the hand-off)" if w == 0 or wg2 else " (from the top)"))
                pro = [f"{name} {t[f'wg{w}_pro{x}_ns']:.0f}" for x, name in enumerate(
                    ("segment found", "copies issued", "rope requested", "query landed", "query converted"))
                    if f"wg{w}_pro{x}_ns" in t]
                if pro:
                    line += f"; WG{w} from the split: " + ", ".join(pro)
                if f"wg{w}_finish_in_ns" in t:
                    line += (f"; last pair's top -> end entered {t[f'wg{w}_finish_in_ns']:.0f}, sums exchanged "
                             f"{t[f'wg{w}_exchanged_ns']:.0f}, stored {t[f'wg{w}_stored_ns']:.0f}")
        else:
            line += f"; of a period: waiting {t['wait_ns']:.0f} (p90 {t['wait_p90_ns']:.0f}), busy {t['busy_ns']:.0f}"
        print(line, flush=True)
        if "profile" in r:
            print("\n".join(profile_lines(r)), flush=True)
        if r.get("lengths"):
            for p in r["lengths"]:
                print(f"  {p['tokens']} tokens: split {p['split_ms']:.4f} ms, decode {p['decode_ms']:.4f} ms")
            if len(r["lengths"]) > 1:
                a_s, b_s = _fit(r["lengths"], "split_ms")
                a_d, b_d = _fit(r["lengths"], "decode_ms")
                r["fit"] = {"split_fixed_us": a_s, "split_us_per_ktok": b_s, "decode_fixed_us": a_d,
                            "decode_us_per_ktok": b_d}
                print(f"  line through them: split {a_s:.1f} us + {b_s:.2f} us / 1k tokens; decode {a_d:.1f} us + "
                      f"{b_d:.2f} us / 1k tokens", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "commit": git_commit(), "rows": rows}))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
