"""``graphtune demo``."""
from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="end-to-end demo: capture-safe tuning in a CUDA-graph decode loop",
                       description="With a GPU: stock triton.autotune vs graphtune in a server-style CUDA-graph "
                                   "runner. Without one: the inspector, the throughput model and the tuning flow "
                                   "through the Triton interpreter.")
    p.add_argument("--out", default="graphtune-demo", help="directory for demo.json / demo.png")
    p.add_argument("--cpu", action="store_true", help="run the CPU demo even when a GPU is present")
    p.add_argument("--full", action="store_true", help="CPU demo: inspect the whole MLA config space")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from ..demo import main
    return main(args.out, force_cpu=args.cpu, full_space=args.full)
