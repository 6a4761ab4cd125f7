"""``graphtune db path|ls|show|export|import|prune``: look at and manage the tuning database."""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table

from .._outputs import file_arg
from ..errors import DatabaseError
from ..identity import current_env, env_mismatch
from ..db import Entry, ImportReport, Summary, TuningDB

_DEFAULT_LIMIT = 100
_CHUNK = 500  # rows per printed table when listing everything: output starts at once, memory stays flat

_LAUNCH = ("num_warps", "num_stages", "num_ctas", "maxnreg")
_SHORT = {"gpu_name": "GPU", "compute_capability": "cc", "triton_version": "triton", "torch_version": "torch",
          "cuda_version": "CUDA"}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("db", help="the tuning database: path, ls, show, export, import, prune",
                                   description="Look at and manage the tuning database ($GRAPHTUNE_DB, else a "
                                               "file in the user cache directory).")
    parser.set_defaults(func=lambda args: _help(parser))
    sub = parser.add_subparsers(dest="db_command", metavar="ACTION")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", metavar="PATH", help="database file (default: $GRAPHTUNE_DB or the user cache)")

    p = sub.add_parser("path", parents=[common], help="print where the database is")
    p.set_defaults(func=_path)

    p = sub.add_parser("ls", parents=[common], help="list entries (the first 100; --limit)")
    p.add_argument("--stale", action="store_true",
                   help="only entries this environment would not apply (other GPU or versions, superseded source)")
    p.add_argument("--kernel", metavar="NAME", help="only this kernel")
    p.add_argument("--device", metavar="GPU", help='only this GPU name, e.g. "NVIDIA H200"')
    p.add_argument("--limit", type=_limit, default=_DEFAULT_LIMIT, metavar="N",
                   help=f"show at most N entries (default {_DEFAULT_LIMIT}; 0: all of them, streamed)")
    p.set_defaults(func=_ls)

    p = sub.add_parser("show", parents=[common], help="every candidate's timing for one kernel")
    p.add_argument("name", metavar="NAME", help="kernel name")
    p.add_argument("--key", action="append", metavar="K1,K2",
                   help="only this tuning key, written as in `ls` (repeatable)")
    p.add_argument("--explain", action="store_true",
                   help="only the candidates that were excluded or failed, with the reason for each")
    p.set_defaults(func=_show)

    p = sub.add_parser("export", parents=[common], help="write entries to a JSON file a package can ship")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="JSON file to write")
    p.add_argument("--kernel", metavar="NAME", help="only this kernel")
    p.add_argument("--device", metavar="GPU", help='only this GPU name, e.g. "NVIDIA H200"')
    p.set_defaults(func=_export)

    p = sub.add_parser("import", parents=[common], help="merge an export file (the better median wins)")
    p.add_argument("file", metavar="FILE", help="JSON file written by `graphtune db export`")
    p.set_defaults(func=_import)

    p = sub.add_parser("prune", parents=[common], help="remove stale entries, or one kernel's entries")
    p.add_argument("--stale", action="store_true", help="remove the entries `ls --stale` lists")
    p.add_argument("--kernel", metavar="NAME", help="remove this kernel's entries and isolated-launch records (with --stale: its stale ones)")
    p.set_defaults(func=_prune)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 0


def _console() -> Console:
    # Piped output (grep, a log file) gets whole rows rather than rich's 80-column default.
    return Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 240)


def _error(text: str) -> None:
    print(text, file=sys.stderr)


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--limit {text!r}: expected a whole number >= 0") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"--limit {text!r}: expected a whole number >= 0 (0: no limit)")
    return value


def _named(args: argparse.Namespace) -> TuningDB:
    """The database --db names (an empty --db is an error, not the default), else the default one."""
    path = file_arg(args.db, "--db")
    return TuningDB(path, origin="--db") if path is not None else TuningDB()


def _open(args: argparse.Namespace, reading: bool = False) -> TuningDB:
    """The database the command works on; one that cannot be used (another program's file, a directory, a newer
    schema) is an error naming it and what pointed there, before anything is read or written."""
    db = _named(args)
    if reading and not db.path.exists():
        db = TuningDB(db.path, readonly=True, origin=db.origin)  # looking must not create a database file
    problem = db.problem
    if problem is not None:
        raise DatabaseError(problem)
    return db


def _key_text(key: Sequence[Any]) -> str:
    return ",".join(str(v) for v in key)


