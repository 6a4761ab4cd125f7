"""Benchmark of graphtune's MLA decode kernel on a CUDA GPU (a script, not a timed test).

For each cache format and page size: every config of the sweep at every batch size, timed by CUDA graph
replay over rotating input sets larger than the L2 (one graph holds one call per set; time = replay time /
sets). Prints ms, effective TB/s (bytes = B * tokens * (row bytes + 4)) and the percentage of a
device-to-device copy measured in the same run, the per-bucket winners and the gain of per-bucket choice
over the best single config; writes everything to JSON (GPU, versions, commit).

    PYTHONPATH=src python benchmarks/bench_mla_decode.py                       # space.CONFIGS, all sizes
    PYTHONPATH=src python benchmarks/bench_mla_decode.py --configs default --formats fp8 --page-sizes 1
    PYTHONPATH=src python benchmarks/bench_mla_decode.py --check               # correctness first

``--configs`` takes ``space``, ``default`` or ``;``-separated ``NAME=VALUE,...`` configs (missing names
keep the default's values).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
import triton

from graphtune.configs import config_from_dict, config_label, config_to_dict, parse_params
from graphtune.kernels.mla_decode import bench, interface, reference, space

ROOT = Path(__file__).resolve().parent.parent


def parse_configs(text: str) -> list[triton.Config]:
    if text == "space":
        return list(space.CONFIGS)
    if text == "default":
        return [space.DEFAULT]
    base = config_to_dict(space.DEFAULT)
    return [config_from_dict({**base, **parse_params(item)}) for item in text.split(";") if item.strip()]


def git_commit() -> str:
    if os.environ.get("GIT_COMMIT"):
        return os.environ["GIT_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def copy_bandwidth(nbytes: int = 2 * 2 ** 30) -> float:
    """Device-to-device copy, bytes read plus written, TB/s (median of 10)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    src.random_(0, 255)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(10):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    del src, dst
    return 2 * nbytes / statistics.median(times) / 1e12


def graph_time_ms(calls: list, reps: int = 20, trials: int = 5) -> float:
    """Median over trials of (graph replay time / calls per graph); the graph replays ``reps`` times a trial."""
    for c in calls:
        c()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for c in calls:
            c()
    graph.replay()
    torch.cuda.synchronize()
    out = []
    for _ in range(trials):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            graph.replay()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) / (reps * len(calls)))
    del graph
    return statistics.median(out)


def _compile_job(job: tuple[str, int, int, dict]) -> str:
    """Worker: run one (format, page size, heads, config) once on tiny inputs to fill Triton's disk cache."""
    kv_format, page_size, heads, cfg = job
    config = config_from_dict(cfg)
    try:
        problem = bench.Problem(batch=3, heads=heads, tokens=64 * max(1, page_size), page_size=page_size,
                                kv_format=kv_format)
        bench.run_inputs(bench.make_inputs(problem), kv_format, config)()
        torch.cuda.synchronize()
        return ""
    except Exception as exc:  # noqa: BLE001 - reported by the parent
        return f"{kv_format} ps{page_size} H{heads} {config_label(config)}: {type(exc).__name__}: {str(exc)[:300]}"


def precompile(jobs: list[tuple[str, int, int, triton.Config]], workers: int) -> list[str]:
    """Compile every job in parallel processes; the parent then loads the binaries from the cache."""
    if workers <= 1 or len(jobs) <= 1:
        return [e for e in map(_compile_job, [(f, p, h, config_to_dict(c)) for f, p, h, c in jobs]) if e]
    import multiprocessing as mp
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        errs = list(pool.map(_compile_job, [(f, p, h, config_to_dict(c)) for f, p, h, c in jobs]))
    return [e for e in errs if e]


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    if not torch.isfinite(a).all():
        return float("inf")
    return ((a - b).norm() / b.norm()).item()


def check(configs: list[triton.Config], heads_list: list[int]) -> list[dict]:
    """Each config on mixed lengths (fp8 and fp8_ds_mla), and the default over formats x page sizes x H."""
    rows = []
    gen = torch.Generator().manual_seed(1234)

    def case(kv_format: str, page_size: int, heads: int, config: triton.Config, batch: int = 5) -> dict:
        lens = torch.randint(1, 3000, (batch,), generator=gen).to(torch.int32)
        lens[0] = 1
        problem = bench.Problem(batch, heads, int(lens.max()), page_size, kv_format)
        x = bench.make_inputs(problem, seed=int(torch.randint(0, 1000, (1,), generator=gen)))
        x["seq_lens"] = lens.cuda()
        x["out"].fill_(float("nan"))
        sm = 1.0 / math.sqrt(576)
        out, lse = interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], sm, x["kv_scale"],
                                     kv_format, x["out"], True, config=config)
        ref, ref_lse = reference.mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], sm,
                                                      kv_scale=x["kv_scale"], kv_format=kv_format, return_lse=True)
        return dict(kv_format=kv_format, page_size=page_size, heads=heads, config=config_label(config),
                    rel_err=rel_err(out, ref), lse_err=(lse - ref_lse).abs().max().item())

    for config in configs:
        for kv_format in ("fp8", "fp8_ds_mla"):
            rows.append(case(kv_format, 1, 16, config))
    for kv_format in ("fp8", "bf16", "fp8_ds_mla"):
        for page_size in (1, 16, 64):
            for heads in heads_list:
                rows.append(case(kv_format, page_size, heads, space.DEFAULT, batch=3))
    return rows


