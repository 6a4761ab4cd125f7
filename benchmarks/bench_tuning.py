"""Tuning time and regret: graphtune's tuner vs stock ``triton.autotune`` on the MLA decode kernel (GPU).

For every capture size: compile every candidate first (timed separately); a long exhaustive graph-replay
measurement of every candidate gives the reference ranking; then graphtune tunes the key (graph replay +
early elimination) and stock ``triton.autotune`` tunes it (eager ``do_bench`` per config), both after
compilation, in the same run. Regret = reference time of the chosen config / reference time of the best - 1.

Stock tuning takes about 0.1 s per config per key, so by default it is measured on a subset of the sizes
(``--stock-sizes``) and its total over all sizes is reported both as measured and as the per-key mean times
the number of sizes (labelled as extrapolated).

    PYTHONPATH=src python benchmarks/bench_tuning.py [--sizes 1,2,4,...] [--stock-sizes 1,8,32,128]
        [--reference-samples 30] [--out DIR]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("GRAPHTUNE_NO_DB", "1")   # measure tuning, not a database hit

import torch  # noqa: E402
import triton  # noqa: E402

from _common import write_result  # noqa: E402
from graphtune.configs import config_label  # noqa: E402
from graphtune.keys import ENGINE_CAPTURE_SIZES  # noqa: E402
from graphtune.search import prune  # noqa: E402
from graphtune.timing import GraphReplaySampler  # noqa: E402

CAPTURE_SIZES = [s for s in ENGINE_CAPTURE_SIZES if s <= 128]   # the demo stops at 128


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, CAPTURE_SIZES)))
    ap.add_argument("--stock-sizes", default="1,8,32,128")
    ap.add_argument("--reference-samples", type=int, default=30)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_tuning needs a CUDA GPU", file=sys.stderr)
        return 2
    from graphtune.kernels.mla_decode.bench import TUNE_TARGET
    target = TUNE_TARGET
    kernel = target.kernel
    sizes = [int(s) for s in args.sizes.split(",")]
    stock_sizes = [int(s) for s in args.stock_sizes.split(",") if s]

    per_size = []
    compile_s = 0.0
    for size in sizes:
        a, kw, grid = target.make_args(size)
        nargs = {**dict(zip(kernel.arg_names, a)), **kw}
        candidates = prune(kernel.space, nargs, kw)
        t0 = time.perf_counter()
        failures = kernel._compile_all(candidates, a, kw, grid, skip=set())
        torch.cuda.synchronize()
        compile_s += time.perf_counter() - t0
        alive = [i for i in range(len(candidates)) if i not in failures]
        calls = kernel._rotating_calls(candidates, alive, a, kw, grid, nargs)
        sampler = GraphReplaySampler(calls, flush_l2=len(calls[0]) == 1)
        ref = {}
        for j, i in enumerate(alive):
            ref[config_label(candidates[i])] = statistics.median(sampler(j, args.reference_samples))
        sampler.close()
        per_size.append({"size": size, "args": (a, kw, grid), "reference_ms": ref,
                         "failures": {config_label(candidates[i]): r for i, r in failures.items()},
                         "n_candidates": len(candidates)})
        del calls

    # graphtune: the kernel's own tuning path, every size, compilation already cached
    kernel.reset()
    gt_total = 0.0
    for row in per_size:
        a, kw, grid = row["args"]
        before = kernel.tune_count
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        kernel[grid](*a, **kw)
        torch.cuda.synchronize()
        row["graphtune_s"] = time.perf_counter() - t0
        row["graphtune_tuned_here"] = kernel.tune_count > before   # False: the size's bucket was already tuned
        gt_total += row["graphtune_s"]
        row["graphtune_choice"] = config_label(kernel.best_config)

    # stock triton.autotune over the same candidates and key
    stock = triton.autotune(configs=kernel.configs, key=kernel.keys,
                            prune_configs_by={"early_config_prune": kernel.early_config_prune}
                            if kernel.early_config_prune else None)(kernel.fn)
    stock_total = 0.0
    for row in per_size:
        if row["size"] not in stock_sizes:
            continue
        a, kw, grid = row["args"]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        stock[grid](*a, **kw)
        torch.cuda.synchronize()
        row["stock_s"] = time.perf_counter() - t0
        stock_total += row["stock_s"]
        row["stock_choice"] = config_label(stock.best_config)

    rows = []
    print(f"{'size':>5s} {'cands':>5s} {'best ms':>8s} {'graphtune s':>11s} {'gt regret':>9s} {'stock s':>8s} "
          f"{'stock regret':>12s}  graphtune choice")
    for row in per_size:
        ref = row["reference_ms"]
        best = min(ref.values())
        gt_regret = ref[row["graphtune_choice"]] / best - 1 if row["graphtune_choice"] in ref else None
        st_regret = (ref[row["stock_choice"]] / best - 1) if "stock_choice" in row and row["stock_choice"] in ref \
            else None
        out = {k: v for k, v in row.items() if k != "args"}
        out.update(best_ms=best, best_config=min(ref, key=ref.get), graphtune_regret=gt_regret,
                   stock_regret=st_regret)
        rows.append(out)
        print(f"{row['size']:5d} {row['n_candidates']:5d} {best:8.4f} {row['graphtune_s']:11.3f} "
              f"{_pct(gt_regret):>9s} {row.get('stock_s', float('nan')):8.2f} {_pct(st_regret):>12s}  "
              f"{row['graphtune_choice']}")
    measured = [r for r in rows if "stock_s" in r]
    stock_per_key = stock_total / len(measured) if measured else float("nan")
    gt_same = sum(r["graphtune_s"] for r in measured)
    summary = {
        "sizes": sizes, "stock_sizes": [r["size"] for r in measured], "compile_s": compile_s,
        "graphtune_total_s": gt_total, "graphtune_per_key_s": gt_total / len(rows),
        "graphtune_tunings": sum(r["graphtune_tuned_here"] for r in rows),
        "stock_measured_total_s": stock_total, "stock_per_key_s": stock_per_key,
        "stock_extrapolated_total_s": stock_per_key * len(rows),
        "graphtune_over_stock_same_keys": gt_same / stock_total if stock_total else None,
        "max_graphtune_regret": max(r["graphtune_regret"] for r in rows),
        "max_stock_regret": max((r["stock_regret"] for r in measured), default=None),
    }
    print(f"compile (all sizes, all candidates) {compile_s:.1f} s; graphtune tuning {gt_total:.2f} s over "
          f"{len(rows)} keys ({summary['graphtune_per_key_s']:.3f} s/key); stock {stock_per_key:.2f} s/key on "
          f"{len(measured)} keys (x{len(rows)} keys = {summary['stock_extrapolated_total_s']:.1f} s extrapolated); "
          f"graphtune/stock on the same keys {_pct(summary['graphtune_over_stock_same_keys'], sign=False)}; "
          f"worst regret graphtune {_pct(summary['max_graphtune_regret'])}, stock "
          f"{_pct(summary['max_stock_regret'])}")
    path = write_result("tuning", {"summary": summary, "rows": rows, "problem": target.describe()}, args.out)
    print(f"wrote {path}")
    return 0


def _pct(v, sign: bool = True) -> str:
    if v is None:
        return "-"
    return f"{v * 100:+.1f}%" if sign else f"{v * 100:.1f}%"


if __name__ == "__main__":
    sys.exit(main())
