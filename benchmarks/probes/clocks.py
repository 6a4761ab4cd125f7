"""The SM clock and board power while graphtune's MLA decode and FlashMLA's run, cell by cell, in one process.

Why: every in-kernel timeline of graphtune's Hopper kernels (sessions 18-20, H200) measured the SMs at 1.71-1.84
GHz, where the H200 reached 1980 MHz after large matrix products (the device notes, 2026-10-28). The H = 128 cells are
bound by the tensor cores and shared memory (a pair of tiles every 3.6 us, bf16), so a peer that runs at a higher
clock on the same card is faster by that ratio for the same schedule. This probe replays each implementation's decode
(CUDA graph over rotating input sets, 4096 tokens a request, page size 64) for ``--seconds`` while ``nvidia-smi``
samples the SM clock, the power draw and the active clock-throttle reasons every 50 ms, twice in alternation
(graphtune, FlashMLA, graphtune, FlashMLA) so that a drift of temperature shows.

    PYTHONPATH=src python benchmarks/probes/clocks.py --cells bf16:128:64,fp8:128:64,fp8:16:128 --out /tmp/clocks.json

Prints one table (the medians of the samples taken while each replay loop ran) and writes JSON (GPU, versions,
commit, every sample). Without a GPU it says so and exits 2; without FlashMLA it times graphtune alone.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_mla_decode import capture_graph, comma_list, flashmla_call, git_commit, import_flashmla  # noqa: E402
from timeline import _cell_spec  # noqa: E402

from graphtune.kernels.mla_decode import bench  # noqa: E402
from graphtune.kernels.mla_decode.reference import D_QK  # noqa: E402

_QUERY = "clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"


def _parse(line: str) -> dict | None:
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 4:
        return None
    try:
        return {"sm_mhz": float(parts[0]), "power_w": float(parts[1]), "temp_c": float(parts[2]),
                "throttle": parts[3]}
    except ValueError:
        return None


def sampled_loop(graph: torch.cuda.CUDAGraph, calls_per_graph: int, seconds: float) -> dict:
    """Replay ``graph`` for about ``seconds`` while nvidia-smi samples; the samples of the loop's middle 80%."""
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={_QUERY}", "--format=csv,noheader,nounits", "-lms", "50"],
                           stdout=subprocess.PIPE, text=True)
    start = time.monotonic()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    replays = 0
    while time.monotonic() - start < seconds:
        for _ in range(20):
            graph.replay()
        replays += 20
        torch.cuda.synchronize()         # (keeps the host near the device, so the samples' times are the loop's)
    b.record()
    torch.cuda.synchronize()
    elapsed = time.monotonic() - start
    smi.terminate()
    lines = smi.communicate(timeout=10)[0].splitlines()
    samples = [s for s in map(_parse, lines) if s]
    trim = samples[len(samples) // 10: len(samples) - len(samples) // 10] or samples
    return {"ms_per_call": a.elapsed_time(b) / (replays * calls_per_graph), "seconds": elapsed,
            "samples": samples,
            "sm_mhz": statistics.median(s["sm_mhz"] for s in trim) if trim else float("nan"),
            "power_w": statistics.median(s["power_w"] for s in trim) if trim else float("nan"),
            "temp_c": statistics.median(s["temp_c"] for s in trim) if trim else float("nan"),
            "throttle": sorted({s["throttle"] for s in trim})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=comma_list(_cell_spec),
                    default=[_cell_spec(c) for c in ("bf16:128:64", "fp8:128:64", "fp8:16:128", "bf16:16:128")])
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/clocks.json"))
    args = ap.parse_args(argv)
    if not (0 < args.seconds < 600):
        print(f"clocks: --seconds {args.seconds}: must be above 0 and below 600", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("clocks: needs a CUDA GPU", file=sys.stderr)
        return 2
    fm, why = import_flashmla()
    gpu = torch.cuda.get_device_name()
    print(f"{gpu}; torch {torch.__version__}, triton {triton.__version__}"
          + ("" if fm else f"; FlashMLA not timed ({why})"), flush=True)
    result = {"gpu": gpu, "torch": torch.__version__, "triton": triton.__version__, "commit": git_commit(),
              "command": " ".join(sys.argv[1:]), "rows": []}
    sm_scale = 1.0 / math.sqrt(D_QK)
    for fmt, heads, batch in args.cells:
        # (the benchmark's rotating input sets: bench_mla_decode.py --vs-flashmla times the same)
        target = bench.MlaDecodeTarget(heads=heads, tokens=4096, page_size=64, kv_format=fmt)
        impls = {"graphtune": target.make(batch, None, path="hopper")}
        if fm is not None:
            impls["flashmla"] = [flashmla_call(fm, x, fmt, sm_scale)[0] for x in target.inputs(batch)]
        graphs = {name: capture_graph(calls) for name, calls in impls.items()}
        for round_ in (1, 2):
            for name, graph in graphs.items():
                r = sampled_loop(graph, len(impls[name]), args.seconds)
                r.update(impl=name, kv_format=fmt, heads=heads, batch=batch, round=round_)
                result["rows"].append(r)
                print(f"{fmt} H={heads} B={batch} {name:9s} round {round_}: {r['ms_per_call']:.4f} ms, SM "
                      f"{r['sm_mhz']:.0f} MHz, {r['power_w']:.0f} W, {r['temp_c']:.0f} C, throttle {r['throttle']} "
                      f"({len(r['samples'])} samples)", flush=True)
        del graphs
        target.release()
        torch.cuda.synchronize()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print("\n| cell | impl | ms | SM MHz | W | C | throttle reasons |\n| --- | --- | --- | --- | --- | --- | --- |")
    for r in result["rows"]:
        print(f"| {r['kv_format']} H={r['heads']} B={r['batch']} (round {r['round']}) | {r['impl']} | "
              f"{r['ms_per_call']:.4f} | {r['sm_mhz']:.0f} | {r['power_w']:.0f} | {r['temp_c']:.0f} | "
              f"{' '.join(r['throttle'])} |")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