def _config_text(config: dict) -> str:
    parts = [f"{k}={v}" for k, v in config.items() if k not in _LAUNCH]
    parts += [f"{k}={config[k]}" for k in _LAUNCH if k in config and not (k == "num_ctas" and config[k] == 1)
              and config[k] is not None]
    return ",".join(parts)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _when(entry: Entry) -> str:
    return f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(entry.tuned_at))} {entry.host} r{entry.rank}"


def _entry_table(title: str, entries: Sequence[Entry | Summary], reasons: Sequence[str | None] | None) -> Table:
    table = Table(title=title or None, title_justify="left")
    for name in ("kernel", "key", "chosen", "median ms", "GPU", "triton / torch / CUDA", "tuned", "source"):
        table.add_column(name, justify="right" if name == "median ms" else "left")
    if reasons is not None:
        table.add_column("status")
    for i, e in enumerate(entries):
        env = e.env
        row = [e.kernel.name, _key_text(e.key), _config_text(e.chosen), _ms(e.chosen_median_ms),
               f"{env.gpu_name} {env.compute_capability}".strip(),
               f"{env.triton_version} / {env.torch_version} / {env.cuda_version or '-'}", _when(e), e.source]
        if reasons is not None:
            row.append(_short_status(e, reasons[i]))
        table.add_row(*row)
    return table


def _short_status(entry: Entry | Summary, reason: str | None) -> str:
    if reason is None:
        return "current"
    fields = [_SHORT[m.split(" ", 1)[0]] for m in env_mismatch(entry.env, current_env())]
    return f"stale: other {', '.join(fields)}" if fields else "stale: superseded"


def _path(args: argparse.Namespace) -> int:
    print(_named(args).path)  # where it is, without opening (or creating) it
    return 0


_LS_HEADERS = ("kernel", "key", "chosen", "median ms", "GPU", "triton / torch / CUDA", "tuned", "source", "status")


def _ls_cells(entry: Summary, reason: str | None) -> list[str]:
    env = entry.env
    return [entry.kernel.name, _key_text(entry.key), _config_text(entry.chosen), _ms(entry.chosen_median_ms),
            f"{env.gpu_name} {env.compute_capability}".strip(),
            f"{env.triton_version} / {env.torch_version} / {env.cuda_version or '-'}", _when(entry), entry.source,
            _short_status(entry, reason)]


