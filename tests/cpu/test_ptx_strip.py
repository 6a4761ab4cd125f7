"""benchmarks/probes/ptx_strip.py on this CPU machine: the bf16 ping-pong kernel's and T8's PTX (compiled for sm_90
with triton 3.6) with the warpgroup barriers right before their mbarrier waits taken out assemble (through triton's
``ir_override`` option, as the probe launches them on the GPU) into kernels with that many fewer ``BAR.SYNC`` and their
wgmmas still asynchronous; the probe's bad arguments get one line."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "benchmarks" / "probes" / "ptx_strip.py"


def _probe():
    from test_mla_decode import probe_module
    return probe_module("ptx_strip")


@pytest.mark.parametrize("fmt,waits_taken,both_taken", [("bf16", 12, 19), ("fp8", 5, 6)])
def test_stripped_ptx_assembles_without_the_barriers_before_waits(tmp_path, fmt, waits_taken, both_taken):
    import triton

    from test_mla_decode import SCHEDULED_WITH_THIS_TRITON, _hopper_compile, _sass, compile_sm90
    from graphtune.kernels.mla_decode import interface_hopper
    import torch
    probe = _probe()
    base = _hopper_compile(fmt, heads=128, page_size=64, config=dict(probe.CONFIGS[fmt]))
    ptx = base.asm["ptx"]
    waits, taken = probe.strip(ptx, ("wait", ))
    both, taken_both = probe.strip(ptx, ("wait", "expect"))
    if not SCHEDULED_WITH_THIS_TRITON:
        pytest.skip(f"triton {triton.__version__} puts no barrier before these waits (3.6 does)")
    if waits_taken is not None:
        assert taken == waits_taken and taken_both == both_taken
    assert 0 < taken < taken_both
    if fmt == "bf16":
        assert probe.strip(ptx, ("wait", "expect", "copy"))[1] == both_taken + 12
    assert waits.count("mbarrier.try_wait") == ptx.count("mbarrier.try_wait")
    path = tmp_path / "stripped.ptx"
    path.write_text(waits)
    q = torch.empty(2, 128, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 576, dtype=torch.bfloat16 if fmt == "bf16" else torch.float8_e4m3fn)
    args, _, consts, _ = interface_hopper.hopper_call(q, kv, torch.zeros(2, 2, dtype=torch.int32),
                                                      torch.ones(2, dtype=torch.int32), 0.04, 1.0, fmt,
                                                      torch.empty(2, 128, 512, dtype=torch.bfloat16), False, sms=132,
                                                      config=dict(probe.CONFIGS[fmt]))
    fn, consts = interface_hopper._kernel_and_params(128, fmt, consts)
    stripped = compile_sm90(fn, args, consts, options={"ir_override": str(path)})
    sass, sass0 = _sass(stripped.asm["cubin"]), _sass(base.asm["cubin"])
    assert sass0.count("BAR.SYNC") - sass.count("BAR.SYNC") == taken
    assert sass.count("WARPGROUP.DEPBAR") == sass0.count("WARPGROUP.DEPBAR")
    assert sass.count("HGMMA") == sass0.count("HGMMA")
    assert stripped.metadata.shared == base.metadata.shared


@pytest.mark.parametrize("argv,needle", [(["--before", "store"],
                                          "--before store: expected a comma list of wait, expect, copy"),
                                         (["--batches", "x"], "--batches"),
                                         (["--format", "fp16"], "--format"),
                                         ([], "needs a Hopper (sm_90) GPU")])
def test_probe_says_what_is_wrong_in_one_line(argv, needle):
    import os
    run = subprocess.run([sys.executable, str(PROBE), *argv], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert run.returncode == 2 and needle in run.stderr.strip().splitlines()[-1], run.stderr
