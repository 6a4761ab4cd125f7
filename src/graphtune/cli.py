"""The ``graphtune`` command line.

Each mechanism registers its own sub-commands from ``cli_<name>.py`` through ``register(subparsers)``:
it adds a parser and ``set_defaults(func=handler)``, where ``handler(args) -> int`` returns the exit code.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys

from .errors import GraphtuneError

# Modules that define ``register(subparsers)``; each adds its own commands.
_COMMAND_MODULES = ("cli_core", "cli_db", "cli_inspect", "cli_audit", "cli_model", "cli_ab", "cli_tune", "cli_demo")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphtune",
        description="Capture-safe, per-bucket Triton autotuning for CUDA-graph-captured inference servers.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-v info, -vv debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(f"graphtune.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"graphtune.{name}":
                continue  # that command family is not part of this build
            raise
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
