"""GPU tests of the H < 64 (tokens-on-M) Hopper kernels added for issue 14's H = 16 work: the second fp8 kernel
(kernel_hopper_tok.py, every config its space or the benchmark runs), the bf16 kernel's PIPE = 1 / 2 schedules
and the public path's pick between the two fp8 kernels,
against the fp32 reference: fresh random inputs, NaN in every cache row past seq_len (TMA reads whole tiles),
NaN-poisoned outputs, lengths 1, 63, 64, 65 and odd ones, SM counts that make requests straddle programs.

Skipped without CUDA (tests/gpu/conftest.py) and off sm_90.
"""
from __future__ import annotations

import math
import os

import pytest
import torch
import triton

from graphtune.kernels import mla_decode_reference
from graphtune.kernels.mla_decode import MLADecodePlan, bench, interface, interface_hopper, mla_decode

from _unproven import skip_unproven

SM_SCALE = 1.0 / math.sqrt(576)
CASES = [(16, 64, [1, 63, 64, 65, 3001, 4096]), (32, 128, [300, 1, 4096, 191]), (16, 256, [255, 1, 2, 129])]
# the second kernel's space and the variants the benchmark times (programs per SM follow NUM_BUF)
V2_CONFIGS = [dict(V2=1, NUM_BUF=n, PREFETCH=p, FAST_MAX=f) for n, p, f in
              ((2, 0, 0), (2, 1, 0), (2, 1, 1), (3, 1, 1), (5, 1, 1))]
# its schedules: S one tile ahead (LOOK 1: before the softmax, 2: between P.V chunks 1 and 2), the rope's score
# MMAs over its 64 columns (RK64), the next tile's page ids loaded a tile ahead (PT_EARLY). Timed on the H200 in
# session 9 (none faster beyond noise; correct there, worst rel. err. 8.1e-4): each knob value once, on the first
# case, so that the README's command stays within minutes on the GPU
SCHEDULE_CONFIGS = [dict(V2=1, NUM_BUF=n, PREFETCH=p, FAST_MAX=p, LOOK=look, RK64=rk, PT_EARLY=pe,
                         **({"CHAIN": 0} if look else {}))
                    for n, p, look, rk, pe in ((2, 1, 0, 1, 1), (2, 1, 2, 1, 1), (3, 1, 1, 1, 1), (2, 0, 2, 1, 1))]
# CHAIN (the scores folded in fp32 every 128 dims; in the fixed config since session 11, so the configs above run
# with it): its other settings, and CHAIN 0 (one chain over all 576 dims, as before)
CHAIN_CONFIGS = [dict(V2=1, NUM_BUF=n, PREFETCH=p, FAST_MAX=1, RK64=rk, CHAIN=c) for n, p, rk, c in
                 ((2, 1, 0, 0), (2, 0, 0, 1), (2, 1, 1, 1), (3, 1, 0, 1))]
V2_CASES = ([(c, case) for c in V2_CONFIGS for case in CASES]
            + [(c, CASES[0]) for c in SCHEDULE_CONFIGS + CHAIN_CONFIGS])


def _v2_id(c: dict) -> str:
    extra = "".join(f"-{k.lower().replace('_', '')}{c[k]}" for k in ("LOOK", "RK64", "PT_EARLY", "CHAIN") if k in c)
    return f"buf{c['NUM_BUF']}-pf{c['PREFETCH']}-fm{c['FAST_MAX']}{extra}"


def _skip_off_hopper():
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the Hopper kernels run on sm_90 only")


