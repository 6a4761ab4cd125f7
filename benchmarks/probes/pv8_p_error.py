"""What quantising P costs the second fp8 tokens-on-M kernel's PV8 (P.V as fp8 MMAs), on the CPU in torch.

The kernel's softmax works per 64-token tile against the running max, so each ``p`` lies in [0, 1]; PV8 stores
``256 p`` as an fp8 (e4m3) pair ``hi + lo`` (``lo`` the rounded residual) and divides the 256 out with the sum. This
emulates that online softmax on the benchmark's inputs (fp8 cache rows, bf16 query, H = 16) and prints the relative
error of the output against the exact fp32 softmax, next to the same with P rounded to fp16 (the shipped path).
Only P's rounding is modelled (scores and V exact); the kernel adds its own (bf16 output, fp8 scores of a hi / lo
query).

    PYTHONPATH=src python benchmarks/probes/pv8_p_error.py
"""
from __future__ import annotations

import math

import torch

from graphtune.kernels.mla_decode import bench

LOG2E = 1.4426950408889634


def errors(tokens: int, seed: int) -> tuple[float, float]:
    x = bench.make_inputs(bench.Problem(1, 16, tokens, 64, "fp8"), device="cpu", seed=seed)
    idx = torch.arange(tokens)
    pt = x["page_table"][0].long()
    kv = x["kv_cache"][pt[idx // 64], idx % 64].float() * float(x["kv_scale"])   # [tokens, 576]
    s = (x["q"][0].float() @ kv.T) / math.sqrt(576) * LOG2E                        # [16, tokens], log2 units
    v = kv[:, :512]
    ref = torch.softmax(s / LOG2E, dim=1) @ v
    m = torch.full((16,), -float("inf"))
    l = torch.zeros(16)
    o8 = torch.zeros(16, 512)
    o16 = torch.zeros(16, 512)
    for t0 in range(0, tokens, 64):
        st = s[:, t0:t0 + 64]
        m_new = torch.maximum(m, st.max(1).values)
        alpha = torch.exp2(m - m_new)
        p = torch.exp2(st - m_new[:, None])
        hi = (p * 256).to(torch.float8_e4m3fn).float()
        lo = (p * 256 - hi).to(torch.float8_e4m3fn).float()
        o8 = o8 * alpha[:, None] + (hi + lo) @ v[t0:t0 + 64] / 256
        o16 = o16 * alpha[:, None] + p.half().float() @ v[t0:t0 + 64]
        l = l * alpha + p.sum(1)
        m = m_new
    rel = [float((o / l[:, None] - ref).norm() / ref.norm()) for o in (o8, o16)]
    return rel[0], rel[1]


if __name__ == "__main__":
    for tokens, seed in ((4096, 1), (3001, 2), (65, 3), (4096, 4)):
        e8, e16 = errors(tokens, seed)
        print(f"{tokens:5d} tokens: rel err with P as fp8 hi/lo (PV8) {e8:.2e}, with P in fp16 {e16:.2e}")
