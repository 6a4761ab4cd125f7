"""The bf16 tokens-on-M ring kernel (kernel_hopper_ring.py, config ``RING = 1``) compiled for sm_90 on a CPU (no GPU
needed): it fits an SM with 25 ring slots, holds the MMAs its design rests on (nine [64 tokens, 16 heads] score
groups, eight [64 dims, 16 heads] P.V products a tile) with one TMA box per chunk, and its wgmmas stay asynchronous.
The interface routes ``RING = 1`` to it with [64, 64] boxes and refuses it where it does not apply.
tests/gpu/test_mla_decode_gpu.py (``RING_CASES``) runs it against the reference on an H200.
"""
from __future__ import annotations

import pytest
import torch

from graphtune import resources
from graphtune.kernels.mla_decode import interface_hopper, kernel_hopper_ring

from test_mla_decode import _sass as _sass_of_cubin
from test_mla_decode import SCHEDULED_WITH_THIS_TRITON, _hopper_compile

SM90_SHARED = 232448          # bytes of shared memory an sm_90 block may use (the driver's 1 KB reserve aside)


SM90_SHARED_PER_SM = 233472   # bytes of shared memory of an sm_90 SM (what two programs share)


@pytest.fixture(scope="module", params=[(25, 1, 0), (9, 1, 0), (11, 2, 0), (25, 1, 1), (18, 1, 1)],
                ids=["slots25", "slots9", "slots11x2", "slots25-early", "slots18-early"])
def compiled(request):
    slots, per_sm, early = request.param
    return request.param, _hopper_compile("bf16", heads=16, page_size=64,
                                          config=dict(RING=1, NUM_SLOTS=slots, PROGRAMS_PER_SM=per_sm, EARLY_S=early))


def test_ring_kernel_fits_sm90(compiled):
    (slots, per_sm, _), comp = compiled
    usage = resources._resource_usage(comp.asm["cubin"], comp.metadata.name)
    assert usage["REG"] <= 255 and usage["LOCAL"] == 0, usage
    # the ring (8 KB a slot) + the query (18 KB) + P + the maxima + barriers: 226,088 B with 25 slots, 111,384 with
    # 11 (two programs an SM)
    assert comp.metadata.shared >= slots * 8192
    assert comp.metadata.shared + resources.static_shared(usage, 90) <= SM90_SHARED, comp.metadata.shared
    assert per_sm * (comp.metadata.shared + resources.static_shared(usage, 90) + 1024) <= SM90_SHARED_PER_SM
    assert per_sm * usage["REG"] * 128 <= 65536          # the register file holds them too
    assert comp.metadata.num_warps == 4


def test_ring_kernel_mmas_and_schedule(compiled):
    _, comp = compiled
    sass = _sass_of_cubin(comp.asm["cubin"])
    # S^T: nine chunks x four k-steps; O^T: eight [64 dims, 16 heads] products x four k-steps of 16 tokens
    assert sass.count("HGMMA.64x16x16.F32.BF16") == 9 * 4 + 8 * 4
    assert "UTMALDG.2D" in sass
    if SCHEDULED_WITH_THIS_TRITON:
        # one wait for the scores, one at the top of the tile for P.V (EARLY_S: one for both), one at the segment's
        # end (a wait that leaves the scores in flight behind P.V made ptxas serialise all 68: C7514)
        assert sass.count("WARPGROUP.DEPBAR") <= 4, "wgmmas serialised (ptxas C7514)"


def _call(heads: int, fmt: str, config: dict):
    dtype = torch.float8_e4m3fn if fmt == "fp8" else torch.bfloat16
    q = torch.empty(2, heads, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 576, dtype=dtype)
    out = torch.empty(2, heads, 512, dtype=torch.bfloat16)
    return interface_hopper.hopper_call(q, kv, torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32),
                                        0.04, 1.0, fmt, out, False, sms=132, config=config)


def test_ring_config_routes_to_the_ring_kernel():
    args, grid, consts, _ = _call(16, "bf16", dict(RING=1))
    fn, consts = interface_hopper._kernel_and_params(16, "bf16", consts)
    assert fn is kernel_hopper_ring._mla_decode_hopper_tok_ring_kernel
    assert not {"NUM_BUF", "PIPE"} & set(consts)            # the first kernel's knobs, dropped
    assert list(args[2].block_shape) == [64, 64]            # one chunk a box, over all 576 columns
    assert grid == (1, 132)
    assert interface_hopper.pinned_config(16, "bf16", dict(RING=1, NUM_SLOTS=13))["NUM_SLOTS"] == 13
    _, grid, _, scratch = _call(16, "bf16", dict(RING=1, NUM_SLOTS=11, PROGRAMS_PER_SM=2))
    assert grid == (1, 264) and scratch[1].shape[0] == 264 + 2     # partial slots for every program
    # the first kernel unchanged without it
    args, _, consts, _ = _call(16, "bf16", None)
    assert list(args[2].block_shape) == [64, 512]
    assert interface_hopper._kernel_and_params(16, "bf16", consts)[0] is not fn


