"""``graphtune tune MODULE:TARGET --sizes ...``: tune every bucket offline, sharded over torchrun's ranks."""
from __future__ import annotations

from .._loading import load_object, parse_sizes
from .._outputs import file_arg
from ..errors import GraphtuneError, UserCodeError, one_line

import argparse
import sys
import time
from typing import Any

_EXAMPLE = """\
examples:
  graphtune tune mypkg.tuning:DECODE --sizes 1,2,4,8,16,32,64,128 --out decode-h200.json
  torchrun --nproc-per-node 8 -m graphtune tune mypkg.tuning:DECODE --out decode-h200.json --db
  graphtune tune ./tuning.py:DECODE           (the target's default_sizes, recorded in the database)

TARGET is an object with `kernel` (a graphtune kernel), `default_sizes`, and
`make_args(size) -> (args, kwargs, grid)` (graphtune.TuneTarget); a class is instantiated.
Under torchrun the (bucket, config) timings are dealt round-robin to the ranks and rank 0 writes the
results; give GRAPHTUNE_DIST_TIMEOUT_S more than the longest share of one rank takes."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "tune", help="tune a kernel for every bucket offline (sharded over torchrun ranks)",
        description="Time every candidate config of a graphtune kernel at the bucket of every size, pick the "
                    "fastest per bucket, and write an export file and / or the tuning database. Under torchrun "
                    "the work is split across the ranks.",
        epilog=_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="MODULE:TARGET", help="MODULE dotted or a .py path; TARGET an attribute")
    p.add_argument("--sizes", metavar="N,...", help="sizes to tune (default: the target's default_sizes)")
    p.add_argument("--out", metavar="FILE", help="write the results as an export file (`graphtune db export` format)")
    p.add_argument("--db", nargs="?", const=True, default=None, metavar="PATH",
                   help="record the results in the tuning database (default: $GRAPHTUNE_DB or the user cache; "
                        "this is also what happens when --out is not given)")
    p.add_argument("--isolate", action="store_true",
                   help="launch candidates that never ran on this GPU and software stack first in a worker "
                        "process: one that faults or hangs is recorded as failed (GRAPHTUNE_ISOLATE=1)")
    p.set_defaults(func=handler)


def resolve_target(spec: str) -> Any:
    """``MODULE:ATTR`` (MODULE dotted or a ``.py`` path, ATTR may be dotted) -> the TuneTarget object."""
    obj: Any = load_object(spec, f"tune target {spec!r}")
    if isinstance(obj, type):
        try:
            obj = obj()
        except Exception as exc:  # noqa: BLE001 - user code
            raise UserCodeError(f"tune target {spec!r}: {obj.__name__}() raised {one_line(exc)}; TARGET must be an "
                                f"object with kernel, default_sizes and make_args (or a class made without "
                                f"arguments)") from exc
    return obj


def handler(args: argparse.Namespace) -> int:
    from .. import agreement, settings, sharded
    from ..tuner import check_forces

    file_arg(args.out, "--out")
    file_arg(args.db if isinstance(args.db, str) else None, "--db")
    if args.isolate:
        settings.override(GRAPHTUNE_ISOLATE="1")
    target = resolve_target(args.target)
    sharded.check_target(target, args.target)
    check_forces()   # a GRAPHTUNE_FORCE naming no kernel is an error here, not silently ignored
    sizes = parse_sizes(args.sizes) if args.sizes is not None else None
    _check_device()
    if args.out is None and args.db is None and settings.db_disabled():
        raise ValueError("GRAPHTUNE_NO_DB=1 and no --out: the results would be lost; give --out FILE or --db PATH")
    db: Any = args.db if args.db is not None else (args.out is None)
    _check_writes(args.out, db)   # before any timing: a write that cannot happen must not cost a tuning run
    created = agreement.init_from_env()
    if created:
        import torch.distributed as dist
    try:
        t0 = time.perf_counter()
        results = sharded.tune_sharded(target, sizes, out=args.out, db=db)
        elapsed = time.perf_counter() - t0
        if agreement.current_rank() == 0:
            _print(target, results, elapsed, agreement.current_world_size(), args.out, db)
        if created:
            # every rank reaches the teardown together: a rank that destroyed its gloo group while rank 0 still
            # wrote and printed was sometimes aborted at exit ("terminate called without an active exception")
            dist.barrier()
    finally:
        if created:
            dist.destroy_process_group()
    return 0


def _check_device() -> None:
    """Tuning runs the kernel on a CUDA GPU, or through Triton's interpreter (TRITON_INTERPRET=1). Without
    either every candidate fails ('0 active drivers', a dozen lines): one line instead, before any work."""
    import torch

    from .. import settings

    if not settings.interpret() and not torch.cuda.is_available():
        raise GraphtuneError("tune needs a CUDA GPU (none found: torch.cuda.is_available() is False), or "
                             "TRITON_INTERPRET=1 to run the kernels through Triton's interpreter")


def _check_writes(out: str | None, db: Any) -> None:
    """One-line errors (ValueError / DatabaseError naming the path, the option and the cause) for an --out that an
    export must not replace (the database itself, a file not an export, not a regular file: db.export_target) or
    cannot write (a read-only directory: _outputs.output_file, checked where the export lands, a link's target), or
    a database that cannot be recorded in."""
    from .._outputs import output_file
    from ..db import TuningDB, export_target

    store = None
    if db is not False and db is not None:
        store = TuningDB() if db is True else TuningDB(db, origin="--db")
    try:
        if out is not None:
            output_file(export_target(out, store.path if store is not None else None, origin="--out"), "--out")
        if store is not None:
            store.check_writable()
    finally:
        if store is not None:
            store.close()


def _print(target: Any, results: dict, elapsed: float, world: int, out: str | None, db: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    kernel = target.kernel
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    table = Table(title=f"graphtune tune {kernel.name}: {len(results)} buckets x {len(kernel.configs)} configs, "
                        f"{world} rank(s), {elapsed:.1f} s")
    table.add_column("bucket (key)")
    table.add_column("sizes")
    table.add_column("config")
    table.add_column("median ms", justify="right")
    table.add_column("timed / failed", justify="right")
    for key, bucket in results.items():
        failed = sum(1 for c in bucket.candidates if c.get("failure"))
        table.add_row(",".join(str(v) for v in key), ",".join(str(s) for s in bucket.sizes), bucket.label,
                      f"{bucket.median_ms:.4f}" if bucket.median_ms is not None else "-",
                      f"{len(bucket.candidates) - failed} / {failed}")
    console.print(table)
    _print_failures(console, results)
    if out:
        console.print(f"wrote {out}")
    if db is not False and db is not None:
        from ..db import TuningDB
        console.print(f"recorded in {TuningDB(None if db is True else db).path}")


def _print_failures(console: Any, results: dict) -> None:
    """One line per failed (bucket, config) with its reason, under the table (which only counts them)."""
    from ..configs import config_label

    for key, bucket in results.items():
        for c in bucket.candidates:
            if c.get("failure"):
                console.print(f"bucket {','.join(str(v) for v in key)}: {config_label(c['config'])} failed: "
                              f"{c['failure']}", markup=False, soft_wrap=True)
