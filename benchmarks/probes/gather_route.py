"""Which kernel path="auto" should run at page sizes that are not whole 64-token TMA tiles (page size 1 is SGLang's
default): the portable kernel or the Hopper row-gather kernel, each tuned per bucket as a server's warm-up would.

For each cell (cache format, page size, batch; H = 16, 4096 tokens per request) the public decode runs twice in one
process, with ``interface_hopper.GATHER_AUTO`` off (the portable kernel) and on (the second tokens-on-M kernel with
GATHER = 1, tuned over its format's space): each checked against ``mla_decode_reference`` on these inputs (output
NaN-poisoned first; fp8 relative error, fp8_ds_mla relative error beyond the bf16 output rounding), then timed under
CUDA graph replay. Effective TB/s = the rows and page indices a decode must read / time.

    PYTHONPATH=src python benchmarks/probes/gather_route.py --out benchmarks/results/gather_route.json

Prints one line per cell and a table last; writes all results as JSON (GPU, versions, commit). Without a Hopper
GPU it says so and exits 2.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_mla_decode import comma_list, git_commit, graph_time_ms, rel_err  # noqa: E402

from graphtune.kernels import mla_decode_reference  # noqa: E402
from graphtune.kernels.mla_decode import MLADecodePlan, bench, interface, interface_hopper  # noqa: E402

SM_SCALE = 1.0 / math.sqrt(576)


def error(out: torch.Tensor, ref32: torch.Tensor, kv_format: str) -> float:
    """fp8: relative error against the fp32 reference; fp8_ds_mla: beyond what rounding it to bf16 costs (the
    errors add in quadrature; tests/gpu/test_mla_hopper_tok_gpu.py)."""
    if kv_format != "fp8_ds_mla":
        return rel_err(out, ref32)
    floor = rel_err(ref32.to(torch.bfloat16), ref32)
    return math.sqrt(max(0.0, rel_err(out, ref32) ** 2 - floor ** 2))


def cell(kv_format: str, page_size: int, batch: int, tokens: int, plan: bool = False) -> dict:
    """One cell: the portable kernel, the row gather, and with ``plan`` the row gather given a step's plan (made once
    here and filled by the warm call, outside the graph, as FlashMLA's metadata is made outside its timed call)."""
    problem = bench.Problem(batch, 16, tokens, page_size, kv_format)
    x = bench.make_inputs(problem, seed=batch * 131 + page_size)
    ref = mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE,
                               kv_scale=x["kv_scale"], kv_format=kv_format,
                               out=torch.empty(x["out"].shape, dtype=torch.float32, device="cuda"))
    row: dict = {"kv_format": kv_format, "page_size": page_size, "batch": batch, "bytes": problem.bytes_moved()}
    saved = interface_hopper.GATHER_AUTO[kv_format]
    try:
        for name, on in (("portable", False), ("gather", True), *((("gather_plan", True),) if plan else ())):
            interface_hopper.GATHER_AUTO[kv_format] = on
            step = MLADecodePlan() if name == "gather_plan" else None
            hopper = interface_hopper.supported(x["q"], x["kv_cache"], kv_format) is None
            if hopper != on:
                raise SystemExit(f"gather_route: GATHER_AUTO={on} but path='auto' runs "
                                 f"{'the Hopper' if hopper else 'the portable'} kernel ({kv_format}, page {page_size})")

            def call() -> None:
                interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE, x["kv_scale"],
                                  kv_format, x["out"], False, plan=step)
            x["out"].fill_(float("nan"))
            call()          # (tunes this batch's bucket, outside any capture)
            x["out"].fill_(float("nan"))
            call()
            torch.cuda.synchronize()
            ms = graph_time_ms([call])
            row[name] = {"rel_err": error(x["out"], ref, kv_format), "ms": ms,
                         "tbs": problem.bytes_moved() / ms / 1e9}
    finally:
        interface_hopper.GATHER_AUTO[kv_format] = saved
    return row


def _format(text: str) -> str:
    if text not in interface_hopper.GATHER:
        raise argparse.ArgumentTypeError(f"--formats item {text!r}: the row gather serves "
                                         f"{', '.join(interface_hopper.GATHER)}")
    return text


def _page_size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 or value % interface_hopper.BLOCK_N == 0:
        raise argparse.ArgumentTypeError(f"--page-sizes item {text!r}: expected a page size >= 1 that is not a "
                                         f"multiple of {interface_hopper.BLOCK_N} (those are whole TMA tiles)")
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", type=comma_list(_format), default=["fp8", "fp8_ds_mla"])
    ap.add_argument("--page-sizes", type=comma_list(_page_size), default=[1, 16])
    ap.add_argument("--batches", type=comma_list(int), default=[1, 8, 32, 64, 128])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--plan", action="store_true", help="also the row gather given a step's plan (MLADecodePlan)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/gather_route.json"))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("gather_route: needs a Hopper (sm_90) GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    print(f"{gpu}; torch {torch.__version__}; triton {triton.__version__}", flush=True)
    rows = []
    for kv_format in args.formats:
        for page_size in args.page_sizes:
            for batch in args.batches:
                r = cell(kv_format, page_size, batch, args.tokens, args.plan)
                rows.append(r)
                print(f"{kv_format} page {page_size} B={batch}: portable {r['portable']['ms']:.4f} ms "
                      f"({r['portable']['tbs']:.2f} TB/s, err {r['portable']['rel_err']:.2e}), gather "
                      f"{r['gather']['ms']:.4f} ms ({r['gather']['tbs']:.2f} TB/s, err {r['gather']['rel_err']:.2e})",
                      flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "triton": triton.__version__,
                                    "commit": git_commit(), "heads": 16, "tokens": args.tokens, "rows": rows},
                                   indent=1))
    print(f"\nH = 16, {args.tokens} tokens per request, {gpu}; ms (effective TB/s), tuned per bucket; "
          "ratio = gather / portable")
    print("| format, page size, batch | portable | row gather | ratio |"
          + (" with a plan | change |" if args.plan else ""))
    print("| --- | --- | --- | --- |" + (" --- | --- |" if args.plan else ""))
    for r in rows:
        p, g = r["portable"], r["gather"]
        planned = ""
        if args.plan:
            gp = r["gather_plan"]
            planned = f" {gp['ms']:.4f} ({gp['tbs']:.2f}) | {(gp['ms'] / g['ms'] - 1) * 100:+.1f}% |"
        print(f"| {r['kv_format']}, {r['page_size']}, {r['batch']} | {p['ms']:.4f} ({p['tbs']:.2f}) | "
              f"{g['ms']:.4f} ({g['tbs']:.2f}) | {g['ms'] / p['ms']:.2f} |" + planned)
    bound = {"fp8": 2e-3, "fp8_ds_mla": 1e-2}    # (the portable kernel's fp8_ds_mla bound; the gather's is 2e-3)
    ways = ("portable", "gather", "gather_plan")
    wrong = [(r["kv_format"], r["page_size"], r["batch"], k) for r in rows for k in ways
             if k in r and not r[k]["rel_err"] <= bound[r["kv_format"]]]
    print(f"\nwrote {args.out}; {len(wrong)} results outside their format's error bound (or NaN): {wrong}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
