"""query8: T8's query pair made before the split kernel: its definition (the torch form), the
pre-pass compiled for sm_90, bad input, and the T8 build that copies it (compiled for sm_90a on the CPU)."""
from __future__ import annotations

import pytest
import torch
import triton

from graphtune.kernels.mla_decode import query8


@pytest.mark.parametrize("batch,heads", [(3, 16), (2, 128)])
def test_the_pair_as_defined(batch, heads):
    """query_pair_reference, the pair's definition (the GPU test holds the kernel to it byte for byte): per row a
    power-of-two scale with max |q s| in (128, 256], hi + lo the scaled query up to lo's own e4m3 rounding (half a
    step: a sixteenth of |lo| when normal, 2^-10 when subnormal), the rope's pair beside the latent's."""
    seed = int(torch.randint(0, 2 ** 31 - 1, ()).item())
    gen = torch.Generator().manual_seed(seed)
    q = (torch.randn(batch, heads, 576, generator=gen) * torch.rand(batch, heads, 1, generator=gen) * 10).bfloat16()
    q[0, 0] = 0                                     # an all-zero row: scale from the 1e-30 floor, pair zero
    pair, rope, scale = query8.query_pair_reference(q)
    assert pair.shape == (batch * heads, 1024) and rope.shape == (batch * heads, 128)
    assert torch.equal(torch.exp2(torch.log2(scale).round()), scale), f"seed {seed}: not powers of two"
    y = q.reshape(-1, 576).float() * scale[:, None]
    assert (y.abs().amax(1)[1:] > 128).all() and (y.abs().amax(1) <= 256).all(), f"seed {seed}"
    hi = torch.cat([pair[:, :512], rope[:, :64]], 1).float()
    lo = torch.cat([pair[:, 512:], rope[:, 64:]], 1).float()
    assert ((hi + lo - y).abs() <= lo.abs() / 16 + 2 ** -10).all(), f"seed {seed}"
    assert not pair[0].float().any() and not rope[0].float().any()


def test_the_pre_pass_compiles_for_sm90():
    """The pre-pass kernel compiled for sm_90 on the CPU (graphtune.inspect): it fits, no spills. (The interpreter
    rounds fp32 -> e4m3 unlike the GPU: ties, and values rounding up to the next power of two came out a binade low,
    31 -> 16; so the kernel's pair is checked on the GPU.)"""
    import graphtune
    (row, hi) = graphtune.inspect(query8._q8_pair_kernel, target="sm_90",
                                    signature={"q_ptr": "*bf16", "stride_qb": "i32", "stride_qh": "i32",
                                               "pair_ptr": "*fp8e4nv", "rope_ptr": "*fp8e4nv", "scale_ptr": "*fp32",
                                               "R": "i32", "H": "i32"},
                                    configs=[triton.Config({"ROWS": query8.ROWS, "PDL": True, "LO": lo}, num_warps=4)
                                             for lo in (1, 0)])
    assert row.fits and row.spill_bytes == 0, row
    assert hi.fits and hi.spill_bytes == 0, hi


def test_query_pair_refuses_a_query_it_cannot_read():
    with pytest.raises(ValueError, match=r"q must be \[B, H, 576\].*shape \(2, 16, 512\)"):
        query8.query_pair(torch.zeros(2, 16, 512, dtype=torch.bfloat16))


