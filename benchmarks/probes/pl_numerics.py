"""Why PL's error grows with a segment's length, on the CPU: kernel_hopper_pp8's ``PL`` (P as an e4m3 pair, each half
multiplied by V in fp8 MMAs) emulated step by step on the benchmark's inputs, against the float64 decode of the same
e4m3 query, for segments of a few tiles (as 132 programs split 4096-token requests) and of a whole request (one
program a request).

The emulation follows the kernel's arithmetic: the running max chain through the two warpgroups' alternate tiles, O
rescaled in fp32, P's pair made from fp32 P (hi = e4m3(2^8 P), lo = e4m3(f16(2^8 P) - hi)), WG1's rescale of WG0's P
by the max step as hi + lo in f16 times f16(beta) split again, the row sums from fp32 P, the segments merged by their
LSEs. Each P.V MMA (k = 32) adds to O either exactly (``exact``) or as a tensor core that aligns its addends to the
largest of them and keeps ``--bits`` bits below its leading one, truncating the rest (``aligned``: the model of
Hopper's fp8 accumulation DeepSeek-V3's technical report gives, about 14 bits on the H800). Session 47 measured PL on
an H100 (call C): 1.93e-3 with 132 programs, 3.28e-3 with one program a request, on two 4096-token requests against
the e4m3 query's fp32 reference. Prints a line per case and writes JSON.

    python benchmarks/probes/pl_numerics.py [--requests 2] [--heads 64] [--tokens 4096] [--segments 64,8] [--bits 14]
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

LOG2E = 1.4426950408889634


def e4m3(x: torch.Tensor) -> torch.Tensor:
    """``x`` rounded to e4m3 (to nearest), as float64."""
    return x.float().to(torch.float8_e4m3fn).double()


def f16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float16).double()


def pair(p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``_p_pair_store``: hi = e4m3(2^8 P) from fp32, lo = e4m3(f16(2^8 P) - f16(hi)) (f16x2 arithmetic)."""
    y = (p.float() * 256.0).double()
    hi = e4m3(y)
    return hi, e4m3(f16(f16(y) - hi))


