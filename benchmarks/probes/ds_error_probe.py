"""Where the Hopper tokens-on-M kernels' error sits (session 10: fp8_ds_mla failed its per-chunk 2e-3 check in some
seeds while its design's arithmetic, modelled in torch, stays under 1.7e-3): per request, per 128-dim chunk, and the
LSE, against a float64 reference, for the fp8 kernel (kv_scale 0.05: a nearly flat softmax, as the fp8 tests use;
kv_scale 1: logits with standard deviation ~1, as fp8_ds_mla's) and fp8_ds_mla (plain and with the groups' scales
2^12 apart), at 132 / 7 / 1 SMs. Prints the worst cells; writes JSON under $OUT or benchmarks/results/.

    PYTHONPATH=src python benchmarks/probes/ds_error_probe.py [--seeds 3] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_mla_decode import git_commit  # noqa: E402

from graphtune.kernels.mla_decode import bench, interface, interface_hopper  # noqa: E402
from graphtune.kernels.mla_decode.reference import dequantize_cache  # noqa: E402

LENS = [1, 63, 64, 65, 3001, 4096]
SM_SCALE = 1.0 / math.sqrt(576)


def _spread(x: dict) -> None:
    kv = x["kv_cache"]
    factor = torch.tensor([2.0 ** (4 * g - 10) for g in range(4)], device=kv.device)
    kv[..., 512:528] = (kv[..., 512:528].contiguous().view(torch.float32) * factor).contiguous().view(torch.uint8)


def _reference64(x: dict, fmt: str) -> tuple[torch.Tensor, torch.Tensor]:
    cache = dequantize_cache(x["kv_cache"], fmt, x["kv_scale"]).double()
    page_size = cache.shape[1]
    outs, lses = [], []
    for b, n in enumerate(x["seq_lens"].tolist()):
        tok = torch.arange(n, device=cache.device)
        rows = cache[x["page_table"][b, tok // page_size].long(), tok % page_size]
        s = (x["q"][b].double() @ rows.T) * SM_SCALE
        lses.append(torch.logsumexp(s, -1))
        outs.append(torch.softmax(s, -1) @ rows[:, :512])
    return torch.stack(outs), torch.stack(lses)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("ds_error_probe: needs a CUDA GPU", file=sys.stderr)
        return 2
    # (format, kv_scale, spread scales, page size, pinned config: None = the tuned kernel)
    # (fp8 with std-1 logits also pinned to the first and the second tokens-on-M kernel, V2 0 / 1, with and without
    # CHAIN: the score chains folded in fp32 every 128 dims, where Triton's default on sm_90 accumulates a whole fp8
    # chain imprecisely. CHAIN=0 is named: both kernels' fixed configs have CHAIN 1. The unpinned row runs the
    # tuned path: the first kernel at this batch of 6.)
    cases = [("fp8", 0.05, False, 64, None), ("fp8", 1.0, False, 64, None),
             ("fp8", 1.0, False, 64, dict(V2=0, CHAIN=0)), ("fp8", 1.0, False, 64, dict(V2=0, CHAIN=1)),
             ("fp8", 1.0, False, 64, dict(V2=1, CHAIN=0)), ("fp8", 1.0, False, 64, dict(V2=1, CHAIN=1)),
             ("fp8_ds_mla", 1.0, False, 64, None),
             ("fp8_ds_mla", 1.0, True, 64, None), ("fp8_ds_mla", 1.0, True, 16, dict(GATHER=1))]
    rows = []
    print(torch.cuda.get_device_name(), flush=True)
    for fmt, kv_scale, spread, page_size, config in cases:
        for seed in range(args.seeds):
            x = bench.make_inputs(bench.Problem(len(LENS), 16, max(LENS), page_size, fmt), seed=1000 + seed)
            x["kv_scale"] = kv_scale if fmt == "fp8" else 1.0
            if spread:
                _spread(x)
            x["seq_lens"].copy_(torch.tensor(LENS, dtype=torch.int32))
            ref, ref_lse = _reference64(x, fmt)
            for sms in (132, 7, 1):
                x["out"].fill_(float("nan"))
                out, lse = interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE,
                                             x["kv_scale"], fmt, x["out"], True, num_sms=sms, path="hopper",
                                             config=None if config is None else triton.Config(dict(config)))
                o = out.double()
                for b, n in enumerate(LENS):
                    for c in range(4):
                        a, r = o[b, :, 128 * c:128 * (c + 1)], ref[b, :, 128 * c:128 * (c + 1)]
                        rb = r.to(torch.bfloat16).double()
                        rows.append(dict(fmt=fmt, kv_scale=kv_scale, spread=spread, page_size=page_size,
                                         config=config, seed=seed, sms=sms, req=b, len=n,
                                         chunk=c, err=float((a - r).norm() / r.norm()),
                                         err_vs_bf16_ref=float((a - rb).norm() / rb.norm()),
                                         bf16_floor=float((rb - r).norm() / r.norm()),
                                         lse_err=float((lse[b].double() - ref_lse[b]).abs().max())))
    label = lambda r: (f"{r['fmt']} kv_scale={r['kv_scale']} spread={int(r['spread'])} page={r['page_size']}"  # noqa: E731
                       f"{' ' + str(r['config']) if r['config'] else ''}")
    print("| case | worst chunk err (fp64 ref) | its request len / chunk / SMs | bf16 floor there | worst LSE err | "
          "LSE worst at len / SMs |")
    print("| --- | --- | --- | --- | --- | --- |")
    for key in dict.fromkeys(label(r) for r in rows):
        mine = [r for r in rows if label(r) == key]
        w = max(mine, key=lambda r: r["err"])
        lw = max(mine, key=lambda r: r["lse_err"])
        print(f"| {key} | {w['err']:.2e} | {w['len']} / {w['chunk']} / {w['sms']} | {w['bf16_floor']:.2e} | "
              f"{lw['lse_err']:.2e} | {lw['len']} / {lw['sms']} |")
    for key in dict.fromkeys(label(r) for r in rows):
        by_len = {}
        for r in rows:
            if label(r) == key:
                by_len[r["len"]] = max(by_len.get(r["len"], 0.0), r["err"])
        print(f"{key}: worst chunk err by request length {({k: round(v, 5) for k, v in by_len.items()})}")
    out = Path(args.out) if args.out else Path(os.environ.get("OUT", "benchmarks/results")) / "ds_error_probe.json"
    out.write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                                   triton=triton.__version__, commit=git_commit(),
                                   command="ds_error_probe.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                                   ds_config=interface_hopper.HOPPER_TOK_DS_CONFIG, rows=rows), indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
