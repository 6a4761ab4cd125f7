"""``graphtune audit PATH...``: the static audit of autotuned Triton kernels (see graphtune.audit)."""
from __future__ import annotations

import argparse
import json
import sys

from ..audit import HAZARD, AuditReport, audit_paths


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "audit", help="find autotuned Triton kernels in source and report capture hazards (read-only)",
        description="Statically audit Python files for triton.autotune / graphtune.autotune kernels and report "
                    "hazards for CUDA graph capture. Never imports the audited code unless --compile is given.")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files or directories (.gitignore respected in git)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--fail-on", choices=("hazard", "never"), default="never",
                        help="'hazard': exit 1 when any non-informational hazard is found")
    parser.add_argument("--target", help="GPU target for --compile, e.g. sm_90 or sm_120")
    parser.add_argument("--compile", action="store_true",
                        help="import each kernel's module (runs that code) and check its configs fit --target")
    parser.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    if args.compile and not args.target:
        raise ValueError("audit: --compile needs --target (e.g. --target sm_120)")
    if args.target and not args.compile:
        raise ValueError(f"audit: --target {args.target} only applies with --compile (which imports the code)")
    report = audit_paths(args.paths, compile_target=args.target if args.compile else None)
    if args.json:
        sys.stdout.write(json.dumps(report.to_dict(), indent=2, default=str) + "\n")
    else:
        _print_report(report)
    return 1 if args.fail_on == "hazard" and report.n_hazards else 0


def _print_report(report: AuditReport) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # piped to a file or CI log: 80 columns would fold every path
    if report.kernels:
        table = Table(title="autotuned kernels")
        for column in ("file:line", "kernel", "wrapper", "key", "configs", "findings"):
            table.add_column(column, overflow="fold")
        for k in report.kernels:
            key = "?" if k.key is None else ",".join(k.key) or "-"
            findings = " ".join(
                f"[red]{h.code}[/red]" if h.severity == HAZARD else f"[dim]{h.code}[/dim]" for h in k.hazards)
            table.add_row(escape(f"{k.file}:{k.line}"), escape(k.name), k.wrapper, escape(key),
                          "dynamic" if k.n_configs is None else str(k.n_configs), findings)
        console.print(table)
    # tunes-at-runtime says the same thing for every kernel: explain it once; the others carry specifics.
    explained: set[str] = set()
    for k in report.kernels:
        for h in k.hazards:
            if h.severity != HAZARD:
                continue
            if h.code == "tunes-at-runtime":
                if h.code not in explained:
                    explained.add(h.code)
                    console.print(f"[red]{h.code}[/red]: {escape(h.message.split(': ', 1)[-1])}")
                continue
            console.print(f"[red]{h.code}[/red] {escape(f'{k.file}:{k.line} {k.name}: {h.message}')}")
    for failure in report.files_failed:
        console.print(f"[yellow]not parsed[/yellow] {escape(failure.file)}: {escape(failure.error)}")
    for failure in report.compile_errors:
        console.print(f"[yellow]not imported[/yellow] {escape(failure.file)}: {escape(failure.error)}")
    counts = ", ".join(f"{code} {n}" for code, n in report.by_hazard.items()) or "none"
    console.print(f"{len(report.kernels)} kernels in {report.files_scanned} files "
                  f"({len(report.files_failed)} not parsed); {report.n_hazards} hazards; findings: {counts}")
