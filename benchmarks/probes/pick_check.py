"""The tuner's timing of each candidate beside what the decode runs with that candidate pinned, in one process.

Why: in session 20's first GPU call (H200, fp8, H = 16, batch 8) the per-bucket tuning timed the second fp8
tokens-on-M kernel's two-buffer configs at 0.0150-0.0153 ms and its three-buffer ones at 0.0161-0.0162, and picked
two buffers, while the benchmark timed the decode with them pinned at 0.0189-0.0190 against 0.0162-0.0165: the tuner
measured two buffers ~4 us faster than the decode runs them and three buffers as the decode does. This probe takes
the decode apart for each config of the cell's space, on the benchmark's input sets (4096 tokens a request, page
size 64, CUDA graph replay): the split kernel alone, the split kernel followed by the reduction as a plain launch
(what the tuner's ``followed_by`` times), the decode as shipped (the reduction a programmatic dependent from
``reduction.PDL_MIN_BATCH`` requests up), the same over the number of input copies the tuner rotates, and
the tuner's own per-candidate medians (``graphtune.coverage()``) after a tuned decode of the cell. Run 2 of session 20
found the tuner rotating 2 input sets at batch 8 (copies counted by what they allocate: the cache three times a
set), warm enough in the L2 to time two buffers 2.3 us faster than cold; ``search.rotation_copies`` now counts what
a launch touches.

    PYTHONPATH=src python benchmarks/probes/pick_check.py --cells fp8:16:8,fp8:16:32 --out /tmp/pick_check.json

Prints one table per cell and writes JSON (GPU, versions, commit). Without a GPU it says so and exits 2.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_mla_decode import comma_list, git_commit, graph_time_ms, restore_hopper_configs  # noqa: E402
from bench_mla_decode import _use_hopper_config  # noqa: E402
from timeline import _cell_spec, _launcher  # noqa: E402

import graphtune  # noqa: E402
from graphtune import search, settings, timing  # noqa: E402
from graphtune.kernels.mla_decode import bench, interface, interface_hopper, reduction  # noqa: E402


@contextlib.contextmanager
def _plain_reduction():
    """The decode's reduction as a plain launch at every batch (as the tuner's follow-up launches it)."""
    saved = reduction.PDL_MIN_BATCH
    reduction.PDL_MIN_BATCH = 1 << 30
    try:
        yield
    finally:
        reduction.PDL_MIN_BATCH = saved


def _split_calls(xs: list[dict], fmt: str, heads: int, pinned: dict, sms: int) -> list:
    """The split kernel alone (no reduction) with ``pinned`` on each input set (the timeline probe's launcher,
    unstamped)."""
    return [lambda call=_launcher(x, fmt, heads, sms, config=pinned)[0]: call(None) for x in xs]


def _tuner_copies(x: dict, fmt: str, heads: int, sms: int) -> int:
    """How many input sets the tuner rotates for this cell (``search.rotation_copies`` over the tuned launch's
    arguments, as ``search._rotating_calls`` counts them)."""
    args, _, _, _ = interface_hopper.tuned_second_call(
        x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 1.0 / math.sqrt(576), x["kv_scale"], fmt, x["out"],
        False, sms=sms)
    return search.rotation_copies(list(args), timing.l2_bytes(), settings.timer_mem_mb() * 2**20)[0]


def _as_dict(label: str) -> dict[str, int]:
    """A tuner config label (``BLOCK_N=64,NUM_BUF=2,...,num_warps=4,num_stages=3``) as its kernel keys."""
    pairs = (item.split("=") for item in label.split(","))
    return {k: int(v) for k, v in pairs if k not in ("num_warps", "num_stages", "num_ctas", "maxnreg")}


def cell(fmt: str, heads: int, batch: int) -> dict:
    on_m = interface_hopper._heads_on_m(heads)
    second = interface_hopper.SECOND.get((on_m, fmt))
    if second is None or batch < second.min_batch:
        raise SystemExit(f"pick_check: {fmt}:{heads}:{batch} is not served by a tuned second kernel")
    sms = interface._sm_count(torch.device("cuda"))
    target = bench.MlaDecodeTarget(heads=heads, tokens=4096, page_size=64, kv_format=fmt)
    xs = target.inputs(batch)
    copies = _tuner_copies(xs[0], fmt, heads, sms)
    rows = []
    for c in second.space:
        variant = {second.flag: 1, **c}
        pinned = _use_hopper_config(heads, variant, fmt)
        row = {"config": variant}
        row["split_ms"] = graph_time_ms(_split_calls(xs, fmt, heads, interface_hopper.pinned_config(
            heads, fmt, pinned.kwargs), sms))
        with _plain_reduction():
            row["split_plain_reduce_ms"] = graph_time_ms(target.make(batch, pinned, path="hopper"))
            # (over the first ``tuner_copies`` input sets only)
            row["split_plain_reduce_tuner_sets_ms"] = graph_time_ms(target.make(batch, pinned, path="hopper")[:copies])
        row["decode_ms"] = graph_time_ms(target.make(batch, pinned, path="hopper"))
        rows.append(row)
    restore_hopper_configs()
    tuned_ms = graph_time_ms(target.make(batch, None, path="hopper"))
    picks = [r for k in graphtune.coverage().to_dict()["kernels"] if k["name"] == second.name for r in k["tuned"]
             if r["key"][0] == batch]
    target.release()
    torch.cuda.empty_cache()
    return {"kv_format": fmt, "heads": heads, "batch": batch, "sets": len(xs), "tuner_copies": copies, "rows": rows,
            "tuned_decode_ms": tuned_ms, "tuner": picks}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=comma_list(_cell_spec), default=[_cell_spec("fp8:16:8"), _cell_spec("fp8:16:32")])
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/pick_check.json"))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("pick_check: needs a CUDA GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    result = {"gpu": gpu, "torch": torch.__version__, "triton": triton.__version__, "commit": git_commit(),
              "cells": []}
    for fmt, heads, batch in args.cells:
        r = cell(fmt, heads, batch)
        result["cells"].append(r)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1, default=str))
        print(f"\n{gpu}: {fmt} H={heads} B={batch}, {r['sets']} input sets (the tuner rotates {r['tuner_copies']}); "
              f"tuned decode {r['tuned_decode_ms']:.4f} ms")
        tuner = {}
        for pick in r["tuner"]:
            for t in pick.get("timings", []):
                tuner[json.dumps(_as_dict(t["config"]), sort_keys=True)] = t["median_ms"]
        print("| config | split alone | + plain reduction | same, tuner's copies | decode as shipped "
              "| tuner's median |")
        print("| --- | --- | --- | --- | --- | --- |")
        for row in r["rows"]:
            label = ",".join(f"{k}={v}" for k, v in row["config"].items())
            flag = next(iter(row["config"]))
            mine = tuner.get(json.dumps({k: v for k, v in row["config"].items() if k != flag}, sort_keys=True))
            print(f"| {label} | {row['split_ms']:.4f} | {row['split_plain_reduce_ms']:.4f} | "
                  f"{row['split_plain_reduce_tuner_sets_ms']:.4f} | "
                  f"{row['decode_ms']:.4f} | {'-' if mine is None else f'{mine:.4f}'} |")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