def resplit(hi: torch.Tensor, lo: torch.Tensor, beta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``_p8_scaled_pair``: (hi + lo) in f16 times f16(beta), split again."""
    x = f16(f16(f16(hi + lo)) * f16(beta)[:, None])
    h = e4m3(x)
    return h, e4m3(f16(x - h))


def mma(acc: torch.Tensor, a: torch.Tensor, v: torch.Tensor, mode: str, bits: int) -> torch.Tensor:
    """``acc`` [M, N] += ``a`` [M, 64] @ ``v`` [64, N] as two k = 32 steps, each exact or aligned (see the module)."""
    for k0 in (0, 32):
        terms = a[:, k0:k0 + 32, None] * v[None, k0:k0 + 32, :]         # [M, 32, N], exact products
        if mode == "exact":
            acc = acc + terms.sum(1)
            continue
        every = torch.cat([acc[:, None, :], terms], 1)
        big = every.abs().amax(1, keepdim=True)
        step = torch.exp2(torch.floor(torch.log2(big.clamp_min(1e-300))) - (bits - 1))
        acc = (torch.trunc(every / step) * step).sum(1)
    return acc


def segment(s2: torch.Tensor, v: torch.Tensor, mode: str, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One segment's (output [H, 512], log2-sum-exp2 [H]) through the kernel's pair loop: ``s2``
    [H, n] the scores in the log2 domain, ``v`` [n, 512]; tiles of 64, even ones WG0's (columns 0..255), odd WG1's."""
    h, n = s2.shape
    tiles = n // 64
    o_l = torch.zeros(h, 256, dtype=torch.float64)
    o_r = torch.zeros(h, 256, dtype=torch.float64)
    m = torch.full((h,), -math.inf, dtype=torch.float64)
    l_sum = torch.zeros(h, dtype=torch.float64)
    for r in range(0, tiles, 2):
        sr, vr = s2[:, 64 * r:64 * r + 64], v[64 * r:64 * r + 64]
        m_r = torch.maximum(m, sr.amax(1))
        alpha = torch.exp2(m - m_r).float().double()
        p_r = torch.exp2(sr - m_r[:, None]).float().double()
        hi_r, lo_r = pair(p_r)
        o_l = o_l * alpha[:, None]
        o_l = mma(mma(o_l, hi_r, vr[:, :256], mode, bits), lo_r, vr[:, :256], mode, bits)
        l_sum = l_sum * alpha + p_r.sum(1)
        if r + 1 >= tiles:
            o_r = o_r * alpha[:, None]
            o_r = mma(mma(o_r, hi_r, vr[:, 256:], mode, bits), lo_r, vr[:, 256:], mode, bits)
            m = m_r
            continue
        s1, v1 = s2[:, 64 * r + 64:64 * r + 128], v[64 * r + 64:64 * r + 128]
        m_1 = torch.maximum(m_r, s1.amax(1))
        beta = torch.exp2(m_r - m_1).float().double()
        p_1 = torch.exp2(s1 - m_1[:, None]).float().double()
        hi_1, lo_1 = pair(p_1)
        # WG1: O rescaled once for both tiles, WG0's P rescaled by beta and split again
        o_r = o_r * (alpha * beta)[:, None]
        he, le = resplit(hi_r, lo_r, beta)
        o_r = mma(mma(o_r, he, vr[:, 256:], mode, bits), le, vr[:, 256:], mode, bits)
        o_r = mma(mma(o_r, hi_1, v1[:, 256:], mode, bits), lo_1, v1[:, 256:], mode, bits)
        # WG0: O times beta, then WG1's P as it was handed over
        o_l = o_l * beta[:, None]
        o_l = mma(mma(o_l, hi_1, v1[:, :256], mode, bits), lo_1, v1[:, :256], mode, bits)
        l_sum = l_sum * beta + p_1.sum(1)
        m = m_1
    return torch.cat([o_l, o_r], 1) / (256.0 * l_sum[:, None]), m + torch.log2(l_sum)


def decode(s2: torch.Tensor, v: torch.Tensor, tiles_per_segment: int, mode: str, bits: int) -> torch.Tensor:
    """The request's output [H, 512]: its segments of ``tiles_per_segment`` tiles merged by their LSEs."""
    parts = [segment(s2[:, i:i + 64 * tiles_per_segment], v[i:i + 64 * tiles_per_segment], mode, bits)
             for i in range(0, s2.shape[1], 64 * tiles_per_segment)]
    lse = torch.stack([x[1] for x in parts])                      # [S, H]
    w = torch.exp2(lse - lse.amax(0))
    outs = torch.stack([x[0] for x in parts])                     # [S, H, 512]
    return (outs * w[:, :, None]).sum(0) / w.sum(0)[:, None]


def main(argv: list[str] | None = None) -> int:
    from graphtune.kernels.mla_decode import bench
    from graphtune.kernels.mla_decode.reference import e4m3_query
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--segments", type=lambda t: [int(x) for x in t.split(",")], default=[64, 8],
                    help="tiles a segment (64 = a whole 4096-token request)")
    ap.add_argument("--bits", type=int, default=14)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/pl_numerics.json"))
    args = ap.parse_args(argv)
    if args.tokens % 64 or args.tokens < 64:
        print(f"pl_numerics: --tokens {args.tokens}: must be a positive multiple of 64", file=sys.stderr)
        return 2
    x = bench.make_inputs(bench.Problem(args.requests, args.heads, args.tokens, 64, "fp8"), device="cpu",
                          seed=args.seed)
    scale = 1.0 / math.sqrt(576)
    q = e4m3_query(x["q"]).double()
    rows_all = []
    results = {}
    for b in range(args.requests):
        n = int(x["seq_lens"][b])
        rows = x["page_table"][b, torch.arange(n) // 64].long() * 64 + torch.arange(n) % 64
        kv = x["kv_cache"].view(-1, 576)[rows].double()
        s = (q[b] @ kv.T) * scale * x["kv_scale"]
        p = torch.exp(s - s.amax(1, keepdim=True))
        ref = (p @ kv[:, :512]) / p.sum(1, keepdim=True) * x["kv_scale"]
        rows_all.append(ref)
        for tiles in args.segments:
            for mode in ("exact", "aligned"):
                out = decode(s * LOG2E, kv[:, :512], tiles, mode, args.bits) * x["kv_scale"]
                results.setdefault((tiles, mode), []).append(out)
    ref = torch.stack(rows_all)
    errors = {}
    for (tiles, mode), outs in results.items():
        err = float((torch.stack(outs) - ref).norm() / ref.norm())
        errors[f"{tiles} tiles a segment, {mode}"] = err
        print(f"{tiles:3d} tiles a segment, P.V {mode:7s}{'' if mode == 'exact' else f' ({args.bits} bits)'}: "
              f"relative error {err:.2e}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"environment": environment(), "command": " ".join(sys.argv), "bits": args.bits,
                                    "requests": args.requests, "heads": args.heads, "tokens": args.tokens,
                                    "relative_error": errors}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
