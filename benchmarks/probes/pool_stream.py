"""Tile pools in the load path's ceiling: does sharing each request's tiles among its programs end the stream sooner?

``kernel_hopper_tok._kv_stream_pool_kernel`` streams the KV tiles as the decode kernels load them (no math) with the
even split's ranges (``POOL`` 0, the ceiling ``bench_mla_decode.py --stream-ceiling`` times) or with each request's
tiles in a pool its programs claim from as they go (``POOL`` 1), its programs' ranges laid over the grid in order
(``SPREAD`` 1) or spread (``kernel_hopper._pool_program``: a request's programs P / 8 ids apart). For fp8, page size
64 (TMA) and 1 (the row gather), two buffers and two programs an SM (the second fp8 kernel's grid), at the batches
given, uniform 4096-token requests and ragged ones (lengths uniform in 1..8191): first a check (every tile issued
exactly once, the counters left at zero, the tiles waited for adding up), then graph replay over rotating input sets
larger than the L2; a table and JSON (GPU, versions, commit).

    PYTHONPATH=src python benchmarks/probes/pool_stream.py --out benchmarks/results/pool_stream.json

Without a GPU it says so and exits 2.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_mla_decode import comma_list, git_commit, graph_time_ms  # noqa: E402

from graphtune.kernels.mla_decode import bench, interface_hopper, kernel_hopper, kernel_hopper_tok  # noqa: E402


def _call(x: dict, progs: int, num_buf: int, gather: int, pool: int, spread: int, ctr: torch.Tensor,
          seen: torch.Tensor | None = None):
    kv = x["kv_cache"]
    kv2 = kv.view(kv.shape[0] * kv.shape[1], 576)
    nope = interface_hopper._descriptor(kv2, [64, 512])
    rope = interface_hopper._descriptor(kv2, [64, 128])
    out = torch.empty(progs, dtype=torch.int32, device=kv.device)
    max_tiles = x["page_table"].shape[1] * kv.shape[1] // 64 + 1

    def call() -> None:
        kernel_hopper_tok._kv_stream_pool_kernel[(progs,)](
            nope, rope, kv, x["page_table"], x["seq_lens"], out, ctr, x["seq_lens"].shape[0],
            x["page_table"].stride(0), PAGE_SIZE=kv.shape[1], ROPE_COL=512, B_CHUNK=128, BLOCK_N=64,
            NUM_BUF=num_buf, num_warps=4, GATHER=gather, POOL=pool, SPREAD=spread, seen_ptr=seen, max_tiles=max_tiles)
    return call, out, max_tiles


def ragged(batch: int, page_size: int, seed: int) -> dict:
    """A ragged batch at any page size: lengths uniform in 1..8191 over a cache of 8192 slots a request."""
    gen = torch.Generator().manual_seed(seed)
    x = bench.make_inputs(bench.Problem(batch, 16, 8192, page_size, "fp8"), seed=seed)
    x["seq_lens"] = torch.randint(1, 8192, (batch,), generator=gen).to(device="cuda", dtype=torch.int32)
    return x


def check(x: dict, progs: int, num_buf: int, gather: int, pool: int, spread: int) -> str:
    """'' when every tile of every request was issued once, the counters are back at zero and the programs waited
    for as many tiles as the batch has; else what went wrong."""
    b = x["seq_lens"].shape[0]
    ctr = torch.zeros(b, dtype=torch.int32, device="cuda")
    tiles = (x["seq_lens"].clamp(min=0) + 63) // 64
    for rep in range(3):
        seen = torch.zeros(b * (int(tiles.max()) + x["page_table"].shape[1] * x["kv_cache"].shape[1] // 64 + 1),
                           dtype=torch.int32, device="cuda")
        call, out, max_tiles = _call(x, progs, num_buf, gather, pool, spread, ctr, seen)
        call()
        torch.cuda.synchronize()
        seen = seen[:b * max_tiles].view(b, max_tiles)
        want = (torch.arange(max_tiles, device="cuda")[None, :] < tiles[:, None]).to(torch.int32)
        if not torch.equal(seen, want):
            bad = (seen != want).nonzero()[:4].tolist()
            return f"rep {rep}: tiles issued wrongly at [request, tile] {bad} (counts {seen[tuple(zip(*bad))]})"
        if int(ctr.abs().sum()):
            return f"rep {rep}: counters left {ctr.nonzero()[:4].flatten().tolist()} nonzero"
        if int(out.sum()) != int(tiles.sum()):
            return f"rep {rep}: programs waited for {int(out.sum())} tiles of {int(tiles.sum())}"
    return ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=comma_list(int), default="32,64,128")
    ap.add_argument("--page-sizes", type=comma_list(int), default="64,1")
    ap.add_argument("--per-sm", type=int, default=2)
    ap.add_argument("--num-buf", type=int, default=2)
    ap.add_argument("--seed", type=int, default=4901)
    ap.add_argument("--out", default="benchmarks/results/pool_stream.json")
    args = ap.parse_args()
    for name in ("per_sm", "num_buf"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be at least 1")
    if args.num_buf > 3:
        ap.error(f"--num-buf {args.num_buf}: the pools take two or three buffers")
    if not torch.cuda.is_available():
        print("pool_stream: needs a CUDA GPU (none visible)", file=sys.stderr)
        return 2
    props = torch.cuda.get_device_properties(0)
    progs = props.multi_processor_count * args.per_sm
    spread = int(kernel_hopper.POOL_SPREAD)
    ways = [("static", 0, 1), ("pool", 1, 1), (f"pool, spread ({spread} rows)", 1, spread)]
    result = dict(gpu=props.name, torch=torch.__version__, triton=__import__("triton").__version__,
                  commit=git_commit(), programs=progs, spread=spread, rows=[])
    print(f"{props.name}; torch {torch.__version__}; {progs} programs", flush=True)
    for page_size in args.page_sizes:
        gather = int(page_size == 1)
        target = bench.MlaDecodeTarget(heads=16, tokens=4096, page_size=page_size, kv_format="fp8")
        for b in args.batches:
            for kind in ("uniform", "ragged"):
                if kind == "uniform":
                    xs = target.inputs(b)
                else:
                    xs = [ragged(b, page_size, args.seed + 31 * b + i)
                          for i in range(len(target.inputs(b)))]
                nbytes = sum(int(x["seq_lens"].clamp(min=0).sum()) for x in xs) / len(xs) * 580
                row = dict(page_size=page_size, batch=b, kind=kind)
                for name, pool, m in ways:
                    bad = check(xs[0], progs, args.num_buf, gather, pool, m)
                    ctr = torch.zeros(b, dtype=torch.int32, device="cuda")
                    ms = float("nan") if bad else graph_time_ms(
                        [_call(x, progs, args.num_buf, gather, pool, m, ctr)[0] for x in xs])
                    row[name] = dict(ms=ms, tbs=nbytes / (ms * 1e-3) / 1e12, check=bad or "ok")
                    print(f"page {page_size} B{b} {kind} {name}: {ms:.4f} ms ({nbytes / (ms * 1e-3) / 1e12:.2f} "
                          f"TB/s) {bad or 'ok'}", flush=True)
                result["rows"].append(row)
                Path(args.out).write_text(json.dumps(result, indent=1))
            target.release()
    print("\n| page | batch | lengths | " + " | ".join(n for n, _, _ in ways) + " |")
    print("| --- | --- | --- |" + " --- |" * len(ways))
    for r in result["rows"]:
        base = r["static"]["ms"]
        cells = [f"{r[n]['ms']:.4f} ({r[n]['tbs']:.2f} TB/s, {r[n]['ms'] / base - 1:+.1%})" for n, _, _ in ways]
        print(f"| {r['page_size']} | {r['batch']} | {r['kind']} | " + " | ".join(cells) + " |")
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
