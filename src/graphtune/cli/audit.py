"""``graphtune audit PATH...``: the static audit of autotuned Triton kernels (see graphtune.audit)."""
from __future__ import annotations

import argparse
import json
import sys

from ..audit import HAZARD, AuditReport, KernelAudit, audit_paths, explain

# --fail-on levels: what makes the command exit 1. "unparsed": a file the audit could not check, that is not
# read or not parsed, or (with --compile) whose module could not be imported, so the compile check never ran.
# Such a file may hold hazards the audit never saw, so "hazard" fails on those too.
_FAIL_ON = ("never", "unparsed", "hazard")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "audit", help="find autotuned Triton kernels in source and report capture hazards (read-only)",
        description="Statically audit Python files for triton.autotune / graphtune.autotune kernels (and wrappers "
                    "of triton's Autotuner) and report hazards for CUDA graph capture. Never imports the audited "
                    "code unless --compile is given.")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files or directories (.gitignore respected in git)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--fail-on", choices=_FAIL_ON, default="never",
                        help="'hazard': exit 1 on any non-informational hazard or any file the audit could not "
                             "check; 'unparsed': exit 1 only on files it could not check (not read, not parsed, or "
                             "with --compile not imported)")
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
    return exit_code(report, args.fail_on)


def exit_code(report: AuditReport, fail_on: str) -> int:
    """The exit status under ``--fail-on`` (levels above _FAIL_ON): a file that was not checked, parsed or (with
    --compile) imported, fails both "unparsed" and "hazard"."""
    if fail_on not in _FAIL_ON:
        raise ValueError(f"audit: --fail-on must be one of {', '.join(_FAIL_ON)}, not {fail_on!r}")
    if fail_on == "never":
        return 0
    if report.files_failed or report.compile_errors:
        return 1
    return 1 if fail_on == "hazard" and report.n_hazards else 0


def _key_text(kernel: KernelAudit) -> str:
    if kernel.key is None:
        return "?"
    if not kernel.key:
        return "-"
    bound = {b.name: b.binding for b in kernel.keys}
    marks = {"batch": "[batch]", "unknown": "[?]"}
    return ",".join(name + marks.get(bound.get(name, "model"), "") for name in kernel.key)


def _configs_text(kernel: KernelAudit) -> str:
    if kernel.n_configs is not None:
        return str(kernel.n_configs) + ("*" if kernel.configs_env else "")
    return kernel.configs  # dynamic / unknown


def _findings_text(kernel: KernelAudit, markup: bool) -> str:
    parts = []
    for h in kernel.hazards:
        if h.severity == HAZARD:
            parts.append(f"[red]{h.code}[/red]" if markup else h.code)
        else:
            parts.append(f"[dim]({h.code})[/dim]" if markup else f"({h.code})")
    return " ".join(parts)


def _wrapper_text(kernel: KernelAudit) -> str:
    name = kernel.wrapper_name or kernel.wrapper
    if kernel.wrapper in ("triton", "graphtune") and name.split(".")[0] == kernel.wrapper \
            and name.endswith(".autotune"):
        return kernel.wrapper  # triton.autotune, triton.runtime.autotuner.autotune, graphtune.tuner.autotune
    return f"{kernel.wrapper}:{name.rsplit('.', 1)[-1]}"


def _print_report(report: AuditReport) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(highlight=False)
    headers = ("file:line", "kernel", "wrapper", "key", "configs", "findings")
    rows = [(f"{k.file}:{k.line}", k.name, _wrapper_text(k), _key_text(k), _configs_text(k),
             _findings_text(k, False)) for k in report.kernels]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    # Nothing in the table wraps, paths least of all (they are copied): it needs the width of its widest
    # cells. Piped output (a CI log) gets that width; a narrower terminal gets one line per kernel instead.
    needed = sum(widths) + 3 * len(widths) + 1
    if not console.is_terminal:
        console = Console(width=max(160, needed), highlight=False)
    if rows and console.width >= needed:
        table = Table(title="autotuned kernels")
        for header, width in zip(headers, widths):
            table.add_column(header, no_wrap=True, min_width=width)
        for k, row in zip(report.kernels, rows):
            table.add_row(*(escape(cell) for cell in row[:5]), _findings_text(k, True))
        console.print(table)
    elif rows:
        for k, row in zip(report.kernels, rows):
            console.print(f"{escape(row[0])}  {escape(row[1])}  {escape(row[2])}  key={escape(row[3])}  "
                          f"configs={row[4]}  {_findings_text(k, True)}", soft_wrap=True)
    if report.kernels:
        console.print("[dim]" + escape("key: name[batch] follows the batch, name[?] binding unknown (no launch "
                                       "found or not readable); configs: * counted with environment defaults; "
                                       "(code): informational") + "[/dim]", soft_wrap=True)
    # tunes-at-runtime says the same thing for every kernel: explain it once; the others carry specifics.
    explained: set[str] = set()
    for k in report.kernels:
        for h in k.hazards:
            if h.severity != HAZARD:
                continue
            if h.code == "tunes-at-runtime":
                if h.code not in explained:
                    explained.add(h.code)
                    console.print(f"[red]{h.code}[/red]: {escape(explain(h.code))} (key names marked "
                                  f"{escape('[batch]')} or {escape('[?]')} above; model-only keys are informational)",
                                  soft_wrap=True)
                continue
            console.print(f"[red]{h.code}[/red] {escape(f'{k.file}:{k.line} {k.name}: {h.message}')}",
                          soft_wrap=True)
    for failure in report.files_failed:
        console.print(f"[yellow]not parsed[/yellow] {escape(failure.file)}: {escape(failure.error)}", soft_wrap=True)
    for failure in report.compile_errors:
        console.print(f"[yellow]not imported[/yellow] {escape(failure.file)}: {escape(failure.error)}",
                      soft_wrap=True)
    counts = ", ".join(f"{code} {n}" for code, n in report.hazards_by_code.items()) or "none"
    info = {code: n - report.hazards_by_code.get(code, 0) for code, n in report.by_hazard.items()}
    info_text = ", ".join(f"{code} {n}" for code, n in info.items() if n) or "none"
    parsed = f"{report.files_parsed} parsed, " if report.files_parsed is not None else ""
    holding = len({k.file for k in report.kernels})
    compiled = (f"; --compile {report.compile_target}: {report.compile_checked} of {len(report.kernels)} kernels "
                f"checked (the others: compile-skipped, with why)" if report.compile_target is not None else "")
    console.print(f"{len(report.kernels)} kernels in {holding} files; {report.files_scanned} files scanned ({parsed}"
                  f"{len(report.files_failed)} failed to parse); {report.n_hazards} hazards: {counts}; "
                  f"informational: {info_text}{compiled}", soft_wrap=True)