def _case(heads: int, page_size: int, lens: list[int], kv_format: str, prepare=None, ref_dtype=torch.bfloat16):
    """Inputs, NaN in every cache row past seq_len (fp8_ds_mla: all-ones bytes, NaN as fp8, fp32 scale and bf16
    rope), and the reference (its output in ``ref_dtype``); ``prepare(x)`` may change the inputs first."""
    # (GRAPHTUNE_TEST_SEED: a failure's seed, to run its inputs again)
    seed = int(os.environ.get("GRAPHTUNE_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))
    x = bench.make_inputs(bench.Problem(len(lens), heads, max(lens), page_size, kv_format), seed=seed)
    if prepare is not None:
        prepare(x)
    x["seq_lens"].copy_(torch.tensor(lens, dtype=torch.int32))
    pt = x["page_table"]
    poison = 255 if kv_format == "fp8_ds_mla" else float("nan")
    for b, n in enumerate(lens):
        tail = torch.arange(n, pt.shape[1] * page_size, device=pt.device)
        x["kv_cache"][pt[b, tail // page_size].long(), tail % page_size] = poison
    ref, ref_lse = mla_decode_reference(x["q"], x["kv_cache"], pt, x["seq_lens"], SM_SCALE, kv_scale=x["kv_scale"],
                                        kv_format=kv_format, return_lse=True,
                                        out=torch.empty(x["out"].shape, dtype=ref_dtype, device=pt.device))
    return seed, x, ref, ref_lse


def _rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref.double()).norm() / ref.double().norm())


def _beyond_bf16(out: torch.Tensor, ref32: torch.Tensor) -> float:
    """The relative error of a bf16 ``out`` against an fp32 reference beyond what rounding the exact result to bf16
    costs (errors add in quadrature: the rounding's is independent of the kernel's). That rounding alone is
    1.6e-3 - 2.5e-3 per request and 128-dim chunk (H200, session 10, benchmarks/probes/ds_error_probe.py), so a
    bf16 output compared with a bf16-rounded reference at 2e-3 fails on rounding flips, not on the kernel."""
    floor = _rel(ref32.to(torch.bfloat16), ref32)
    return math.sqrt(max(0.0, _rel(out, ref32) ** 2 - floor ** 2))


def _check(x, ref, ref_lse, kv_format: str, seed: int, tol: float, scales) -> None:
    for scale in scales:
        for sms in (132, 7, 1):
            x["out"].fill_(float("nan"))
            out, lse = interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE, scale,
                                         kv_format, x["out"], True, num_sms=sms, path="hopper")
            assert torch.isfinite(out.float()).all(), f"seed {seed}, {sms} SMs: unwritten or NaN outputs"
            assert _rel(out, ref) <= tol, f"seed {seed}, {sms} SMs: rel err {_rel(out, ref):.3e}"
            assert float((lse - ref_lse).abs().max()) <= 2e-3, f"seed {seed}, {sms} SMs: lse"


@pytest.mark.parametrize("config,case", V2_CASES,
                         ids=[f"H{h}-ps{p}-B{len(n)}-{_v2_id(c)}" for c, (h, p, n) in V2_CASES])
def test_tok_fp8_v2_matches_reference(monkeypatch, config, case):
    """The issue's fp8 bound (relative error <= 2e-3, LSE within 2e-3), the scale as a float and as a tensor."""
    _skip_off_hopper()
    skip_unproven(config)
    heads, page_size, lens = case
    for key, value in config.items():
        monkeypatch.setitem(interface_hopper.HOPPER_TOK_FP8_CONFIG, key, value)
    seed, x, ref, ref_lse = _case(heads, page_size, lens, "fp8")
    scales = (x["kv_scale"], torch.tensor([x["kv_scale"]], dtype=torch.float32, device="cuda"))
    _check(x, ref, ref_lse, "fp8", seed, 2e-3, scales)


# The first fp8 kernel (V2=0) with CHAIN=1: its hi scores as one fp8 MMA chain per 128 dims and the rope's, folded in
# fp32 (in its fixed config and space since session 11). Each config of its space, pinned, on the first case.
V1_CHAIN_CONFIGS = [dict(c, V2=0, CHAIN=1) for c in interface_hopper.HOPPER_TOK_FP8_SPACE]


@pytest.mark.parametrize("config", V1_CHAIN_CONFIGS, ids=lambda c: f"buf{c['NUM_BUF']}-widen{c['WIDEN']}-chain1")
def test_tok_fp8_first_kernel_chain_matches_reference(monkeypatch, config):
    """The first fp8 kernel with CHAIN=1 (pinned with its space config's programs per SM): the issue's fp8 bound
    (relative error <= 2e-3, LSE within 2e-3) with the fp8 tests' scale, as a float and as a tensor; and with logits
    of standard deviation ~1 (kv_scale 1, as benchmarks/probes/ds_error_probe.py) the LSE within 2e-3, the
    one-token request's included (its LSE is its one score: the score chain's accumulation error undiluted;
    without CHAIN, 3.6e-3 on the H200 in session 11)."""
    _skip_off_hopper()
    heads, page_size, lens = CASES[0]
    assert 1 in lens
    monkeypatch.setattr(interface_hopper, "HOPPER_TOK_FP8_CONFIG", interface_hopper.pinned_config(heads, "fp8", config))
    seed, x, ref, ref_lse = _case(heads, page_size, lens, "fp8")
    scales = (x["kv_scale"], torch.tensor([x["kv_scale"]], dtype=torch.float32, device="cuda"))
    _check(x, ref, ref_lse, "fp8", seed, 2e-3, scales)
    seed, x, _, ref_lse = _case(heads, page_size, lens, "fp8", prepare=lambda x: x.update(kv_scale=1.0),
                                ref_dtype=torch.float32)
    for sms in (132, 7, 1):
        x["out"].fill_(float("nan"))
        out, lse = interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE, 1.0, "fp8",
                                     x["out"], True, num_sms=sms, path="hopper")
        assert torch.isfinite(out.float()).all(), f"seed {seed}, {sms} SMs: unwritten or NaN outputs"
        err = (lse - ref_lse).abs().amax(dim=1)
        assert float(err.max()) <= 2e-3, f"seed {seed}, {sms} SMs: std-1 logits, LSE err by request {err.tolist()}"


GATHER_CASES = [(16, 1, [1, 63, 64, 65, 3001, 4096]), (32, 1, [300, 1, 4096, 191]), (16, 16, [255, 1, 2, 129]),
                (16, 64, [1, 63, 64, 65])]


# (NUM_BUF, LOOK, RK64, PT_EARLY): the space's buffers on every case, the schedules on page size 1 only
GATHER_PARAMS = ([((n, 0, 0, 0), case) for n in (2, 3) for case in GATHER_CASES]
                 + [(k, GATHER_CASES[0]) for k in ((2, 2, 1, 1), (3, 1, 1, 1))])


@pytest.mark.parametrize("knobs,case", GATHER_PARAMS,
                         ids=[f"H{h}-ps{p}-B{len(n)}-" + "-".join(map(str, k)) for k, (h, p, n) in GATHER_PARAMS])
