"""Several runs of ``bench_mla_decode.py --vs-flashmla`` side by side: which cells a change moved beyond noise.

Each run (its JSON) times FlashMLA and graphtune's public call in the same process. FlashMLA is the same code in every
run, so its change between two runs is the run-to-run drift of the machine (clocks under the power cap, another H200,
the L2's state), and graphtune's time over FlashMLA's in the same run (the ratio) is what a change of graphtune's code
moves. For every cell (uniform or ragged batch, format, heads, batch) and every graphtune column present in all runs,
this prints each run's ratio and the ratio's change against the first run (the baseline), beside FlashMLA's own change
(the drift). The rule it prints by: a change is *beyond noise* where the ratio moved by more than the larger of the
drift and ``--floor`` (1% unless given); faster / slower are counted per run, cell by cell.

    python benchmarks/compare_mla_tables.py main.json fused.json fp16.json --labels main,fused,fp16 \\
        --out benchmarks/results/compare.json

Reads JSON only (no GPU); prints one table per column and format, then the counts, and writes them with ``--out``.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

TUNED = "tuned (as shipped)"


def _cells(result: dict) -> dict[tuple, dict[str, float]]:
    """(kind, format, heads, batch) -> {"flashmla": ms, <graphtune column>: ms, "lengths": ...} of one run."""
    cells: dict[tuple, dict] = {}
    for kind, key in (("uniform", "vs_rows"), ("ragged", "ragged_rows")):
        for r in result.get(key, []):
            cell = cells.setdefault((kind, r["kv_format"], r["heads"], r["batch"]), {})
            # (older runs' ragged rows name no config: the tuned path's, the one graphtune column they timed)
            name = "flashmla" if r["impl"] == "flashmla" else r.get("config", TUNED)
            cell[name] = r["ms"]
            if "len_mean" in r:
                cell["lengths"] = (r["len_min"], r["len_mean"], r["len_max"])
    return cells


def compare(results: list[dict], labels: list[str], floor: float = 0.01) -> dict:
    """The comparison of ``results`` (the first the baseline): per column, rows of every cell all runs timed, and the
    count of cells each later run made faster / slower beyond noise or left within it."""
    runs = [_cells(r) for r in results]
    keys = [k for k in runs[0] if all(k in c and "flashmla" in c[k] for c in runs)]
    columns = [c for c in dict.fromkeys(n for k in keys for n in runs[0][k]) if c not in ("flashmla", "lengths")
               and all(c in run[k] for run in runs for k in keys)]
    out = {"labels": labels, "floor": floor, "columns": {}}
    for column in columns:
        rows, counts = [], {label: {"faster": 0, "slower": 0, "within": 0} for label in labels[1:]}
        for key in sorted(keys, key=lambda k: (k[0] != "uniform", k[1], k[2], k[3])):
            fl = [run[key]["flashmla"] for run in runs]
            ms = [run[key][column] for run in runs]
            ratio = [m / f for m, f in zip(ms, fl)]
            lengths = [run[key].get("lengths") for run in runs]
            row = {"kind": key[0], "kv_format": key[1], "heads": key[2], "batch": key[3], "flashmla_ms": fl,
                   "ms": ms, "ratio": ratio, "lengths": lengths[0], "verdict": {}}
            for i, label in enumerate(labels[1:], start=1):
                drift = fl[i] / fl[0] - 1
                change = ratio[i] / ratio[0] - 1
                if lengths[i] != lengths[0]:
                    verdict = "other lengths"     # (ragged batches of another seed: not the same work)
                else:
                    verdict = ("within" if abs(change) <= max(abs(drift), floor) else "faster" if change < 0
                               else "slower")
                    counts[label][verdict] += 1
                row["verdict"][label] = {"ratio_change": change, "flashmla_drift": drift, "verdict": verdict}
            rows.append(row)
        out["columns"][column] = {"rows": rows, "counts": counts}
    return out


def print_comparison(cmp: dict) -> None:
    labels = cmp["labels"]
    for column, got in cmp["columns"].items():
        print(f"\n{column}: ratio = graphtune / FlashMLA in the same run; change = the ratio against {labels[0]}'s, "
              f"FlashMLA drift = FlashMLA's own time against {labels[0]}'s run (beyond noise: |change| > "
              f"max(drift, {cmp['floor']:.0%}))")
        head = "| batch | format | H | B | FlashMLA ms |" + "".join(f" {lb} ms | ratio |" for lb in labels) + \
            "".join(f" {lb}: change / drift |" for lb in labels[1:])
        print(head)
        print("|" + " --- |" * (head.count("|") - 1))
        for r in got["rows"]:
            cells = "".join(f" {m:.4f} | {q:.2f} |" for m, q in zip(r["ms"], r["ratio"]))
            moves = "".join(f" {v['ratio_change']:+.1%} / {v['flashmla_drift']:+.1%}"
                            f"{'' if v['verdict'] == 'within' else ' ' + v['verdict']} |"
                            for v in r["verdict"].values())
            print(f"| {r['kind']} | {r['kv_format']} | {r['heads']} | {r['batch']} | {r['flashmla_ms'][0]:.4f} |"
                  f"{cells}{moves}")
        for label, c in got["counts"].items():
            others = sum(1 for r in got["rows"] if r["verdict"][label]["verdict"] == "other lengths")
            print(f"{label} against {labels[0]}: {c['faster']} faster, {c['slower']} slower, {c['within']} within "
                  f"noise ({column})" + (f"; {others} ragged cells of other lengths not compared" if others else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="bench_mla_decode.py --vs-flashmla JSON, baseline first")
    parser.add_argument("--labels", help="comma-separated names of the runs (default: the files' stems)")
    parser.add_argument("--floor", type=float, default=0.01, help="the smallest change counted beyond noise (0.01)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    labels = args.labels.split(",") if args.labels else [p.stem for p in args.runs]
    if len(args.runs) < 2 or len(labels) != len(args.runs):
        parser.error(f"--labels: {len(labels)} names for {len(args.runs)} runs (two runs at least, a name each)")
    if not 0 <= args.floor < 1:
        parser.error(f"--floor: {args.floor}, expected a fraction in [0, 1)")
    results = []
    for path in args.runs:
        try:
            results.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            parser.error(f"run {path}: {exc}")
    cmp = compare(results, labels, args.floor)
    # what each run was: its GPU, versions and commit as its JSON records them
    cmp["runs"] = [{"label": label, "path": str(path), **{k: r.get(k) for k in ("gpu", "torch", "triton", "commit",
                                                                             "date", "ragged_seed")}}
                   for label, path, r in zip(labels, args.runs, results)]
    if not cmp["columns"]:
        print("no cell timed by every run with FlashMLA beside it: nothing to compare")
        return 1
    print_comparison(cmp)
    if args.out:
        args.out.write_text(json.dumps(cmp, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
