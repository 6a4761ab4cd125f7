"""The fp8_ds_mla decode's LSE error against its fp32 reference, per way of launching the split (``SPLIT_PDL``),
over seeds: whether a test's LSE beyond its bound comes from a launch order or from the inputs.

The inputs are ``tests/gpu/test_mla_hopper_tok_gpu.py``'s ``test_tok_ds_matches_reference`` case (H = 16, page size
64, lengths 1 / 63 / 64 / 65 / 3001 / 4096, NaN past each length, its ``spread`` group scales 2^12 apart, the DS
config pinned with ``PT_EARLY``), the pinned launch at 132 / 7 / 1 SMs, the output NaN-poisoned before each.

    PYTHONPATH=src python benchmarks/probes/ds_lse.py --seeds 1720180888 --random 12

Prints a line per seed, way and SM count (the largest LSE error of its ``--repeat`` launches, where, the output's
error beyond bf16 rounding, and how many repeats differed from the first bit for bit: the same inputs and launch, so
any difference is a race); JSON with the GPU, versions and commit.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "gpu"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_mla_decode import git_commit  # noqa: E402

import triton  # noqa: E402

from graphtune.kernels.mla_decode import interface, interface_hopper  # noqa: E402

LENS = [1, 63, 64, 65, 3001, 4096]


def seeds_arg(text: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",") if s]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds {text!r}: expected comma-separated integers") from None


def ways_arg(text: str) -> list[int]:
    try:
        ways = [int(w) for w in text.split(",") if w]
    except ValueError:
        ways = []
    if not ways or any(w not in (0, 1, 2) for w in ways):
        raise argparse.ArgumentTypeError(f"--ways {text!r}: expected SPLIT_PDL values 0, 1 or 2, comma-separated")
    return ways


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=seeds_arg, default=[], help="seeds to run again (comma-separated)")
    ap.add_argument("--random", type=int, default=8, help="fresh random seeds besides")
    ap.add_argument("--ways", type=ways_arg, default=[0, 2], help="SPLIT_PDL values (comma-separated)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="launches of each seed, way and SM count (their outputs compared bit for bit)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/ds_lse.json"))
    args = ap.parse_args(argv)
    if args.random < 0:
        ap.error(f"--random {args.random}: must be at least 0")
    if args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: must be at least 1")
    ways = args.ways
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("ds_lse: needs a Hopper (sm_90) GPU", file=sys.stderr)
        return 2
    import test_mla_hopper_tok_gpu as t     # (its case and scales, as the test makes them)
    gpu = torch.cuda.get_device_name()
    print(f"{gpu}; torch {torch.__version__}; triton {triton.__version__}", flush=True)
    shipped = interface_hopper.SPLIT_PDL
    saved = dict(interface_hopper.HOPPER_TOK_DS_CONFIG)
    interface_hopper.HOPPER_TOK_DS_CONFIG["PT_EARLY"] = 1
    rows = []
    seeds = args.seeds + [int.from_bytes(os.urandom(4), "little") for _ in range(args.random)]
    try:
        for seed in seeds:
            os.environ["GRAPHTUNE_TEST_SEED"] = str(seed)
            _, x, ref32, ref_lse = t._case(16, 64, LENS, "fp8_ds_mla", t._spread_scales, ref_dtype=torch.float32)
            for way in ways:
                interface_hopper.SPLIT_PDL = way
                for sms in (132, 7, 1):
                    first = None
                    errs, differs = [], 0
                    for _ in range(args.repeat):
                        x["out"].fill_(float("nan"))
                        out, lse = interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"],
                                                     t.SM_SCALE, 1.0, "fp8_ds_mla", x["out"], True, num_sms=sms,
                                                     path="hopper")
                        torch.cuda.synchronize()
                        diff = (lse - ref_lse).abs()
                        errs.append((float(diff.max()), divmod(int(diff.argmax()), diff.shape[1]),
                                     t._beyond_bf16(out, ref32)))
                        if first is None:
                            first = (out.clone(), lse.clone())
                        elif not (torch.equal(out, first[0]) and torch.equal(lse, first[1])):
                            differs += 1     # (the same inputs and launch: any difference is a race)
                    worst = max(errs)
                    row = dict(seed=seed, split_pdl=way, sms=sms, lse_err=worst[0], at=worst[1], out_err=worst[2],
                               repeats=args.repeat, differing_repeats=differs,
                               lse_errs=sorted({round(e[0], 7) for e in errs}))
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    finally:
        interface_hopper.SPLIT_PDL = shipped
        interface_hopper.HOPPER_TOK_DS_CONFIG.clear()
        interface_hopper.HOPPER_TOK_DS_CONFIG.update(saved)
        os.environ.pop("GRAPHTUNE_TEST_SEED", None)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(dict(gpu=gpu, torch=torch.__version__, triton=triton.__version__,
                                        commit=git_commit(), rows=rows), indent=1))
    worst, differing = {}, {}
    for r in rows:
        worst[r["split_pdl"]] = max(worst.get(r["split_pdl"], 0.0), r["lse_err"])
        differing[r["split_pdl"]] = differing.get(r["split_pdl"], 0) + r["differing_repeats"]
    print("largest LSE error per SPLIT_PDL: " + ", ".join(f"{w}: {e:.2e}" for w, e in worst.items()))
    print("repeats that differed from their first launch per SPLIT_PDL: "
          + ", ".join(f"{w}: {n}" for w, n in differing.items()))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