def test_tok_fp8_v2_row_gather_matches_reference(monkeypatch, knobs, case):
    """GATHER = 1 (cp.async rows through the page table: page size 1, and any other): the same bounds, NaN in
    every cache row past seq_len, page-table entries past seq_len pointing at NaN rows; with the schedules
    (LOOK, RK64, PT_EARLY) too."""
    _skip_off_hopper()
    num_buf, look, rk64, pt_early = knobs
    heads, page_size, lens = case
    # (LOOK runs with one score chain: CHAIN 0 with it, the fixed config's CHAIN 1 without)
    for key, value in dict(V2=1, GATHER=1, NUM_BUF=num_buf, PREFETCH=1, FAST_MAX=1, LOOK=look, RK64=rk64,
                           PT_EARLY=pt_early, CHAIN=int(look == 0)).items():
        monkeypatch.setitem(interface_hopper.HOPPER_TOK_FP8_CONFIG, key, value)
    seed, x, ref, ref_lse = _case(heads, page_size, lens, "fp8")
    scales = (x["kv_scale"], torch.tensor([x["kv_scale"]], dtype=torch.float32, device="cuda"))
    _check(x, ref, ref_lse, "fp8", seed, 2e-3, scales)


# COPY_FIRST (session 58): a segment's first copies issued before its query's loads. Two and three buffers on every TMA
# case (page sizes 64 / 128 / 256), the row gather at page sizes 1 and 16, H = 16 and 32.
COPY_FIRST_CASES = ([(dict(V2=1, NUM_BUF=n, PREFETCH=1, FAST_MAX=1, RK64=1, COPY_FIRST=1), case) for n in (2, 3)
                     for case in CASES]
                    + [(dict(V2=1, NUM_BUF=n, PREFETCH=1, FAST_MAX=1, GATHER=1, COPY_FIRST=1), case) for n in (2, 3)
                       for case in GATHER_CASES[:3]])


@pytest.mark.parametrize("config,case", COPY_FIRST_CASES,
                         ids=[f"H{h}-ps{p}-B{len(n)}-buf{c['NUM_BUF']}" + ("-gather" if c.get("GATHER") else "")
                              for c, (h, p, n) in COPY_FIRST_CASES])
def test_tok_fp8_v2_copies_before_the_query_match_reference(monkeypatch, config, case):
    """``COPY_FIRST=1``: the issue's fp8 bound at 132, 7 and 1 SMs (programs of several segments, each with its own
    query), NaN in every cache row past seq_len, NaN-poisoned outputs, the scale as a float and a tensor."""
    test_tok_fp8_v2_matches_reference(monkeypatch, config, case)


# WG2 (session 59): two consumer warpgroups and a producer warp on one pool of buffers (kernel_hopper_tok2.py), three
# to five buffers, with and without RK64, on every TMA case (H = 16 and 32, page sizes 64 / 128 / 256), pinned.
WG2_CASES = [(dict(V2=1, WG2=1, NUM_BUF=n, FAST_MAX=1, RK64=rk), case) for n, rk in ((3, 1), (4, 1), (5, 0), (5, 1))
             for case in CASES]


@pytest.mark.parametrize("config,case", WG2_CASES,
                         ids=[f"H{h}-ps{p}-B{len(n)}-buf{c['NUM_BUF']}-rk{c['RK64']}" for c, (h, p, n) in WG2_CASES])
def test_tok_fp8_two_warpgroups_match_reference(monkeypatch, config, case):
    """``WG2=1``: the issue's fp8 bound at 132, 7 and 1 SMs (programs of several segments: the query rewritten
    behind the warpgroups' exchange; segments of one tile: the second warpgroup owning none), NaN in every cache row
    past seq_len, NaN-poisoned outputs, the scale as a float and a tensor."""
    test_tok_fp8_v2_matches_reference(monkeypatch, config, case)


@pytest.mark.parametrize("num_buf", [4, 5])
@pytest.mark.parametrize("case", CASES + [(16, 64, [0, 4096, 0, 77, 1])],
                         ids=[f"H{h}-ps{p}-B{len(n)}" for h, p, n in CASES] + ["H16-ps64-zero-lengths"])
def test_tok_fp8_two_warpgroups_with_a_plan_match_reference(case, num_buf):
    """``WG2=1`` with ``plan=``: the producer's first copies from the plan's page ids, the split from its rows; the
    issue's fp8 bound at 132, 7 and 1 SMs, the plan read by two calls, requests of no tokens between others."""
    _skip_off_hopper()
    skip_unproven({"WG2": 1})
    heads, page_size, lens = case
    _planned_calls_match_reference(heads, page_size, lens, dict(V2=1, WG2=1, NUM_BUF=num_buf, FAST_MAX=1, RK64=1),
                                   layers=2)


@pytest.mark.parametrize("pipe", [1, 2])
@pytest.mark.parametrize("heads,page_size,lens", CASES, ids=[f"H{h}-ps{p}-B{len(n)}" for h, p, n in CASES])
def test_bf16_tok_pipe_matches_reference(monkeypatch, pipe, heads, page_size, lens):
    _skip_off_hopper()
    monkeypatch.setitem(interface_hopper.HOPPER_TOK_CONFIG, "PIPE", pipe)
    seed, x, ref, ref_lse = _case(heads, page_size, lens, "bf16")
    _check(x, ref, ref_lse, "bf16", seed, 1e-2, (1.0, ))


