"""What ``query_precision="e4m3"`` costs an MLA decode's output, on the CPU: the decode in float64 of the benchmark's
inputs with the bf16 query, with ``reference.e4m3_query(q)`` (the query that mode scores against: a power of two per
head, then e4m3) and with the query cast to e4m3 as the benchmark hands it to FlashMLA's fp8 path (no scale; the
same roundings unless a value falls below e4m3's normal range). Two input sets, as ``benchmarks/bench_mla_decode.py
--vs-flashmla`` builds them: its timed inputs (every request ``--tokens`` long) and its accuracy check's (six
requests of 1 to 3000 tokens, the first of one token). Two errors each: against the exact output (what a user gets)
and, both rounded to bf16, against ``mla_decode_reference``'s output (the benchmark's measure). Prints a table and
writes JSON.

    python benchmarks/probes/query_rounding.py [--batch 2] [--heads 16,128] [--tokens 4096] [--seed 3]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import environment  # noqa: E402

QUERIES = ("bf16", "e4m3_query", "e4m3 cast")


def _decode(x: dict, q: torch.Tensor, sm_scale: float) -> torch.Tensor:
    """The exact (float64) output of every request, [B, H, 512]."""
    from graphtune.kernels.mla_decode.reference import dequantize_cache
    cache = dequantize_cache(x["kv_cache"], "fp8", x["kv_scale"]).double()
    page_size = cache.shape[1]
    outs = []
    for b in range(q.shape[0]):
        n = int(x["seq_lens"][b])
        tokens = torch.arange(n)
        rows = cache[x["page_table"][b, tokens // page_size].long(), tokens % page_size]
        s = (q[b].double() @ rows.T) * sm_scale
        outs.append(torch.softmax(s, dim=-1) @ rows[:, :512])
    return torch.stack(outs)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def _inputs(kind: str, batch: int, heads: int, tokens: int, seed: int) -> dict:
    from graphtune.kernels.mla_decode import bench
    if kind == "timed":
        return bench.make_inputs(bench.Problem(batch, heads, tokens, 64, "fp8"), device="cpu", seed=seed)
    # bench_mla_decode.py's _accuracy_inputs on the CPU (its seed: 1000 + heads)
    gen = torch.Generator().manual_seed(1000 + heads)
    lens = torch.randint(1, 3001, (6,), generator=gen).to(torch.int32)
    lens[0] = 1
    lens[-1] = 3000
    x = bench.make_inputs(bench.Problem(6, heads, 3000, 64, "fp8"), device="cpu", seed=1000 + heads)
    x["seq_lens"] = lens
    return x


def main(argv: list[str] | None = None) -> int:
    from graphtune.kernels.mla_decode.reference import e4m3_query
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=2, help="requests of the timed input set")
    ap.add_argument("--heads", default="16,128")
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/query_rounding.json"))
    args = ap.parse_args(argv)
    try:
        heads = [int(h) for h in args.heads.split(",")]
    except ValueError:
        print(f"query_rounding: --heads {args.heads!r}: expected a comma list of integers", file=sys.stderr)
        return 2
    for name, value in (("batch", args.batch), ("tokens", args.tokens), *(("heads", h) for h in heads)):
        if value < 1:
            print(f"query_rounding: --{name} {value}: must be at least 1", file=sys.stderr)
            return 2
    sm_scale = 1.0 / math.sqrt(576)
    rows = []
    print("| inputs | H | query | vs exact | vs reference (bf16) |")
    print("| --- | --- | --- | --- | --- |")
    for kind in ("timed", "accuracy"):
        for h in heads:
            x = _inputs(kind, args.batch, h, args.tokens, args.seed)
            exact = _decode(x, x["q"], sm_scale)
            reference = exact.to(torch.bfloat16).double()
            for name, q in zip(QUERIES, (x["q"], e4m3_query(x["q"]),
                                         x["q"].float().to(torch.float8_e4m3fn).float())):
                out = _decode(x, q, sm_scale).to(torch.bfloat16).double()
                row = dict(inputs=kind, heads=h, query=name, lens=x["seq_lens"].tolist(),
                           vs_exact=_rel(out, exact), vs_reference=_rel(out, reference))
                rows.append(row)
                print(f"| {kind} | {h} | {name} | {row['vs_exact']:.2e} | {row['vs_reference']:.2e} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"environment": environment(), "command": " ".join(sys.argv), "rows": rows},
                                   indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
