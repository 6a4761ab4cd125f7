"""MERGE: the second fp8 tokens-on-M kernel merges a request's partials itself (the program that writes its last part),
in place of the reduction kernel. Compiled for sm_90 on the CPU (the counting's atomics and fence, the tile loop
unchanged), and the launch's bookkeeping with the kernel replaced by a stand-in: no reduction after a MERGE config,
pinned, forced or tuned, and the counters graphtune keeps zeroed per device. Its results are checked on the GPU
(tests/gpu: test_mla_hopper_tok_gpu.py, test_mla_decode_gpu.py zero-length cases)."""
from __future__ import annotations

import re

import pytest
import torch
import triton

import graphtune
from graphtune.kernels.mla_decode import interface_hopper as hopper
from graphtune.kernels.mla_decode import kernel_hopper_tok, reduction
from graphtune.state import STATE

from test_mla_decode import _hopper_compile, _sass
from test_mla_hopper_pp import _tile_loop_local_loads


def _ins(sass: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4,5}\*/\s+(.*?);", sass)]


@pytest.mark.parametrize("buffers", [2, 3])
def test_merge_compiles_with_a_released_count_and_leaves_the_tile_loop_alone(buffers):
    base = dict(V2=1, NUM_BUF=buffers, RK64=1, PT_EARLY=1)
    plain = _ins(_sass(_hopper_compile("fp8", heads=16, config=base).asm["cubin"]))
    merge = _ins(_sass(_hopper_compile("fp8", heads=16, config={**base, "MERGE": 1}).asm["cubin"]))
    assert not any("ATOMG" in i or "REDG" in i for i in plain)
    atoms = [k for k, i in enumerate(merge) if "ATOMG" in i]
    adds = [k for k in atoms if "ATOMG.E.ADD.STRONG.GPU" in merge[k]]
    # the count: one add, released (a GPU-scope fence before it) and acquired (L1 invalidated after it); the range
    # words read and the three words zeroed by exchanges; the slot maxima as reductions
    assert len(adds) == 1 and any("MEMBAR.ALL.GPU" in i for i in merge[adds[0] - 4:adds[0]])
    assert "CCTL.IVALL" in merge[adds[0] + 1]
    assert sum("ATOMG.E.EXCH.STRONG.GPU" in merge[k] for k in atoms) == 3
    assert sum("REDG.E.MAX.S32.STRONG.GPU" in i for i in merge) == 2
    # the score MMAs' loop: no local-memory reload added by the merge
    sass = _sass(_hopper_compile("fp8", heads=16, config={**base, "MERGE": 1}).asm["cubin"])
    assert _tile_loop_local_loads(sass.replace("QGMMA", "HGMMA.64x64x16")) == 0


def test_merge_takes_0_or_1():
    assert hopper.pinned_config(16, "fp8", dict(V2=1, MERGE=1))["MERGE"] == 1
    with pytest.raises(ValueError, match=r"'MERGE': 2"):
        hopper.hopper_call(*_cpu_inputs(16)[:4], 0.04, 1.0, "fp8", _cpu_inputs(16)[4], False, sms=7,
                           config=dict(V2=1, MERGE=2))


def _cpu_inputs(heads: int, batch: int = 5):
    q = torch.randn(batch, heads, 576).to(torch.bfloat16)
    kv = torch.zeros(4 * batch, 64, 576).to(torch.float8_e4m3fn)
    pt = torch.arange(4 * batch, dtype=torch.int32).view(batch, 4)
    lens = torch.full((batch,), 200, dtype=torch.int32)
    out = torch.empty(batch, heads, 512, dtype=torch.bfloat16)
    return q, kv, pt, lens, out


class _Run:
    """The second fp8 tokens-on-M kernel's ``run``, recording each launch's MERGE and counter buffer."""

    def __init__(self):
        self.launches: list[tuple[int, torch.Tensor]] = []

    def __call__(self, *args, grid, warmup, **kwargs):
        if not warmup:
            named = dict(zip(kernel_hopper_tok._mla_decode_hopper_tok_fp8_v2_kernel.arg_names, args))
            self.launches.append((kwargs.get("MERGE", 0), named["cnt_ptr"]))
            for name in ("seg_ptr", "part_o_ptr", "part_lse_ptr"):
                named[name].zero_()