@pytest.mark.parametrize("fmt", ["fp8", "fp8_ds_mla"])
@pytest.mark.parametrize("batch", [1, 8, 33])
def test_public_path_picks_the_tok_kernel_by_batch_tunes_and_replays(monkeypatch, batch, fmt):
    """H = 16, page size 64 through the public entry point. fp8: the second kernel (tuned per bucket) from
    ``TOK_FP8_V2_MIN_BATCH`` requests up (1 since session 18), the first below; fp8_ds_mla (``DS_AUTO`` on): its DS kernel, tuned per
    bucket at every batch. Correct, and one captured graph replays to eager's output with new lengths and
    queries."""
    _skip_off_hopper()
    skip_unproven(dict(DS=fmt == "fp8_ds_mla"))
    import graphtune
    from graphtune.kernels import mla_decode
    monkeypatch.setattr(interface_hopper, "DS_AUTO", True)
    second = interface_hopper.SECOND[(False, fmt)]
    seed = int.from_bytes(os.urandom(4), "little")
    x = bench.make_inputs(bench.Problem(batch, 16, 1500, 64, fmt), seed=seed)
    args = (x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE)
    out = torch.empty_like(x["out"])
    interface_hopper.tuned_second_kernel(False, fmt).reset()
    mla_decode(*args, kv_scale=x["kv_scale"], kv_format=fmt, out=out)       # tunes this bucket
    tuned = graphtune.coverage([second.name]).to_dict()["kernels"][0]["tuned"]
    assert bool(tuned) == interface_hopper.second_applies(16, fmt, batch), tuned
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        mla_decode(*args, kv_scale=x["kv_scale"], kv_format=fmt, out=out)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(2):
        x["seq_lens"].copy_(torch.randint(1, 1501, (batch,), generator=gen, dtype=torch.int32))
        x["q"].copy_(torch.randn(x["q"].shape, generator=gen).to(torch.bfloat16))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        eager = mla_decode(*args, kv_scale=x["kv_scale"], kv_format=fmt)
        assert torch.equal(out, eager), f"seed {seed}: replay differs from eager"
        ref32 = mla_decode_reference(*args, kv_scale=x["kv_scale"], kv_format=fmt,
                                     out=torch.empty(out.shape, dtype=torch.float32, device=out.device))
        assert _beyond_bf16(out, ref32) <= 2e-3, f"seed {seed}: rel err beyond bf16 {_beyond_bf16(out, ref32):.3e}"


# fp8_ds_mla (656-byte rows) on the second kernel with DS=1 (passed on the H200 in session 10). The fixed config on
# every TMA case, the other configs the benchmark times on the first; the row gather (GATHER=1) at page sizes 16, 1
# and 64.
DS_CONFIGS = [dict(DS=1), dict(DS=1, NUM_BUF=3), dict(DS=1, PT_EARLY=1)]
DS_CASES = [(16, 64, [1, 63, 64, 65, 3001, 4096]), (32, 64, [300, 1, 4096, 191]), (16, 256, [255, 1, 2, 129]),
            (16, 128, [77, 1, 1000])]
DS_GATHER_CASES = [(16, 16, [255, 1, 2, 129, 64]), (32, 16, [300, 1, 4096, 191]), (16, 1, [1, 63, 64, 65, 3001]),
                   (16, 64, [1, 63, 64, 65])]
DS_PARAMS = ([(DS_CONFIGS[0], case) for case in DS_CASES] + [(c, DS_CASES[0]) for c in DS_CONFIGS[1:]]
             + [(dict(DS=1, GATHER=1), case) for case in DS_GATHER_CASES] + [(dict(DS=1, GATHER=1, NUM_BUF=3),
                                                                             DS_GATHER_CASES[0])]
             # COPY_FIRST (session 58): a segment's first copies before its query's loads, TMA at page sizes 64 and
             # 256, the row gather at 16
             + [(dict(DS=1, COPY_FIRST=1), DS_CASES[0]), (dict(DS=1, COPY_FIRST=1, NUM_BUF=3), DS_CASES[2]),
                (dict(DS=1, GATHER=1, COPY_FIRST=1), DS_GATHER_CASES[0])])


def _spread_scales(x: dict) -> None:
    """Group g's scales times 2^(4g - 10) in every row (the dequantized values follow: the reference reads them)."""
    kv = x["kv_cache"]
    factor = torch.tensor([2.0 ** (4 * g - 10) for g in range(4)], device=kv.device)
    kv[..., 512:528] = (kv[..., 512:528].contiguous().view(torch.float32) * factor).contiguous().view(torch.uint8)


@pytest.mark.parametrize("spread", [False, True], ids=["", "spread"])
@pytest.mark.parametrize("config,case", DS_PARAMS,
                         ids=[f"H{h}-ps{p}-B{len(n)}-" + "-".join(f"{k.lower()}{v}" for k, v in c.items())
                              for c, (h, p, n) in DS_PARAMS])
