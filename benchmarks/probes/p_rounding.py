"""What rounding P costs an MLA decode's output, on the CPU: the decode of the benchmark's inputs (fp8 cache, its
scale, 576-dim query) in float64 with P = exp(s - max) kept exact, against the same with P rounded as a kernel's
P.V wgmma would take it: e4m3 (times 2^8: e4m3's normal range then covers P down to 2^-14), an e4m3 hi/lo pair in
one accumulator (hi = e4m3(256 P), lo = e4m3(256 P - hi)), fp16 (the widening kernels' P) and bf16. The row sums
stay exact. Prints one line per form and writes JSON.

    python benchmarks/probes/p_rounding.py [--batch 4] [--heads 128] [--tokens 4096] [--seed 1]
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

FORMS = ("e4m3", "e4m3 hi/lo", "fp16", "bf16")


def _rounded(p: torch.Tensor, form: str) -> torch.Tensor:
    if form == "e4m3":
        return (p * 256).to(torch.float8_e4m3fn).double() / 256
    if form == "e4m3 hi/lo":
        hi = (p * 256).to(torch.float8_e4m3fn).double()
        return (hi + (p * 256 - hi).to(torch.float8_e4m3fn).double()) / 256
    return p.to(torch.float16 if form == "fp16" else torch.bfloat16).double()


def main(argv: list[str] | None = None) -> int:
    from graphtune.kernels.mla_decode import bench
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/p_rounding.json"))
    args = ap.parse_args(argv)
    for name in ("batch", "heads", "tokens"):
        if getattr(args, name) < 1:
            print(f"p_rounding: --{name} {getattr(args, name)}: must be at least 1", file=sys.stderr)
            return 2
    x = bench.make_inputs(bench.Problem(args.batch, args.heads, args.tokens, 64, "fp8"), device="cpu",
                          seed=args.seed)
    scale = 1.0 / math.sqrt(576)
    exact, rounded = [], {form: [] for form in FORMS}
    for b in range(args.batch):
        n = int(x["seq_lens"][b])
        rows = x["page_table"][b, torch.arange(n) // 64].long() * 64 + torch.arange(n) % 64
        kv = x["kv_cache"].view(-1, 576)[rows].double() * x["kv_scale"]
        s = (x["q"][b].double() @ kv.T) * scale
        p = torch.exp(s - s.amax(1, keepdim=True))
        l = p.sum(1, keepdim=True)
        exact.append(p @ kv[:, :512] / l)
        for form in FORMS:
            rounded[form].append(_rounded(p, form) @ kv[:, :512] / l)
    ref = torch.stack(exact)
    errors = {form: float((torch.stack(v) - ref).norm() / ref.norm()) for form, v in rounded.items()}
    for form, err in errors.items():
        print(f"P in {form}: relative error {err:.2e}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"environment": environment(), "command": " ".join(sys.argv), "batch": args.batch,
                                    "heads": args.heads, "tokens": args.tokens, "seed": args.seed,
                                    "relative_error": errors}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