def _t8_build(config, q_lo=1):
    """T8 pinned to ``config`` at fp8 H = 128, compiled for sm_90a on the CPU (with ``Q8PRE``: over a pair's boxes)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from test_mla_decode import compile_sm90

    from graphtune.kernels.mla_decode import interface_hopper as hopper
    q = torch.empty(2, 128, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 576, dtype=torch.float8_e4m3fn)
    out = torch.empty(2, 128, 512, dtype=torch.bfloat16)
    args, _, consts, _ = hopper.hopper_call(q, kv, torch.zeros(2, 2, dtype=torch.int32),
                                            torch.ones(2, dtype=torch.int32), 0.04, 1.0, "fp8", out, False,
                                            sms=132, config=config)
    fn, consts = hopper._kernel_and_params(128, "fp8", {**consts, "Q_LO": q_lo})
    if consts.get("Q8PRE"):
        pair = torch.empty(256, 1024, dtype=torch.float8_e4m3fn)
        rope = torch.empty(256, 128, dtype=torch.float8_e4m3fn)
        args, consts = hopper.with_query_pair(args, consts, pair, rope, torch.empty(256))
        # (the scale pointer follows STAMPS, left at None: positional for the CPU compile)
        args, consts = (*args, consts.pop("q8_scale_ptr")), {**consts, "STAMPS": None}
    return compile_sm90(fn, args, consts)


def test_t8_with_the_pair_copies_it_and_converts_nothing():
    """Q8PRE = 1 compiled for sm_90a: nine more TMA copies (the pair's eight [64, 128] boxes and the rope pair) and
    three fewer (the bf16 query), about 900 fewer instructions, no wgmma finding, no spill reload in the tile loop,
    the wait on the pre-pass (griddepcontrol.wait) in the PTX."""
    from test_mla_decode import _sass
    from test_mla_hopper_pp import _tile_loop_local_loads

    from graphtune.sass import wgmma_findings

    base, pre = _t8_build(dict(T8=1)), _t8_build(dict(T8=1, Q8PRE=1))
    sass_base, sass_pre = _sass(base.asm["cubin"]), _sass(pre.asm["cubin"])
    assert sass_pre.count("UTMALDG") == sass_base.count("UTMALDG") + 6
    assert sass_pre.count("/*") < sass_base.count("/*") - 3 * 500
    assert [str(f) for f in wgmma_findings(sass_pre)] == []
    assert _tile_loop_local_loads(sass_pre, "QGMMA.64x64x32") == 0
    assert "griddepcontrol.wait" in pre.asm["ptx"] and "griddepcontrol.wait" not in base.asm["ptx"]


def test_t8_of_the_e4m3_precision_copies_the_hi_halves_alone():
    """``query_precision="e4m3"`` (``Q_LO = 0``) with the pair made before T8: its four lo boxes are not copied (the
    pre-pass made no lo half; the barrier expects 4 + 1 boxes), fewer fp8 wgmmas (no lo halves scored), no wgmma
    finding, no spill reload in the tile loop."""
    from test_mla_decode import _sass
    from test_mla_hopper_pp import _tile_loop_local_loads

    from graphtune.sass import wgmma_findings

    pair, hi = _t8_build(dict(T8=1, Q8PRE=1)), _t8_build(dict(T8=1, Q8PRE=1), q_lo=0)
    sass_pair, sass_hi = _sass(pair.asm["cubin"]), _sass(hi.asm["cubin"])
    assert sass_hi.count("UTMALDG") == sass_pair.count("UTMALDG") - 4
    # (the expected bytes: 4 boxes of 64 x 128 e4m3 and the rope box, 40,960 = 0xa000, against 73,728 = 0x12000)
    assert "40960" in hi.asm["ptx"] and "73728" in pair.asm["ptx"] and "73728" not in hi.asm["ptx"]
    assert sass_hi.count("QGMMA") < sass_pair.count("QGMMA")
    assert [str(f) for f in wgmma_findings(sass_hi)] == []
    assert _tile_loop_local_loads(sass_hi, "QGMMA.64x64x32") == 0


class _Launches:
    """A kernel stand-in: records what each ``kernel[grid](*args, **kwargs)`` launch was given."""

    def __init__(self):
        self.calls: list[tuple[tuple, dict]] = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.append((args, kwargs))


@pytest.mark.parametrize("config,fp8_q,pair,q_lo", [(None, False, True, True), (dict(T8=1), False, True, True),
                                                    (dict(T8=1, Q8PRE=0), False, False, True),
                                                    (None, True, False, False), (dict(T8=1), True, False, False),
                                                    (None, False, True, False), (dict(T8=1), False, True, False)],
                         ids=["tuned", "pinned", "pinned-Q8PRE0", "tuned-e4m3-query", "pinned-e4m3-query",
                              "tuned-e4m3-precision", "pinned-e4m3-precision"])
def test_every_t8_launch_of_a_bf16_query_takes_the_pair(monkeypatch, config, fp8_q, pair, q_lo):
    """interface_hopper.launch at fp8 H = 128, batch 32 (T8 on the tuned path): with a bf16 query the pre-pass makes
    the pair once (as the launch's programmatic primary) and T8 gets its boxes, ``Q8PRE = 1``, its scale and
    ``launch_pdl``; pinned ``Q8PRE = 0`` keeps the conversion in the kernel; a query given in e4m3 is read as it is
    (no pair, ``Q8PRE = 0``, ``Q_FP8 = 1``). The bf16 query's own descriptors are built only where T8 reads them
    (pinned ``Q8PRE = 0``), not built and then replaced. ``query_precision="e4m3"`` (``q_lo=False``): the pre-pass
    makes the hi halves alone, T8 gets ``Q_LO = 0``."""
    from graphtune.kernels.mla_decode import interface_hopper as hopper
    batch, heads = 32, 128
    assert hopper._tuned_route(heads, "fp8", batch, 64, q_lo, fp8_q=fp8_q) == "third"
    made = []

    def fake_pair(q, pdl=False, lo=True):
        made.append((pdl, lo))
        rows = q.shape[0] * q.shape[1]
        return (torch.empty(rows, 1024, dtype=torch.float8_e4m3fn), torch.empty(rows, 128, dtype=torch.float8_e4m3fn),
                torch.empty(rows))
    launches = _Launches()
    kernel_and_params = hopper._kernel_and_params
    monkeypatch.setattr(query8, "query_pair", fake_pair)
    monkeypatch.setattr(hopper, "_route_kernel", lambda *a, **k: launches)
    monkeypatch.setattr(hopper, "_kernel_and_params", lambda *a: (launches, kernel_and_params(*a)[1]))
    q_descriptors, built = hopper._q_descriptors, []
    monkeypatch.setattr(hopper, "_q_descriptors", lambda *a: built.append(a[1:]) or q_descriptors(*a))
    q = torch.randn(batch, heads, 576).bfloat16()
    if fp8_q:
        q = q.to(torch.float8_e4m3fn)
    kv = torch.empty(batch * 2, 64, 576, dtype=torch.float8_e4m3fn)
    out = torch.empty(batch, heads, 512, dtype=torch.bfloat16)
    hopper.launch(q, kv, torch.arange(batch * 2, dtype=torch.int32).view(batch, 2),
                  torch.full((batch, ), 100, dtype=torch.int32), 0.04, 1.0, "fp8", out, False, sms=132,
                  config=config, q_lo=q_lo, q_scale=1.0 if fp8_q else None)
    ((args, kwargs), ) = launches.calls
    assert kwargs["Q_LO"] == int(q_lo)
    if pair:
        assert made == [(True, q_lo)]
        assert kwargs["Q8PRE"] == 1 and kwargs["launch_pdl"] is True and kwargs["q8_scale_ptr"].shape == (batch * heads, )
        assert [tuple(a.base.shape) for a in args[:2]] == [(batch * heads, 1024), (batch * heads, 128)]
    else:
        assert made == [] and kwargs.get("Q8PRE", 0) == 0 and "launch_pdl" not in kwargs
        assert kwargs.get("Q_FP8", 0) == int(fp8_q)
    if fp8_q:
        assert [tuple(a.block_shape) for a in args[:2]] == [(64, 128), (64, 128)] and args[0] is args[1]
    # the bf16 query's [64, 256] / [64, 64] boxes: built for the in-kernel conversion alone
    assert built == ([] if pair or fp8_q else [(64, 256)])
    assert all(a is not None for a in args)
