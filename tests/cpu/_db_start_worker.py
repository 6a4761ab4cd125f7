"""Run by test_tuner_db.py in fresh processes: tune (or load) one kernel and report what it cost."""
from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import graphtune  # noqa: E402


@triton.jit
def _db_start_kernel(x_ptr, out_ptr, n, B, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)


def main() -> None:
    n_configs = int(sys.argv[1])
    configs = [triton.Config({"BLOCK": 16 << i}) for i in range(n_configs)]
    bench_calls = []

    def do_bench(fn):
        bench_calls.append(1)
        fn()
        return float(len(bench_calls))     # the first candidate timed wins
    kernel = graphtune.autotune(configs, key=["B"], name="db_start", do_bench=do_bench,
                                buckets={"B": graphtune.Buckets.explicit([1, 4, 16])})(_db_start_kernel)
    launched = []
    from graphtune.search import Space
    original = Space.call

    def counting_call(space, config, *a, **k):   # the launches a search makes (compile, validate, time)
        launched.append(config.kwargs["BLOCK"])
        return original(space, config, *a, **k)
    Space.call = counting_call
    for b in (1, 3, 16):
        x = torch.randn(100)
        out = torch.full((100,), float("nan"))
        kernel[lambda m: (triton.cdiv(100, m["BLOCK"]),)](x, out, 100, b)
        assert torch.allclose(out, x * 2.0)
    cov = graphtune.coverage(["db_start"]).to_dict()["kernels"][0]
    print(json.dumps({"bench_calls": len(bench_calls), "candidate_launches": launched,
                      "sources": sorted({t["source"] for t in cov["tuned"]}), "tune_count": kernel.tune_count}))


if __name__ == "__main__":
    main()
