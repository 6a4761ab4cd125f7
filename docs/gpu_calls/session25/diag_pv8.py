"""Session 25, call E (branch pv8-wip): PV8's hi/lo pair went wrong in s26a's cases (a one-token request 0.69
relative error, NaN elsewhere): the same cases with P's lo half left out (kernel_hopper_pp8._PV8_LO = 0), and with
it, in one process."""
import math
import sys

import torch
from triton.experimental.gluon import language as gl

from graphtune.kernels.mla_decode import bench, interface, interface_hopper, kernel_hopper_pp8
from graphtune.kernels.mla_decode.reference import mla_decode_reference

CASES = [(64, [1], 132), (64, [64], 132), (64, [128], 132), (64, [4096, 4096], 7)]
lo = int(sys.argv[1])
kernel_hopper_pp8._PV8_LO = gl.constexpr(lo)
cfg = {"PP": 0, "T8": 1, "PV8": 1}
interface_hopper.HOPPER_FP8_CONFIG = interface_hopper.pinned_config(128, "fp8", {"BLOCK_N": 64, **cfg})
for i, (heads, lens, sms) in enumerate(CASES):
    x = bench.make_inputs(bench.Problem(len(lens), heads, max(lens), 64, "fp8"), seed=i)
    x["seq_lens"] = torch.tensor(lens, dtype=torch.int32, device="cuda")
    pt = x["page_table"]
    for b, n in enumerate(lens):
        tail = torch.arange(n, pt.shape[1] * 64, device=pt.device)
        x["kv_cache"][pt[b, tail // 64].long(), tail % 64] = float("nan")
    x["out"].fill_(float("nan"))
    s = 1.0 / math.sqrt(576)
    ref = mla_decode_reference(x["q"], x["kv_cache"], pt, x["seq_lens"], s, kv_scale=x["kv_scale"], kv_format="fp8")
    out = interface._launch(x["q"], x["kv_cache"], pt, x["seq_lens"], s, x["kv_scale"], "fp8", x["out"], False,
                            num_sms=sms, path="hopper")
    torch.cuda.synchronize()
    o, r = out.double(), ref.double()
    left, right = o[..., :256], o[..., 256:]
    rel = lambda a, b: float((a - b).norm() / b.norm())
    print(f"lo={lo} H={heads} lens={lens} sms={sms}: finite {bool(torch.isfinite(o).all())}, rel {rel(o, r):.2e}, "
          f"left (WG0) {rel(left, r[..., :256]):.2e}, right (WG1) {rel(right, r[..., 256:]):.2e}", flush=True)