def test_tok_ds_matches_reference(monkeypatch, config, case, spread):
    """fp8_ds_mla through path="hopper": relative error beyond the bf16 output rounding (:func:`_beyond_bf16`)
    <= 2e-3 (issue 14's fp8 bound), per 128-dim chunk too, LSE within 2e-3, lengths 1 / 63 / 64 / 65 / odd, NaN in
    every row past seq_len, NaN-poisoned outputs, SM counts that make requests straddle programs; ``spread``: the
    four groups' scales 2^12 apart (a chunk whose small scale were lost in fp16 P: 2.4e-2, docs/mla_decode.md), the
    LSE then within 8e-3 (its largest group's keys 4x the others')."""
    _skip_off_hopper()
    skip_unproven(config)
    heads, page_size, lens = case
    for key, value in config.items():
        monkeypatch.setitem(interface_hopper.HOPPER_TOK_DS_CONFIG, key, value)
    seed, x, ref32, ref_lse = _case(heads, page_size, lens, "fp8_ds_mla", _spread_scales if spread else None,
                                    ref_dtype=torch.float32)
    for sms in (132, 7, 1):
        x["out"].fill_(float("nan"))
        out, lse = interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE, 1.0,
                                     "fp8_ds_mla", x["out"], True, num_sms=sms, path="hopper")
        assert torch.isfinite(out.float()).all(), f"seed {seed}, {sms} SMs: unwritten or NaN outputs"
        for name, part in [("all", slice(None))] + [(f"chunk {c}", slice(128 * c, 128 * (c + 1))) for c in range(4)]:
            err = _beyond_bf16(out[..., part], ref32[..., part])
            assert err <= 2e-3, f"seed {seed}, {sms} SMs, {name}: rel err beyond bf16 rounding {err:.3e}"
        # spread: group 3's keys 2^2 times larger, so its scores' rounding (the query's e4m3 hi / lo pair, ~2^-9 of
        # each product) up to 4x; the LSE of a 63-65-token request is about its largest score's (session 56, call C,
        # benchmarks/probes/ds_lse.py, 17 seeds on an H100: up to 2.09e-3 with spread scales, the same bit for bit
        # with the split launched plainly and behind the kernel ahead; call B's test run saw 3.0e-3)
        lse_bound = 8e-3 if spread else 2e-3
        assert float((lse - ref_lse).abs().max()) <= lse_bound, f"seed {seed}, {sms} SMs: lse"


@pytest.mark.parametrize("fmt,page_size", [("fp8", 1), ("fp8", 16), ("fp8_ds_mla", 16), ("fp8_ds_mla", 1)])
def test_pages_below_a_tile_run_the_tuned_row_gather_and_auto_follows_gather_auto(monkeypatch, fmt, page_size):
    """Page sizes that are not whole TMA tiles: path="hopper" without a config runs the row-gather kernel tuned per
    bucket (``interface_hopper.GATHER``), within the formats' bounds (fp8: relative error 2e-3; fp8_ds_mla: 2e-3
    beyond the bf16 output rounding), NaN past every length, NaN-poisoned outputs; path="auto" runs it where
    ``GATHER_AUTO`` is on and the portable kernel where it is off, both correct."""
    _skip_off_hopper()
    ref_dtype = torch.float32 if fmt == "fp8_ds_mla" else torch.bfloat16
    seed, x, ref, ref_lse = _case(16, page_size, [33, 1, 200, 129], fmt, ref_dtype=ref_dtype)

    def err(out):
        return _beyond_bf16(out, ref) if fmt == "fp8_ds_mla" else _rel(out, ref)
    for path, auto in (("hopper", False), ("auto", False), ("auto", True)):
        monkeypatch.setitem(interface_hopper.GATHER_AUTO, fmt, auto)
        assert (interface_hopper.supported(x["q"], x["kv_cache"], fmt) is None) == auto
        x["out"].fill_(float("nan"))
        out, lse = interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE,
                                     x["kv_scale"], fmt, x["out"], True, path=path)
        where = f"seed {seed}, path {path}, GATHER_AUTO {auto}"
        assert torch.isfinite(out.float()).all(), f"{where}: unwritten or NaN outputs"
        # (the portable kernel's bound for fp8_ds_mla is 1e-2: tests/gpu/test_mla_decode_gpu.py)
        tol = 1e-2 if (path == "auto" and not auto and fmt == "fp8_ds_mla") else 2e-3
        assert err(out) <= tol, f"{where}: rel err {err(out):.3e}"
        assert float((lse - ref_lse).abs().max()) <= 2e-3, f"{where}: lse"


_GATHER_PLAN_CASES = [(16, 1, [1, 63, 64, 65, 3001, 4096]), (32, 16, [300, 0, 4096, 191])]


@pytest.mark.parametrize("num_buf", [2, 3])
@pytest.mark.parametrize("case", CASES + [(16, 64, [0, 4096, 0, 77, 1])] + _GATHER_PLAN_CASES,
                         ids=[f"H{h}-ps{p}-B{len(n)}" for h, p, n in CASES] + ["H16-ps64-zero-lengths"]
                         + [f"gather-H{h}-ps{p}-B{len(n)}" for h, p, n in _GATHER_PLAN_CASES])
def test_tok_fp8_v2_with_a_plan_matches_reference(case, num_buf):
    """``plan=`` (session 35): the split and first segment read from an MLADecodePlan's rows give the issue's fp8
    bound at 132, 7 and 1 SMs (programs that take several segments, requests of no tokens between), pinned configs of
    two and three buffers, the plan reused by a second call of the step (as the next layer's); at page sizes 1 and 16
    the row gather (``GATHER``, which reads the split and the first segment from the plan, its page ids itself)."""
    _skip_off_hopper()
    heads, page_size, lens = case
    gather = page_size % 64 != 0
    skip_unproven({"PLAN": 1, "PLAN_GATHER": int(gather)})
    _planned_calls_match_reference(heads, page_size, lens, dict(V2=1, NUM_BUF=num_buf, PREFETCH=1, FAST_MAX=1,
                                                                GATHER=int(gather)), layers=2)


