"""One profiled decode of graphtune's Hopper MLA kernel and of FlashMLA on the same inputs, for Nsight Compute.

Warms both up (compiles, FlashMLA's metadata), then runs each once between ``cudaProfilerStart`` / ``Stop`` so
that ``ncu --profile-from-start off`` measures exactly those launches (graphtune's split kernel and its reduction,
FlashMLA's split kernel and its combine), each under an NVTX range naming it:

    ncu --profile-from-start off --nvtx --section SpeedOfLight --section ComputeWorkloadAnalysis \\
        --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy \\
        -o $OUT/h16_fp8_b128 python benchmarks/probes/ncu_mla.py --heads 16 --batch 128 --kv-format fp8
    ncu --import $OUT/h16_fp8_b128.ncu-rep --page details --csv > $OUT/h16_fp8_b128.csv

graphtune runs ``path="hopper"`` as a server would (tuned for this batch by the warm-up calls: the config it chose
is printed), or pinned to ``--config`` (a JSON dict of the Hopper kernel's parameters, e.g.
``'{"V2": 1, "NUM_BUF": 2, "PREFETCH": 1, "FAST_MAX": 1}'``).
Without a GPU it says so and exits 2.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_mla_decode import flashmla_call, import_flashmla  # noqa: E402

import graphtune  # noqa: E402
from graphtune.configs import config_from_dict  # noqa: E402
from graphtune.kernels.mla_decode import MLADecodePlan, bench, interface  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--kv-format", choices=["bf16", "fp8"], default="fp8")
    ap.add_argument("--config", default="", help="JSON dict overlaid on the Hopper kernel's fixed config")
    ap.add_argument("--no-flashmla", action="store_true")
    ap.add_argument("--query-precision", choices=["e4m3"], default=None,
                    help="graphtune's fp8 query mode (FlashMLA's accuracy class); default: the hi/lo pair")
    ap.add_argument("--plan", action="store_true", help="graphtune with a step's plan (MLADecodePlan)")
    args = ap.parse_args(argv)
    if args.query_precision and args.kv_format != "fp8":
        print(f"ncu_mla: --query-precision {args.query_precision} applies to an fp8 cache, not "
              f"--kv-format {args.kv_format}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("ncu_mla: needs a CUDA GPU", file=sys.stderr)
        return 2
    try:
        config = json.loads(args.config) if args.config else None
    except json.JSONDecodeError as exc:
        print(f"ncu_mla: --config {args.config!r} is not a JSON dict: {exc}", file=sys.stderr)
        return 2
    x = bench.make_inputs(bench.Problem(args.batch, args.heads, args.tokens, 64, args.kv_format), seed=1)
    sm_scale = 1.0 / math.sqrt(576)
    plan = MLADecodePlan() if args.plan else None

    def ours() -> None:
        interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], sm_scale, x["kv_scale"],
                          args.kv_format, x["out"], False, path="hopper",
                          config=None if config is None else config_from_dict(config),
                          query_precision=args.query_precision, plan=plan)

    runs = [("graphtune", ours)]
    fm, why = (None, "--no-flashmla") if args.no_flashmla else import_flashmla()
    if fm is not None:
        runs.append(("flashmla", flashmla_call(fm, x, args.kv_format, sm_scale)[0]))
    else:
        print(f"ncu_mla: FlashMLA not profiled ({why})", flush=True)
    for _, call in runs:
        for _ in range(3):
            call()
    torch.cuda.synchronize()
    tuned = [(k["name"], k["tuned"]) for k in graphtune.coverage().to_dict()["kernels"] if k["tuned"]]
    print(f"{torch.cuda.get_device_name()}: H={args.heads} B={args.batch} {args.kv_format} {args.tokens} tokens, "
          f"query {args.query_precision or 'hi/lo'}, plan {args.plan}; "
          f"graphtune config {config if config is not None else tuned}; profiling {[n for n, _ in runs]}",
          flush=True)
    torch.cuda.cudart().cudaProfilerStart()
    for name, call in runs:
        torch.cuda.nvtx.range_push(name)
        call()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
