"""The ``graphtune`` command line: one module per command family in this package.

Each module in ``COMMANDS`` defines ``register(subparsers)``: it adds its parsers and
``set_defaults(func=handler)``, where ``handler(args) -> int`` returns the exit code. The table is explicit:
a module missing from it is a bug, not a build option.
"""
from __future__ import annotations

import argparse
import logging
import sys

import importlib

from .. import settings
from ..errors import GraphtuneError, one_line

# command name -> its module in this package (which registers exactly that command). Only the invoked command's
# module is imported: `graphtune audit` and `graphtune db path/export/import` then never import torch or triton.
COMMANDS = {"db": "db", "inspect": "inspect", "audit": "audit", "model": "model", "ab": "ab", "tune": "tune",
            "demo": "demo"}


def _invoked(argv: list[str]) -> str | None:
    """The command named on the command line (the first word that is one), or None."""
    return next((a for a in argv if a in COMMANDS), None)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphtune",
        description="Capture-safe, per-bucket Triton autotuning for CUDA-graph-captured inference servers.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-v info, -vv debug)")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error instead of one line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in ([only] if only else list(COMMANDS)):
        importlib.import_module(f"{__name__}.{COMMANDS[name]}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_invoked(argv))
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        settings.validate_all()
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("graphtune: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the command line reports every error as one line (--debug: all)
        if args.debug:
            raise
        if isinstance(exc, (GraphtuneError, ValueError, FileNotFoundError)):
            text = str(exc)
        else:
            text = f"{one_line(exc)} (--debug shows the traceback)"
        print(f"graphtune: error: {' '.join(text.split()) if len(text.splitlines()) <= 1 else text}",
              file=sys.stderr)
        return 2