def summarize(times: dict[str, dict[int, float]], sizes: list[int]) -> dict:
    """Per-bucket winners, the best single config (least summed time over sizes) and the tuning gain."""
    winners = {b: min(times, key=lambda c: times[c][b]) for b in sizes}
    single = min(times, key=lambda c: sum(times[c][b] for b in sizes))
    gains = {b: times[single][b] / times[winners[b]][b] for b in sizes}
    return dict(winners={b: [winners[b], times[winners[b]][b]] for b in sizes}, best_single=single,
                best_single_ms={b: times[single][b] for b in sizes},
                gain_per_bucket=gains, gain_total=sum(times[single][b] for b in sizes)
                / sum(times[winners[b]][b] for b in sizes))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", default="fp8,fp8_ds_mla")
    ap.add_argument("--page-sizes", default="1,64")
    ap.add_argument("--batches", default="1,8,32,60,90,128")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--configs", default="space")
    ap.add_argument("--configs-file", default=None, help="read --configs from this file")
    ap.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1))
    ap.add_argument("--check", action="store_true", help="correctness against the reference first")
    ap.add_argument("--check-heads", default="16,32,64,128")
    ap.add_argument("--out", default=None, help="JSON path (default benchmarks/results/mla_decode_<time>.json)")
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_mla_decode: needs a CUDA GPU", file=sys.stderr)
        return 2
    configs = parse_configs(Path(args.configs_file).read_text().strip() if args.configs_file else args.configs)
    formats = args.formats.split(",")
    page_sizes = [int(p) for p in args.page_sizes.split(",")]
    sizes = [int(b) for b in args.batches.split(",")]
    t0 = time.time()
    jobs = [(f, p, args.heads, c) for f in formats for p in page_sizes for c in configs]
    if args.check:
        heads_list = [int(h) for h in args.check_heads.split(",")]
        jobs += [("fp8_ds_mla", 1, 16, c) for c in configs if "fp8_ds_mla" not in formats]
        jobs += [(f, p, h, space.DEFAULT) for f in ("fp8", "bf16", "fp8_ds_mla") for p in (1, 16, 64)
                 for h in heads_list]
    seen, unique = set(), []
    for f, p, h, c in jobs:
        k = (f, p, h, config_label(c))
        if k not in seen:
            seen.add(k)
            unique.append((f, p, h, c))
    errors = precompile(unique, args.workers)
    print(f"compiled {len(unique)} variants in {time.time() - t0:.0f} s; {len(errors)} failed", flush=True)
    for e in errors:
        print("  compile error:", e, flush=True)
    result: dict = dict(
        gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
        python=platform.python_version(), commit=git_commit(), tag=args.tag,
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        command=" ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), heads=args.heads, tokens=args.tokens,
        compile_errors=errors)
    if args.check:
        result["check"] = check(configs, heads_list)
        worst = max(r["rel_err"] for r in result["check"])
        print(f"check: {len(result['check'])} cases, worst rel err {worst:.2e}", flush=True)
        for r in result["check"]:
            if not r["rel_err"] <= 1e-2:
                print("  FAIL", r, flush=True)
    copy_tbs = copy_bandwidth()
    result["copy_tbs"] = copy_tbs
    print(f"device-to-device copy: {copy_tbs:.2f} TB/s (read + write)", flush=True)
    rows, summaries = [], {}
    for kv_format in formats:
        for page_size in page_sizes:
            target = bench.MlaDecodeTarget(heads=args.heads, tokens=args.tokens, page_size=page_size,
                                           kv_format=kv_format)
            times: dict[str, dict[int, float]] = {}
            for b in sizes:
                for config in configs:
                    label = config_label(config)
                    try:
                        ms = graph_time_ms(target.make(b, config))
                    except Exception as exc:  # noqa: BLE001 - a failing config is recorded, not fatal
                        print(f"  {kv_format} ps{page_size} B{b} {label}: {type(exc).__name__}: {exc}"[:300])
                        ms = float("inf")
                    tbs = target.bytes_moved(b) / (ms * 1e-3) / 1e12
                    times.setdefault(label, {})[b] = ms
                    rows.append(dict(kv_format=kv_format, page_size=page_size, batch=b, config=label, ms=ms,
                                     tbs=tbs, pct_copy=100 * tbs / copy_tbs))
                target.release()
                torch.cuda.empty_cache()
            good = {c: t for c, t in times.items() if all(math.isfinite(v) for v in t.values())}
            if good:
                summaries[f"{kv_format}/ps{page_size}"] = summarize(good, sizes)
    result["rows"] = rows
    result["summaries"] = summaries
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / (
        "mla_decode_" + datetime.datetime.now().strftime("%Y%m%d_%H%M%S") + ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str))
    # The table last: it is what a reader (and a remote run's output tail) sees.
    print(f"\n{'format':<11}{'ps':>3}{'B':>5}  {'best config':<58}{'ms':>8}{'TB/s':>7}{'%copy':>7}")
    for key, s in summaries.items():
        kv_format, ps = key.split("/ps")
        for b, (label, ms) in s["winners"].items():
            tbs = bench.Problem(b, args.heads, args.tokens, int(ps), kv_format).bytes_moved() / (ms * 1e-3) / 1e12
            print(f"{kv_format:<11}{ps:>3}{b:>5}  {label:<58}{ms:8.4f}{tbs:7.2f}{100 * tbs / copy_tbs:7.1f}")
        print(f"  best single config {s['best_single']}: "
              + " ".join(f"B{b}={ms:.4f}" for b, ms in s["best_single_ms"].items())
              + f"; per-bucket tuning gains {100 * (s['gain_total'] - 1):.1f}% in total")
    print(f"wrote {out} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
