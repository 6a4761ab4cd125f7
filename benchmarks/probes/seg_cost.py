"""The even split with each request's start priced at N tiles (``kernel_hopper._split_start``'s ``SEG_COST``), timed
on the public table: ``--bf16 N`` sets ``kernel_hopper.BF16_SEG_COST`` (the bf16 kernels of the tuned path, shipped
at 0), ``--fp8 N`` ``FP8_SEG_COST`` (the fp8 ones, shipped at 4), before any kernel compiles; the remaining arguments
go to ``bench_mla_decode.py --vs-flashmla`` (``--vs-ragged --ragged-seed S``: the ragged batches the price is for;
give each N its own ``TRITON_CACHE_DIR``). The priced split applies only where the even split leaves a request
boundary inside a program, so uniform batches time the shipped split whatever N is.

    PYTHONPATH=src python benchmarks/probes/seg_cost.py --bf16 4 --configs none --vs-formats bf16 \\
        --vs-variant-filter NONE --vs-ragged --ragged-seed 39179 --out bf16_seg4.json
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from triton.experimental.gluon import language as gl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_mla_decode  # noqa: E402

from graphtune.kernels.mla_decode import (kernel_hopper, kernel_hopper_heads, kernel_hopper_pp,  # noqa: E402
                                          kernel_hopper_pp8, kernel_hopper_tok, kernel_hopper_tok2)

# every module whose kernels read a price by name (a Gluon kernel resolves its globals in its own module)
_READERS = {"BF16_SEG_COST": (kernel_hopper, kernel_hopper_pp),
            "FP8_SEG_COST": (kernel_hopper, kernel_hopper_heads, kernel_hopper_pp, kernel_hopper_pp8, kernel_hopper_tok,
                             kernel_hopper_tok2)}


def _price(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 64:
        raise argparse.ArgumentTypeError(f"a start's price in tiles is 0..64, got {text}")
    return value


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bf16", type=_price, help="BF16_SEG_COST (shipped 0)")
    parser.add_argument("--fp8", type=_price, help="FP8_SEG_COST (shipped 4)")
    args, rest = parser.parse_known_args(argv)
    for name, value in (("BF16_SEG_COST", args.bf16), ("FP8_SEG_COST", args.fp8)):
        if value is not None:
            for module in _READERS[name]:
                setattr(module, name, gl.constexpr(value))
        print(f"split: {name} {int(getattr(kernel_hopper, name))}", flush=True)
    return bench_mla_decode.main(["--vs-flashmla", *rest])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