@pytest.fixture
def stand_in(monkeypatch):
    run = _Run()
    monkeypatch.setattr(kernel_hopper_tok._mla_decode_hopper_tok_fp8_v2_kernel, "run", run)
    yield run
    hopper.tuned_second_kernel(False, "fp8").reset()


def _launch(**kw):
    q, kv, pt, lens, out = _cpu_inputs(16)
    return hopper.launch(q, kv, pt, lens, 0.04, 1.0, "fp8", out, False, sms=7, **kw)


def test_a_pinned_merge_launch_leaves_no_reduction_and_counters_zeroed_per_device(stand_in):
    lse, part_o, part_lse, seg = _launch(config=dict(V2=1, MERGE=1))
    assert seg is None and stand_in.launches[-1][0] == 1
    counters = stand_in.launches[-1][1]
    assert counters.dtype == torch.int32 and counters.numel() >= 5 * 4 and not counters.any()
    assert STATE.buffers[("mla_merge_counters", torch.device("cpu"))] is counters
    _, _, _, seg = _launch(config=dict(V2=1, MERGE=0))
    assert seg is not None and stand_in.launches[-1] == (0, counters)       # the same buffer, every launch
    graphtune.state.reset()                                                  # forgotten with the process state
    assert ("mla_merge_counters", torch.device("cpu")) not in STATE.buffers


def test_counters_grow_zeroed_when_a_launch_needs_more():
    small = hopper._merge_counters(torch.device("cpu"), 16)
    assert small.numel() >= 16 and hopper._merge_counters(torch.device("cpu"), 16) is small
    big = hopper._merge_counters(torch.device("cpu"), small.numel() + 1)
    assert big.numel() > small.numel() and not big.any()


def test_the_tuned_path_skips_the_reduction_exactly_when_the_config_that_ran_merges(stand_in):
    assert _launch()[3] is not None and stand_in.launches[-1][0] == 0      # tuned over the space (no MERGE yet)
    kernel = hopper.tuned_second_kernel(False, "fp8")
    args, _, consts, _ = hopper.tuned_second_call(*_cpu_inputs(16)[:4], 0.04, 1.0, "fp8", _cpu_inputs(16)[4], False,
                                                  sms=7)
    cfg = hopper.HOPPER_TOK_FP8_V2_SPACE[0]
    kernel.install(kernel.key_of(args, consts), triton.Config({**cfg, "MERGE": 1}, num_warps=4), record=False)
    assert _launch()[3] is None and stand_in.launches[-1][0] == 1


def test_the_tuners_follow_up_skips_a_merging_config(monkeypatch):
    merged = []
    monkeypatch.setattr(reduction, "merge", lambda *a, **k: merged.append(a))
    named = dict(B=2, H=16, seg_ptr=None, part_o_ptr=None, part_lse_ptr=None, out_ptr=None, lse_ptr=None,
                 seq_lens_ptr=None, RETURN_LSE=False)
    reduction.after_split({**named, "MERGE": 1})
    assert merged == []
    reduction.after_split(named)
    assert len(merged) == 1


def test_config_for_names_what_a_launch_runs():
    kernel = hopper.tuned_second_kernel(False, "fp8")
    args, grid, consts, _ = hopper.tuned_second_call(*_cpu_inputs(16)[:4], 0.04, 1.0, "fp8", _cpu_inputs(16)[4],
                                                     False, sms=7)
    assert kernel.config_for(*args, **consts) is None                      # nothing resolved for the key yet
    cfg = triton.Config(dict(hopper.HOPPER_TOK_FP8_V2_SPACE[1]), num_warps=4)
    kernel.install(kernel.key_of(args, consts), cfg, record=False)
    try:
        assert kernel.config_for(*args, **consts).kwargs == cfg.kwargs
    finally:
        kernel.reset()
