"""The ``graphtune`` command line: one module per command family in this package.

Each module in ``COMMANDS`` defines ``register(subparsers)``: it adds its parsers and
``set_defaults(func=handler)``, where ``handler(args) -> int`` returns the exit code. The table is explicit:
a module missing from it is a bug, not a build option.
"""
from __future__ import annotations

import argparse
import logging
import sys

from ..errors import GraphtuneError
from . import ab, audit, db, demo, inspect, model, tune

COMMANDS = (db, inspect, audit, model, ab, tune, demo)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphtune",
        description="Capture-safe, per-bucket Triton autotuning for CUDA-graph-captured inference servers.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-v info, -vv debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except (GraphtuneError, ValueError, FileNotFoundError) as exc:
        print(f"graphtune: error: {exc}", file=sys.stderr)
        return 2
