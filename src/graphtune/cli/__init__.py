"""The ``graphtune`` command line: one module per command family in this package.

Each module in ``COMMANDS`` defines ``register(subparsers)``: it adds its parsers and
``set_defaults(func=handler)``, where ``handler(args) -> int`` returns the exit code. The table is explicit:
a module missing from it is a bug, not a build option.
"""
from __future__ import annotations

import argparse
import logging
import os
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
    _add_common_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in ([only] if only else list(COMMANDS)):
        importlib.import_module(f"{__name__}.{COMMANDS[name]}").register(sub)
    for command in _subcommands(parser):
        _add_common_options(command, top=False)
    return parser


def _add_common_options(parser: argparse.ArgumentParser, top: bool) -> None:
    """-v / --debug, before the command and after it (``graphtune db ls --debug``: every error line suggests
    --debug). After it they default to SUPPRESS: not given there, the value given before the command stands.
    A command that defines one of these options itself keeps its own."""
    taken = parser._option_string_actions
    if not {"-v", "--verbose"} & taken.keys():
        # after the command, a count of its own (argparse would copy it over the one before): main adds them
        parser.add_argument("-v", "--verbose", action="count", dest="verbose" if top else "verbose_after",
                            default=0 if top else argparse.SUPPRESS, help="more log output (-v info, -vv debug)")
    if "--debug" not in taken:
        parser.add_argument("--debug", action="store_true", default=False if top else argparse.SUPPRESS,
                            help="show the traceback of an error instead of one line")


def _subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every parser below ``parser``: the commands and their own actions (``db ls``), each once."""
    out: list[argparse.ArgumentParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):   # an alias names the same parser again
                out += [sub, *_subcommands(sub)]
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_invoked(argv))
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose + getattr(args, "verbose_after", 0), logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        settings.validate_all()
        code = int(args.func(args) or 0)
        sys.stdout.flush()   # here, not at exit, so that a reader gone away (below) is seen here too
        return code
    except KeyboardInterrupt:
        print("graphtune: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the command line reports every error as one line (--debug: all)
        if isinstance(exc, BrokenPipeError) and _stdout_gone():
            return _reader_gone()
        if args.debug:
            raise
        if isinstance(exc, (GraphtuneError, ValueError, FileNotFoundError)):
            text = str(exc)
        else:
            text = f"{one_line(exc)} (--debug shows the traceback)"
        print(f"graphtune: error: {' '.join(text.split()) if len(text.splitlines()) <= 1 else text}",
              file=sys.stderr)
        return 2


def _stdout_gone() -> bool:
    """Whether a broken pipe is stdout's (its reader went away), not another pipe's (an isolated worker that died,
    a subprocess): flushing stdout again fails then, with what it still holds."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return True
    except (OSError, ValueError):
        return False
    return False


def _reader_gone() -> int:
    """The reader of stdout went away (``graphtune db ls | head -1``): no error, as for any Unix tool. stdout is
    pointed at devnull (the Python docs' recipe), so the flush at exit cannot raise again, and the status is
    141 = 128 + SIGPIPE, what the shell reports for a tool SIGPIPE ends (``yes | head -1``; seen under pipefail)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):   # stdout is no file descriptor (embedded, tests): nothing to do
        pass
    return 141