@pytest.mark.parametrize("heads,fmt,config,needle", [
    (128, "bf16", dict(RING=1), "H < 64"),
    (16, "fp8", dict(RING=1), "'fp8'"),
    (16, "bf16", dict(RING=1, NUM_SLOTS=26), "NUM_SLOTS=26"),
    (16, "bf16", dict(RING=1, NUM_SLOTS=8), "NUM_SLOTS=8"),
    (16, "bf16", dict(RING=1, NUM_SLOTS=12, PROGRAMS_PER_SM=2), "NUM_SLOTS=12"),
    (16, "bf16", dict(RING=1, PROGRAMS_PER_SM=3), "PROGRAMS_PER_SM=3"),
    (16, "bf16", dict(RING=1, NUM_SLOTS=13, EARLY_S=1), "EARLY_S=1"),
    (16, "bf16", dict(RING=1, NUM_SLOTS=11, PROGRAMS_PER_SM=2, EARLY_S=1), "EARLY_S=1")])
def test_ring_config_refused_where_it_does_not_apply(heads, fmt, config, needle):
    with pytest.raises(ValueError, match="RING=1") as err:
        _call(heads, fmt, config)
    assert needle in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("heads,fmt,config,needle", [
    (16, "bf16", dict(NUM_SLOTS=11), "NUM_SLOTS=11 belongs to the ring kernel: add RING=1"),
    (16, "bf16", dict(RING=0, NUM_SLOTS=18, EARLY_S=1), "EARLY_S=1, NUM_SLOTS=18 belong to the ring kernel: add RING=1"),
    (128, "bf16", dict(RELOAD=1), "RELOAD=1 belongs to the ping-pong kernel: add PP=1"),
    (128, "fp8", dict(PP=0, WG1_FIRST=1), "WG1_FIRST=1 belongs to the ping-pong kernel: add PP=1"),
    (16, "fp8", dict(PREFETCH=1, FAST_MAX=1), "FAST_MAX=1, PREFETCH=1 belong to the second fp8 tokens-on-M kernel: "
                                              "add V2=1"),
    (16, "fp8", dict(V2=0, LOOK=0), "LOOK=0 belongs to the second fp8 tokens-on-M kernel: add V2=1"),
    # the fp8 heads-on-M class has two siblings: a knob of one under the other's flag, or of T8 without its flag
    (128, "fp8", dict(T8=1, RELOAD=1), "RELOAD=1 belongs to the ping-pong kernel: not to the fp8 ping-pong kernel "
                                       "with fp8 scores, which T8=1 selects"),
    (128, "fp8", dict(PP=1, WL1=1), "WL1=1 belongs to the fp8 ping-pong kernel with fp8 scores: not to the ping-pong "
                                    "kernel, which PP=1 selects"),
    (128, "fp8", dict(PP=0, WL1=1), "WL1=1 belongs to the fp8 ping-pong kernel with fp8 scores: add T8=1")],
    ids=["ring-slots", "ring-off", "pp-reload", "pp-fp8-off", "v2-prefetch", "v2-off", "t8-pp-knob", "pp-t8-knob",
         "t8-off"])
def test_a_sibling_kernels_knob_without_its_flag_is_refused(heads, fmt, config, needle):
    """A pinned config naming a knob that only the class's sibling kernel takes, without the flag that selects that
    kernel, ran the first kernel without it (its keys were dropped without a word): now one line names the knob
    and the flag, from ``pinned_config`` (the public call's path) and from ``hopper_call``."""
    for call in (lambda: interface_hopper.pinned_config(heads, fmt, config), lambda: _call(heads, fmt, config)):
        with pytest.raises(ValueError) as err:
            call()
        assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_knobs_the_first_kernel_takes_too_and_selected_siblings_stay_accepted():
    # CHAIN: both fp8 tokens-on-M kernels; PROGRAMS_PER_SM: the launcher's grid, every class; BLOCK_N: every kernel
    for heads, fmt, config in [(16, "fp8", dict(CHAIN=0, NUM_BUF=2, PROGRAMS_PER_SM=1)),
                               (16, "bf16", dict(BLOCK_N=64, PROGRAMS_PER_SM=1)),
                               (16, "bf16", dict(RING=1, NUM_SLOTS=18, EARLY_S=1)),
                               (128, "bf16", dict(PP=1, RELOAD=0, WG1_FIRST=1)),
                               (128, "fp8", dict(PP=1, RELOAD=1)),
                               (128, "fp8", dict(T8=1, WL1=1)),
                               (16, "fp8", dict(V2=1, PREFETCH=1, FAST_MAX=1, LOOK=0))]:
        pinned = interface_hopper.pinned_config(heads, fmt, config)
        _, _, consts, _ = _call(heads, fmt, pinned)
        assert all(consts[k] == v for k, v in config.items() if k not in ("V2", "PROGRAMS_PER_SM")), (config, consts)
