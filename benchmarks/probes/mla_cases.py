"""Runs one Hopper MLA decode config on a list of small cases, each in its own process (a fault ends a CUDA
context, not the probe); prints per case the relative error against the fp32 reference (flagged above 2e-3) or the
error, and writes them as JSON: where a new kernel path faults or goes wrong. Optionally under compute-sanitizer
(``--sanitize N``: case N, memcheck).

    python benchmarks/probes/mla_cases.py --config '{"PP": 0, "T8": 1}' [--sanitize 3] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import environment  # noqa: E402

# (heads, lengths, SMs): full tiles, one tile, a partial tile, one token, segments spanning programs, the GPU
# test's mixed batch
TOL = 2e-3         # issue 14's bound for fp8 against the fp32 reference
CASES = [(64, [64, 64, 64, 64], 132), (64, [128], 132), (64, [64], 132), (64, [100], 132), (64, [1], 132),
         (64, [4096, 4096], 7), (64, [4096, 1, 129, 2000, 77], 132), (128, [4096, 1, 129, 2000, 77], 7)]


def _one(config: dict, index: int) -> str:
    import torch
    from graphtune.kernels.mla_decode import bench, interface, interface_hopper
    from graphtune.kernels.mla_decode.reference import mla_decode_reference
    heads, lens, sms = CASES[index]
    torch.manual_seed(index)
    x = bench.make_inputs(bench.Problem(len(lens), heads, max(lens), 64, "fp8"), seed=index)
    x["seq_lens"] = torch.tensor(lens, dtype=torch.int32, device="cuda")
    pt = x["page_table"]
    for b, n in enumerate(lens):          # NaN past every length (TMA reads whole tiles)
        tail = torch.arange(n, pt.shape[1] * 64, device=pt.device)
        x["kv_cache"][pt[b, tail // 64].long(), tail % 64] = float("nan")
    x["out"].fill_(float("nan"))
    scale = 1.0 / math.sqrt(576)
    ref = mla_decode_reference(x["q"], x["kv_cache"], pt, x["seq_lens"], scale, kv_scale=x["kv_scale"],
                               kv_format="fp8")
    interface_hopper.HOPPER_FP8_CONFIG = interface_hopper.pinned_config(128, "fp8", {"BLOCK_N": 64, **config})
    out = interface._launch(x["q"], x["kv_cache"], pt, x["seq_lens"], scale, x["kv_scale"], "fp8", x["out"], False,
                            num_sms=sms, path="hopper")
    torch.cuda.synchronize()
    if not torch.isfinite(out.float()).all():
        return "non-finite outputs"
    rel = float((out.double() - ref.double()).norm() / ref.double().norm())
    return f"rel err {rel:.2e}" + (f" (above the fp8 bound {TOL:.0e})" if rel > TOL else "")


def _config(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not JSON ({err.msg})") from None
    if not isinstance(value, dict) or not all(isinstance(v, int) for v in value.values()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a JSON object of integer knobs")
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=_config, required=True, help="the pinned config, a JSON object")
    ap.add_argument("--case", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--sanitize", type=int, default=None, help="also run case N under compute-sanitizer memcheck")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/mla_cases.json"))
    args = ap.parse_args(argv)
    for name, value in (("--case", args.case), ("--sanitize", args.sanitize)):
        if value is not None and not 0 <= value < len(CASES):
            print(f"mla_cases: {name} {value}: the cases are 0..{len(CASES) - 1}", file=sys.stderr)
            return 2
    import torch
    if not torch.cuda.is_available():
        print("mla_cases: needs a CUDA GPU", file=sys.stderr)
        return 2
    text = json.dumps(args.config)
    if args.case is not None:
        print(_one(args.config, args.case))
        return 0
    rows = []
    for i, case in enumerate(CASES):
        r = subprocess.run([sys.executable, __file__, "--config", text, "--case", str(i)],
                           capture_output=True, text=True, timeout=120)
        last = (r.stdout.strip().splitlines() or ["?"])[-1] if r.returncode == 0 else \
            (r.stderr.strip().splitlines() or ["?"])[-1][:200]
        print(f"case {i} H={case[0]} lens={case[1]} sms={case[2]}: {last}", flush=True)
        rows.append({"heads": case[0], "lens": case[1], "sms": case[2], "result": last})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"environment": environment(), "command": " ".join(sys.argv),
                                    "config": args.config, "cases": rows}, indent=2))
    print(f"wrote {args.out}")
    if args.sanitize is not None:
        r = subprocess.run(["compute-sanitizer", "--tool", "memcheck", "--print-limit", "4", sys.executable, __file__,
                            "--config", text, "--case", str(args.sanitize)],
                           capture_output=True, text=True, timeout=300, env={**os.environ})
        print("\n".join(r.stdout.splitlines()[:60]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