def _planned_calls_match_reference(heads: int, page_size: int, lens: list[int], config: dict, layers: int) -> None:
    """The pinned fp8 ``config`` with a plan at 132, 7 and 1 SMs, ``layers`` calls of each plan (as a step's layers),
    NaN-poisoned outputs: within the issue's fp8 bound of the reference, an LSE of -inf for requests of no tokens."""
    seed, x, ref, ref_lse = _case(heads, page_size, lens, "fp8")
    for sms in (132, 7, 1):
        plan = MLADecodePlan()
        for layer in range(layers):
            x["out"].fill_(float("nan"))
            out, lse = interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE,
                                         x["kv_scale"], "fp8", x["out"], True, num_sms=sms, path="hopper",
                                         config=triton.Config(dict(config)), plan=plan)
            what = f"seed {seed}, {sms} SMs, call {layer} of the plan"
            assert torch.isfinite(out.float()).all(), f"{what}: unwritten or NaN outputs"
            assert _rel(out, ref) <= 2e-3, f"{what}: rel err {_rel(out, ref):.3e}"
            fin = torch.isfinite(ref_lse)      # (a request of no tokens: -inf)
            assert float((lse[fin] - ref_lse[fin]).abs().max()) <= 2e-3, f"{what}: lse"
            assert bool((lse[~fin] == float("-inf")).all()), f"{what}: empty requests' lse"


@pytest.mark.parametrize("page_size", [64, 1], ids=["ps64", "ps1-gather"])
def test_tuned_decode_with_a_plan_made_in_the_captured_step_follows_new_lengths(page_size):
    """The tuned path (per bucket, tuned outside capture) with a plan made inside the captured function and read by
    two layers' calls (two caches, one page table): replays after the lengths change in place equal the reference for
    the new lengths, NaN-poisoned outputs first. Page size 1: the tuned row gather."""
    _skip_off_hopper()
    skip_unproven({"PLAN": 1, "PLAN_GATHER": int(page_size == 1)})
    lens = [4096, 1, 3001, 64, 0, 2500, 129, 4000]
    seed = int.from_bytes(os.urandom(4), "little")
    # (no NaN past the lengths here: the replays' lengths reach rows the first ones leave out)
    x = bench.make_inputs(bench.Problem(len(lens), 16, max(lens), page_size, "fp8"), seed=seed)
    x["seq_lens"].copy_(torch.tensor(lens, dtype=torch.int32))
    kv2 = bench.make_inputs(bench.Problem(len(lens), 16, max(lens), page_size, "fp8"), seed=seed + 1)["kv_cache"]
    args = (x["q"], x["kv_cache"], x["page_table"], x["seq_lens"])
    mla_decode(*args, SM_SCALE, kv_scale=x["kv_scale"], plan=MLADecodePlan())       # (tunes the bucket)
    outs = [torch.empty_like(x["out"]) for _ in range(2)]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan = MLADecodePlan()
        for cache, out in zip((x["kv_cache"], kv2), outs):
            mla_decode(x["q"], cache, x["page_table"], x["seq_lens"], SM_SCALE, kv_scale=x["kv_scale"], out=out,
                       plan=plan)
    for new in ([4096, 1, 3001, 64, 0, 2500, 129, 4000], [17, 4096, 0, 3000, 64, 1, 4095, 2048]):
        x["seq_lens"].copy_(torch.tensor(new, dtype=torch.int32))
        for out in outs:
            out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        for cache, out in zip((x["kv_cache"], kv2), outs):
            ref = mla_decode_reference(x["q"], cache, x["page_table"], x["seq_lens"], SM_SCALE, kv_scale=x["kv_scale"],
                                       kv_format="fp8")
            assert torch.isfinite(out.float()).all(), f"seed {seed}, lengths {new}: unwritten or NaN outputs"
            assert _rel(out, ref) <= 2e-3, f"seed {seed}, lengths {new}: rel err {_rel(out, ref):.3e}"


@pytest.mark.parametrize("case", CASES, ids=[f"H{h}-ps{p}-B{len(n)}" for h, p, n in CASES])
def test_fp8_ds_mla_with_a_plan_matches_reference_and_other_paths_leave_it_unread(case):
    """``plan=`` with fp8_ds_mla (its tuned DS kernel reads the plan, the even split: no segment price): relative
    error beyond the bf16 output rounding <= 2e-3 at 132, 7 and 1 SMs, LSE within 2e-3; at page size 1 (the row
    gather, which reads the plan's split since session 36) and with a bf16 cache the outputs are right with a plan
    too."""
    _skip_off_hopper()
    skip_unproven({"PLAN": 1, "PLAN_GATHER": 1})       # (its page-size-1 call reads the plan in the row gather)
    heads, page_size, lens = case
    seed, x, ref32, ref_lse = _case(heads, page_size, lens, "fp8_ds_mla", ref_dtype=torch.float32)
    for sms in (132, 7, 1):
        x["out"].fill_(float("nan"))
        out, lse = interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE, 1.0,
                                     "fp8_ds_mla", x["out"], True, num_sms=sms, path="hopper", plan=MLADecodePlan())
        assert torch.isfinite(out.float()).all(), f"seed {seed}, {sms} SMs: unwritten or NaN outputs"
        assert _beyond_bf16(out, ref32) <= 2e-3, f"seed {seed}, {sms} SMs: rel err {_beyond_bf16(out, ref32):.3e}"
        assert float((lse - ref_lse).abs().max()) <= 2e-3, f"seed {seed}, {sms} SMs: lse"
    for fmt, ps in (("fp8", 1), ("bf16", page_size)):
        seed, x, ref, _ = _case(heads, ps, lens, fmt)
        x["out"].fill_(float("nan"))
        out = mla_decode(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE, kv_scale=x["kv_scale"],
                         out=x["out"], plan=MLADecodePlan())
        assert torch.isfinite(out.float()).all(), f"seed {seed}, {fmt} page size {ps}: unwritten or NaN outputs"
        tol = 2e-3 if fmt == "fp8" else 1e-2     # (bf16: the bound of tests/gpu/test_mla_decode_gpu.py)
        assert _rel(out, ref) <= tol, f"seed {seed}, {fmt} page size {ps}: rel err {_rel(out, ref):.3e}"


