"""SASS fingerprint of every Hopper MLA decode kernel x config (compiled for sm_90 on the CPU, no GPU).

For refactors that must not change the generated code: run it before and after, compare the hashes. Each line:
kernel, H, format, config; instruction count; a hash of the instruction text without addresses. The configs are
every per-bucket space config (as the tuned kernel runs it: ``interface_hopper.pinned_config``) and the second
fp8 tokens-on-M kernel's space. Uses the compile helper of
tests/cpu/test_mla_hopper_tok.py (constexprs a launch leaves out at their defaults).

    PYTHONPATH=src python benchmarks/probes/sass_fingerprint.py /tmp/sass_before
"""
from __future__ import annotations

import hashlib
import os
import re
import sys
from pathlib import Path

import torch

from graphtune.kernels.mla_decode import interface_hopper as H

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "cpu"))
import test_mla_hopper_tok as T  # noqa: E402 - the tests' compile helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
cases = []
for heads, fmt in ((128, "bf16"), (16, "bf16"), (128, "fp8"), (16, "fp8")):
    on_m = H._heads_on_m(heads)
    for c in H._SPACES[(on_m, fmt == "fp8")]:
        cases.append((heads, fmt, dict(c)))
for c in H.HOPPER_TOK_FP8_V2_SPACE:
    cases.append((16, "fp8", {**c, "V2": 1}))
for heads, fmt, cfg in cases:
    dtype = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}[fmt]
    q = torch.empty(2, heads, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 576, dtype=dtype)
    o = torch.empty(2, heads, 512, dtype=torch.bfloat16)
    cfg = H.pinned_config(heads, fmt, cfg)
    args, _, consts, _ = H.hopper_call(q, kv, torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32),
                                       0.04, 1.0, fmt, o, False, sms=132, config=cfg)
    fn, consts = H._kernel_and_params(heads, fmt, consts)
    comp = T._compile_fn(fn, args, consts)
    sass = T._sass(comp)
    body = [re.sub(r"/\*[0-9a-f]{4,}\*/", "", ln).strip() for ln in sass.splitlines() if re.search(r"/\*[0-9a-f]{4,}\*/", ln)]
    name = f"{fn.__name__}_{heads}_{fmt}_" + "_".join(f"{k}{v}" for k, v in sorted(cfg.items()))
    open(os.path.join(out, name + ".sass"), "w").write("\n".join(body))
    print(name, len(body), hashlib.sha1("\n".join(body).encode()).hexdigest()[:10], flush=True)
