"""Where T8 with an e4m3 P (``P8 = 1``, pinned) goes wrong, if it does: per request, head block and output half, how
many outputs are unwritten (a finite sentinel left) or not finite, beside T8 with the e4m3 query (``query_precision=
"e4m3"``) on the same inputs; batch, lengths and SM counts from the command line.

    PYTHONPATH=src python benchmarks/probes/p8_check.py --batch 8 --sms 132,7,1 --lengths uniform,mixed

Prints a line per case and writes JSON (GPU, versions, commit). Without a Hopper GPU it says so and exits 2.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_mla_decode import comma_list, git_commit  # noqa: E402

import triton  # noqa: E402

from graphtune.kernels import mla_decode_reference  # noqa: E402
from graphtune.kernels.mla_decode import bench, interface  # noqa: E402
from graphtune.kernels.mla_decode.reference import e4m3_query  # noqa: E402

SM_SCALE = 1.0 / math.sqrt(576)
SENTINEL = 777.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--heads", type=int, default=128)
    ap.add_argument("--max-len", type=int, default=4096)
    ap.add_argument("--sms", type=comma_list(int), default=[132, 7, 1])
    ap.add_argument("--lengths", type=comma_list(str), default=["uniform", "mixed"])
    ap.add_argument("--configs", type=comma_list(str), default=["T8=1", "T8=1/P8=1", "T8=1/P8=1/WL1=1"])
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/p8_check.json"))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("p8_check: needs a Hopper (sm_90) GPU", flush=True)
        return 2
    gpu = torch.cuda.get_device_name()
    print(f"{gpu}; torch {torch.__version__}; triton {triton.__version__}", flush=True)
    rows = []
    for lengths in args.lengths:
        x = bench.make_inputs(bench.Problem(args.batch, args.heads, args.max_len, 64, "fp8"), seed=7)
        if lengths == "mixed":
            lens = ([1, 63, 64, 65, min(3001, args.max_len), 0, args.max_len, 129] * args.batch)[:args.batch]
            x["seq_lens"].copy_(torch.tensor(lens, dtype=torch.int32))
        ref, ref_lse = mla_decode_reference(e4m3_query(x["q"]), x["kv_cache"], x["page_table"], x["seq_lens"],
                                            SM_SCALE, kv_scale=x["kv_scale"], return_lse=True)
        ref = ref.float()
        live = x["seq_lens"] > 0
        for sms in args.sms:
            for text in args.configs:
                config = {k: int(v) for k, v in (kv.split("=") for kv in text.split("/"))}
                x["out"].fill_(SENTINEL)
                out, lse = interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE,
                                             x["kv_scale"], "fp8", x["out"], True, config=triton.Config(dict(config)),
                                             num_sms=sms, path="hopper", query_precision="e4m3")
                out = out.float()
                torch.cuda.synchronize()
                bad = []
                for b in range(args.batch):
                    for hb in range(args.heads // 64):
                        for half in range(2):
                            blk = out[b, 64 * hb:64 * hb + 64, 256 * half:256 * half + 256]
                            unwritten = int((blk == SENTINEL).sum())
                            nonfinite = int((~torch.isfinite(blk)).sum())
                            if unwritten or nonfinite:
                                bad.append((b, hb, half, unwritten, nonfinite))
                                if len(bad) == 1:       # which heads and output columns, for the first such block
                                    where = (~torch.isfinite(blk)).nonzero()
                                    heads = sorted(set(where[:, 0].tolist()))
                                    cols = sorted(set(where[:, 1].tolist()))
                                    print(f"  first bad block (request {b}, head block {hb}, half {half}): heads "
                                          f"{heads[:70]} ({len(heads)}), columns {cols[:70]} ({len(cols)})",
                                          flush=True)
                                    h = 64 * hb + heads[0]
                                    other = out[b, h, 256 * (1 - half):256 * (2 - half)]
                                    want = ref[b, h, 256 * (1 - half):256 * (2 - half)]
                                    print(f"  its head {h}: lse {float(lse[b, h]):.4g} against "
                                          f"{float(ref_lse[b, h]):.4g}; "
                                          f"the other half's max |out| {float(other.abs().max()):.3g} against "
                                          f"{float(want.abs().max()):.3g}, rel err "
                                          f"{float((other - want).norm() / want.norm()):.3g}", flush=True)
                ok = torch.isfinite(out) & (out != SENTINEL)
                err = float(((out - ref) * ok)[live].norm() / (ref * ok)[live].norm())
                row = dict(lengths=lengths, sms=sms, config=config, bad_blocks=bad, rel_err_finite=err)
                rows.append(row)
                print(f"{lengths} {sms} SMs {text}: {len(bad)} bad blocks {bad[:8]}; rel err where finite {err:.3e}",
                      flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(dict(gpu=gpu, torch=torch.__version__, triton=triton.__version__,
                                        commit=git_commit(), rows=rows), indent=1))
    print(f"wrote {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
