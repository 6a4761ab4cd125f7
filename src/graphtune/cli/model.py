"""``graphtune model``: project decode step time and throughput, and what a faster component is worth."""
from __future__ import annotations

import argparse

from .._outputs import first_non_finite, strict_json
from ..configs import number, parse_list
from ..model import ThroughputModel, parse_points

_EXAMPLE = """\
example:
  graphtune model --fixed-ms 18 --per-request-ms 1.05 --component attention=0.79 \\
                  --speedup 1.25,1.8 --concurrency 60,90
  graphtune model --points 60:81.0,90:112.5 --component attention=0.79 --speedup 1.5
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "model", help="decode throughput model: step = fixed + C * per_request",
        description="Decode throughput model: step_ms(C) = fixed_ms + C * per_request_ms, one token per request per "
                    "step, tokens/s = C / (step_ms / 1000). Give fixed and per-request costs, or fit them to "
                    "measured points; name components of the per-request cost and project the gain of making "
                    "one of them faster.",
        epilog=_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fixed-ms", type=float, help="cost of a step independent of the batch (ms)")
    p.add_argument("--per-request-ms", type=float, help="cost of each request in the batch (ms)")
    p.add_argument("--points", metavar="C:MS,...",
                   help="measured (concurrency, step ms) points to fit fixed and per-request costs to, "
                        "e.g. 60:81.0,90:112.5 (instead of --fixed-ms / --per-request-ms)")
    p.add_argument("--component", action="append", default=[], metavar="NAME=MS",
                   help="a named part of the per-request cost, e.g. attention=0.79 (repeatable)")
    p.add_argument("--speedup", metavar="F,...", help="factors to make each component faster by, e.g. 1.25,1.8")
    p.add_argument("--concurrency", metavar="C,...",
                   help="concurrency levels to project at (default: those of --points)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=handler)


def _numbers(text: str, what: str) -> list[float]:
    return parse_list(text, number, what=what, nothing="numbers")


def _components(items: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--component {item!r} is not NAME=MS")
        if name.strip() in out:
            raise ValueError(f"--component {name.strip()!r} given twice")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--component {item!r}: {value!r} is not a number of ms") from None
    return out


def build_model(args: argparse.Namespace) -> ThroughputModel:
    components = _components(args.component)
    given = args.fixed_ms is not None or args.per_request_ms is not None
    if args.points and given:
        raise ValueError("give either --points (to fit) or --fixed-ms and --per-request-ms, not both")
    if args.points:
        return ThroughputModel.fit(parse_points(args.points), components)
    if args.fixed_ms is None or args.per_request_ms is None:
        raise ValueError("need --fixed-ms and --per-request-ms, or --points to fit them")
    return ThroughputModel(args.fixed_ms, args.per_request_ms, components)


def handler(args: argparse.Namespace) -> int:
    model = build_model(args)
    if args.concurrency:
        levels = _numbers(args.concurrency, "--concurrency")
    elif model.fit_info is not None:
        levels = [c for c, _ in model.fit_info.points]
    else:
        raise ValueError("need --concurrency (or --points, whose concurrencies are used)")
    factors = _numbers(args.speedup, "--speedup") if args.speedup else []
    if factors and not model.components:
        raise ValueError("--speedup needs at least one --component NAME=MS to speed up")
    report = model.project(levels, factors)
    overflow = first_non_finite(report)
    if overflow is not None:
        # e.g. --fixed-ms 1e308 --per-request-ms 1e308: finite inputs whose step time overflows a double
        raise ValueError(f"the model overflows: {overflow} (from --fixed-ms {model.fixed_ms:g}, --per-request-ms "
                         f"{model.per_request_ms:g}); give costs and concurrencies whose step time is a finite "
                         f"number of ms")
    if args.json:
        print(strict_json(report, "graphtune model --json", indent=2))
        return 0
    _print_tables(model, report)
    return 0


def _print_tables(model: ThroughputModel, report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    parts = ", ".join(f"{k} {v:g} ms" for k, v in model.components.items())
    console.print(f"step_ms(C) = {model.fixed_ms:.4g} + C x {model.per_request_ms:.4g} ms"
                  + (f"   (per request: {parts})" if parts else ""))
    if model.fit_info is not None:
        fit = Table(title=f"least-squares fit (rms residual {model.fit_info.rms_ms:.3g} ms)")
        for name in ("C", "measured ms", "fitted ms", "residual ms"):
            fit.add_column(name, justify="right")
        for point in model.fit_info.to_dict()["points"]:
            fit.add_row(f"{point['c']:g}", f"{point['step_ms']:.3f}", f"{point['fitted_ms']:.3f}",
                        f"{point['residual_ms']:+.3f}")
        console.print(fit)
    base = Table(title="baseline")
    for name in ("C", "step ms", "tokens/s"):
        base.add_column(name, justify="right")
    for row in report["baseline"]:
        base.add_row(f"{row['c']:g}", f"{row['step_ms']:.2f}", f"{row['tokens_per_s']:.1f}")
    console.print(base)
    if report["scenarios"]:
        sc = Table(title="component made faster")
        for name in ("component", "factor", "C", "step ms", "tokens/s", "gain"):
            sc.add_column(name, justify="left" if name == "component" else "right")
        for row in report["scenarios"]:
            sc.add_row(row["component"], f"{row['factor']:g}x", f"{row['c']:g}", f"{row['step_ms']:.2f}",
                       f"{row['tokens_per_s']:.1f}", f"{row['gain_pct']:+.1f}%")
        console.print(sc)
