"""Kernel-level Nsight Compute figures side by side: one row per profiled launch of one or more reports' raw pages
(``ncu --import REPORT --page raw --csv``), the metrics that say what bounds a decode kernel: its time, the SM's,
L1 / shared memory's, L2's and DRAM's share of their peaks, the tensor pipe's, the shared-memory wavefronts the
load-store unit issued, the instructions issued, registers and shared memory a block, and the warps' occupancy.

    python benchmarks/probes/ncu_kernels.py $OUT/ncu_fp8_raw.csv $OUT/ncu_bf16_raw.csv --out summary.json

A metric a report does not hold is shown as ``-`` (sections differ between calls). ``tensor_%`` is the tensor pipe's
active cycles against the elapsed ones (wgmma work, however it is fed), ``issue_%`` the SMs' issue slots used.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import sys
from pathlib import Path

# (label, raw metric name): what the table prints, in order
METRICS = (
    ("us", "gpu__time_duration.sum"),
    ("sm_%", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("l1_%", "l1tex__throughput.avg.pct_of_peak_sustained_active"),
    ("l2_%", "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("dram_%", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("tensor_%", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"),
    ("issue_%", "sm__issue_active.avg.pct_of_peak_sustained_elapsed"),
    ("smem_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"),
    ("insts", "smsp__inst_executed.sum"),
    ("regs", "launch__registers_per_thread"),
    ("smem_block", "launch__shared_mem_per_block_dynamic"),
    ("grid", "launch__grid_size"),
    ("warps_%", "sm__warps_active.avg.pct_of_peak_sustained_active"),
)


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def read(path: Path) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The units row and the launches of one raw page (dicts of column -> value)."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", errors="replace") as fh:
            rows = list(csv.reader(io.StringIO(fh.read())))
    except OSError as exc:
        raise SystemExit(f"ncu_kernels: {path}: {exc.strerror or exc}") from None
    start = next((i for i, r in enumerate(rows) if "Kernel Name" in r and "ID" in r), None)
    if start is None:
        raise SystemExit(f"ncu_kernels: {path}: no 'ID' / 'Kernel Name' header (not an ncu --page raw --csv output)")
    header = rows[start]
    body = [r for r in rows[start + 1:] if len(r) == len(header)]
    # (the row after the header holds the units: its ID cell is empty)
    key = header.index("ID")
    units = next((dict(zip(header, r)) for r in body if not r[key].strip()), {})
    return units, [dict(zip(header, r)) for r in body if r[key].strip()]


_TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}


def summarise(path: Path) -> list[dict]:
    """Per launch: its report, kernel name (up to its first '(' or '<'), and the METRICS and tensor-pipe values."""
    out = []
    units, launches = read(path)
    for launch in launches:
        name = launch["Kernel Name"]
        short = name.split("(")[0].split("<")[0].strip() or name
        row: dict = {"report": path.name, "id": launch["ID"], "kernel": short}
        for label, metric in METRICS:
            if metric in launch:
                row[label] = _number(launch[metric])
        if row.get("us") is not None:
            unit = units.get(METRICS[0][1], "").strip()
            if unit not in _TO_US:
                raise SystemExit(f"ncu_kernels: {path}: duration in {unit!r}, expected one of {sorted(_TO_US)}")
            row["us"] *= _TO_US[unit]
        out.append(row)
    return out


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() or abs(value) >= 1e5 else f"{value:,.1f}"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("raw", nargs="+", type=Path, help="ncu --page raw --csv outputs (.csv or .csv.gz)")
    ap.add_argument("--out", type=Path, default=None, help="the rows as JSON")
    args = ap.parse_args(argv)
    rows = [row for path in args.raw for row in summarise(path)]
    if not rows:
        print(f"ncu_kernels: no launches in {', '.join(str(p) for p in args.raw)}", file=sys.stderr)
        return 2
    labels = [label for label, _ in METRICS]
    print("| report | kernel | " + " | ".join(labels) + " |")
    print("| --- " * (len(labels) + 2) + "|")
    for r in rows:
        print(f"| {r['report']} | {r['kernel'][:60]} | " + " | ".join(_cell(r.get(k)) for k in labels) + " |")
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
