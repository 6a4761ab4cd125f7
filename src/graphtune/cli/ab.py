"""``graphtune ab``: time configs x sizes inside CUDA graph replay; decide one config (V1) or per-bucket (V3)."""
from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from .._loading import parse_sizes
from .._outputs import output_dir, run_output_dir
from ..ab import TARGET_ALIASES, ABResult, ab, check_statistics

_EXAMPLE = """\
examples:
  graphtune ab mla_decode --sizes 1,8,32,60,90,128 --out ab-mla
  graphtune ab mypkg.bench:TARGET --configs "num_warps=4,BLOCK_N=32;num_warps=8,BLOCK_N=64" --trials 7
  graphtune ab --from-json ab-mla/ab.json --confidence 0.99      (re-analyse saved samples; no GPU needed)
  graphtune ab --from-json ab-mla/ab.json --min-gain 5            (a margin that may be under 5% is within noise)

built-in targets: """ + ", ".join(f"{k} ({v})" for k, v in TARGET_ALIASES.items())


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "ab", help="A/B configs x sizes in CUDA graph replay; decide V1 (one config) or V3 (per bucket)",
        description="Time every config at every size inside CUDA graph replay (several launches per graph, "
                    "rotating input sets larger than L2, several independent trials), report medians with "
                    "bootstrap confidence intervals, the winner per size and whether it beats the runner-up beyond "
                    "noise, and decide: one config for all sizes (V1) or per-bucket configs (V3).",
        epilog=_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", nargs="?", metavar="MODULE:KERNEL_OR_BENCH",
                   help="a bench target: MODULE:ATTR (MODULE dotted or a .py path) or a built-in name")
    p.add_argument("--sizes", metavar="N,...", help="sizes to time (default: the target's)")
    p.add_argument("--configs", default="all", metavar="all|SPEC;SPEC",
                   help="'all' (the target's configs) or ';'-separated NAME=VALUE,... each applied over the "
                        "target's first config")
    p.add_argument("--trials", type=int, default=None, help="independent trials, one graph capture per cell each (5)")
    p.add_argument("--samples", type=int, default=None, help="graph replays timed per cell and trial (20)")
    p.add_argument("--launches-per-sample", type=int, default=None,
                   help="launches captured in one graph (default: the timer's)")
    p.add_argument("--confidence", type=float, default=None, help="confidence level of the intervals (0.95)")
    p.add_argument("--n-boot", type=int, default=None, help="bootstrap resamples (2000)")
    p.add_argument("--seed", type=int, default=None, help="bootstrap seed (0)")
    p.add_argument("--min-gain", type=float, default=None, metavar="PCT",
                   help="minimum practical gain in percent: a config counts as within noise of the winner when the "
                        "lower end of the CI of its median's ratio to the winner's is <= 1 + PCT/100 (0: <= 1); a "
                        "decision setting, also for --from-json (default: 0, or the saved file's)")
    p.add_argument("--from-json", metavar="FILE", help="re-analyse the samples of a saved ab.json instead of timing")
    p.add_argument("--out", metavar="DIR", help="write ab.json and ab.png here")
    p.add_argument("--json", action="store_true", help="print the JSON result instead of a table")
    p.set_defaults(func=handler)


# check_statistics names the library's parameters; the command names its options
_STATISTICS_FLAGS = (("confidence", "--confidence"), ("n_boot", "--n-boot"), ("min_gain_pct", "--min-gain"))


def handler(args: argparse.Namespace) -> int:
    stats: dict[str, Any] = {k: v for k, v in (("confidence", args.confidence), ("n_boot", args.n_boot),
                                                 ("seed", args.seed), ("min_gain_pct", args.min_gain)) if v is not None}
    # the statistics options are the command's, not the file's: checked here, named as flags
    try:
        check_statistics(stats.get("confidence", 0.95), stats.get("n_boot", 2000), stats.get("min_gain_pct", 0.0))
    except ValueError as exc:
        text = str(exc)
        for name, flag in _STATISTICS_FLAGS:
            if text.startswith(name + " "):
                raise ValueError(flag + text[len(name):]) from None
        raise
    if args.from_json:
        if args.target or args.sizes or args.configs != "all":
            raise ValueError("--from-json re-analyses the saved sizes and configs: give no target, --sizes or "
                             "--configs with it")
        timing = [f for f, v in (("--trials", args.trials), ("--samples", args.samples),
                                 ("--launches-per-sample", args.launches_per_sample)) if v is not None]
        if timing:
            raise ValueError(f"--from-json re-analyses saved samples: {', '.join(timing)} would time nothing; give "
                             f"them without --from-json")
        result = ABResult.load(args.from_json, option="--from-json", **stats)
        if args.out is not None:
            output_dir(args.out, "--out")
    else:
        if not args.target:
            raise ValueError("give a target (MODULE:ATTR or a built-in: " + ", ".join(TARGET_ALIASES)
                             + "), or --from-json FILE")
        sizes = parse_sizes(args.sizes) if args.sizes else None
        # --out is made before any timing (a bad --out must not cost an A/B run) and removed again if ab()
        # refuses its arguments or finds no GPU (one line, after the target, sizes and configs are checked)
        with run_output_dir(args.out, "--out") if args.out is not None else contextlib.nullcontext():
            result = ab(args.target, sizes, args.configs, trials=5 if args.trials is None else args.trials,
                        samples=20 if args.samples is None else args.samples,
                        launches_per_sample=args.launches_per_sample, **stats)
    if args.json:
        print(result.to_json())
    else:
        from rich.console import Console

        # config labels are long: give the table room when the output is a file or CI log
        Console(width=None if sys.stdout.isatty() else 220).print(result.render_table())
    if args.out:
        try:
            written = result.save(args.out)
        except OSError as exc:
            print(f"graphtune: error: --out {args.out}: could not write the results: {exc}", file=sys.stderr)
            return 2
        for path in written:
            print(f"wrote {path}", file=sys.stderr)
    return 0
