"""The MLA decode reduction's block shapes, timed alone on real partials, beside the split kernel that wrote them.

For each cell (cache format, heads, batch; 4096 tokens per request, page size 64, as bench_mla_decode.py's
FlashMLA comparison), runs graphtune's Hopper path once (tuned for the batch as a server's warm-up would), keeps
its partials, then for every ``(BLOCK_S, BLOCK_H, BLOCK_D, num_warps)`` shape: checks the merged output against
the full decode's (output NaN-poisoned before each run) and times the reduction alone under CUDA graph replay.
Also times the split kernel alone and FlashMLA when it imports, so each row shows the reduction's share, and with
``--pdl`` the decode without the reduction launched as a programmatic dependent of the split kernel, with it (checked
too) and without it again (the two plain times bracket it); without ``--pdl`` the decode as shipped.
The reduction alone is launch-bound where its grid is small (batch 1: session 15 timed one shape at 0.0035 and
0.0052 ms in two runs with the decodes equal): the decode-level times decide.

    PYTHONPATH=src python benchmarks/probes/reduce_sweep.py --out benchmarks/results/reduce_sweep.json

Prints one table per cell (ms, median of graph replays) and the rule's pick; writes all results as JSON.
Without a GPU it says so and exits 2.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_mla_decode import (comma_list, flashmla_call, git_commit, graph_time_ms,  # noqa: E402
                              import_flashmla)

from graphtune.kernels.mla_decode import bench, interface, interface_hopper, reduction  # noqa: E402

SHAPES = [(16, 1, 512, 4), (64, 1, 128, 4), (32, 1, 256, 4), (16, 1, 128, 4), (8, 1, 512, 4), (4, 1, 512, 4),
          (4, 1, 512, 2), (2, 1, 512, 2), (4, 1, 256, 2), (4, 2, 512, 4), (4, 4, 512, 4), (2, 4, 512, 4),
          (4, 4, 256, 4), (2, 8, 512, 8), (4, 8, 512, 8), (8, 2, 512, 4)]


def _shape(text: str) -> tuple[int, int, int, int]:
    """``BLOCK_SxBLOCK_HxBLOCK_Dxwarps``, each a power of two, BLOCK_D at most 512 (e.g. ``4x2x512x4``)."""
    try:
        parts = tuple(int(p) for p in text.split("x"))
    except ValueError:
        parts = ()
    if len(parts) != 4 or any(p < 1 or p & (p - 1) for p in parts) or parts[2] > 512:
        raise argparse.ArgumentTypeError(f"--shapes item {text!r}: expected BLOCK_SxBLOCK_HxBLOCK_Dxwarps, powers of "
                                         f"two, BLOCK_D <= 512 (e.g. 4x2x512x4)")
    return parts


def _decode_with_pdl(args: tuple, out: torch.Tensor, full: torch.Tensor) -> dict:
    """The decode with the reduction launched as a programmatic dependent of the split kernel at every batch
    (``reduction.PDL_MIN_BATCH`` 1; the split kernels let it launch from their first instruction): checked
    against ``full`` (NaN-poisoned output first) and timed, in the same process as the plain decode."""
    with _pdl_from(1):
        out.fill_(float("nan"))
        interface._launch(*args, out, False, path="hopper")
        torch.cuda.synchronize()
        err = ((out.float() - full.float()).abs().max() / full.float().abs().max()).item()
        return {"rel_diff": err, "ms": graph_time_ms([lambda: interface._launch(*args, out, False, path="hopper")])}


@contextlib.contextmanager
def _pdl_from(batch: int):
    """``reduction.PDL_MIN_BATCH`` set to ``batch`` (a graph captured meanwhile keeps its launches)."""
    saved = reduction.PDL_MIN_BATCH
    reduction.PDL_MIN_BATCH = batch
    try:
        yield
    finally:
        reduction.PDL_MIN_BATCH = saved


def cell(kv_format: str, heads: int, batch: int, shapes: list, fm, pdl: bool = False) -> dict:
    x = bench.make_inputs(bench.Problem(batch, heads, 4096, 64, kv_format), seed=batch + heads)
    sm_scale = 1.0 / math.sqrt(576)
    sms = interface._sm_count(x["q"].device)
    args = (x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], sm_scale, x["kv_scale"], kv_format)
    full = interface._launch(*args, x["out"], False, path="hopper").clone()   # (tunes this batch's bucket)
    out = torch.empty_like(full)
    lse, part_o, part_lse, seg = interface_hopper.launch(*args, out, False, sms=sms)
    torch.cuda.synchronize()
    slots = part_o.shape[0]
    rule = (interface.reduce_blocks(batch, slots, heads, part_o.element_size()) if hasattr(interface, "reduce_launch")
            else interface.reduce_blocks(batch, slots))     # (a source tree from before BLOCK_H)
    row: dict = {"kv_format": kv_format, "heads": heads, "batch": batch, "slots": slots, "rule": list(rule),
                 "shapes": []}

    def split() -> None:
        interface_hopper.launch(*args, out, False, sms=sms)

    row["split_ms"] = graph_time_ms([split])

    def decode() -> None:
        interface._launch(*args, x["out"], False, path="hopper")
    if pdl:
        # plain (no programmatic launch at any batch), with it, plain again: a drift of the GPU's clocks within the
        # cell shows as a gap between the two plain times
        with _pdl_from(1 << 30):
            row["decode_ms"] = graph_time_ms([decode])
        row["decode_pdl"] = _decode_with_pdl(args, out, full)
        with _pdl_from(1 << 30):
            row["decode_ms_after"] = graph_time_ms([decode])
    else:
        row["decode_ms"] = graph_time_ms([decode])      # (as shipped)
    if fm is not None:
        row["flashmla_ms"] = graph_time_ms([flashmla_call(fm, x, kv_format, sm_scale)[0]])
    interface_hopper.launch(*args, out, False, sms=sms)    # (the partials as the timed split calls left them)

    def check_and_time(reduce) -> dict:
        out.fill_(float("nan"))     # (the split kernel writes unsplit requests' rows itself)
        split()
        reduce()
        torch.cuda.synchronize()
        err = ((out.float() - full.float()).abs().max() / full.float().abs().max()).item()
        return {"rel_diff": err, "ms": graph_time_ms([reduce], reps=50)}

    # the rule as the decode runs it (interface._reduce: also in source trees without reduce_launch)
    row["rule_run"] = check_and_time(lambda: interface._reduce(batch, heads, seg, part_o, part_lse, out, lse,
                                                               x["seq_lens"], False))
    for shape in shapes if hasattr(interface, "reduce_launch") else []:
        if heads % shape[1]:
            continue

        def reduce(shape=shape) -> None:
            interface.reduce_launch(seg, part_o, part_lse, out, lse, x["seq_lens"], False, shape)

        row["shapes"].append({"shape": list(shape), **check_and_time(reduce)})
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", type=comma_list(str), default=["bf16", "fp8"])
    ap.add_argument("--h16", type=comma_list(int), default=[1, 8, 32, 64, 128])
    ap.add_argument("--h128", type=comma_list(int), default=[1, 8, 32, 64])
    ap.add_argument("--shapes", type=comma_list(_shape), default=SHAPES)
    ap.add_argument("--pdl", action="store_true",
                    help="also time the decode with the reduction as a programmatic dependent launch")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/reduce_sweep.json"))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("reduce_sweep: needs a CUDA GPU", file=sys.stderr)
        return 2
    fm, why = import_flashmla()
    gpu = torch.cuda.get_device_name()
    print(f"{gpu}; torch {torch.__version__}; FlashMLA {'timed' if fm else f'not timed ({why})'}", flush=True)
    rows = []
    for kv_format in args.formats:
        for heads, batches in ((16, args.h16), (128, args.h128)):
            for batch in batches:
                row = cell(kv_format, heads, batch, args.shapes, fm, args.pdl)
                rows.append(row)
                best = min(row["shapes"], key=lambda s: s["ms"], default={"shape": "-", "ms": float("nan")})
                pdl = row.get("decode_pdl")
                pdl_text = "" if pdl is None else (f" (PDL {pdl['ms']:.4f}"
                                                   f"{'' if pdl['rel_diff'] < 1e-2 else ' WRONG'}, then without "
                                                   f"{row['decode_ms_after']:.4f})")
                print(f"\n{kv_format} H={heads} B={batch} slots={row['slots']}: "
                      f"decode {row['decode_ms']:.4f}{pdl_text} split {row['split_ms']:.4f} FlashMLA {row.get('flashmla_ms', float('nan')):.4f} ms; "
                      f"rule {row['rule']} {row['rule_run']['ms']:.4f}"
                      f"{'' if row['rule_run']['rel_diff'] < 1e-2 else ' WRONG'}, best {best['shape']} "
                      f"{best['ms']:.4f}")
                print("  " + "  ".join(f"{'x'.join(map(str, s['shape']))}={s['ms']:.4f}"
                                       f"{'' if s['rel_diff'] < 1e-2 else ' WRONG'}" for s in row["shapes"]),
                      flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "commit": git_commit(),
                                    "rows": rows}, indent=1))
    wrong = [(r["kv_format"], r["heads"], r["batch"], s.get("shape", "rule")) for r in rows
             for s in [*r["shapes"], r["rule_run"], *([r["decode_pdl"]] if "decode_pdl" in r else [])]
             if not s["rel_diff"] < 1e-2]
    print(f"\nwrote {args.out}; {len(wrong)} shapes differ from the full decode by >= 1% of its largest "
          f"value (or NaN): {wrong}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
