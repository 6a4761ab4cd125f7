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
    import sys

    from .._outputs import output_dir
    from ..demo import main
    output_dir(args.out, "--out")   # one line for an existing file or an unwritable place, before the demo runs
    try:
        return main(args.out, force_cpu=args.cpu, full_space=args.full)
    except OSError as exc:  # the disk filled up, the directory was removed meanwhile
        print(f"graphtune: error: --out {args.out}: could not write the demo's results: {exc}", file=sys.stderr)
        return 2
