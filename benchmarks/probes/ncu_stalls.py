"""Where a kernel's warps wait, from Nsight Compute's per-SASS-line source view: the stall reasons over the whole
kernel and the lines with the most samples, each with the mbarrier try-wait before it (a ``@!P BRA`` right after
``SYNCS.PHASECHK.TRANS64.TRYWAIT`` is the wait loop of that mbarrier: its samples are time spent waiting on it).

The CSV is what ``ncu --import REPORT --page source --print-source sass --csv`` prints (plain or gzipped), e.g. the
ones ``docs/gpu_calls/session39/s39c.sh`` brought back (benchmarks/results/ncu/):

    python benchmarks/probes/ncu_stalls.py benchmarks/results/ncu/ncu_h100_session39_callB_pp_reload1_sass.csv.gz

Prints the partitions (code between ``EXIT`` lines), the reasons' shares, and the top lines; ``--top N``.
"""
from __future__ import annotations

import argparse
import collections
import csv
import gzip
import io
import sys


def _num(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def read(path: str) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of one kernel's source view."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", errors="replace") as fh:
        rows = list(csv.reader(io.StringIO(fh.read())))
    start = next((i for i, r in enumerate(rows) if "Source" in r and "Address" in r), None)
    if start is None:
        raise SystemExit(f"ncu_stalls: {path}: no 'Address' / 'Source' header (not a --page source --csv output)")
    header = rows[start]
    return header, [r for r in rows[start + 1:] if len(r) == len(header)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="ncu --page source --print-source sass --csv output (.csv or .csv.gz)")
    ap.add_argument("--top", type=int, default=20, help="lines to list (default 20)")
    args = ap.parse_args(argv)
    if args.top < 0:
        print(f"ncu_stalls: --top must be >= 0, got {args.top}", file=sys.stderr)
        return 2
    header, data = read(args.csv)
    col = {h: i for i, h in enumerate(header)}
    samples = col.get("Warp Stall Sampling (All Samples)")
    if samples is None:
        print("ncu_stalls: no 'Warp Stall Sampling (All Samples)' column (profile with --section SourceCounters)",
              file=sys.stderr)
        return 2
    source = col["Source"]
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(_num(r[samples]) for r in data) or 1.0
    exits = [i for i, r in enumerate(data) if "EXIT" in r[source]]
    print(f"{len(data)} SASS lines, {total:.0f} samples; EXIT at lines {exits}")
    agg = collections.Counter({h: sum(_num(r[col[h]]) for r in data) for h in reasons})
    print("reasons: " + ", ".join(f"{h[6:]} {100 * v / total:.1f}%" for h, v in agg.most_common(12) if v))
    ranked = sorted(range(len(data)), key=lambda i: -_num(data[i][samples]))[:args.top]
    for i in ranked:
        row = data[i]
        top = sorted(((_num(row[col[h]]), h[6:]) for h in reasons if _num(row[col[h]]) > 0), reverse=True)[:2]
        waits = ""
        for k in range(i - 1, max(i - 4, -1), -1):
            if "SYNCS.PHASECHK" in data[k][source]:
                waits = "  <- " + data[k][source].strip()
                break
        print(f"{i:6d} {100 * _num(row[samples]) / total:5.1f}%  {row[source].strip()[:60]:60s} "
              f"{', '.join(f'{name} {v:.0f}' for v, name in top)}{waits}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