def _ls_lines(rows: list[list[str]], widths: list[int], header: bool) -> str:
    # Plain aligned text, not a rich Table: rich lays out a table of a few hundred rows in seconds, and `ls`
    # of a large database must print as fast as it reads. Values are never cut; a longer one widens its column.
    out = []
    if header:
        out.append("  ".join(h.ljust(w) for h, w in zip(_LS_HEADERS, widths)).rstrip())
        out.append("  ".join("-" * w for w in widths))
    for row in rows:
        out.append("  ".join(c.rjust(w) if i == 3 else c.ljust(w)
                             for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    return "\n".join(out)


def _ls(args: argparse.Namespace) -> int:
    """Streams: rows are read in primary-key order without their candidates and printed _CHUNK at a time, so
    the first rows of a database of any size show at once and memory does not grow with it."""
    db = _open(args, reading=True)
    reason_of = db.staleness_of(current_env())
    limit = args.limit or None
    chunk: list[list[str]] = []
    widths: list[int] | None = None
    shown = n_stale = 0
    more = False

    def flush() -> None:
        nonlocal chunk, widths
        if not chunk:
            return
        first = widths is None
        measured = [max(len(h), *(len(r[i]) for r in chunk)) for i, h in enumerate(_LS_HEADERS)]
        widths = measured if first else [max(a, b) for a, b in zip(widths, measured)]
        print(_ls_lines(chunk, widths, header=first), flush=True)
        chunk = []

    for entry in db.iter_entries(args.kernel, args.device, summary=True):
        reason = reason_of(entry)
        if args.stale and reason is None:
            continue
        if limit is not None and shown == limit:
            more = True
            break
        chunk.append(_ls_cells(entry, reason))
        shown += 1
        n_stale += reason is not None
        if len(chunk) == _CHUNK:
            flush()
    flush()
    if not more:
        print(f"{shown} {'stale ' if args.stale else ''}entries"
              f"{'' if args.stale else f' ({n_stale} stale)'} in {db.path}")
    elif args.stale:
        print(f"the first {shown} stale entries in {db.path}; there are more: --limit N shows N, --limit 0 all")
    else:
        total = db.count(args.kernel, args.device)
        print(f"the first {shown} of {total} entries ({n_stale} of them stale) in {db.path}; "
              f"--limit N shows N, --limit 0 all")
    return 0


def _show(args: argparse.Namespace) -> int:
    db = _open(args, reading=True)
    entries = db.entries(kernel_name=args.name)
    if args.key:
        wanted = {k.replace(" ", "") for k in args.key}
        entries = [e for e in entries if _key_text(e.key).replace(" ", "") in wanted]
    if not entries:
        names = db.kernel_names()
        what = f"kernel {args.name!r}" + (f" with key {', '.join(args.key)}" if args.key else "")
        _error(f"no entries for {what} in {db.path}; kernels there: "
                                    f"{', '.join(names) or '(none)'}")
        return 1
    env = current_env()
    console = _console()
    reason_of = db.staleness_of(env)
    for entry in entries:
        reason = reason_of(entry)
        e = entry.env
        gpu = f"{e.gpu_name} {e.compute_capability}".strip()
        title = (f"{entry.kernel.name} key ({_key_text(entry.key)}) on {gpu}, triton "
                 f"{e.triton_version}, torch {e.torch_version}, CUDA {e.cuda_version or '-'}; tuned {_when(entry)}; "
                 f"source {entry.kernel.source_hash}, configs {entry.kernel.configs_hash}; {reason or 'current'}")
        table = Table(title=title, title_justify="left")
        for name in ("", "config", "median ms", "p20 ms", "p80 ms", "n", "failure / resources"):
            table.add_column(name, justify="right" if name.endswith("ms") or name == "n" else "left")
        ranked = sorted(entry.candidates, key=lambda c: (c.median_ms is None, c.median_ms or 0.0))
        if getattr(args, "explain", False):
            ranked = [c for c in ranked if c.failure]
            if not ranked:
                console.print(f"{entry.kernel.name} key ({_key_text(entry.key)}): no candidate was excluded")
                continue
        for cand in ranked:
            note = cand.failure or ", ".join(f"{k}={v}" for k, v in (cand.resources or {}).items())
            table.add_row("*" if cand.config == entry.chosen else "", _config_text(cand.config), _ms(cand.median_ms),
                          _ms(cand.p20_ms), _ms(cand.p80_ms), str(cand.n), note)
        console.print(table)
    return 0


def _export(args: argparse.Namespace) -> int:
    file_arg(args.output, "-o")
    db = _open(args, reading=True)
    if db.count(args.kernel, args.device) == 0:
        kernels = db.kernel_names()
        devices = db.gpu_names(args.kernel)
        _error(
            f"nothing to export from {db.path}: no entries"
            f"{f' of kernel {args.kernel!r}' if args.kernel else ''}{f' on {args.device!r}' if args.device else ''}"
            f" (kernels: {', '.join(kernels) or '(none)'}; GPUs{' of that kernel' if args.kernel else ''}: "
            f"{', '.join(devices) or '(none)'}); {args.output} not written")
        return 1
    n = db.export(args.output, kernel=args.kernel, device=args.device, origin="-o")
    print(f"exported {n} entries from {db.path} to {args.output}")
    return 0


def _report(console: Console, report: ImportReport, into: str) -> None:
    print(f"imported {report.path} into {into}: {report.added} added, {report.replaced} replaced, "
                  f"{report.kept} kept, {len(report.conflicts)} conflicts")
    if report.conflicts:
        table = Table(title="conflicts (the lower chosen median is kept)", title_justify="left")
        for name in ("kernel", "key", "GPU", "kept", "existing", "ms", "imported", "ms "):
            table.add_column(name, justify="right" if name.startswith("ms") else "left")
        for c in report.conflicts:
            table.add_row(c.kernel, _key_text(c.key), c.gpu_name, c.kept, _config_text(c.existing_chosen),
                          _ms(c.existing_median_ms), _config_text(c.imported_chosen), _ms(c.imported_median_ms))
        console.print(table)


def _import(args: argparse.Namespace) -> int:
    db = _open(args)
    _report(_console(), db.import_file(args.file), str(db.path))
    return 0


def _prune(args: argparse.Namespace) -> int:
    if not args.stale and not args.kernel:
        _error(
            "graphtune db prune: say what to remove: --stale (entries `graphtune db ls --stale` lists) and/or "
            "--kernel NAME (every entry of that kernel; with --stale, its stale ones); nothing removed")
        return 2
    db = _open(args)
    removed, isolated = db.remove_all(stale=args.stale, kernel=args.kernel)
    console = _console()
    if removed:
        console.print(_entry_table(f"removed from {db.path}", removed, None))
    records = f" and {isolated} isolated-launch records" if isolated else ""
    print(f"removed {len(removed)} entries{records} from {db.path}")
    return 0