# fp8_ds_mla with the reduction streamed behind the split (reduction.STREAM_DS, written in session 54, on since this
# passed in session 55: the second tokens-on-M kernel with DS = 1 counts its written segments as on a per-tensor fp8
# cache).
DS_STREAM_LENS = [4096, 0, 1, 3001, 64, 65, 2500, 0, 129, 4000, 17]


@pytest.mark.parametrize("heads,page_size,num_buf", [(16, 64, 2), (16, 64, 3), (32, 64, 2), (16, 1, 2)],
                         ids=["H16-buf2", "H16-buf3", "H32-buf2", "H16-ps1-gather"])
def test_fp8_ds_mla_streamed_reduction_matches_reference_and_leaves_the_counters_at_zero(heads, page_size, num_buf,
                                                                                          monkeypatch):
    """fp8_ds_mla pinned with a plan, ``reduction.STREAM`` on (two buffers count, three do not; H = 32: two head
    groups counting apart; page size 1: the row gather): at 132, 7 and 1 SMs, three calls a plan, lengths of no tokens
    between others, every row past a length poisoned (fp8 NaN bytes), NaN-poisoned outputs: relative error beyond
    the bf16 output rounding <= 2e-3, LSE within 2e-3 (-inf for requests of no tokens), the plan's counters back at
    zero after every call; then the tuned path with a plan made inside a captured step of two calls, replayed
    after the lengths change in place, each output within the same bound of its fp32 reference."""
    _skip_off_hopper()
    from graphtune.kernels.mla_decode import reduction
    monkeypatch.setattr(reduction, "STREAM", True)
    monkeypatch.setattr(reduction, "STREAM_DS", True)
    assert interface_hopper._streams("fp8_ds_mla", "V2")
    seed, x, ref32, ref_lse = _case(heads, page_size, DS_STREAM_LENS, "fp8_ds_mla", ref_dtype=torch.float32)
    live = x["seq_lens"] > 0
    config = {**interface_hopper.HOPPER_TOK_DS_CONFIG, "NUM_BUF": num_buf, "GATHER": int(page_size % 64 != 0)}
    for sms in (132, 7, 1):
        plan = MLADecodePlan()
        for call in range(3):
            x["out"].fill_(float("nan"))
            out, lse = interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE, 1.0,
                                         "fp8_ds_mla", x["out"], True, config=triton.Config(dict(config)),
                                         num_sms=sms, path="hopper", plan=plan)
            torch.cuda.synchronize()
            where = f"seed {seed}, {sms} SMs, call {call}"
            assert torch.isfinite(out.float()).all(), f"{where}: unwritten or NaN outputs"
            err = _beyond_bf16(out, ref32)
            assert err <= 2e-3, f"{where}: rel err beyond bf16 rounding {err:.3e}"
            assert float((lse[live] - ref_lse[live]).abs().max()) <= 2e-3, f"{where}: lse"
            assert bool((lse[~live] == float("-inf")).all()), f"{where}: empty requests' lse"
            assert plan.counted() == (num_buf <= 2), f"{where}: counted {plan.counted()}"
            assert not plan.counters().any(), f"{where}: counters left {plan.counters().nonzero().tolist()}"
    # the tuned path (the DS space: two and three buffers) with the plan made inside the captured step
    seed += 1
    x = bench.make_inputs(bench.Problem(len(DS_STREAM_LENS), heads, 4096, page_size, "fp8_ds_mla"), seed=seed)
    x["seq_lens"].copy_(torch.tensor(DS_STREAM_LENS, dtype=torch.int32))
    args = (x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE)
    first = MLADecodePlan()
    out = mla_decode(*args, kv_format="fp8_ds_mla", plan=first)      # (tunes the bucket)
    torch.cuda.synchronize()
    ref32 = mla_decode_reference(*args, kv_format="fp8_ds_mla",
                                 out=torch.empty(out.shape, dtype=torch.float32, device=out.device))
    assert _beyond_bf16(out, ref32) <= 2e-3, f"seed {seed}, the tuning call: {_beyond_bf16(out, ref32):.3e}"
    assert not first.counters().any(), f"seed {seed}: counters left after tuning {first.counters().nonzero()}"
    outs = [torch.empty_like(x["out"]) for _ in range(2)]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan = MLADecodePlan()
        for o in outs:
            mla_decode(*args, kv_format="fp8_ds_mla", out=o, plan=plan)
    for new in (DS_STREAM_LENS, [17, 4096, 0, 3000, 64, 1, 4095, 2048, 0, 100, 4033]):
        x["seq_lens"].copy_(torch.tensor(new, dtype=torch.int32))
        for o in outs:
            o.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref32 = mla_decode_reference(*args, kv_format="fp8_ds_mla",
                                     out=torch.empty(out.shape, dtype=torch.float32, device=out.device))
        for o in outs:
            assert torch.isfinite(o.float()).all(), f"seed {seed}, lengths {new}: unwritten or NaN outputs"
            err = _beyond_bf16(o, ref32)
            assert err <= 2e-3, f"seed {seed}, lengths {new}: rel err beyond bf16 rounding {err:.3e}"


