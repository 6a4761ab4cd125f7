"""Cost of isolated candidate evaluation (``isolate=True``): the first start, which screens every candidate in
a worker process, against later starts, which read the outcomes from the tuning database, and against tuning
without isolation. Each start is its own process, as a server's is; the figure is the time of the first launch
(tuning included, synchronised) inside that process, after its imports.

    PYTHONPATH=src python benchmarks/bench_isolate.py [--configs 4,8] [--out DIR]

Space: N configs of a streaming kernel (BLOCK x num_warps), one of which stores far out of bounds (an illegal
memory access, which poisons the CUDA context of the process that launches it). Needs CUDA.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))


@triton.jit
def _maybe_faulting_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, BAD: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if BAD:
        tl.store(out_ptr + offs.to(tl.int64) + (1 << 40), x * 2.0, mask=mask)   # far outside any allocation
    else:
        tl.store(out_ptr + offs, x * 2.0, mask=mask)


def _configs(n: int, bad: bool) -> list[triton.Config]:
    good = [triton.Config({"BLOCK": b, "BAD": 0}, num_warps=w) for b in (256, 512, 1024, 2048) for w in (4, 8)]
    out = good[:n - 1] if bad else good[:n]
    if bad:
        out.insert(len(out) // 2, triton.Config({"BLOCK": 512, "BAD": 1}, num_warps=4))
    return out


def child(n_configs: int, isolate: bool, bad: bool, size: int) -> dict:
    """One start: define the kernel, tune it on its first launch, check the result."""
    import torch

    import graphtune
    kernel = graphtune.autotune(_configs(n_configs, bad), key=["n"], name="bench_isolate", isolate=isolate)(
        _maybe_faulting_kernel)
    x = torch.randn(size, device="cuda")
    out = torch.full_like(x, float("nan"))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    kernel[lambda m: (triton.cdiv(size, m["BLOCK"]),)](x, out, size)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    torch.testing.assert_close(out, 2 * x)
    cov = graphtune.coverage(["bench_isolate"]).to_dict()["kernels"][0]
    excluded = [c["reason"] for e in cov["excluded"] for c in e["configs"]]
    return dict(seconds=seconds, searches=kernel.tune_count, excluded=excluded,
                chosen=[t["config"] for t in cov["tuned"]])


def _start(db: Path, n_configs: int, isolate: bool, bad: bool, size: int) -> dict:
    env = {**os.environ, "GRAPHTUNE_DB": str(db)}
    argv = [sys.executable, __file__, "--child", f"{n_configs},{int(isolate)},{int(bad)},{size}"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"start failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default="4,8", help="space sizes N, comma-separated")
    parser.add_argument("--size", type=int, default=1 << 20, help="elements per launch")
    parser.add_argument("--out", default=None, help="directory for the JSON (default benchmarks/results)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        n, iso, bad, size = (int(v) for v in args.child.split(","))
        print(json.dumps(child(n, bool(iso), bool(bad), size)))
        return
    import torch
    from _common import environment, write_result
    if not torch.cuda.is_available():
        sys.exit("bench_isolate: needs CUDA")
    env = environment()
    print(f"device: {env['gpu']}  torch {env['torch']}  triton {env['triton']}")
    rows = []
    for n in (int(v) for v in args.configs.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            db_iso, db_plain = Path(tmp) / "iso.sqlite", Path(tmp) / "plain.sqlite"
            cases = [
                ("not isolated, all good configs, first start", db_plain, n, False, False, args.size),
                ("isolated, 1 faulting, first start", db_iso, n, True, True, args.size),
                ("isolated, later start, same key (from the database)", db_iso, n, True, True, args.size),
                ("isolated, later start, new key (outcomes remembered)", db_iso, n, True, True, args.size // 2 + 3),
            ]
            for label, db, n_cfg, iso, bad, size in cases:
                r = _start(db, n_cfg, iso, bad, size)
                rows.append(dict(configs=n, case=label, **r))
                print(f"N={n:2d}  {label:55s} {r['seconds']:7.3f} s  searches={r['searches']}  "
                      f"excluded={len(r['excluded'])}", flush=True)
    path = write_result("isolate_cost", dict(rows=rows), args.out)
    print("\n| N configs | case | first launch, s | searches | excluded |\n| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['configs']} | {r['case']} | {r['seconds']:.3f} | {r['searches']} | {len(r['excluded'])} |")
    print(f"\nJSON: {path}")


if __name__ == "__main__":
    main()
