"""``graphtune inspect``: registers, spills, shared memory and occupancy of every config, for any target.

    graphtune inspect MODULE:KERNEL --target sm_120 [--target sm_90] [--constexpr NAME=VALUE ...]
                      [--signature NAME=TYPE ...] [--no-specialize] [--json]
    graphtune inspect --targets [--json]

MODULE is a dotted module name or a path to a ``.py`` file; KERNEL an attribute of it (dots allowed). A kernel
object may carry ``graphtune_signature`` / ``graphtune_constexprs`` attributes; ``--signature`` and
``--constexpr`` add to or override them.
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from ..configs import LAUNCH_OPTIONS, parse_list, parse_params, shared_and_varying
from ..errors import InspectError
from ..resources import ResourceRow, _resolve, get_target, inspect, list_targets


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "inspect", help="registers, spills, shared memory and occupancy of each config, for any GPU target",
        description="Compile every config of a Triton kernel for a target GPU (no GPU needed) and report "
                    "registers, spills, shared memory, occupancy, and the configs that cannot launch there.")
    parser.add_argument("kernel", nargs="?", metavar="MODULE:KERNEL",
                        help="a dotted module or a path to a .py file, ':', the kernel's attribute name")
    parser.add_argument("--target", action="append", metavar="TARGET",
                        help="sm_80, sm_86, sm_89, sm_90, sm_100, sm_120 (also 90, sm90, 9.0) or 'device'; "
                             "repeat for several (default sm_90)")
    parser.add_argument("--constexpr", action="append", default=[], metavar="NAME=VALUE",
                        help="a tl.constexpr value the configs do not set (repeatable, or comma-separated)")
    parser.add_argument("--signature", action="append", default=[], metavar="NAME=TYPE",
                        help="Triton type of a runtime parameter, e.g. x_ptr=*bf16 n=i32 (repeatable)")
    parser.add_argument("--no-specialize", action="store_true",
                        help="compile without tt.divisibility hints (as for unaligned tensors / odd sizes)")
    parser.add_argument("--targets", action="store_true", help="list the built-in targets and exit")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=handler)


def _parse_signature(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        out.update(parse_list(item, _name_type, what="--signature", nothing=None, error=InspectError))
    return out


def _name_type(part: str) -> tuple[str, str]:
    name, sep, ty = part.partition("=")
    if not sep or not name.strip() or not ty.strip():
        raise ValueError(f"{part!r} is not NAME=TYPE (e.g. x_ptr=*bf16)")
    return name.strip(), ty.strip()


def _parse_constexprs(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        out.update(parse_params(item, where="--constexpr"))
    return out


def load_object(spec: str) -> Any:
    """``pkg.module:name`` or ``path/to/file.py:name.attr`` -> the object."""
    from .._loading import load_object as load
    return load(spec, "inspect", form="MODULE:KERNEL", error=InspectError)


def _resolved(spec: str, kernel: Any) -> Any:
    """``kernel``'s wrappers walked down to its @triton.jit function; an object that is no Triton kernel is an
    InspectError naming ``spec`` as given on the command line (the object alone, ``42``, says little)."""
    try:
        return _resolve(kernel)
    except InspectError as exc:
        raise InspectError(f"inspect {spec}: {exc}") from None


def _sort_key(row: ResourceRow) -> tuple:
    return (not row.fits, -row.occupancy_pct, row.spill_bytes or 0, row.registers or 0, row.label)


def _console() -> Any:
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        # Piped output: rich would wrap at 80 columns and fold every config into a tall column.
        console = Console(width=200)
    return console


def _print_targets(as_json: bool) -> None:
    targets = list_targets()
    if as_json:
        print(json.dumps([t.to_dict() for t in targets], indent=2))
        return
    from rich.table import Table

    table = Table(title="built-in targets (CUDA programming guide limits)")
    for col in ("target", "GPUs", "smem/block opt-in B", "smem/SM B", "regs/SM", "max regs/thread",
                "max warps/SM", "max threads/SM", "max blocks/SM"):
        table.add_column(col, justify="left" if col in ("target", "GPUs") else "right")
    for t in targets:
        table.add_row(t.name, t.description, f"{t.shared_per_block_optin:,}", f"{t.shared_per_sm:,}",
                      f"{t.registers_per_sm:,}", str(t.max_registers_per_thread), str(t.max_warps_per_sm),
                      str(t.max_threads_per_sm), str(t.max_blocks_per_sm))
    _console().print(table)


def _num(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _print_rows(title: str, rows: list[ResourceRow]) -> None:
    from rich.table import Table

    shared, varying = shared_and_varying([{k: v for k, v in r.config.items() if k not in LAUNCH_OPTIONS}
                                          for r in rows])
    meta = varying
    show_maxnreg = any(r.config.get("maxnreg") is not None for r in rows)
    show_ctas = any(r.num_ctas != 1 for r in rows)
    if shared:   # the same in every row: said once, so the columns left show what differs
        title += "\nevery config: " + ", ".join(f"{k}={v}" for k, v in shared.items())
    table = Table(title=title)
    for name in meta:
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("warps", justify="right", no_wrap=True)
    table.add_column("stages", justify="right", no_wrap=True)
    if show_maxnreg:
        table.add_column("maxnreg", justify="right")
    if show_ctas:
        table.add_column("ctas", justify="right")
    for col in ("regs", "spill B", "smem B", "blocks/SM by R/S/T/L", "blocks", "occupancy", "limiter"):
        table.add_column(col, justify="left" if col == "limiter" else "right", no_wrap=True)
    table.add_column("fits", overflow="fold")
    for row in sorted(rows, key=_sort_key):
        # a warp-specialised kernel's worker warps (padded to whole warpgroups) after the config's: "4+4"
        warps = str(row.num_warps) if row.total_warps == row.num_warps else \
            f"{row.num_warps}+{row.total_warps - row.num_warps}"
        cells = [str(row.config.get(name, "")) for name in meta] + [warps, str(row.num_stages)]
        if show_maxnreg:
            cells.append(str(row.config.get("maxnreg") or ""))
        if show_ctas:
            cells.append(str(row.num_ctas))
        by = "-" if row.blocks_by_registers is None else \
            f"{row.blocks_by_registers}/{row.blocks_by_shared}/{row.blocks_by_threads}/{row.blocks_by_limit}"
        spill = _num(row.spill_bytes)
        if row.spill_bytes:
            spill = f"[yellow]{spill}[/yellow]"
        fits = "yes" if row.fits else f"[red]no: {row.reason}[/red]"
        cells += [_num(row.registers), spill, _num(row.shared_bytes), by, str(row.resident_blocks),
                  f"{row.occupancy_pct:.1f}%", row.limiter, fits]
        table.add_row(*cells)
    console = _console()
    console.print(table)
    # compile-time hazards read from the SASS (graphtune.sass), under the table: one line each, naming the config
    for row in sorted(rows, key=_sort_key):
        for hazard in row.hazards:
            console.print(f"[red]{row.label}: {hazard}[/red]", soft_wrap=True)


def handler(args: argparse.Namespace) -> int:
    if args.targets:
        _print_targets(args.json)
        return 0
    if not args.kernel:
        raise InspectError("give MODULE:KERNEL to inspect, or --targets to list the targets")
    kernel = load_object(args.kernel)
    targets = [get_target(t) for t in (args.target or ["sm_90"])]
    signature = dict(_resolved(args.kernel, kernel).signature or {})
    signature.update(_parse_signature(args.signature))
    constexprs = _parse_constexprs(args.constexpr)
    specialize = not args.no_specialize
    results: list[tuple[str, list[ResourceRow]]] = []
    for target in targets:
        rows = inspect(kernel, target=target, signature=signature or None, constexprs=constexprs,
                       specialize=specialize)
        results.append((target.name, rows))
    if args.json:
        print(json.dumps([row.to_dict() for _, rows in results for row in rows], indent=2, default=repr))
        return 0
    for name, rows in results:
        bad = sum(not r.fits for r in rows)
        hazardous = sum(bool(r.hazards) for r in rows)
        title = (f"{args.kernel} on {name}: {len(rows)} config{'s' if len(rows) != 1 else ''}"
                 + (f", {bad} cannot run" if bad else "")
                 + (f", {hazardous} miscompiled (below)" if hazardous else ""))
        _print_rows(title, rows)
    return 0