# The split kernel launched as the programmatic dependent of the kernel ahead of it (interface_hopper.SPLIT_PDL):
# PDL 1 waits before its first load, PDL 2 reads the plan's row first.
PDL_LENS = [4096, 1, 3001, 0, 65, 2500, 129, 4000]


@pytest.mark.parametrize("fmt,heads,num_buf,mode", [
    ("fp8", 16, 2, 1), ("fp8", 16, 2, 2), ("fp8", 16, 3, 2), ("fp8", 16, None, 2), ("bf16", 16, None, 2),
    ("bf16", 128, None, 2), ("bf16", 128, "pp", 1), ("fp8", 16, "wg2", 1), ("fp8", 16, "wg2", 2)],
    ids=["buf2-wait-first", "buf2-plan-first", "buf3-plan-first", "tuned-plan-first", "bf16-tok-tuned-plan-first",
         "bf16-pp-tuned-plan-first", "bf16-pp-wait-first", "wg2-wait-first", "wg2-plan-first"])
def test_split_launched_behind_the_kernel_ahead_reads_what_that_kernel_wrote(fmt, heads, num_buf, mode, monkeypatch):
    """A captured step of three layers, each a copy that writes the layer's query (the kernel ahead) then the
    decode (fp8 H = 16: the second tokens-on-M kernel; bf16 H = 16: the tokens-on-M kernel; bf16 H = 128: the
    ping-pong kernel), pinned or tuned (``num_buf`` None: tuned by the first, eager step), with the step's plan (made
    inside the step: the first layer's split runs right behind the plan kernel, so it waits first whatever the mode),
    replayed after the queries' sources and the lengths change in place, NaN-poisoned outputs: each layer's output
    within its format's bound of its fp32 reference (a split that read its query before the copy's writes, or a plan
    row before the plan kernel's, would be off), at 132 and 7 SMs."""
    _skip_off_hopper()
    if num_buf == "wg2":
        skip_unproven({"WG2": 1})
    monkeypatch.setattr(interface_hopper, "SPLIT_PDL", mode)
    seed = int.from_bytes(os.urandom(4), "little")
    x = bench.make_inputs(bench.Problem(len(PDL_LENS), heads, 4096, 64, fmt), seed=seed)
    x["seq_lens"].copy_(torch.tensor(PDL_LENS, dtype=torch.int32))
    if num_buf is None:
        config = None
    elif num_buf == "pp":
        config = triton.Config(dict(PP=1, SM1=1, RA=1))
    elif num_buf == "wg2":
        config = triton.Config(dict(V2=1, WG2=1, NUM_BUF=4, FAST_MAX=1, RK64=1))
    else:
        config = triton.Config(dict(V2=1, NUM_BUF=num_buf, PREFETCH=1, FAST_MAX=1, PT_EARLY=1, RK64=1, CHAIN=1))
    tol = 2e-3 if fmt == "fp8" else 1e-2     # (bf16: the bound of tests/gpu/test_mla_decode_gpu.py)
    gen = torch.Generator(device=x["q"].device).manual_seed(seed)
    sources = [torch.randn(x["q"].shape, generator=gen, device=x["q"].device).to(x["q"].dtype) for _ in range(3)]
    queries = [torch.empty_like(x["q"]) for _ in range(3)]
    for sms in (132, 7):
        outs = [torch.empty_like(x["out"]) for _ in range(3)]

        def step() -> None:
            plan = MLADecodePlan()
            for q, src, o in zip(queries, sources, outs):
                q.copy_(src)
                interface._launch(q, x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE, x["kv_scale"], fmt,
                                  o, False, config=config, num_sms=sms, path="hopper", plan=plan)
        step()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        for new in (PDL_LENS, [17, 4096, 0, 3000, 64, 1, 4095, 2048]):
            x["seq_lens"].copy_(torch.tensor(new, dtype=torch.int32))
            for src in sources:
                src.copy_(torch.randn(src.shape, generator=gen, device=src.device).to(src.dtype))
            for q, o in zip(queries, outs):
                q.fill_(float("nan"))
                o.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            for layer, (src, o) in enumerate(zip(sources, outs)):
                ref = mla_decode_reference(src, x["kv_cache"], x["page_table"], x["seq_lens"], SM_SCALE,
                                           kv_scale=x["kv_scale"], kv_format=fmt,
                                           out=torch.empty(o.shape, dtype=torch.float32, device=o.device))
                where = f"seed {seed}, {sms} SMs, lengths {new}, layer {layer}"
                assert torch.isfinite(o.float()).all(), f"{where}: unwritten or NaN outputs"
                assert _beyond_bf16(o, ref) <= tol, f"{where}: rel err beyond bf16 {_beyond_bf16(o, ref):.3e}"
