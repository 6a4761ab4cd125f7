"""CPU tests of the MLA decode kernel: the kernels through the Triton interpreter, and input validation.

Triton decides when a kernel is decorated whether it is interpreted, so the interpreted cases run in a
child pytest process started on this file with ``TRITON_INTERPRET=1`` before anything imports Triton (the
rest of the suite keeps compiled kernels). In the parent, ``test_interpreted_kernel_cases`` starts that
child and fails with its output; the validation tests need no kernel launch and run in the parent.

Every interpreted case draws fresh random inputs (the seed is printed on failure), poisons the output with
NaN, and compares against the fp32 reference on the dequantised cache: relative L2 error <= 1e-2.
"""
from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

_CHILD_FLAG = "_MLA_DECODE_INTERPRETED_CHILD"
IN_CHILD = os.environ.get(_CHILD_FLAG) == "1"

if IN_CHILD and os.environ.get("TRITON_INTERPRET") != "1":  # pragma: no cover - misuse guard
    raise RuntimeError(f"{_CHILD_FLAG}=1 needs TRITON_INTERPRET=1")

import torch  # noqa: E402

from graphtune.kernels import mla_decode, mla_decode_reference  # noqa: E402
from graphtune.kernels.mla_decode import interface, space  # noqa: E402
from graphtune.kernels.mla_decode.reference import quantize_ds_mla  # noqa: E402
from graphtune.configs import config_from_dict, config_to_dict  # noqa: E402
from graphtune.sass import wgmma_findings  # noqa: E402
from _bench_module import load_bench_mla_decode  # noqa: E402

TOL = 1e-2           # relative L2 error vs the fp32 reference (bf16 output, fp8/bf16 operands)
LSE_TOL = 2e-3       # absolute, natural log


def _seed() -> int:
    return int.from_bytes(os.urandom(4), "little")


def make_case(batch: int, heads: int, page_size: int, kv_format: str, lens: list[int], gen: torch.Generator,
              spare_pages: int = 3) -> dict:
    """Random inputs with a shuffled page pool larger than needed (page ids non-contiguous)."""
    max_pages = max((n + page_size - 1) // page_size for n in lens) + 1
    num_pages = batch * max_pages + spare_pages
    values = torch.randn(num_pages, page_size, 576, generator=gen)
    if kv_format == "fp8":
        kv, scale = (values * 40).to(torch.float8_e4m3fn), 0.03
    elif kv_format == "bf16":
        kv, scale = values.bfloat16(), 1.0
    else:
        kv, scale = quantize_ds_mla(values * torch.rand(num_pages, page_size, 1, generator=gen) * 5), 1.0
    pages = torch.randperm(num_pages, generator=gen)[: batch * max_pages].view(batch, max_pages).to(torch.int32)
    q = (torch.randn(batch, heads, 576, generator=gen) * 2).bfloat16()
    return dict(q=q, kv_cache=kv, page_table=pages.contiguous(), seq_lens=torch.tensor(lens, dtype=torch.int32),
                kv_scale=scale, kv_format=kv_format)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    return float((out - ref).norm() / ref.norm())


# --------------------------------------------------------------------------------- interpreted (child)

CASES = [
    # id, batch, heads, page size, format, seq lens, SMs sizing the split grid
    ("fp8-ps1-H16-B1-len1", 1, 16, 1, "fp8", [1], 3),
    ("fp8-ps1-H16-B3-odd", 3, 16, 1, "fp8", [37, 1, 53], 3),
    ("fp8-ps16-H16-B4-partial", 4, 16, 16, "fp8", [17, 50, 1, 33], 5),
    ("fp8-ps64-H8-B2-masked-heads", 2, 8, 64, "fp8", [65, 130], 2),
    ("fp8-ps16-H32-B2-two-head-blocks", 2, 32, 16, "fp8", [45, 9], 3),
    ("fp8-ps1-H16-B5-one-program", 5, 16, 1, "fp8", [3, 21, 1, 40, 18], 1),
    ("bf16-ps16-H16-B3", 3, 16, 16, "bf16", [31, 48, 1], 3),
    ("bf16-ps64-H24-B2", 2, 24, 64, "bf16", [70, 5], 4),
    ("bf16-ps1-H16-B2", 2, 16, 1, "bf16", [19, 40], 7),
    ("ds_mla-ps1-H16-B3", 3, 16, 1, "fp8_ds_mla", [29, 1, 47], 3),
    ("ds_mla-ps16-H16-B3", 3, 16, 16, "fp8_ds_mla", [50, 17, 90], 3),
    ("ds_mla-ps64-H32-B2", 2, 32, 64, "fp8_ds_mla", [100, 64], 2),
    # the issue's matrix (every format x page sizes 1 / 16 / 64 x H 16 / 32 / 64 / 128) filled where the cases above
    # leave it open: H = 64 and 128 (four and eight head blocks), fp8 at page size 64 with 16 heads
    ("fp8-ps64-H16-B2-straddle", 2, 16, 64, "fp8", [129, 64], 3),
    ("fp8-ps16-H64-B2", 2, 64, 16, "fp8", [33, 1], 2),
    ("fp8-ps64-H128-B1-len1", 1, 128, 64, "fp8", [1], 2),
    ("bf16-ps1-H64-B2", 2, 64, 1, "bf16", [9, 20], 3),
    ("bf16-ps64-H128-B1", 1, 128, 64, "bf16", [70], 2),
    ("ds_mla-ps16-H64-B1", 1, 64, 16, "fp8_ds_mla", [40], 2),
    ("ds_mla-ps1-H128-B1", 1, 128, 1, "fp8_ds_mla", [12], 1),
]


def _config(**overrides: int):
    return config_from_dict({**config_to_dict(space.INTERPRET_CONFIG), **overrides})


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_reference(case):
    _, batch, heads, page_size, kv_format, lens, sms = case
    seed = _seed()
    x = make_case(batch, heads, page_size, kv_format, lens, torch.Generator().manual_seed(seed))
    out = torch.full((batch, heads, 512), float("nan"), dtype=torch.bfloat16)
    got, lse = interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.06, x["kv_scale"],
                                 kv_format, out, True, num_sms=sms)
    ref, ref_lse = mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.06,
                                        kv_scale=x["kv_scale"], return_lse=True)
    assert got is out
    assert torch.isfinite(got.float()).all(), f"seed {seed}: unwritten (NaN) outputs"
    err = rel_err(got, ref)
    assert err <= TOL, f"seed {seed}: relative error {err:.3e} > {TOL}"
    lse_err = float((lse - ref_lse).abs().max())
    assert lse_err <= LSE_TOL, f"seed {seed}: lse error {lse_err:.3e}"


@pytest.mark.parametrize("kv_format,page_size,lens,sms", [("fp8", 16, [37, 1, 90], 3), ("fp8_ds_mla", 1, [29, 64], 2)])
def test_query_precision_e4m3_scores_against_the_e4m3_query(kv_format, page_size, lens, sms):
    """``query_precision="e4m3"`` computes the decode of ``reference.e4m3_query(q)`` (the query rounded to e4m3 after a
    power of two per head), the default that of q itself: each LSE (fp32, no output rounding in the way) matches its
    own reference to 1e-4 and misses the other's by far more (these logits' standard deviation is ~3.5: the
    rounding moves LSEs by ~0.2)."""
    from graphtune.kernels.mla_decode.reference import e4m3_query
    seed = _seed()
    x = make_case(len(lens), 16, page_size, kv_format, lens, torch.Generator().manual_seed(seed))
    refs = {}
    for name, q in (("bf16", x["q"]), ("e4m3", e4m3_query(x["q"], kv_format))):
        refs[name] = mla_decode_reference(q, x["kv_cache"], x["page_table"], x["seq_lens"], 0.06,
                                          kv_scale=x["kv_scale"], return_lse=True)
    for precision, other in (("bf16", "e4m3"), ("e4m3", "bf16")):
        out = torch.full((len(lens), 16, 512), float("nan"), dtype=torch.bfloat16)
        got, lse = interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.06, x["kv_scale"],
                                     kv_format, out, True, num_sms=sms, query_precision=precision)
        assert torch.isfinite(got.float()).all(), f"seed {seed}, {precision}: unwritten (NaN) outputs"
        own = float((lse - refs[precision][1]).abs().max())
        far = float((lse - refs[other][1]).abs().max())
        assert own <= 1e-4, f"seed {seed}, {precision}: lse error {own:.3e} against its own reference"
        assert far >= 20 * max(own, 1e-4), f"seed {seed}, {precision}: lse {far:.3e} from the other reference"
        err = rel_err(got, refs[precision][0])
        assert err <= TOL, f"seed {seed}, {precision}: relative error {err:.3e} > {TOL}"


@pytest.mark.parametrize("kv_format", ["fp8", "fp8_ds_mla"])
def test_an_e4m3_query_is_its_value_times_its_scale(kv_format):
    """An fp8 ``q`` with ``q_scale`` (FlashMLA's query form): the decode of the query ``q * q_scale`` in the e4m3
    precision, bit for bit the bf16 query ``q * q_scale`` (exact for this power-of-two scale) with
    ``query_precision="e4m3"``, as a float and as a tensor scale; its LSEs match the reference of that query."""
    seed = _seed()
    x = make_case(3, 16, 16, kv_format, [37, 1, 90], torch.Generator().manual_seed(seed))
    q8 = (x["q"].float() / 8).to(torch.float8_e4m3fn)
    q_value = (q8.float() * 8).to(torch.bfloat16)
    want, want_lse = interface._launch(q_value, x["kv_cache"], x["page_table"], x["seq_lens"], 0.06, x["kv_scale"],
                                       kv_format, None, True, num_sms=3, query_precision="e4m3")
    ref, ref_lse = mla_decode_reference(q_value, x["kv_cache"], x["page_table"], x["seq_lens"], 0.06,
                                        kv_scale=x["kv_scale"], return_lse=True)
    # (the reference takes the e4m3 query with its scale too)
    ref8 = mla_decode_reference(q8, x["kv_cache"], x["page_table"], x["seq_lens"], 0.06, kv_scale=x["kv_scale"],
                                q_scale=8.0)
    assert torch.equal(ref8, ref)
    for scale in (8.0, torch.tensor([8.0])):
        out = torch.full((3, 16, 512), float("nan"), dtype=torch.bfloat16)
        got, lse = mla_decode(q8, x["kv_cache"], x["page_table"], x["seq_lens"], 0.06, kv_scale=x["kv_scale"],
                              out=out, return_lse=True, q_scale=scale)
        assert torch.equal(got, want) and torch.equal(lse, want_lse), f"seed {seed}"
        assert float((lse - ref_lse).abs().max()) <= 1e-4, f"seed {seed}"
        assert rel_err(got, ref) <= TOL, f"seed {seed}"


# (each case's pinned SM count splits the batch so that a program walks past padding slots between its requests;
# the public call splits over the interpreter's 3 SMs)
@pytest.mark.parametrize("kv_format,sms,lens", [("fp8", 4, [0, 40, 0, 33, 0, 1, 0]), ("bf16", 1, [40, 0, 33, 0, 1, 0]),
                                                ("fp8_ds_mla", 2, [0, 0, 17, 0, 50]), ("fp8", 4, [0, 0, 0])])
def test_requests_of_no_tokens_get_zeros_and_leave_the_others_right(kv_format, sms, lens):
    """Padding slots of a captured batch (seq_len 0, any page ids) before, between and after real requests, or the
    whole batch: zeros and an LSE of -inf for them (the reduction writes them: the split programs pass them by),
    the others as the reference."""
    seed = _seed()
    x = make_case(len(lens), 16, 16, kv_format, lens, torch.Generator().manual_seed(seed))
    # a padding slot's page-table row may hold anything: ids no kernel may follow
    x["page_table"][torch.tensor(lens) == 0] = torch.tensor([-1, 1 << 30], dtype=torch.int32).repeat(
        x["page_table"].shape[1] // 2 + 1)[:x["page_table"].shape[1]]
    ref, ref_lse = mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.06,
                                        kv_scale=x["kv_scale"], kv_format=kv_format, return_lse=True)
    dead = torch.tensor([n == 0 for n in lens])
    args = (x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.06)
    for how in ("public", f"{sms} SMs"):
        out = torch.full((len(lens), 16, 512), float("nan"), dtype=torch.bfloat16)
        if how == "public":   # (validated: seq_len 0 is in the contract)
            got, lse = mla_decode(*args, kv_scale=x["kv_scale"], kv_format=kv_format, out=out, return_lse=True)
        else:
            got, lse = interface._launch(*args, x["kv_scale"], kv_format, out, True, num_sms=sms)
        where = f"{how}, seed {seed}"
        assert (got[dead] == 0).all(), f"{where}: a request of no tokens not zeroed"
        assert (lse[dead] == float("-inf")).all() and (ref_lse[dead] == float("-inf")).all(), f"{where}: lse"
        assert torch.isfinite(got.float()).all(), f"{where}: unwritten (NaN) outputs"
        if (~dead).any():
            assert rel_err(got[~dead], ref[~dead]) <= TOL, f"{where}: relative error {rel_err(got, ref):.3e}"
            assert float((lse[~dead] - ref_lse[~dead]).abs().max()) <= LSE_TOL, f"{where}: lse error"


def test_tuned_grid_never_outgrows_the_partial_scratch():
    """The tuned path sizes the partial slots for the space's most programs per SM; a config forced with more
    (graphtune.force accepts any PROGRAMS_PER_SM >= 0) gets a grid capped at those slots, not one whose
    programs would write partials past part_o (found by a review in session 13)."""
    most = max(c.kwargs["PROGRAMS_PER_SM"] for c in [*space.CONFIGS, space.DEFAULT])
    batch, heads, sms = 4, 16, 132
    q = torch.empty(batch, heads, 576, dtype=torch.bfloat16)
    kv = torch.empty(8, 64, 576, dtype=torch.float8_e4m3fn)
    args, grid, (_, part_o, _, _) = interface.split_call(
        q, kv, torch.zeros(batch, 8, dtype=torch.int32), torch.ones(batch, dtype=torch.int32), 0.1, 1.0, "fp8",
        torch.empty(batch, heads, 512, dtype=torch.bfloat16), False, sms=sms)
    for pps in (1, most, most + 1, 8):
        meta = {**space.DEFAULT.kwargs, "PROGRAMS_PER_SM": pps}
        head_blocks, programs = grid(meta)
        # the largest slot a program writes is pid + b <= (programs - 1) + (batch - 1)
        assert programs - 1 + batch - 1 < part_o.shape[0], (pps, programs, part_o.shape[0])
        assert programs == min(sms * pps // head_blocks, sms * most // head_blocks)


# (SMs sizing the split grid, lengths, the reduction's blocks): a request split over more programs than one step
# of the reduction merges, with whole rows (8 programs per request for 24 SMs: 8 slots a step), with rows of four
# heads (4 SMs, 3 requests: 2 slots and 4 heads a step; request 0 spans 3 programs; with 6 heads, 2 a program) and
# with column blocks (2 requests over 140 SMs: 70 programs each; request 0, 69 tiles of 16 tokens, in 69 partials:
# more than a 64-slot step)
REDUCE_CASES = [(24, [1500, 16, 16], 16, (8, 1, 512, 4)), (4, [700, 300, 5], 16, (2, 4, 512, 4)),
                (4, [700, 300, 5], 6, (2, 2, 512, 4)), (140, [1100, 5], 16, (64, 1, 128, 4))]


@pytest.mark.parametrize("sms,lens,heads,blocks", REDUCE_CASES,
                         ids=["whole-rows", "head-rows", "head-rows-6-heads", "column-blocks"])
def test_reduction_merges_more_partials_than_one_step(sms, lens, heads, blocks):
    """(6 heads: four heads a program does not divide them, two do)"""
    assert interface.reduce_blocks(len(lens), interface.max_partials(sms, len(lens), 1), heads) == blocks
    seed = _seed()
    x = make_case(len(lens), heads, 16, "fp8", lens, torch.Generator().manual_seed(seed))
    out = torch.full((len(lens), heads, 512), float("nan"), dtype=torch.bfloat16)
    got, lse = interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.06, x["kv_scale"], "fp8",
                                 out, True, num_sms=sms)
    ref, ref_lse = mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.06,
                                        kv_scale=x["kv_scale"], return_lse=True)
    assert torch.isfinite(got.float()).all(), f"seed {seed}: unwritten (NaN) outputs"
    assert rel_err(got, ref) <= TOL, f"seed {seed}: relative error {rel_err(got, ref):.3e}"
    assert float((lse - ref_lse).abs().max()) <= LSE_TOL, f"seed {seed}: lse error"


def test_partials_are_fp16_where_bounded_or_scaled():
    """An fp8 cache's partials are fp16 where |partial| <= 448 x kv_scale fits fp16 (a scale up to 146), else fp32 (a
    scale given as a tensor, read on the device, too); a bf16 cache's are fp16 stored scaled per half-row (its slot
    rows of part_lse three times as wide) where the launch asks (the ping-pong kernel up to PP_PART16_MAX_BATCH
    requests: interface_hopper), else fp32; fp8_ds_mla keeps fp32."""
    from graphtune.kernels.mla_decode import reduction
    assert reduction.partial_layout("fp8", 0.03) == (torch.float16, False)
    assert reduction.partial_layout("fp8", 146.0) == (torch.float16, False)
    assert reduction.partial_layout("fp8", 147.0) == (torch.float32, False)
    assert reduction.partial_layout("fp8", torch.tensor([0.03])) == (torch.float32, False)
    assert reduction.partial_layout("bf16", 1.0, scaled=True) == (torch.float16, True)
    assert reduction.partial_layout("bf16", 1.0) == (torch.float32, False)
    assert reduction.partial_layout("fp8", 0.03, scaled=True) == (torch.float16, False)
    from graphtune.kernels.mla_decode import interface_hopper
    for batch, pp, want in ((8, True, 3), (interface_hopper.PP_PART16_MAX_BATCH, True, 3),
                            (interface_hopper.PP_PART16_MAX_BATCH + 1, True, 1), (4, False, 1)):
        q = torch.empty(batch, 128, 576, dtype=torch.bfloat16)
        kv = torch.empty(batch * 2, 64, 576, dtype=torch.bfloat16)
        _, _, consts, (_, part_o, part_lse, _) = interface_hopper.hopper_call(
            q, kv, torch.zeros(batch, 2, dtype=torch.int32), torch.ones(batch, dtype=torch.int32), 0.04, 1.0, "bf16",
            torch.empty(batch, 128, 512, dtype=torch.bfloat16), False, sms=132,
            config=dict(BLOCK_N=64, PP=1, RELOAD=1, WG1_FIRST=1) if pp else None)
        assert part_lse.shape[1] == want * 128 and consts.get("PART_SCALED", False) == (want == 3), (batch, pp)
        assert part_o.dtype == (torch.float16 if want == 3 else torch.float32)
    assert reduction.partial_layout("fp8_ds_mla", 1.0) == (torch.float32, False)
    assert reduction.lse_columns(16, True) == 48 and reduction.lse_columns(16, False) == 16
    # (scaled partials merged by whole rows at two warps as shipped since session 38, by half rows at one with
    # SCALED_HALF_ROWS on)
    assert reduction.reduce_blocks(32, 32 + 264, 128, 2, scaled=True)[2:] == \
        ((256, 1) if reduction.SCALED_HALF_ROWS else (512, 2))


def _scaled_halves(part: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What the Hopper kernels store for a bf16 cache's partials (kernel_hopper._scaled_partial, per 256-column
    half-row): fp16 values times 2^-k and k = ceil(log2 max |half|) - 15."""
    halves = part.view(part.shape[0], part.shape[1], 2, 256)
    mx = halves.abs().amax(dim=3)
    k = torch.where(mx > 0, (torch.ceil(torch.log2(mx)) - 15).clamp(min=-100), torch.zeros_like(mx))
    stored = (halves * torch.exp2(-k)[..., None]).to(torch.float16).view_as(part)
    return stored, k


@pytest.mark.parametrize("half_rows", [True, False], ids=["half-rows", "whole-rows"])
@pytest.mark.parametrize("heads,magnitude", [(16, 1.0), (16, 3.0e6), (16, 2.0e-6), (4, 1.0e30), (128, 1.0)])
def test_the_reduction_merges_scaled_fp16_partials(heads, magnitude, half_rows, monkeypatch):
    """A bf16 cache's partials as the Hopper kernels store them (fp16 times 2^-k per half-row, k beside the LSE in
    the slot's row of part_lse, ``reduction.partial_layout``), merged by the reduction (through the interpreter):
    values of ``magnitude`` (past fp16's range, below its normal range, or ordinary), each half-row at its own scale
    (factors up to 2^20 apart), three requests of 5 / 2 / 1 segments (the last whole: untouched), random LSEs: none
    infinite, as close to the exact merge in float64 as the same partials merged in fp32 (the bf16 output's rounding
    is most of either's error), the LSE as from fp32 partials; merged by half rows (one k a program, as shipped) and
    by whole rows (``reduction.SCALED_HALF_ROWS`` off: each column's factor selected by its half)."""
    from graphtune.kernels.mla_decode import reduction
    monkeypatch.setattr(reduction, "SCALED_HALF_ROWS", half_rows)
    assert reduction.reduce_blocks(3, 8, heads, 2, scaled=True)[2] == (256 if half_rows else 512)
    seed = _seed()
    gen = torch.Generator().manual_seed(seed)
    segs = [(0, 4), (5, 6), (7, 7)]
    slots = 8
    spread = torch.exp2(torch.randint(-10, 11, (slots, heads, 2, 1), generator=gen).float())
    part = ((torch.rand(slots, heads, 2, 256, generator=gen) * 2 - 1) * spread * magnitude).view(slots, heads, 512)
    part_lse = torch.randn(slots, heads, generator=gen) * 4
    stored, k = _scaled_halves(part)
    lse_rows = torch.cat([part_lse, k[:, :, 0], k[:, :, 1]], dim=1)
    assert lse_rows.shape[1] == reduction.lse_columns(heads, True)
    seg = torch.tensor(segs, dtype=torch.int32)
    lens = torch.tensor([300, 100, 50], dtype=torch.int32)
    w = torch.zeros(3, slots, heads, dtype=torch.float64)
    for b, (first, last) in enumerate(segs):
        w[b, first:last + 1] = torch.softmax(part_lse[first:last + 1].double() * math.log(2), dim=0)
    exact = torch.einsum("bsh,shd->bhd", w, part.double())
    out = torch.full((3, heads, 512), float("nan"), dtype=torch.bfloat16)
    out[2] = 0
    lse = torch.empty(3, heads)
    reduction.merge(3, heads, seg, stored, lse_rows, out, lse, lens, True)
    assert torch.isfinite(out.float()).all(), f"seed {seed}: infinite or unwritten outputs"
    lse32 = torch.empty(3, heads)
    out32 = torch.full((3, heads, 512), float("nan"), dtype=torch.bfloat16)
    reduction.merge(3, heads, seg, part, part_lse, out32, lse32, lens, True)
    err, err32 = (float((o[:2].double() - exact[:2]).norm() / exact[:2].norm()) for o in (out, out32))
    assert err <= 4e-3 and err <= 1.1 * err32 + 2e-4, \
        f"seed {seed}: relative error {err:.3e} against the exact merge (fp32 partials: {err32:.3e})"
    assert torch.allclose(lse[:2], lse32[:2], atol=1e-5), f"seed {seed}: the LSE moved with the scales"


@pytest.mark.parametrize("heads,spread", [(16, 1.0), (16, 146.0 * 448.0), (4, 146.0 * 448.0)])
def test_the_reduction_merges_fp16_partials_as_fp32_ones(heads, spread):
    """The reduction (through the interpreter) given the same random partials as fp32 and as fp16: three requests
    split into 5 / 2 / 1 segments (the last written whole: untouched), values up to ``spread`` (the largest an fp8
    cache at the largest fp16 scale gives, 146 x 448), random LSEs; each output within fp16's rounding of the
    fp32-partials output, none infinite, both against the exact merge in float64."""
    from graphtune.kernels.mla_decode import reduction
    seed = _seed()
    gen = torch.Generator().manual_seed(seed)
    segs = [(0, 4), (5, 6), (7, 7)]
    slots = 8
    part32 = (torch.rand(slots, heads, 512, generator=gen) * 2 - 1) * spread
    part_lse = torch.randn(slots, heads, generator=gen) * 4
    seg = torch.tensor(segs, dtype=torch.int32)
    lens = torch.tensor([300, 100, 50], dtype=torch.int32)
    w = torch.zeros(3, slots, heads, dtype=torch.float64)
    for b, (first, last) in enumerate(segs):
        w[b, first:last + 1] = torch.softmax(part_lse[first:last + 1].double() * math.log(2), dim=0)
    exact = torch.einsum("bsh,shd->bhd", w, part32.double())
    outs = {}
    for dtype in (torch.float32, torch.float16):
        out = torch.full((3, heads, 512), float("nan"), dtype=torch.bfloat16)
        out[2] = 0      # (request 2 was written whole by its split kernel: the reduction leaves it)
        lse = torch.empty(3, heads)
        reduction.merge(3, heads, seg, part32.to(dtype), part_lse, out, lse, lens, True)
        assert torch.isfinite(out.float()).all(), f"seed {seed}: {dtype}: infinite or unwritten outputs"
        outs[dtype] = out[:2].double()
    ref = exact[:2]
    for dtype, got in outs.items():
        err = float((got - ref).norm() / ref.norm())
        assert err <= 4e-3, f"seed {seed}: {dtype} partials, relative error {err:.3e} against the exact merge"


CONFIG_CASES = [
    ("widen-first-QK8=0", dict(QK8=0)),
    ("hw-cvt-CONVERT=0", dict(CONVERT=0)),
    ("pure-asm-CONVERT=2", dict(CONVERT=2)),
    ("BLOCK_N=32-two-per-SM", dict(BLOCK_N=32, PROGRAMS_PER_SM=2)),
]


@pytest.mark.parametrize("overrides", [c[1] for c in CONFIG_CASES], ids=[c[0] for c in CONFIG_CASES])
@pytest.mark.parametrize("kv_format", ["fp8", "fp8_ds_mla"])
def test_config_paths(overrides, kv_format):
    seed = _seed()
    x = make_case(3, 16, 16, kv_format, [45, 1, 70], torch.Generator().manual_seed(seed))
    out = torch.full((3, 16, 512), float("nan"), dtype=torch.bfloat16)
    interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.06, x["kv_scale"], kv_format, out,
                      False, config=_config(**overrides), num_sms=3)
    ref = mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.06, kv_scale=x["kv_scale"])
    assert torch.isfinite(out.float()).all(), f"seed {seed}: unwritten outputs"
    assert rel_err(out, ref) <= TOL, f"seed {seed}: relative error {rel_err(out, ref):.3e}"


def test_tuned_split_kernels_are_timed_with_their_reduction():
    """Every tuned MLA split kernel (portable and Hopper) is tuned with the reduction after each timed launch
    (``graphtune.autotune(followed_by=reduction.after_split)``: configs with more programs leave more partials), and
    that follow-up, given a split launch's arguments by name, merges its partials into the decode's output and LSE
    (the portable kernel here, under the interpreter; every split kernel writes the same partials)."""
    from graphtune.kernels.mla_decode import interface_hopper, kernel, reduction
    tuned = [interface._tuned_kernel(), *(interface_hopper.tuned_kernel(m, f) for m in (True, False)
                                          for f in (True, False)),
             *(interface_hopper.tuned_second_kernel(m, f) for m, f in interface_hopper.SECOND),
             *(interface_hopper.tuned_second_kernel(m, f, third=True) for m, f in interface_hopper.THIRD),
             *(interface_hopper.tuned_second_kernel(False, f, gather=True) for f in interface_hopper.GATHER)]
    # (the Hopper kernels' follow-up launches it as the decode does after them: a programmatic dependent from
    # reduction.PDL_MIN_BATCH requests up)
    assert tuned[0].space.followed_by is reduction.after_split
    assert all(k.space.followed_by is reduction.after_hopper_split for k in tuned[1:]), [k.name for k in tuned]
    seed = _seed()
    lens = [45, 1, 70, 9]
    x = make_case(len(lens), 16, 16, "fp8", lens, torch.Generator().manual_seed(seed))
    out = torch.full((len(lens), 16, 512), float("nan"), dtype=torch.bfloat16)
    config = space.INTERPRET_CONFIG
    args, grid, (lse, _, _, _) = interface.split_call(
        x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.06, x["kv_scale"], "fp8", out, True, sms=3,
        programs_per_sm=config.kwargs["PROGRAMS_PER_SM"])
    kernel._mla_decode_split_kernel[grid](*args, **config.all_kwargs())
    reduction.after_split({**dict(zip(kernel._mla_decode_split_kernel.arg_names, args)), **config.all_kwargs()})
    ref, ref_lse = mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.06,
                                        kv_scale=x["kv_scale"], return_lse=True)
    assert torch.isfinite(out.float()).all(), f"seed {seed}: unwritten outputs"
    assert rel_err(out, ref) <= TOL, f"seed {seed}: relative error {rel_err(out, ref):.3e}"
    assert float((lse - ref_lse).abs().max()) <= LSE_TOL, f"seed {seed}: lse"


def test_public_api_tensor_scale_and_many_request_chunks(monkeypatch):
    """kv_scale as a device tensor; more requests than one B_CHUNK step of the on-device tile count."""
    monkeypatch.setattr(interface, "_B_CHUNK", 4)
    seed = _seed()
    lens = [5, 1, 17, 2, 33, 9, 1, 26, 12]
    x = make_case(len(lens), 16, 16, "fp8", lens, torch.Generator().manual_seed(seed))
    scale = torch.tensor([x["kv_scale"]], dtype=torch.float32)
    got = mla_decode(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.05, kv_scale=scale)
    ref = mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.05, kv_scale=scale)
    assert got.shape == (len(lens), 16, 512) and got.dtype == torch.bfloat16
    assert rel_err(got, ref) <= TOL, f"seed {seed}"


@pytest.mark.parametrize("lens", [[16, 800, 16, 16, 16, 16, 16, 16, 16], [0, 800, 16, 0, 16, 5, 16, 16, 0, 33]],
                         ids=["long-first-chunk", "with-padding"])
def test_split_past_a_request_longer_than_the_programs_share(monkeypatch, lens):
    """More requests than one B_CHUNK step (4 here, 128 shipped) with a request in the first chunk that spans the
    program boundaries: a program starting inside it must start there, not count the next chunk's short requests
    as done (until session 13 a chunk's ends started from where the done requests ended, so program 1 of 3 took
    request 5 as its first and request 1 lost its middle)."""
    monkeypatch.setattr(interface, "_B_CHUNK", 4)
    seed = _seed()
    x = make_case(len(lens), 16, 16, "fp8", lens, torch.Generator().manual_seed(seed))
    out = torch.full((len(lens), 16, 512), float("nan"), dtype=torch.bfloat16)
    got = mla_decode(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.05, kv_scale=x["kv_scale"], out=out)
    ref = mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.05, kv_scale=x["kv_scale"])
    assert torch.isfinite(got.float()).all(), f"seed {seed}: unwritten outputs"
    assert rel_err(got, ref) <= TOL, f"seed {seed}: relative error {rel_err(got, ref):.3e}"


def test_negative_lengths_count_as_no_tokens(monkeypatch):
    """A negative seq_len is outside the contract (GRAPHTUNE_CHECK=1 rejects it); unchecked, the split takes it as a
    request of no tokens (zeros, LSE -inf, the others right) instead of a negative tile count that shifted every
    program's start (session 13's review)."""
    monkeypatch.setattr(interface, "_B_CHUNK", 4)
    seed = _seed()
    lens = [-20, 33, -1, 17, -64, 5, 40]
    live = [n > 0 for n in lens]
    x = make_case(len(lens), 16, 16, "fp8", [max(n, 1) for n in lens], torch.Generator().manual_seed(seed))
    x["seq_lens"] = torch.tensor(lens, dtype=torch.int32)
    keep = torch.tensor(live)
    ref, ref_lse = mla_decode_reference(x["q"][keep], x["kv_cache"], x["page_table"][keep], x["seq_lens"][keep], 0.05,
                                        kv_scale=x["kv_scale"], return_lse=True)
    out = torch.full((len(lens), 16, 512), float("nan"), dtype=torch.bfloat16)
    got, lse = interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.05, x["kv_scale"], "fp8",
                                 out, True, num_sms=3)
    assert (got[~keep] == 0).all() and (lse[~keep] == float("-inf")).all(), f"seed {seed}: negative lengths"
    assert rel_err(got[keep], ref) <= TOL, f"seed {seed}: relative error {rel_err(got[keep], ref):.3e}"
    assert float((lse[keep] - ref_lse).abs().max()) <= LSE_TOL, f"seed {seed}: lse"


# ------------------------------------------------------------------------------------ parent process


def test_interpreted_kernel_cases():
    """Run this file's kernel cases under TRITON_INTERPRET=1 in a child process."""
    env = {**os.environ, "TRITON_INTERPRET": "1", _CHILD_FLAG: "1"}
    # The interpreter converts 0-d loop bounds through numpy, which warns (DeprecationWarning) per loop.
    proc = subprocess.run([sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider",
                           "-W", "ignore::DeprecationWarning",
                           ],
                          env=env, capture_output=True, text=True, timeout=900)
    tail = (proc.stdout[-8000:] + "\n" + proc.stderr[-4000:]).strip()
    assert proc.returncode == 0, f"interpreted cases failed (exit {proc.returncode}):\n{tail}"
    assert " passed" in proc.stdout and " failed" not in proc.stdout, tail


def _good(**changes):
    gen = torch.Generator().manual_seed(7)
    x = make_case(2, 16, 16, "fp8", [20, 33], gen)
    args = dict(q=x["q"], kv_cache=x["kv_cache"], page_table=x["page_table"], seq_lens=x["seq_lens"],
                sm_scale=0.05, kv_scale=x["kv_scale"])
    args.update(changes)
    return args


def _call(args):
    args = dict(args)
    return mla_decode(args.pop("q"), args.pop("kv_cache"), args.pop("page_table"), args.pop("seq_lens"),
                      args.pop("sm_scale"), **args)


BAD = [
    ("q-dtype", lambda a: dict(q=a["q"].half()), r"q: dtype torch.float16"),
    ("q-last-dim", lambda a: dict(q=a["q"][..., :512].contiguous()), r"q: shape \(2, 16, 512\)"),
    ("q-2d", lambda a: dict(q=a["q"][0]), r"q: shape \(16, 576\) has 2 dims"),
    ("q-not-contiguous", lambda a: dict(q=a["q"].transpose(1, 2).contiguous().transpose(1, 2)),
     r"q: last dimension must be contiguous"),
    ("kv-dtype", lambda a: dict(kv_cache=a["kv_cache"].float()), r"kv_cache: dtype torch.float32, expected torch.float8_e4m3fn or torch.bfloat16 or torch.uint8"),
    ("kv-format-mismatch", lambda a: dict(kv_format="fp8_ds_mla"), r"kv_cache: dtype torch.float8_e4m3fn does not"),
    ("kv-format-unknown", lambda a: dict(kv_format="int4"), r"kv_format: 'int4'"),
    ("page-table-dtype", lambda a: dict(page_table=a["page_table"].long()), r"page_table: dtype torch.int64"),
    ("page-table-batch", lambda a: dict(page_table=a["page_table"][:1]), r"page_table: shape \(1, \d+\), expected \[2"),
    ("seq-lens-shape", lambda a: dict(seq_lens=a["seq_lens"][:1]), r"seq_lens: shape \(1,\), expected \[2\]"),
    ("seq-len-too-long", lambda a: dict(seq_lens=torch.tensor([20, 10_000], dtype=torch.int32)),
     r"seq_lens: requests \{1: 10000\} outside \[0, \d+\]"),
    ("seq-len-negative", lambda a: dict(seq_lens=torch.tensor([-1, 5], dtype=torch.int32)),
     r"seq_lens: requests \{0: -1\} outside \[0, "),
    ("page-id-out-of-range", lambda a: dict(page_table=a["page_table"].clone().fill_(10_000)),
     r"page_table: page ids out of range \[0, \d+\) at \(request, slot, id\) \[\(0, 0, 10000\)"),
    ("page-id-negative", lambda a: dict(page_table=a["page_table"].clone().fill_(-1)),
     r"page_table: page ids out of range"),
    ("device-mismatch", lambda a: dict(seq_lens=a["seq_lens"].to("meta")), r"seq_lens: on device meta"),
    ("kv-scale-for-bf16", lambda a: dict(kv_cache=a["kv_cache"].bfloat16(), kv_scale=0.5),
     r"kv_scale: 0.5 given with kv_format='bf16'"),
    ("kv-scale-tensor-dtype", lambda a: dict(kv_scale=torch.tensor([0.5], dtype=torch.float64)),
     r"kv_scale: tensor of shape \(1,\), dtype torch.float64"),
    ("sm-scale-nan", lambda a: dict(sm_scale=float("nan")), r"sm_scale: nan"),
    ("sm-scale-zero", lambda a: dict(sm_scale=1 // 24), r"sm_scale: 0, expected a finite float > 0"),
    ("sm-scale-negative", lambda a: dict(sm_scale=-0.05), r"sm_scale: -0.05"),
    ("kv-scale-zero", lambda a: dict(kv_scale=0.0), r"kv_scale: 0.0, expected a finite float > 0"),
    ("kv-scale-tensor-nan", lambda a: dict(kv_scale=torch.tensor([float("nan")])), r"kv_scale: tensor holding nan"),
    ("kv-scale-tensor-negative", lambda a: dict(kv_scale=torch.tensor([-0.5])), r"kv_scale: tensor holding -0.5"),
    ("out-shape", lambda a: dict(out=torch.empty(2, 16, 576, dtype=torch.bfloat16)), r"out: shape \(2, 16, 576\)"),
    ("query-precision-unknown", lambda a: dict(query_precision="fp8"),
     r"query_precision: 'fp8', expected one of \['bf16', 'e4m3'\]"),
    ("query-precision-not-str", lambda a: dict(query_precision=16), r"query_precision: 16, expected one of"),
    ("query-precision-e4m3-bf16", lambda a: dict(kv_cache=a["kv_cache"].bfloat16(), kv_scale=1.0,
                                                 query_precision="e4m3"),
     r"query_precision: 'e4m3' applies to an fp8 cache \(kv_format 'fp8' or 'fp8_ds_mla'\), not 'bf16'"),
    ("q-scale-with-bf16-q", lambda a: dict(q_scale=2.0), r"q_scale: 2.0 given with a bf16 query"),
    ("fp8-q-without-scale", lambda a: dict(q=a["q"].to(torch.float8_e4m3fn)), r"q_scale: None: an e4m3 query needs"),
    ("fp8-q-scale-zero", lambda a: dict(q=a["q"].to(torch.float8_e4m3fn), q_scale=0.0), r"q_scale: 0.0, expected"),
    ("fp8-q-scale-tensor", lambda a: dict(q=a["q"].to(torch.float8_e4m3fn), q_scale=torch.ones(2)),
     r"q_scale: tensor of shape \(2,\)"),
    ("fp8-q-scale-tensor-nan", lambda a: dict(q=a["q"].to(torch.float8_e4m3fn), q_scale=torch.tensor([float("nan")])),
     r"q_scale: tensor holding nan"),
    ("fp8-q-scale-tensor-zero", lambda a: dict(q=a["q"].to(torch.float8_e4m3fn), q_scale=torch.zeros(1, 1)),
     r"q_scale: tensor holding 0.0, expected a finite value > 0"),
    ("fp8-q-bf16-precision", lambda a: dict(q=a["q"].to(torch.float8_e4m3fn), q_scale=1.0, query_precision="bf16"),
     r"query_precision: 'bf16' with an e4m3 query"),
    ("fp8-q-bf16-cache", lambda a: dict(q=a["q"].to(torch.float8_e4m3fn), q_scale=1.0,
                                        kv_cache=a["kv_cache"].bfloat16(), kv_scale=1.0),
     r"q: dtype torch.float8_e4m3fn \(an e4m3 query\) needs an fp8 cache"),
]


@pytest.mark.parametrize("change,match", [(b[1], b[2]) for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_raises_value_error(change, match):
    args = _good()
    args.update(change(args))
    with pytest.raises(ValueError, match=match):
        _call(args)


def test_an_e4m3_querys_bf16_copy_keeps_its_shape_for_any_one_element_scale():
    """``interface_hopper.dequantize_query`` (the Hopper kernels that do not read an e4m3 query take its bf16 value):
    a scale tensor of shape [1, 1, 1] is the scalar it holds (multiplied as it is, it broadcast the query to four
    dims, and the launch then failed on the query's shape)."""
    from graphtune.kernels.mla_decode import interface_hopper
    q8 = (torch.randn(3, 16, 576, generator=torch.Generator().manual_seed(_seed())) * 8).to(torch.float8_e4m3fn)
    for scale in (0.25, torch.tensor([0.25]), torch.tensor([[[0.25]]]), torch.tensor(0.25)):
        got = interface_hopper.dequantize_query(q8, scale)
        assert got.shape == q8.shape and got.dtype == torch.bfloat16
        assert torch.equal(got, (q8.float() / 4).bfloat16())     # (exact: a power-of-two scale)


def test_bad_input_unused_page_slots_may_hold_anything():
    """Only the slots a request uses are checked: padding ids beyond seq_len are not an error."""
    args = _good()
    table = args["page_table"].clone()
    table[0, -1] = 10_000    # request 0 has 20 tokens = 2 pages of 16; the last slot is padding
    args["page_table"] = table
    interface._check_contents(args["kv_cache"], table, args["seq_lens"])   # no error


# ----------------------------------------------------------------- targets: sm_120 and the Hopper path


def test_portable_space_fits_sm120_or_is_excluded():
    """Every config of the portable space compiles for sm_120 (no GPU) and fits its 101,376 B of shared
    memory per block, or is listed in space.SM120_EXCLUDED with its reason: exactly those, for every format (and
    for the fp8 formats' e4m3 query too)."""
    from graphtune import inspect
    from graphtune.configs import config_label
    from graphtune.kernels.mla_decode import kernel
    fitting = {}
    for kv_format in ("fp8", "bf16", "fp8_ds_mla"):
        signature, constexprs = interface.inspect_signature(16, 64, kv_format)
        rows = inspect(kernel._mla_decode_split_kernel, target="sm_120", signature=signature, constexprs=constexprs,
                       configs=space.CONFIGS)
        assert len(rows) == len(space.CONFIGS)
        for config, row in zip(space.CONFIGS, rows):
            label = config_label(config)
            assert row.registers is not None, f"{kv_format} {label} did not compile for sm_120: {row.reason}"
            if row.fits:
                assert label not in space.SM120_EXCLUDED, f"{kv_format} {label} fits sm_120 but is excluded"
                fitting.setdefault(kv_format, []).append(label)
            else:
                assert label in space.SM120_EXCLUDED, f"{kv_format} {label} does not fit sm_120: {row.reason}"
                assert row.reason == f"needs {row.shared_bytes} B shared memory, sm_120 allows 101376 B per block"
        # what runs when nothing is tuned must fit too
        assert config_label(space.default_for(kv_format)) in fitting[kv_format]
        if kv_format != "bf16":
            # query_precision="e4m3" (Q_LO 0: one fp8 dot a chunk): every config compiles and needs no more shared
            # memory than with the pair (registers are the allocator's: 255 against 254 under triton 3.9), so
            # SM120_EXCLUDED holds for it too
            single = inspect(kernel._mla_decode_split_kernel, target="sm_120", signature=signature,
                             constexprs={**constexprs, "Q_LO": 0}, configs=space.CONFIGS)
            for config, row, pair in zip(space.CONFIGS, single, rows):
                label = config_label(config)
                assert row.registers is not None, f"{kv_format} {label}, Q_LO 0: did not compile: {row.reason}"
                assert row.shared_bytes <= pair.shared_bytes, (label, row.shared_bytes, pair.shared_bytes)
                assert row.fits or label in space.SM120_EXCLUDED, f"{kv_format} {label}, Q_LO 0: {row.reason}"


# The Triton release whose ptxas the Hopper kernels' wgmma schedule was written against and timed with on the H200
SCHEDULED_WITH_THIS_TRITON = __import__("triton").__version__.startswith("3.6.")


def compile_sm90(fn, args, consts: dict, options: dict | None = None):
    """Triton's compile of Gluon kernel ``fn`` for sm_90 on the CPU with a launch's positional ``args`` and
    constexprs (those left out at their defaults), specialised as a launch on the GPU specialises them: every
    pointer 16-byte aligned, an integer argument divisible by 16 marked so and one equal to 1 made a constant, except
    the kernel's ``do_not_specialize`` ones. (Without the integers' divisibility the compile differs from the GPU's:
    e.g. stores that the GPU's build vectorises along a stride-1 dim stay scalar.) ``options``: more compile options
    (e.g. ``ir_override``, a PTX file taken in place of the compiler's)."""
    import triton
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend, GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from graphtune import resources
    names = list(fn.arg_names)
    # (a launch's keyword arguments that are tensors, e.g. a scale's pointer, are arguments, not constants)
    keywords = {n: v for n, v in consts.items() if isinstance(v, torch.Tensor)}
    consts = {n: v for n, v in consts.items() if n not in keywords}
    consts = {**{p.name: p.default for p in fn.params if p.is_constexpr and p.name not in consts and p.has_default},
              **consts}
    values = {**dict(zip([n for n in names if n not in consts and n not in keywords], args)), **keywords}
    # (an argument left out at its default, e.g. a diagnostic pointer defaulting to None, is a constant of the launch)
    consts.update({p.name: p.default for p in fn.params if p.name not in consts and p.name not in values
                   and p.has_default})
    keep = {p.name for p in fn.params if p.do_not_specialize}
    signature, attrs = {}, {}
    for i, n in enumerate(names):
        if n in consts:
            signature[n] = "constexpr"
            continue
        ty, key = native_specialize_impl(BaseBackend, values[n], False, n not in keep, True)
        if ty == "constexpr":           # (an integer equal to 1)
            signature[n] = "constexpr"
            consts[n] = key
        else:
            signature[n] = ty
            if key:
                attrs[(i,)] = BaseBackend.parse_attr(key)
    # tests/cpu set TRITON_INTERPRET=1: compile with the switch off (as graphtune.inspect does)
    with resources._compiler_mode(fn):
        return triton.compile(GluonASTSource(fn, signature, consts, attrs), target=GPUTarget("cuda", 90, 32),
                              options=dict(num_warps=consts["num_warps"], **(options or {})))


def _compile_reduction(blocks: tuple[int, int, int, int], *, partial: str = "fp32", return_lse: bool = True,
                       pdl: bool = True, divisible: bool = False, scaled: bool = False, seg_early: bool = False,
                       stream: bool = False, split_bh: int = 16, writers: int = 1):
    """The reduction kernel compiled for sm_90 on the CPU with ``blocks`` = ``(BLOCK_S, BLOCK_H, BLOCK_D, num_warps)``
    over ``partial`` partials (``divisible``: its pointers and integers marked divisible by 16, as a launch
    specialises them; ``scaled``: a bf16 cache's scaled fp16 partials; ``stream``: given the counters,
    ``done_ptr``, as the streamed reduction is)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from graphtune import resources
    from graphtune.kernels.mla_decode import kernel
    fn = kernel._mla_decode_reduce_kernel
    if resources._is_interpreted(fn):    # (tests/cpu: triton.jit made an InterpretedFunction of it)
        fn = resources._jit_twin(fn)
    signature = {**{n: "*i32" for n in ("seg_ptr", "seq_lens_ptr")}, "part_o_ptr": f"*{partial}",
                 **{n: "*fp32" for n in ("part_lse_ptr", "lse_ptr")}, "out_ptr": "*bf16",
                 **{n: "i32" for n in ("H", "stride_po_s", "stride_po_h", "stride_pl_s", "stride_out_b",
                                       "stride_out_h")},
                 **{n: "constexpr" for n in ("RETURN_LSE", "BLOCK_S", "BLOCK_D", "BLOCK_H", "PDL", "SCALED",
                                             "SEG_EARLY", "SPLIT_BH", "WRITERS")},
                 "done_ptr": "*i32" if stream else "constexpr"}
    names = list(fn.arg_names)
    attrs = ({(names.index(n),): [["tt.divisibility", 16]] for n, t in signature.items() if t != "constexpr"}
             if divisible else None)
    block_s, block_h, block_d, warps = blocks
    consts = dict(RETURN_LSE=return_lse, BLOCK_S=block_s, BLOCK_D=block_d, BLOCK_H=block_h, PDL=pdl, SCALED=scaled,
                  SEG_EARLY=seg_early, SPLIT_BH=split_bh, WRITERS=writers, **({} if stream else {"done_ptr": None}))
    with resources._compiler_mode(fn):
        return triton.compile(triton.compiler.ASTSource(fn, signature, consts, attrs),
                              target=GPUTarget("cuda", 90, 32), options=dict(num_warps=warps, launch_pdl=pdl))


@pytest.mark.parametrize("pdl", [False, True])
def test_reduction_compiles_for_sm90_and_waits_on_its_grid_dependency_first(pdl):
    """The reduction with ``PDL`` (launched as a programmatic dependent of the split kernel): its first
    instruction of grid dependency control, ``griddepcontrol.wait``, comes before any load (the split kernel's
    writes must be visible to all of them); without it, no such instruction. Both block shapes compile without
    local memory."""
    from graphtune import resources
    shapes = {interface.reduce_blocks(batch, interface.max_partials(132, batch, 1), heads)
              for heads in (16, 128) for batch in (1, 8, 64, 128)}
    for block_s, block_h, block_d, warps in shapes:
        compiled = _compile_reduction((block_s, block_h, block_d, warps), pdl=pdl)
        ptx = compiled.asm["ptx"]
        body = ptx[ptx.index("{", ptx.index(".entry")):]
        first_load = body.index("ld.global")
        if pdl:
            assert 0 <= body.find("griddepcontrol.wait") < first_load, f"{block_s, block_d}: waits after a load"
        else:
            assert "griddepcontrol" not in body
        usage = resources._resource_usage(compiled.asm["cubin"], compiled.metadata.name)
        assert usage["LOCAL"] == 0 and usage["REG"] <= 255, f"{block_s, block_d}: {usage}"


def test_reduction_reads_a_plans_slots_before_its_wait():
    """``SEG_EARLY`` (the slots a step's plan wrote, ``reduction.SEG_FROM_PLAN``): compiled for sm_90 with ``PDL``,
    the lengths' and slots' three loads come before ``griddepcontrol.wait`` and every other load after it (the
    partials are the split kernel's); without it every load follows the wait. At the block shapes the rule gives
    for H = 16 and 128, batch 8 to 128 on 132 SMs, fp16 and fp32 partials: no local memory."""
    from graphtune import resources
    from graphtune.kernels.mla_decode import reduction
    shapes = {(reduction.reduce_blocks(batch, interface.max_partials(132, batch, 1) + batch, heads, size), size)
              for heads in (16, 128) for batch in (8, 32, 64, 128) for size in (2, 4)}
    for blocks, size in shapes:
        for early in (False, True):
            compiled = _compile_reduction(blocks, partial="fp16" if size == 2 else "fp32", divisible=True,
                                          seg_early=early)
            ptx = compiled.asm["ptx"]
            body = ptx[ptx.index("{", ptx.index(".entry")):]
            wait = body.index("griddepcontrol.wait")
            loads_before = body[:wait].count("ld.global")
            assert loads_before == (3 if early else 0), f"{blocks}, early {early}: {loads_before} loads before the wait"
            assert body[wait:].count("ld.global") > 0
            usage = resources._resource_usage(compiled.asm["cubin"], compiled.metadata.name)
            assert usage["LOCAL"] == 0 and usage["REG"] <= 255, f"{blocks}: {usage}"


@pytest.mark.parametrize("partial", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_the_reduction_merges_alike_with_early_slots_and_sixteen_slots_a_step(partial):
    """The reduction (through the interpreter) over the same random partials, four requests of 10 / 3 / 1 / no
    segments (the third whole: untouched; the fourth of no tokens: zeros and an LSE of -inf): with 8 slots a step,
    with one step of 16 slots (a probe may pass other blocks), streamed (``done_ptr``: the counts as the split
    kernel leaves them, every count back at zero after), and with ``SEG_EARLY`` (its loads before the wait, which the interpreter
    does not run): the same output and LSE, each against the exact merge in float64."""
    from graphtune.kernels.mla_decode import kernel
    seed = _seed()
    gen = torch.Generator().manual_seed(seed)
    heads, segs = 16, [(0, 9), (10, 12), (13, 13), (14, 14)]
    slots = 15
    part = ((torch.rand(slots, heads, 512, generator=gen) * 2 - 1) * 3).to(partial)
    part_lse = torch.randn(slots, heads, generator=gen) * 4
    seg = torch.tensor(segs, dtype=torch.int32)
    lens = torch.tensor([900, 200, 50, 0], dtype=torch.int32)
    w = torch.zeros(2, slots, heads, dtype=torch.float64)
    for b, (first, last) in enumerate(segs[:2]):
        w[b, first:last + 1] = torch.softmax(part_lse[first:last + 1].double() * math.log(2), dim=0)
    exact = torch.einsum("bsh,shd->bhd", w, part.double())
    results = []
    for block_s, early, stream in ((8, False, False), (16, False, False), (16, True, False), (8, True, True)):
        out = torch.full((4, heads, 512), float("nan"), dtype=torch.bfloat16)
        out[2] = 1.0
        lse = torch.full((4, heads), float("nan"))
        warps = 4 if partial == torch.float32 else 2
        # (streamed: every partial segment counted, as the split kernel leaves them; the requests of 10 and 3 slots)
        counts = torch.zeros(2, 4, 4, dtype=torch.int32)
        counts[0, 0, 0], counts[0, 1, 0] = 10, 3
        kernel._mla_decode_reduce_kernel[(4, heads, 1)](
            seg, part, part_lse, out, lse, lens, heads, part.stride(0), part.stride(1), part_lse.stride(0),
            out.stride(0), out.stride(1), True, block_s, 512, 1, False, False, early, num_warps=warps,
            **({"done_ptr": counts} if stream else {}))
        where = f"seed {seed}, BLOCK_S {block_s}, SEG_EARLY {early}, streamed {stream}"
        if stream:
            assert not counts.any(), f"{where}: counts left {counts.nonzero().tolist()}"
        err = float((out[:2].double() - exact).norm() / exact.norm())
        assert err <= 4e-3, f"{where}: relative error {err:.3e}"
        assert bool((out[2] == 1.0).all()) and bool((out[3] == 0).all()), where
        assert bool((lse[3] == float("-inf")).all()), where
        results.append((out, lse))
    for out, lse in results[1:]:
        assert torch.equal(out, results[0][0]) or float((out.float() - results[0][0].float()).abs().max()) <= 2e-2
        assert torch.allclose(lse[:2], results[0][1][:2], atol=1e-5)


def test_the_streamed_reduction_waits_per_request_and_reads_past_the_l1():
    """With the plan's counters (``done_ptr``, ``reduction.STREAM``), compiled for sm_90 with ``PDL`` and
    ``SEG_EARLY`` at the block shapes the rule gives (H = 16 and 128, batch 8 to 128 on 132 SMs, fp16 and fp32
    partials; and as after the bf16 ping-pong kernel, 64-head groups of two counts a segment): the slots' loads, then
    the request's count read with acquire semantics a sleep apart, the grid's wait only as the fallback after it and
    again before the exit, the partials read ``.cg`` (L2: written while the grid runs), one relaxed atomic add for the
    readers' count; no local memory."""
    import re
    from graphtune import resources
    from graphtune.kernels.mla_decode import reduction
    shapes = {(reduction.reduce_blocks(batch, interface.max_partials(132, batch, 1) + batch, heads, size), size,
               (16, 1) if heads == 16 else geometry)
              for heads in (16, 128) for batch in (8, 32, 64, 128) for size in (2, 4) for geometry in ((16, 1), (64, 2))}
    for blocks, size, (group, writers) in shapes:
        compiled = _compile_reduction(blocks, partial="fp16" if size == 2 else "fp32", divisible=True,
                                      seg_early=True, stream=True, split_bh=group, writers=writers)
        ptx = compiled.asm["ptx"]
        body = ptx[ptx.index("{", ptx.index(".entry")):]
        events = [m.group(0) for m in re.finditer(
            r"griddepcontrol\.wait|ld\.global\.gpu\.acquire|ld\.global\.gpu\.relaxed|atom\.global\.gpu\.relaxed\.add|"
            r"ld\.global\.cg|ld\.global\.(?!gpu|cg)|nanosleep", body)]
        where = f"{blocks}: {events[:10]}"
        wait = events.index("griddepcontrol.wait")
        assert events[:3] == ["ld.global."] * 3, where                      # (the plan's slots and the length)
        assert set(events[3:wait]) == {"ld.global.gpu.acquire", "nanosleep"}, where
        assert "ld.global.gpu.relaxed" not in events and events.count("griddepcontrol.wait") == 2, where
        first_cg = events.index("ld.global.cg")
        assert wait < first_cg and "ld.global." not in events[3:], where
        assert events[-1] == "griddepcontrol.wait" and events.count("atom.global.gpu.relaxed.add") == 1, where
        usage = resources._resource_usage(compiled.asm["cubin"], compiled.metadata.name)
        assert usage["LOCAL"] == 0 and usage["REG"] <= 255, f"{blocks}: {usage}"


class _KernelStub:
    """A stand-in for a kernel launched as ``kernel[grid](*args, **consts)``: each launch calls ``record(grid, args,
    consts)`` (nothing runs)."""

    def __init__(self, record=None):
        self.record = record or (lambda grid, args, consts: None)

    def __getitem__(self, grid):
        return lambda *args, **consts: self.record(grid, args, consts)


def test_streamed_launches_hand_the_plans_counters_to_the_split_and_the_reduction(monkeypatch):
    """``reduction.STREAM``: the second fp8 tokens-on-M kernel's launch (a per-tensor fp8 cache, fp8_ds_mla rows with
    ``STREAM_DS``; not bf16, T8 or without SEG_FROM_PLAN) gets the plan's counters as ``done_ptr`` (zeros, ``[2, batch, STREAM_GROUPS]``);
    where the config that filled the plan counts (two buffers, ``kernel_hopper.STREAM_MAX_BUF``) the launch's ``seg`` is
    a view of the plan's slots that carries them (``reduction.streamed``), which the reduction's launch passes on as
    ``done_ptr`` (a three-buffer config: the plain slots; the view made once for the plan); the tuner's follow-up
    likewise by the config's ``NUM_BUF``, streamed where the plan's slots are reachable and, from rows that lead to none
    (not made by ``plan.attach``), merged plainly with the counts cleared."""
    from graphtune.kernels.mla_decode import MLADecodePlan, interface_hopper, kernel, kernel_hopper, plan as plan_mod
    from graphtune.kernels.mla_decode import reduction
    lens, pt = torch.ones(3, dtype=torch.int32), torch.zeros(3, 2, dtype=torch.int32)
    plan = MLADecodePlan()
    rows = plan_mod.attach(plan, lens, pt, 64, 66, lambda config: 66, 128, slots=True, counts=True)
    counts = plan.counters()
    assert tuple(counts.shape) == (2, 3, int(kernel_hopper.STREAM_GROUPS)) and not counts.any()
    assert int(kernel.STREAM_GROUPS) == int(kernel_hopper.STREAM_GROUPS)   # (the reduction's and the split's layout)
    monkeypatch.setattr(reduction, "STREAM", False)
    assert not interface_hopper._streams("fp8", "V2")
    monkeypatch.setattr(reduction, "STREAM", True)
    assert interface_hopper._streams("fp8", "V2")
    # (fp8_ds_mla rows with STREAM_DS, on since its GPU run in session 55)
    assert reduction.STREAM_DS
    monkeypatch.setattr(reduction, "STREAM_DS", False)
    assert not interface_hopper._streams("fp8_ds_mla", "V2")
    monkeypatch.setattr(reduction, "STREAM_DS", True)
    assert interface_hopper._streams("fp8_ds_mla", "V2")
    # (the bf16 ping-pong kernel only with STREAM_PP: its GPU test passed in session 55, off as not faster)
    assert not reduction.STREAM_PP and not interface_hopper._streams("bf16", "PP")
    monkeypatch.setattr(reduction, "STREAM_PP", True)
    assert interface_hopper._streams("bf16", "PP", 128) and interface_hopper._streams("bf16", "PP", 256)
    assert not interface_hopper._streams("fp8", "PP", 128)
    assert not interface_hopper._streams("bf16", "PP", 512)     # (five 64-head groups: the counters hold four)
    monkeypatch.setattr(reduction, "STREAM_PP", False)
    for fmt, reads in (("bf16", "V2"), ("fp8", "T8"), ("fp8", None), ("bf16", None)):
        assert not interface_hopper._streams(fmt, reads), (fmt, reads)
    monkeypatch.setattr(reduction, "SEG_FROM_PLAN", False)
    assert not interface_hopper._streams("fp8", "V2")
    monkeypatch.setattr(reduction, "SEG_FROM_PLAN", True)
    with pytest.raises(ValueError, match="no counters before"):
        MLADecodePlan().counters()

    monkeypatch.setattr(kernel_hopper, "_mla_decode_plan_kernel", _KernelStub())
    scratch = ("lse", "part_o", "part_lse", "seg")
    plan_mod.plan_hook({"plan_ptr": rows, "NUM_BUF": 3})
    assert not plan.counted() and interface_hopper._with_plan_slots(
        scratch, {"plan_ptr": rows, "done_ptr": counts})[3] is plan.slots()
    plan_mod.plan_hook({"plan_ptr": rows, "NUM_BUF": 2})
    assert plan.counted() and plan_mod.counted_of(rows) and not plan_mod.counted_of(rows.clone())
    seg = interface_hopper._with_plan_slots(scratch, {"plan_ptr": rows, "done_ptr": counts})[3]
    assert seg.data_ptr() == plan.slots().data_ptr() and reduction.planned_slots(seg)
    assert reduction.streamed_counts(seg) is counts and reduction.streamed_counts(plan.slots()) is None
    assert interface_hopper._with_plan_slots(scratch, {"plan_ptr": rows, "done_ptr": counts})[3] is seg
    assert reduction.streamed_counts(interface_hopper._with_plan_slots(scratch, {"plan_ptr": rows})[3]) is None
    launched = []
    monkeypatch.setattr(kernel, "_mla_decode_reduce_kernel",
                        _KernelStub(lambda grid, args, consts: launched.append(consts.get("done_ptr"))))
    out = torch.empty(3, 16, 512, dtype=torch.bfloat16)
    part = torch.empty(70, 16, 512, dtype=torch.float16)
    part_lse = torch.empty(70, 16)
    reduction.merge(3, 16, seg, part, part_lse, out, torch.empty(3, 16), lens, False)
    reduction.merge(3, 16, plan.slots(), part, part_lse, out, torch.empty(3, 16), lens, False)
    assert launched[0] is counts and launched[1] is None
    named = dict(B=3, H=16, seg_ptr=plan.slots(), part_o_ptr=part, part_lse_ptr=part_lse, out_ptr=out,
                 lse_ptr=torch.empty(3, 16), seq_lens_ptr=lens, RETURN_LSE=0, plan_ptr=rows, done_ptr=counts)
    reduction.after_hopper_split(named)
    assert launched[2] is counts
    copy = counts.clone().fill_(5)       # (rows that lead to no slots: a plain tensor)
    reduction.after_hopper_split({**named, "plan_ptr": rows.clone(), "done_ptr": copy})
    assert launched[3] is None and not copy.any()
    reduction.after_hopper_split({**named, "NUM_BUF": 3})       # (a config that does not count)
    assert launched[4] is None


def test_the_ping_pong_kernels_stream_geometry_reaches_the_reduction(monkeypatch):
    """A plan filled for the bf16 ping-pong kernel (``PP``) records its stream geometry (64-head groups, two counts a
    segment: each warpgroup counts its half), a tokens-on-M config the default (16, 1); the launch's ``seg`` and the
    tuner's follow-up carry it to the reduction's launch as ``SPLIT_BH`` / ``WRITERS``."""
    from graphtune.kernels.mla_decode import MLADecodePlan, interface_hopper, kernel, kernel_hopper, plan as plan_mod
    from graphtune.kernels.mla_decode import reduction

    monkeypatch.setattr(kernel_hopper, "_mla_decode_plan_kernel", _KernelStub())
    launched = []
    monkeypatch.setattr(kernel, "_mla_decode_reduce_kernel",
                        _KernelStub(lambda grid, args, consts: launched.append(consts)))
    lens, pt = torch.ones(3, dtype=torch.int32), torch.zeros(3, 2, dtype=torch.int32)
    plan = MLADecodePlan()
    rows = plan_mod.attach(plan, lens, pt, 64, 132, lambda config: 132, 128, fp8=False, slots=True, counts=True)
    counts = plan.counters()
    assert plan_mod.geometry_of(rows) == (16, 1) and plan_mod.geometry_of(rows.clone()) == (16, 1)
    plan_mod.plan_hook({"plan_ptr": rows, "PP": 1, "BLOCK_H": 64})
    assert plan.counted() and plan.stream_geometry() == (64, 2) == plan_mod.geometry_of(rows)
    scratch = ("lse", "part_o", "part_lse", "seg")
    seg = interface_hopper._with_plan_slots(scratch, {"plan_ptr": rows, "done_ptr": counts})[3]
    assert reduction.streamed_counts(seg) is counts and seg._graphtune_geometry == (64, 2)
    out = torch.empty(3, 128, 512, dtype=torch.bfloat16)
    part, part_lse = torch.empty(70, 128, 512), torch.empty(70, 128)
    reduction.merge(3, 128, seg, part, part_lse, out, torch.empty(3, 128), lens, False)
    assert launched[-1]["done_ptr"] is counts and (launched[-1]["SPLIT_BH"], launched[-1]["WRITERS"]) == (64, 2)
    named = dict(B=3, H=128, seg_ptr=plan.slots(), part_o_ptr=part, part_lse_ptr=part_lse, out_ptr=out,
                 lse_ptr=torch.empty(3, 128), seq_lens_ptr=lens, RETURN_LSE=0, plan_ptr=rows, done_ptr=counts,
                 PP=1, BLOCK_H=64)
    reduction.after_hopper_split(named)
    assert launched[-1]["done_ptr"] is counts and (launched[-1]["SPLIT_BH"], launched[-1]["WRITERS"]) == (64, 2)
    plan_mod.plan_hook({"plan_ptr": rows, "NUM_BUF": 2, "BLOCK_H": 16})      # (a tokens-on-M config again)
    assert plan.stream_geometry() == (16, 1)
    seg = interface_hopper._with_plan_slots(scratch, {"plan_ptr": rows, "done_ptr": counts})[3]
    reduction.merge(3, 16, seg, part[:, :16], part_lse[:, :16], out[:, :16], torch.empty(3, 16), lens, False)
    assert launched[-1]["done_ptr"] is counts and (launched[-1]["SPLIT_BH"], launched[-1]["WRITERS"]) == (16, 1)


@pytest.mark.parametrize("num_buf", [2, 3])
def test_a_streamed_pinned_launch_hands_the_plans_counters_to_the_split_kernel(num_buf, monkeypatch):
    """``reduction.STREAM`` on, the second fp8 tokens-on-M kernel pinned with a plan (its launch stubbed): the kernel
    gets the plan's counters as ``done_ptr`` (made with the plan's rows, before its fill) and the launch's ``seg``
    carries them to the reduction where the config counts (two buffers), not with three."""
    from graphtune.kernels.mla_decode import MLADecodePlan, interface_hopper, kernel_hopper, kernel_hopper_tok
    from graphtune.kernels.mla_decode import reduction
    monkeypatch.setattr(reduction, "STREAM", True)
    launches = []

    class PlanKernel:
        def __getitem__(self, grid):
            return lambda *args, **consts: None
    monkeypatch.setattr(kernel_hopper, "_mla_decode_plan_kernel", PlanKernel())
    monkeypatch.setattr(kernel_hopper_tok._mla_decode_hopper_tok_fp8_v2_kernel, "run",
                        lambda *args, **kwargs: launches.append(kwargs))
    q = torch.randn(2, 16, 576, dtype=torch.bfloat16)
    kv = torch.randn(4, 64, 576).to(torch.float8_e4m3fn)
    pt, lens = torch.arange(4, dtype=torch.int32).view(2, 2), torch.tensor([100, 70], dtype=torch.int32)
    plan = MLADecodePlan()
    seg = interface_hopper.launch(q, kv, pt, lens, 0.04, 1.0, "fp8", torch.empty(2, 16, 512, dtype=torch.bfloat16),
                                  False, sms=132, config=dict(V2=1, NUM_BUF=num_buf), plan=plan)[3]
    assert len(launches) == 1 and launches[0]["done_ptr"] is plan.counters()
    assert reduction.planned_slots(seg) and seg.data_ptr() == plan.slots().data_ptr()
    assert (reduction.streamed_counts(seg) is plan.counters()) == (num_buf == 2) and plan.counted() == (num_buf == 2)


def test_the_timers_rotating_sets_share_a_plans_rows_and_each_timer_graph_fills_it_again(monkeypatch):
    """A plan's rows and counters are marked ``descriptors.share_across_rotations``: the timer's rotating input
    sets use them as they are (each candidate's pre-hook fills the rows for its grid, which a copy made before would
    not see) and ``search.rotation_copies`` does not count them as copies' memory; a fill is made again in each of
    the timer's graph captures (``capture.timer_graph``: the timer replays one candidate's graph after another's),
    once through a server's own capture and outside one (a plan filled before a server's graph is not filled again
    in it: that put the plan kernel into every timed step, 5-9% slower, session 53 call I)."""
    from graphtune import capture, search
    from graphtune.descriptors import rotation_copy
    from graphtune.kernels.mla_decode import MLADecodePlan, kernel_hopper, plan as plan_mod
    launches = []

    class PlanKernel:
        def __getitem__(self, grid):
            return lambda *args, **consts: launches.append(grid)
    monkeypatch.setattr(kernel_hopper, "_mla_decode_plan_kernel", PlanKernel())
    lens, pt = torch.ones(3, dtype=torch.int32), torch.zeros(3, 2, dtype=torch.int32)
    plan = MLADecodePlan()
    rows = plan_mod.attach(plan, lens, pt, 64, 66, lambda config: 66, 128, slots=True, counts=True)
    assert rotation_copy(rows) is rows and rotation_copy(plan.counters()) is plan.counters()
    other = torch.zeros(5)
    assert rotation_copy(other) is not other and torch.equal(rotation_copy(other), other)
    l2 = 50 * 2**20
    assert search.rotation_copies([rows, other], l2, other.numel() * 4 * 3) == (3, False)
    try:
        for fill in range(2):                  # (outside a capture: once)
            plan_mod.plan_hook({"plan_ptr": rows})
        assert len(launches) == 1
        capture.simulate_capture(True)
        plan_mod.plan_hook({"plan_ptr": rows})  # (a server's capture of a plan filled before it: as filled)
        plan_mod.plan_hook({"plan_ptr": rows})
        assert len(launches) == 1
        for graph in range(3):                  # (the timer's graphs: in each)
            with capture.timer_capture():
                plan_mod.plan_hook({"plan_ptr": rows})
                plan_mod.plan_hook({"plan_ptr": rows})
        assert len(launches) == 4 and capture.timer_graph() is None
        plan_mod.plan_hook({"plan_ptr": rows})  # (after them, in a capture of the server's: once more)
        plan_mod.plan_hook({"plan_ptr": rows})
        assert len(launches) == 5
    finally:
        capture.simulate_capture(None)
    assert plan.slots() is not None


def test_a_plan_filled_with_slots_hands_them_to_the_reduction(monkeypatch):
    """``plan.attach(..., slots=True)``: each fill passes the plan's slot rows to the plan kernel (``seg_ptr``) and
    ``MLADecodePlan.slots()`` returns them (None before a fill, or after a fill without them: a fill for other slots
    launches again); the launch's scratch then carries them as ``seg`` (``interface_hopper._with_plan_slots``),
    marked for the reduction to read before its wait (``reduction.planned_slots``), and the tuner's follow-up takes
    them from the launch's ``plan_ptr`` where ``reduction.SEG_FROM_PLAN`` is on."""
    from graphtune.kernels.mla_decode import MLADecodePlan, interface_hopper, kernel_hopper, plan as plan_mod, reduction
    launches = []

    class PlanKernel:
        def __getitem__(self, grid):
            return lambda *args, **consts: launches.append((grid, consts.get("seg_ptr")))
    monkeypatch.setattr(kernel_hopper, "_mla_decode_plan_kernel", PlanKernel())
    lens, pt = torch.ones(3, dtype=torch.int32), torch.zeros(3, 2, dtype=torch.int32)
    plan = MLADecodePlan()
    plain = plan_mod.attach(plan, lens, pt, 64, 66, lambda config: 66, 128)
    assert plan.slots() is None
    plan_mod.plan_hook({"plan_ptr": plain})
    assert plan.slots() is None and launches[-1][1] is None
    rows = plan_mod.attach(plan, lens, pt, 64, 66, lambda config: 66, 128, slots=True)
    plan_mod.plan_hook({"plan_ptr": rows})
    slots = plan.slots()
    assert len(launches) == 2 and launches[-1][1] is slots and tuple(slots.shape) == (3, 2)
    assert reduction.planned_slots(slots) and not reduction.planned_slots(torch.empty(3, 2, dtype=torch.int32))
    scratch = ("lse", "part_o", "part_lse", "seg")
    assert interface_hopper._with_plan_slots(scratch, {"plan_ptr": rows}) == (*scratch[:3], slots)
    assert interface_hopper._with_plan_slots(scratch, {}) == scratch
    merged = []
    monkeypatch.setattr(reduction, "merge", lambda batch, heads, seg, *rest, pdl: merged.append((seg, pdl)))
    named = dict(B=3, H=16, seg_ptr="own", part_o_ptr=None, part_lse_ptr=None, out_ptr=None, lse_ptr=None,
                 seq_lens_ptr=lens, RETURN_LSE=0, plan_ptr=rows)
    for on in (False, True):
        monkeypatch.setattr(reduction, "SEG_FROM_PLAN", on)
        reduction.after_hopper_split({**named, "B": 8})
    assert merged[0] == ("own", True) and merged[1][0] is slots and merged[1][1]


@pytest.mark.parametrize("page_size,seg_cost", [(64, 4), (1, 0)])
def test_the_plan_kernel_with_slots_compiles_for_sm90(page_size, seg_cost):
    """The plan kernel given ``seg_ptr`` (``MLADecodePlan.fill(..., slots=True)``): compiled for sm_90, its segments'
    loop adds the two slot stores (under their conditions) to the row's eight, no local memory, the same registers
    or fewer than 64; without it the build has the row's stores alone."""
    from graphtune import resources
    from graphtune.kernels.mla_decode import kernel_hopper as kh
    args = (torch.ones(2, dtype=torch.int32), torch.zeros(2, 2, dtype=torch.int32),
            torch.empty(132, int(kh.PLAN_COLS), dtype=torch.int32), 2, 2)
    consts = dict(PAGE_SIZE=page_size, B_CHUNK=128, BLOCK_N=64, SEG_COST=seg_cost, num_warps=4)
    plain = compile_sm90(kh._mla_decode_plan_kernel, args, consts)
    slots = compile_sm90(kh._mla_decode_plan_kernel, args, {**consts, "seg_ptr": torch.empty(2, 2, dtype=torch.int32)})
    stores = [_sass(c.asm["cubin"]).count("STG") for c in (plain, slots)]
    assert stores == [int(kh.PLAN_COLS), int(kh.PLAN_COLS) + 2], stores
    usage = resources._resource_usage(slots.asm["cubin"], slots.metadata.name)
    assert usage["LOCAL"] == 0 and usage["REG"] <= 64, usage


@pytest.mark.parametrize("half_rows", [True, False], ids=["half-rows", "whole-rows"])
def test_scaled_partials_reduce_without_local_memory(half_rows, monkeypatch):
    """The reduction over a bf16 cache's scaled fp16 partials (k a half-row beside the LSE), by half rows at one warp
    (as shipped) or by whole rows (``reduction.SCALED_HALF_ROWS`` off), compiled for sm_90 at the block shapes the
    rule gives (H = 16 and 128, batch 8 to 128 on 132 SMs, one and two programs an SM):
    no local memory, at most 255 registers, loads of 16 bytes."""
    from graphtune import resources
    from graphtune.kernels.mla_decode import reduction
    monkeypatch.setattr(reduction, "SCALED_HALF_ROWS", half_rows)
    shapes = {reduction.reduce_blocks(batch, interface.max_partials(132, batch, pps) + batch, heads, 2, scaled=True)
              for heads in (16, 128) for batch in (8, 32, 128) for pps in (1, 2)}
    for blocks in shapes:
        compiled = _compile_reduction(blocks, partial="fp16", divisible=True, scaled=True)
        usage = resources._resource_usage(compiled.asm["cubin"], compiled.metadata.name)
        assert usage["LOCAL"] == 0 and usage["REG"] <= 255, f"{blocks}: {usage}"
        assert "ld.global.v4.b32" in compiled.asm["ptx"] or "ld.global.nc.v4.b32" in compiled.asm["ptx"], blocks


def test_fp16_partials_reduce_with_no_more_shared_memory_than_fp32_ones():
    """The reduction's whole-row blocks (``reduction.reduce_blocks``, BLOCK_D 512: batch 8 to 128 at H = 16 on 132
    SMs) for fp16 and for fp32 partials, compiled for sm_90 as a launch specialises them (pointers and strides
    divisible by 16): at the warps the rule gives each, the fp16 build uses no more shared memory and no more
    barriers than the fp32 one, none where a row is one head, and loads its partials as 16-byte vectors. (Four warps
    over fp16 rows, loaded 8 to a thread, split the slots between warps, whose sum then crossed warps through shared
    memory every step: 4-16 KB and 5-14 barriers, 1.2-4x slower on an H100, session 34.)"""

    def build(partial: str, blocks: tuple[int, int, int, int]):
        compiled = _compile_reduction(blocks, partial=partial, return_lse=False, divisible=True)
        return compiled.metadata.shared, compiled.asm["ptx"]

    cells = [(batch, heads) for heads in (16, 128) for batch in (8, 32, 64, 128)]
    seen = set()
    for batch, heads in cells:
        slots = interface.max_partials(132, batch, 1)
        wide, half = interface.reduce_blocks(batch, slots, heads, 4), interface.reduce_blocks(batch, slots, heads, 2)
        if wide[2] != 512 or (wide, half) in seen:
            continue
        seen.add((wide, half))
        assert half[:3] == wide[:3] and half[3] == wide[3] // 2, (wide, half)
        shared32, ptx32 = build("fp32", wide)
        shared16, ptx16 = build("fp16", half)
        assert shared16 <= shared32 and ptx16.count("bar.sync") <= ptx32.count("bar.sync"), (wide, shared16, shared32)
        if half[1] == 1:
            assert shared16 == 0 and "bar.sync" not in ptx16, half
        assert "ld.global.v4.b32" in ptx16, f"{half}: the partials' loads are not 16-byte vectors"
    assert seen


def _hopper_compile(kv_format: str = "bf16", heads: int = 128, page_size: int = 64, config: dict | None = None):
    from graphtune.kernels.mla_decode import interface_hopper
    dtype = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}[kv_format]
    q = torch.empty(2, heads, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, page_size, 576, dtype=dtype)
    out = torch.empty(2, heads, 512, dtype=torch.bfloat16)
    args, _, consts, _ = interface_hopper.hopper_call(q, kv, torch.zeros(2, 2, dtype=torch.int32),
                                                      torch.ones(2, dtype=torch.int32), 0.04, 1.0, kv_format, out,
                                                      False, sms=132, config=config)
    fn, consts = interface_hopper._kernel_and_params(heads, kv_format, consts)
    return compile_sm90(fn, args, consts)


_ON_M_BF16 = ("HGMMA.64x256x16.F32.BF16", "HGMMA.64x32x16.F32.BF16")
_ON_M_FP16 = ("HGMMA.64x256x16.F32 ", "HGMMA.64x32x16.F32 ")   # fp16 operands: no type suffix in the SASS


@pytest.mark.parametrize("kv_format,heads,config,mmas", [
    ("bf16", 128, None, _ON_M_BF16),
    ("bf16", 128, dict(PSMEM=1, XCH=1, EARLY=1), _ON_M_BF16),
    ("bf16", 128, dict(XCH=0, EARLY=0), _ON_M_BF16),
    ("bf16", 128, dict(BLOCK_N=32, NUM_BUF=4, XCH=1, EARLY=1), ("HGMMA.64x256x16.F32.BF16", "HGMMA.64x16x16.F32.BF16")),
    ("bf16", 16, None, ("HGMMA.64x16x16.F32.BF16",)),
    ("fp8", 16, None, ("QGMMA.64x16x32.F32.E4M3.E4M3", "HGMMA.64x16x16.F32 ")),
    ("fp8", 128, None, _ON_M_FP16),
    ("fp8", 128, dict(WOVL=0, PSMEM=0, XCH=0), _ON_M_FP16),
    ("fp8", 128, dict(WOVL=1, PSMEM=1, XCH=0, LSUM=1, MAX1=1), _ON_M_FP16 + ("HGMMA.64x8x16.F32 ",))],
    ids=["heads-on-M", "heads-on-M-psmem-xch-early", "heads-on-M-before", "heads-on-M-32tok", "tokens-on-M",
         "tokens-on-M-fp8", "heads-on-M-fp8", "heads-on-M-fp8-serial", "heads-on-M-fp8-lsum"])
def test_hopper_kernel_compiles_for_sm90_with_tma_and_wgmma(kv_format, heads, config, mmas):
    """The Gluon kernels compiled for sm_90a on a CPU: TMA loads (UTMALDG), warpgroup MMAs of the expected
    shapes (HGMMA; QGMMA for fp8 scores), and a block that fits an sm_90 SM (232,448 B of shared memory,
    255 registers). fp8 heads on M: the kernel widens the tile to fp16 (fp16 wgmmas only)."""
    from graphtune import resources
    compiled = _hopper_compile(kv_format, heads=heads, config=config)
    usage = resources._resource_usage(compiled.asm["cubin"], compiled.metadata.name)
    assert usage["REG"] <= 255
    assert compiled.metadata.shared + resources.static_shared(usage, 90) <= 232448
    sass = _sass(compiled.asm["cubin"])
    assert "UTMALDG.2D" in sass and all(m in sass for m in mmas), [m for m in mmas if m not in sass]
    # graphtune.sass: every wgmma's descriptor written on every path into it (ptxas 12.8 once built one that was not),
    # and no register of a wgmma written while it runs (ptxas 12.8 and 13.0 once did)
    assert [str(u) for u in wgmma_findings(sass)] == []
    # ptxas serialises every wgmma (a wait after each, warning C7514) when it sees the accumulator read while
    # MMAs are in flight: the loop then holds ~40 waits instead of a few. Checked with triton 3.6's ptxas, the
    # one the kernels were scheduled and timed with; triton 3.9's serialises the bf16 kernels' (not timed:
    # docs/mla_decode.md, "Triton 3.9")
    if SCHEDULED_WITH_THIS_TRITON:
        assert sass.count("WARPGROUP.DEPBAR") <= 8, "wgmmas serialised (ptxas C7514)"


@pytest.mark.parametrize("kv_format,heads,config", [
    ("bf16", 128, None), ("bf16", 128, dict(BLOCK_N=64, PP=1, RELOAD=1, WG1_FIRST=1)), ("bf16", 16, None),
    ("fp8", 16, None), ("fp8", 128, None), ("fp8", 128, dict(BLOCK_N=64, PP=1, RELOAD=1, WG1_FIRST=1))],
    ids=["heads-on-M", "ping-pong", "tokens-on-M", "tokens-on-M-fp8", "heads-on-M-fp8", "ping-pong-fp8"])
def test_hopper_split_kernels_let_the_reduction_launch_early(kv_format, heads, config):
    """Every Hopper split kernel gives ``griddepcontrol.launch_dependents`` (SASS ``PREEXIT``) before its tile loop,
    so a reduction launched as its programmatic dependent is scheduled while the split kernel still runs: each
    partition of a warp-specialised kernel gives it (both ping-pong warpgroups start from ``_split_start``)."""
    compiled = _hopper_compile(kv_format, heads=heads, config=config)
    partitions = 2 if config and config.get("PP") else 1
    assert compiled.asm["ptx"].count("griddepcontrol.launch_dependents") == partitions
    assert _sass(compiled.asm["cubin"]).count("PREEXIT") == partitions


@pytest.mark.parametrize("kv_format,heads,config,clocks", [
    ("fp8", 16, {"V2": 1}, 6), ("bf16", 128, dict(BLOCK_N=64, PP=1, RELOAD=1, WG1_FIRST=1), 27),
    ("fp8", 128, dict(BLOCK_N=64, PP=1, RELOAD=1, WG1_FIRST=1), 29), ("fp8", 16, dict(V2=1, WG2=1, NUM_BUF=4), 18)],
    ids=["second-fp8-tokens-on-M", "ping-pong", "fp8-ping-pong", "two-warpgroup-fp8-tokens-on-M"])
def test_timeline_stamps_compile_to_nothing_unless_asked_for(kv_format, heads, config, clocks):
    """The diagnostic ``STAMPS`` keyword (benchmarks/probes/timeline.py): left out, as every launch of the library
    leaves it, the kernel reads no clock; given a buffer, it reads the SM clock at each stamp (tokens on M: entry,
    split, query ready, tile landed, tile done, exit; ping-pong: those of each warpgroup, four a pair of tiles, three in a
    segment's end, the first segment's prologue marks: WG0 three (bf16) or five (fp8), WG1 two; the tokens-on-M
    kernel's WG2 form: entry, split, query ready, exit and four a pair in each warpgroup, its own tile's two marks on
    both paths of the pair, with and without an own tile) and the global timer at entry and exit (each warpgroup's
    where there are two)."""
    import re
    from graphtune.kernels.mla_decode import interface_hopper
    dtype = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}[kv_format]
    q = torch.empty(2, heads, 576, dtype=torch.bfloat16)
    out = torch.empty(2, heads, 512, dtype=torch.bfloat16)
    args, _, consts, _ = interface_hopper.hopper_call(q, torch.empty(4, 64, 576, dtype=dtype),
                                                      torch.zeros(2, 2, dtype=torch.int32),
                                                      torch.ones(2, dtype=torch.int32), 0.04, 1.0, kv_format, out,
                                                      False, sms=132, config=config)
    fn, consts = interface_hopper._kernel_and_params(heads, kv_format, consts)
    for stamps in (False, True):
        extra = [torch.empty(4, 256, dtype=torch.int64)] if stamps else []
        sass = _sass(compile_sm90(fn, list(args) + extra, consts).asm["cubin"])
        reads = (len(re.findall(r"CS2R R\d+, SR_CLOCK", sass)), len(re.findall(r"GLOBALTIMER", sass)))
        assert reads == ((clocks, 2 * (1 + ("PP" in config or "WG2" in config))) if stamps else (0, 0)), (stamps, reads)


def _sass(cubin: bytes) -> str:
    from graphtune import resources
    return resources._cuobjdump_text(cubin, "--dump-sass")


def test_hopper_path_selection_and_reasons():
    from graphtune.kernels.mla_decode import interface_hopper
    q = torch.empty(2, 128, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 576, dtype=torch.bfloat16)
    assert interface_hopper.shape_supported(q, kv, "bf16") is None
    kv8 = kv.to(torch.float8_e4m3fn)
    for heads, kind in ((128, "heads-on-M"), (16, "tokens-on-M")):
        q_h = q[:, :heads].contiguous()
        assert interface_hopper.shape_supported(q_h, kv8, "fp8", explicit=True) is None
        auto = interface_hopper.shape_supported(q_h, kv8, "fp8")
        if interface_hopper.FP8_AUTO[kind]:
            assert auto is None
        else:
            assert f"the {kind} fp8 kernel is not the measured faster path" in auto
    assert "kv_format 'fp8_ds_mla'" in interface_hopper.shape_supported(q, kv8, "fp8_ds_mla", explicit=True)
    assert interface_hopper.shape_supported(q[:, :16].contiguous(), kv, "bf16") is None    # tokens on M
    assert "H = 24" in interface_hopper.shape_supported(q[:, :24].contiguous(), kv, "bf16")
    assert "page size 16" in interface_hopper.shape_supported(q, kv[:, :16], "bf16")
    assert interface_hopper.supported(q, kv, "bf16") == "not a CUDA tensor"
    pt = torch.zeros(2, 1, dtype=torch.int32)
    lens = torch.ones(2, dtype=torch.int32)
    with pytest.raises(ValueError, match="path='hopper' does not apply: "):
        interface._launch(q, kv, pt, lens, 0.05, 1.0, "bf16", None, False, path="hopper")
    with pytest.raises(ValueError, match="path 'gluon', expected"):
        interface._launch(q, kv, pt, lens, 0.05, 1.0, "bf16", None, False, path="gluon")



def test_bench_hopper_variants_are_selected_before_labelled(monkeypatch):
    """bench_mla_decode.py times several fixed configs of a Hopper kernel by rewriting its module-level config
    before each capture; ``_activate`` selects a variant and returns its label in one call (a run once
    recorded each row under the previous variant's label): the label names the config the kernel now runs,
    and the module's config can be restored afterwards."""
    from graphtune.kernels.mla_decode import interface_hopper
    bench_mod = load_bench_mla_decode("_bench_mla_decode_under_test")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    before = dict(interface_hopper.HOPPER_TOK_FP8_CONFIG)
    x = dict(q=torch.empty(2, 16, 576, dtype=torch.bfloat16), kv_cache=torch.empty(4, 64, 576, dtype=torch.float8_e4m3fn))
    candidates = bench_mod._hopper_candidates(x, 16, "fp8")
    assert [dict(c) for c in candidates] == bench_mod.HOPPER_TOK_FP8_VARIANTS
    try:
        for variant in candidates:
            label = bench_mod._activate(variant, 16, "fp8")
            keys = variant.kernel_keys()
            assert all(f"{k}={v}" in label for k, v in keys.items()), (variant, label)
            assert interface_hopper.HOPPER_TOK_FP8_CONFIG == {**before, **keys}
            # PLAN is the benchmark's (every call given a step's plan), named in the label, never a kernel key
            assert ("with a step's plan" in label) == bool(variant.get("PLAN")) and "PLAN" not in keys
            assert bench_mod._variant_kwargs(variant, 16, "fp8")["plan"] == bool(variant.get("PLAN"))
    finally:
        for (heads, kv_format), cfg in bench_mod.SAVED_HOPPER.items():
            d = bench_mod._hopper_dict(heads, kv_format)
            d.clear()
            d.update(cfg)
    assert interface_hopper.HOPPER_TOK_FP8_CONFIG == before
    assert bench_mod._hopper_candidates(dict(x, kv_cache=x["kv_cache"][:, :16]), 16, "fp8") == []   # page size 16



def test_bench_tuned_row_runs_the_shipped_path_and_the_filter_keeps_what_it_names(monkeypatch):
    """The vs-FlashMLA table's "tuned" row is what a user gets: the public call's path with the shipped fixed
    configs back in place (a pinned variant selected before it must not leak into it); ``--vs-variant-filter``
    keeps exactly the variants whose dict text holds a part ('|'-separated)."""
    from types import SimpleNamespace
    from graphtune.kernels.mla_decode import interface_hopper
    bench_mod = load_bench_mla_decode("_bench_mla_decode_tuned_under_test")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    before = dict(interface_hopper.HOPPER_TOK_FP8_CONFIG)
    x = dict(q=torch.empty(2, 16, 576, dtype=torch.bfloat16), kv_cache=torch.empty(4, 64, 576, dtype=torch.float8_e4m3fn))
    variant = bench_mod.HopperVariant(bench_mod.HOPPER_TOK_FP8_VARIANTS[0])
    bench_mod._activate(variant, 16, "fp8")
    assert interface_hopper.HOPPER_TOK_FP8_CONFIG != before
    assert bench_mod._activate(bench_mod.TUNED, 16, "fp8") == bench_mod.TUNED.label
    assert interface_hopper.HOPPER_TOK_FP8_CONFIG == before
    assert bench_mod._variant_kwargs(bench_mod.TUNED, 16, "fp8") == dict(config=None, path="auto",
                                                                         query_precision="bf16", fp8_query=False,
                                                                         plan=False, p_precision="bf16")
    assert bench_mod._variant_kwargs(bench_mod.TUNED_P8, 16, "fp8")["p_precision"] == "e4m3"
    # --vs-e4m3: the public call with the e4m3 query too, from the bf16 query and from one cast to e4m3 outside the
    # call (FlashMLA's input), on the per-tensor fp8 cache only, labelled apart
    e4m3 = bench_mod._e4m3(SimpleNamespace(vs_e4m3=True), "fp8")
    assert e4m3 == [bench_mod.TUNED_E4M3, bench_mod.TUNED_FP8Q, bench_mod.TUNED_P8]
    assert len({bench_mod.TUNED.label, *bench_mod._E4M3_LABELS}) == 7
    assert bench_mod._variant_kwargs(e4m3[0], 128, "fp8")["query_precision"] == "e4m3"
    assert bench_mod._variant_kwargs(e4m3[1], 128, "fp8")["fp8_query"] is True
    assert bench_mod._variant_kwargs(e4m3[2], 128, "fp8")["p_precision"] == "e4m3"
    # (with --vs-plan: the e4m3 query and the e4m3 query and P given a step's plan too, and FlashMLA's terms: the query
    # given in e4m3, P in e4m3, a step's plan)
    assert bench_mod._e4m3(SimpleNamespace(vs_e4m3=True, vs_plan=True), "fp8")[3:] == [
        bench_mod.TUNED_E4M3_PLAN, bench_mod.TUNED_P8_PLAN, bench_mod.TUNED_FP8Q_P8_PLAN]
    flashmlas = bench_mod._variant_kwargs(bench_mod.TUNED_FP8Q_P8_PLAN, 128, "fp8")
    assert flashmlas["fp8_query"] is True and flashmlas["p_precision"] == "e4m3" and flashmlas["plan"] is True
    assert bench_mod._e4m3(SimpleNamespace(vs_e4m3=True), "bf16") == []
    assert bench_mod._e4m3(SimpleNamespace(vs_e4m3=False), "fp8") == []
    # the public columns' order: as shipped first (it tunes the buckets); --vs-plan-first puts the plan's first
    both = SimpleNamespace(vs_e4m3=True, vs_plan=True)
    e4m3_all = [bench_mod.TUNED_E4M3, bench_mod.TUNED_FP8Q, bench_mod.TUNED_P8, bench_mod.TUNED_E4M3_PLAN,
                bench_mod.TUNED_P8_PLAN, bench_mod.TUNED_FP8Q_P8_PLAN]
    assert bench_mod._publics(both, "fp8") == [bench_mod.TUNED, *e4m3_all, bench_mod.TUNED_PLAN]
    both.vs_plan_first = True
    assert bench_mod._publics(both, "fp8") == [bench_mod.TUNED_PLAN, bench_mod.TUNED, *e4m3_all]
    assert bench_mod._publics(SimpleNamespace(vs_e4m3=False, vs_plan=False, vs_plan_first=True), "bf16") == \
        [bench_mod.TUNED]
    assert bench_mod.parse_configs("none") == []
    wanted = [bench_mod.HOPPER_TOK_FP8_VARIANTS[1], bench_mod.HOPPER_TOK_FP8_VARIANTS[-1]]
    args = SimpleNamespace(vs_variant_filter="|".join(str(v) for v in wanted))
    assert [dict(v) for v in bench_mod._vs_candidates(args, x, 16, "fp8")] == wanted
    assert len(bench_mod._vs_candidates(SimpleNamespace(vs_variant_filter=""), x, 16, "fp8")) == \
        len(bench_mod.HOPPER_TOK_FP8_VARIANTS)
    # "'PLAN'" (docs/gpu_calls/session51/s51b.sh): the variants given a step's plan of each tokens-on-M format, and
    # nothing else; the fp8 ones the tuned space's schedules with PT_EARLY on and off
    planned = SimpleNamespace(vs_variant_filter="'PLAN'")
    for fmt, variants in (("fp8", bench_mod.HOPPER_TOK_FP8_VARIANTS), ("bf16", bench_mod.HOPPER_TOK_VARIANTS)):
        xf = dict(x, kv_cache=x["kv_cache"].to(torch.bfloat16)) if fmt == "bf16" else x
        got = [dict(v) for v in bench_mod._vs_candidates(planned, xf, 16, fmt)]
        assert got == [v for v in variants if v.get("PLAN")] and got
        if fmt == "fp8":
            assert {(v["NUM_BUF"], v["PT_EARLY"]) for v in got} == {(2, 0), (2, 1), (3, 0), (3, 1)}


def test_bench_pins_every_hopper_variant_it_times_as_labelled(monkeypatch):
    """A Hopper variant equal to the shipped fixed config would, unpinned, run the tuned kernel (the space's pick
    for the bucket, or from session 10 a shape class's second kernel such as the ping-pong one): the benchmark
    passes every variant as a pinned config, and that pinned config runs exactly the kernel and constexprs of the
    fixed config overlaid with the variant, the config its label names."""
    from graphtune.kernels.mla_decode import interface_hopper as hopper
    bench_mod = load_bench_mla_decode("_bench_mla_decode_pins_under_test")
    # every variant list of every phase, for the H and format it serves (bf16 heads on M: the ping-pong kernel's
    # space too); the pinned config's checks pass them all (a sibling kernel's knob always comes with its flag)
    kinds = [(heads, fmt, variants + (hopper.HOPPER_PP_SPACE if (heads, fmt) == (128, "bf16") else []))
             for phase in bench_mod.HOPPER_PHASES for _, fmt, heads, _, variants in phase]
    assert len(kinds) == 5
    try:
        for heads, fmt, variants in kinds:
            q = torch.empty(2, heads, 576, dtype=torch.bfloat16)
            kv = (torch.empty(4, 64, 656, dtype=torch.uint8) if fmt == "fp8_ds_mla" else
                  torch.empty(4, 64, 576, dtype=torch.bfloat16 if fmt == "bf16" else torch.float8_e4m3fn))
            call = (q, kv, torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32), 0.04, 1.0, fmt,
                    torch.empty(2, heads, 512, dtype=torch.bfloat16), False)
            for variant in variants:
                kwargs = bench_mod._variant_kwargs(bench_mod.HopperVariant(variant), heads, fmt)
                assert kwargs["path"] == "hopper" and kwargs["config"] is not None, variant
                pinned = hopper.pinned_config(heads, fmt, kwargs["config"].kwargs)
                assert hopper.pinned(heads, fmt, pinned)
                # (selected first, as the benchmark does before it captures the variant's calls: a pinned config
                # overlays the module's fixed config as it is then)
                bench_mod._select(bench_mod.HopperVariant(variant), heads, fmt)     # what the label names
                _, _, new, _ = hopper.hopper_call(*call, sms=132, config=pinned)
                _, _, labelled, _ = hopper.hopper_call(*call, sms=132)
                fn_new, params_new = hopper._kernel_and_params(heads, fmt, new)
                fn_label, params_label = hopper._kernel_and_params(heads, fmt, labelled)
                # (a knob left out compiles at the kernel's default: the same kernel as the default named)
                defaults = {p.name: p.default for p in fn_new.params if p.is_constexpr and p.has_default}
                assert fn_new is fn_label and {**defaults, **params_new} == {**defaults, **params_label}, \
                    (heads, fmt, variant)
    finally:
        bench_mod.restore_hopper_configs()


@pytest.mark.parametrize("probe_name,argv,expect", [
    ("reduce_sweep", ["--shapes", "4x1x512"], "--shapes item '4x1x512'"),
    ("reduce_sweep", ["--shapes", "4x3x512x4"], "--shapes item '4x3x512x4'"),
    ("reduce_sweep", ["--shapes", "4x1xbigx4"], "--shapes item '4x1xbigx4'"),
    ("reduce_sweep", [], "needs a CUDA GPU"),
    ("gather_route", ["--formats", "fp8,bf16"], "--formats item 'bf16'"),
    ("gather_route", ["--page-sizes", "1,64"], "--page-sizes item '64'"),
    ("gather_route", ["--page-sizes", "0"], "--page-sizes item '0'"),
    ("gather_route", [], "needs a Hopper (sm_90) GPU"),
    ("timeline", ["--cells", "fp8:16"], "--cells item 'fp8:16'"),
    ("timeline", ["--cells", "fp16:16:8"], "--cells item 'fp16:16:8'"),
    ("timeline", ["--cells", "bf16:128:64:SM1"], "--cells item 'bf16:128:64:SM1'"),
    ("timeline", ["--overlay", "RELOAD"], "--overlay: list: 'RELOAD' is not NAME=VALUE"),
    ("timeline", [], "needs a CUDA GPU"),
    ("cold_code", ["--sizes", "256,x"], "--sizes '256,x'"),
    ("cold_code", ["--sizes", "256,0"], "--sizes [0]"),
    ("cold_code", ["--load-mb", "-1"], "--load-mb -1"),
    ("cold_code", [], "needs a CUDA GPU"),
    ("pick_check", ["--cells", "fp8:16"], "--cells item 'fp8:16'"),
    ("pick_check", [], "needs a CUDA GPU"),
    ("clocks", ["--cells", "bf16:128"], "--cells item 'bf16:128'"),
    ("clocks", ["--seconds", "0"], "--seconds 0.0: must be above 0"),
    ("clocks", [], "needs a CUDA GPU"),
    ("mla_cases", ["--config", "{'T8': 1}"], "--config: \"{'T8': 1}\" is not JSON"),
    ("mla_cases", ["--config", '{"T8": "yes"}'], "is not a JSON object of integer knobs"),
    ("mla_cases", ["--config", '{"T8": 1}', "--sanitize", "8"], "--sanitize 8: the cases are 0..7"),
    ("mla_cases", ["--config", '{"T8": 1}'], "needs a CUDA GPU"),
    ("p_rounding", ["--tokens", "0"], "--tokens 0: must be at least 1"),
    ("pl_numerics", ["--tokens", "100"], "--tokens 100: must be a positive multiple of 64"),
    ("query_rounding", ["--heads", "16,x"], "--heads '16,x': expected a comma list of integers"),
    ("query_rounding", ["--batch", "0"], "--batch 0: must be at least 1"),
    ("ncu_mla", ["--kv-format", "bf16", "--query-precision", "e4m3"],
     "--query-precision e4m3 applies to an fp8 cache, not --kv-format bf16"),
    ("ncu_mla", ["--config", "[1]"], "needs a CUDA GPU"),
    ("reduce_tail", ["--cells", "fp8:16:64"], "--cells item 'fp8:16:64'"),
    ("reduce_tail", ["--cells", "fp16:16:64:32"], "format 'fp16'"),
    ("reduce_tail", ["--rounds", "0"], "--rounds 0 / --sets 6: each at least 1"),
    ("reduce_tail", [], "needs a Hopper (sm_90) GPU"),
    ("stream_pad", ["--configs", "[{'V2': 1}]"], "--configs \"[{'V2': 1}]\": not JSON"),
    ("stream_pad", ["--pad", "-1"], "--pad -1: must be at least 0 (KB)"),
    ("stream_pad", [], "needs a Hopper (sm_90) GPU"),
    ("split_pdl", ["--cells", "fp8:16"], "--cells item 'fp8:16'"),
    ("split_pdl", ["--sets", "0"], "--sets 0: must be at least 1"),
    ("split_pdl", ["--ahead", "gemm"], "--ahead: invalid choice: 'gemm'"),
    ("split_pdl", ["--ways", "plan-first,late"], "--ways 'plan-first,late': expected a comma-separated subset of"),
    ("split_pdl", [], "needs a Hopper (sm_90) GPU"),
    ("ds_lse", ["--seeds", "1,x"], "--seeds '1,x': expected comma-separated integers"),
    ("ds_lse", ["--random", "-1"], "--random -1: must be at least 0"),
    ("ds_lse", ["--repeat", "0"], "--repeat 0: must be at least 1"),
    ("ds_lse", ["--ways", "0,3"], "--ways '0,3': expected SPLIT_PDL values 0, 1 or 2"),
    ("ds_lse", [], "needs a Hopper (sm_90) GPU")],
    ids=["three-parts", "not-a-power-of-two", "not-a-number", "no-gpu", "gather-bf16", "gather-whole-tiles",
         "gather-page-0", "gather-no-gpu", "timeline-two-parts", "timeline-format", "timeline-cell-keys",
         "timeline-overlay", "timeline-no-gpu", "cold-code-not-a-number", "cold-code-zero", "cold-code-load",
         "cold-code-no-gpu", "pick-check-cells", "pick-check-no-gpu", "clocks-cells", "clocks-seconds", "clocks-no-gpu",
         "cases-not-json", "cases-not-knobs", "cases-sanitize-range", "cases-no-gpu", "p-rounding-tokens", "pl-numerics-tokens",
         "query-rounding-heads", "query-rounding-batch", "ncu-query-precision", "ncu-no-gpu", "tail-cells",
         "tail-format", "tail-rounds", "tail-no-gpu", "pad-configs", "pad-negative", "pad-no-gpu", "pdl-cells",
         "pdl-sets", "pdl-ahead", "pdl-ways", "pdl-no-gpu", "lse-seeds", "lse-random", "lse-repeat", "lse-ways",
         "lse-no-gpu"])
def test_probes_say_what_is_wrong_in_one_line(probe_name, argv, expect):
    """benchmarks/probes/reduce_sweep.py, gather_route.py, timeline.py, cold_code.py, pick_check.py, clocks.py,
    mla_cases.py, p_rounding.py, pl_numerics.py, query_rounding.py, ncu_mla.py, reduce_tail.py, stream_pad.py,
    split_pdl.py and ds_lse.py: a
    malformed argument is named with its value; without a GPU (this CPU machine) they say so; each exits 2 before
    touching any device."""
    probe = Path(__file__).resolve().parents[2] / "benchmarks" / "probes" / f"{probe_name}.py"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    run = subprocess.run([sys.executable, str(probe), *argv], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 2, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert expect in last, run.stderr



def probe_module(name: str):
    """benchmarks/probes/NAME.py as a module (the probes import their neighbours in benchmarks/)."""
    import importlib.util
    probes = Path(__file__).resolve().parents[2] / "benchmarks"
    sys.path.insert(0, str(probes))
    try:
        spec = importlib.util.spec_from_file_location(f"{name}_probe", probes / "probes" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(probes))
    return module


def _timeline_probe():
    """benchmarks/probes/timeline.py as a module."""
    return probe_module("timeline")

def test_timeline_streams_a_cell_with_stream_set_on_the_grid_of_its_buffers():
    """benchmarks/probes/timeline.py's ``STREAM=1`` cell key: the stream kernel (the load path alone) instead of the
    decode, two programs an SM with two buffers and one with three (as the decode's grid), no plan (it takes none)."""
    tl = _timeline_probe()
    x = {"q": torch.empty(2, 16, 576, dtype=torch.bfloat16),
         "kv_cache": torch.empty(4, 64, 576, dtype=torch.float8_e4m3fn),
         "page_table": torch.zeros(2, 2, dtype=torch.int32), "seq_lens": torch.ones(2, dtype=torch.int32)}
    for num_buf, rows in ((2, 264), (3, 132)):
        call, got = tl._launcher(x, "fp8", 16, 132, {"STREAM": 1, "NUM_BUF": num_buf}, plan=True)
        assert got == rows and callable(call)


def test_timeline_landing_profile_counts_landings_requests_and_work_per_window(tmp_path, capsys):
    """benchmarks/probes/timeline.py's ``landing_profile`` on a made-up stamped program (SM clock = ns): two tiles,
    two buffers, both copies issued at the split's end (500 ns), landed at 3,000 / 5,000 and done at 4,500 / 7,000:
    per 2 us window the landings, the mean of the tiles requested and not yet taken, and of the programs computing,
    and the medians of the tiles that landed in it: work (1,500 / 2,000 ns), the program's wait (from its query ready
    at 1,000: 2,000; from tile 0's end: 500) and copy issue to landing (2,500 / 4,500); ``--from`` prints them for a
    saved run, and says in one line what is wrong with a file that is not one."""
    tl = _timeline_probe()
    row = [0] * 12
    row[0], row[1], row[3], row[4], row[5], row[6], row[7] = 0, 10_000, 0, 500, 1_000, 10_000, 2
    row[8:12] = [3_000, 4_500, 5_000, 7_000]
    idle = [0] * 12
    idle[1] = 2_000
    p = tl.landing_profile([row, idle], 1.0, 2)
    assert p["landed"] == [0, 1, 1, 0, 0, 0]
    assert p["waiting"] == [1.5, 1.5, 0.5, 0.0, 0.0, 0.0]
    assert p["computing"] == [0.0, 0.5, 0.75, 0.5, 0.0, 0.0]
    assert p["busy_ns"] == [None, 1500, 2000, None, None, None]
    assert p["wait_ns"] == [None, 2000, 500, None, None, None]
    assert p["issue_ns"] == [None, 2500, 4500, None, None, None]
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps({"gpu": "made up", "commit": "x", "rows": [
        {"kv_format": "fp8", "heads": 16, "batch": 1, "config": {"NUM_BUF": 2}, "raw": [row, idle],
         "timeline": {"sm_ghz": 1.0}}]}))
    assert tl.main(["--from", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "tiles landed [0, 1, 1, 0, 0, 0]" in out
    assert "its program's wait for it: ['-', 2000, 500, '-', '-', '-']" in out
    (tmp_path / "bad.json").write_text("[1, 2]")
    assert tl.main(["--from", str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a saved timeline run" in err[0], err


@pytest.mark.parametrize("heads,batch,kernel_flag,per_program", [(128, 64, "T8", 2), (128, 4, "T8", 2),
                                                                  (16, 64, "V2", 1)])
def test_timeline_pins_the_tuned_paths_kernel_and_sizes_its_stamp_rows(heads, batch, kernel_flag, per_program):
    """benchmarks/probes/timeline.py pins, for a cell, the kernel the tuned path runs there (fp8, H >= 64: the third
    kernel, T8, from interface_hopper.T8_MIN_BATCH, every batch since session 37) and gives it one stamp row a program,
    two for the ping-pong kernels (T8 included: each warpgroup writes its own; sessions 22-23 sized T8's buffer for
    one a program, so half its programs stamped past it)."""
    from graphtune.kernels.mla_decode import interface_hopper
    tl = _timeline_probe()
    x = {"q": torch.empty(batch, heads, 576, dtype=torch.bfloat16),
         "kv_cache": torch.empty(batch * 2, 64, 576, dtype=torch.float8_e4m3fn),
         "page_table": torch.zeros(batch, 2, dtype=torch.int32), "seq_lens": torch.ones(batch, dtype=torch.int32),
         "kv_scale": 0.5, "out": torch.empty(batch, heads, 512, dtype=torch.bfloat16)}
    config = tl._config("fp8", heads, batch)
    assert config.get(kernel_flag) == 1
    if kernel_flag == "T8":
        assert config == interface_hopper.THIRD[(True, "fp8")].space[0]
        assert batch >= interface_hopper.T8_MIN_BATCH
    _, rows = tl._launcher(x, "fp8", heads, 132)
    _, grid, _, _ = interface_hopper.hopper_call(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.04, 0.5, "fp8",
                                                 x["out"], False, sms=132, config=config)
    assert rows == grid[0] * grid[1] * per_program


def test_timeline_reads_program_stamps():
    """benchmarks/probes/timeline.py on stamps laid out as the kernels write them (kernel_hopper.STAMP_*): a
    tokens-on-M row per program, ping-pong rows per warpgroup; the medians it prints come from the right slots."""
    from graphtune.kernels.mla_decode import kernel_hopper as kh
    tl = _timeline_probe()
    row, t0 = int(kh.STAMP_ROW), int(kh.STAMP_TILE0)
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    ghz = 1.5 + float(torch.rand((), generator=gen))     # clocks per ns
    raw = torch.zeros(6, row, dtype=torch.int64)
    for p in range(6):           # tiles land every 2,000 ns; each is busy 1,500 ns; the split 400 ns, the query 900
        r, start = raw[p], 1000 * p
        r[int(kh.STAMP_GT_IN)] = start
        r[int(kh.STAMP_CLK_IN)] = 7
        r[int(kh.STAMP_CLK_SPLIT)] = 7 + round(400 * ghz)
        r[int(kh.STAMP_CLK_READY)] = r[int(kh.STAMP_CLK_SPLIT)] + round(900 * ghz)
        r[int(kh.STAMP_TILES)] = 5
        for k in range(5):
            r[t0 + 2 * k] = r[int(kh.STAMP_CLK_READY)] + round((300 + 2000 * k) * ghz)
            r[t0 + 2 * k + 1] = r[t0 + 2 * k] + round(1500 * ghz)
        r[int(kh.STAMP_CLK_OUT)] = r[t0 + 9] + round(250 * ghz)
        r[int(kh.STAMP_GT_OUT)] = start + round(int(r[int(kh.STAMP_CLK_OUT)] - 7) / ghz)
    # two programs an SM (SMs 0, 1, 2), and a seventh row that got no tiles (an even split's idle program)
    for p in range(6):
        raw[p, int(kh.STAMP_SMID)] = p // 2
    idle = torch.zeros(1, row, dtype=torch.int64)
    idle[0, int(kh.STAMP_SMID)] = 3
    idle[0, int(kh.STAMP_GT_IN)] = 100
    idle[0, int(kh.STAMP_GT_OUT)] = 900
    raw = torch.cat([raw, idle])
    t = tl.analyse(raw, pp=False)
    assert t["sm_ghz"] == pytest.approx(ghz, rel=1e-3) and t["live"] == 6
    exits = raw[:6, int(kh.STAMP_GT_OUT)].tolist()
    assert t["idle_rows"] == 1 and t["sms"] == 3
    assert t["sm_last_exit_ns"][1.0] == max(exits) and t["sm_last_exit_ns"][0.0] == max(exits[:2])
    assert t["sm_exit_gap_ns"] == pytest.approx(statistics.median(exits[2 * k + 1] - exits[2 * k] for k in range(3)))
    for key, ns in (("split_ns", 400), ("ready_ns", 900), ("first_tile_ns", 300), ("period_ns", 2000),
                    ("wait_ns", 500), ("busy_ns", 1500), ("end_ns", 250)):
        assert t[key] == pytest.approx(ns, abs=2), key
    assert t["entry_ns"][1.0] == 5000 and t["span_ns"] == max(raw[:, int(kh.STAMP_GT_OUT)].tolist())
    t_in = min(raw[:, int(kh.STAMP_GT_IN)].tolist())
    assert t["exit_mean_ns"] == pytest.approx(statistics.mean(e - t_in for e in exits))   # (the live rows only)



def test_timeline_reads_two_warpgroup_pairs_with_the_other_p_after_the_hand_off():
    """The fp8 tokens-on-M kernel's WG2 form writes rows as the ping-pong kernels do (2 p + WG, four marks a pair:
    top, own scores retired, own P handed, the other's P received) but both warpgroups take the other's P after their
    own hand-off: ``analyse(wg2=True)`` reads WG1's wait from its hand-off (a ping-pong WG1's from the pair's top), and
    the launcher gives such a cell two rows a program."""
    from graphtune.kernels.mla_decode import interface_hopper
    from graphtune.kernels.mla_decode import kernel_hopper as kh
    tl = _timeline_probe()
    row, t0 = int(kh.STAMP_ROW), int(kh.STAMP_TILE0)
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    ghz = 1.5 + float(torch.rand((), generator=gen))
    steps = {0: (600, 300, 150), 1: (700, 250, 90)}     # ns: top -> scores, -> handed, -> the other's P
    raw = torch.zeros(4, row, dtype=torch.int64)
    for i in range(4):          # two programs, rows 2 p (WG0) and 2 p + 1 (WG1), three pairs each
        r, (sc, hand, other) = raw[i], steps[i % 2]
        r[int(kh.STAMP_GT_IN)] = 100 * i
        r[int(kh.STAMP_CLK_IN)] = 5
        r[int(kh.STAMP_CLK_SPLIT)] = 5 + round(300 * ghz)
        r[int(kh.STAMP_CLK_READY)] = r[int(kh.STAMP_CLK_SPLIT)] + round(800 * ghz)
        r[int(kh.STAMP_TILES)] = 6
        for k in range(3):
            top = int(r[int(kh.STAMP_CLK_READY)]) + round((200 + 1500 * k) * ghz)
            r[t0 + 4 * k: t0 + 4 * k + 4] = torch.tensor(
                [top, top + round(sc * ghz), top + round((sc + hand) * ghz), top + round((sc + hand + other) * ghz)])
        r[int(kh.STAMP_CLK_OUT)] = r[t0 + 8] + round(1200 * ghz)
        r[int(kh.STAMP_GT_OUT)] = 100 * i + round(int(r[int(kh.STAMP_CLK_OUT)] - 5) / ghz)
        r[int(kh.STAMP_SMID)] = i // 2
    t = tl.analyse(raw, pp=True, wg2=True)
    for w, (sc, hand, other) in steps.items():
        assert t[f"wg{w}_scores_ns"] == pytest.approx(sc, abs=2)
        assert t[f"wg{w}_softmax_ns"] == pytest.approx(hand, abs=2)
        assert t[f"wg{w}_other_p_ns"] == pytest.approx(other, abs=2)
    assert tl.analyse(raw, pp=True)["wg1_other_p_ns"] == pytest.approx(sum(steps[1]), abs=2)   # (ping-pong's reading)
    x = {"q": torch.empty(32, 16, 576, dtype=torch.bfloat16),
         "kv_cache": torch.empty(64, 64, 576, dtype=torch.float8_e4m3fn),
         "page_table": torch.zeros(32, 2, dtype=torch.int32), "seq_lens": torch.ones(32, dtype=torch.int32),
         "kv_scale": 0.5, "out": torch.empty(32, 16, 512, dtype=torch.bfloat16)}
    _, rows = tl._launcher(x, "fp8", 16, 132, {"WG2": 1, "NUM_BUF": 4})
    _, grid, _, _ = interface_hopper.hopper_call(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.04, 0.5, "fp8",
                                                 x["out"], False, sms=132, config=tl._config("fp8", 16, 32, {"WG2": 1,
                                                                                                       "NUM_BUF": 4}))
    assert grid == (1, 132) and rows == 2 * 132


def test_timeline_reads_ping_pong_prologue_marks():
    """The ping-pong rows' prologue marks (kernel_hopper_pp.STAMP_PRO + x, x = 0..4, WG0 all five on an fp8 cache,
    WG1 the segment and the rope rows): medians from the split per warpgroup, an unwritten slot left out."""
    from graphtune.kernels.mla_decode import kernel_hopper as kh
    from graphtune.kernels.mla_decode import kernel_hopper_pp as kpp
    tl = _timeline_probe()
    row, t0, pro = int(kh.STAMP_ROW), int(kh.STAMP_TILE0), int(kpp.STAMP_PRO)
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    ghz = 1.5 + float(torch.rand((), generator=gen))
    marks = {0: [1200, 2100, 2400, 3000, 8000], 1: [150, None, 400, None, None]}    # ns after the split
    raw = torch.zeros(4, row, dtype=torch.int64)
    for i in range(4):          # two programs, rows 2 p (WG0) and 2 p + 1 (WG1)
        r, wg = raw[i], i % 2
        r[int(kh.STAMP_GT_IN)] = 0
        r[int(kh.STAMP_CLK_IN)] = 11
        split = 11 + round(500 * ghz)
        r[int(kh.STAMP_CLK_SPLIT)] = split
        r[int(kh.STAMP_CLK_READY)] = split + round(9000 * ghz)
        r[int(kh.STAMP_TILES)] = 6
        for k in range(3):      # three pairs, 4 stamps each
            for x in range(4):
                r[t0 + 4 * k + x] = r[int(kh.STAMP_CLK_READY)] + round((1000 + 5000 * k + 500 * x) * ghz)
        for x, ns in enumerate(marks[wg]):
            if ns is not None:
                r[pro + x] = split + round(ns * ghz)
        r[int(kh.STAMP_CLK_OUT)] = r[t0 + 11] + round(300 * ghz)
        r[int(kh.STAMP_GT_OUT)] = round(int(r[int(kh.STAMP_CLK_OUT)] - 11) / ghz)
    t = tl.analyse(raw, pp=True)
    for wg, values in marks.items():
        for x, ns in enumerate(values):
            if ns is None:
                assert f"wg{wg}_pro{x}_ns" not in t
            else:
                assert t[f"wg{wg}_pro{x}_ns"] == pytest.approx(ns, abs=2), (wg, x)


# Each process collects only its own tests: kernel cases in the child, the launcher and validation here.
if IN_CHILD:
    del test_interpreted_kernel_cases, test_bad_input_raises_value_error, test_bad_input_unused_page_slots_may_hold_anything
    del test_portable_space_fits_sm120_or_is_excluded, test_hopper_kernel_compiles_for_sm90_with_tma_and_wgmma
    del test_hopper_path_selection_and_reasons, test_bench_hopper_variants_are_selected_before_labelled
    del test_bench_pins_every_hopper_variant_it_times_as_labelled
    del test_bench_tuned_row_runs_the_shipped_path_and_the_filter_keeps_what_it_names
    del test_tuned_grid_never_outgrows_the_partial_scratch, test_probes_say_what_is_wrong_in_one_line
    del test_timeline_reads_program_stamps, test_timeline_reads_ping_pong_prologue_marks
else:
    del test_matches_reference, test_config_paths, test_public_api_tensor_scale_and_many_request_chunks
    del test_tuned_split_kernels_are_timed_with_their_reduction
    del test_split_past_a_request_longer_than_the_programs_share, test_negative_lengths_count_as_no_tokens



def test_query_rounding_probe_writes_its_table(tmp_path):
    """benchmarks/probes/query_rounding.py on a small batch: the bf16 query's output equals the reference (both
    rounded to bf16 from the same exact values) and the e4m3 query's moves it; the JSON holds every row."""
    import json
    probe = Path(__file__).resolve().parents[2] / "benchmarks" / "probes" / "query_rounding.py"
    out = tmp_path / "q.json"
    run = subprocess.run([sys.executable, str(probe), "--batch", "1", "--heads", "16", "--tokens", "256",
                          "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 2 * 3
    by = {(r["inputs"], r["query"]): r for r in rows}
    for kind in ("timed", "accuracy"):
        assert by[(kind, "bf16")]["vs_reference"] == 0.0
        assert by[(kind, "e4m3_query")]["vs_reference"] > 0.0


def test_pl_numerics_growth_needs_a_short_accumulation(tmp_path):
    """benchmarks/probes/pl_numerics.py (session 47), PL's arithmetic emulated on a small request: with exact P.V
    accumulation the error is the pair's rounding and does not grow with a segment's length; a tensor core keeping 14
    bits of each accumulation makes it larger, and larger for the longer segment (what PL measured on an H100); kept to
    every bit (53), the aligned model is the exact one."""
    probe = probe_module("pl_numerics")
    torch.manual_seed(0)
    s2 = torch.randn(16, 1024, dtype=torch.float64) * 3.0
    v = torch.randn(1024, 512).to(torch.float8_e4m3fn).double()
    p = torch.exp2(s2 - s2.amax(1, keepdim=True))
    ref = p @ v / p.sum(1, keepdim=True)

    def err(tiles, mode, bits=14):
        return float((probe.decode(s2, v, tiles, mode, bits) - ref).norm() / ref.norm())
    exact_long, exact_short = err(16, "exact"), err(2, "exact")
    assert exact_long < 1.5e-3 and exact_short < 1.5e-3 and abs(exact_long - exact_short) < 0.3 * exact_long
    aligned_long, aligned_short = err(16, "aligned"), err(2, "aligned")
    assert aligned_long > aligned_short > exact_short and aligned_long > 2 * exact_long
    assert err(16, "aligned", bits=53) == pytest.approx(exact_long, rel=1e-6)


def test_return_lse_must_be_a_bool():
    """``return_lse="no"`` was taken as true (session 31's input review): one line naming it, eager and op."""
    from graphtune.kernels.mla_decode import mla_decode_op
    c = make_case(1, 16, 16, "fp8", [10], torch.Generator().manual_seed(3))
    for call in (mla_decode, mla_decode_op):
        with pytest.raises(ValueError, match=r"mla_decode: return_lse: 'no', expected True or False"):
            call(c["q"], c["kv_cache"], c["page_table"], c["seq_lens"], 0.06, kv_scale=c["kv_scale"], return_lse="no")


def test_timeline_measures_whether_the_same_sms_are_slow_again():
    """benchmarks/probes/timeline.py's ``sm_persistence`` on session 40's two recorded timelines (call E, H100, fp8
    H = 16 batch 32, other inputs and programs on each SM): the per-SM last exits correlate 0.71 over the 116 SMs
    that ran two programs in both, and the first run's fastest third ended at 31.0 us in the second against its
    slowest third's 33.4, the figures docs/mla_decode.md quotes."""
    import json
    tl = _timeline_probe()
    root = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    raws = []
    for way in ("main", "new"):
        rows = json.loads((root / f"timeline_h100_session40_callE_{way}.json").read_text())["rows"]
        raws.append(torch.tensor([r for r in rows if r["batch"] == 32][0]["raw"], dtype=torch.int64))
    got = tl.sm_persistence(*raws)
    assert got["sms"] == 116
    assert round(got["correlation"], 2) == 0.71
    assert (round(got["fast_third_ns"] / 1e3, 1), round(got["slow_third_ns"] / 1e3, 1)) == (31.0, 33.4)
    assert tl.sm_persistence(raws[0][:4], raws[1][:4]) == {"sms": 4}


def test_the_probes_check_then_time_each_way_in_alternating_order(capsys):
    """benchmarks/probes/reduce_tail.py's helpers that reduce_tail, stream_pad and split_pdl share: a way whose error
    is NaN or over the bound is named in one line and not timed; the others are timed round after round, every
    other round in reverse order; medians and timings go into the row, ways never timed left out."""
    tail = probe_module("reduce_tail")
    row = {}
    errs = {"a": 1e-3, "b": float("nan"), "c": 5e-3, "d": 2e-3}
    ok = tail.passing_ways(list(errs), errs.__getitem__, 2e-3, row, "fp8 B=32")
    assert ok == ["a", "d"] and row == {f"{w}_err": e for w, e in errs.items()}
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == ["fp8 B=32 b: relative error nan (bound 0.002): not timed",
                     "fp8 B=32 c: relative error 5.000e-03 (bound 0.002): not timed"]
    order = []
    ms = {"a": iter([3.0, 1.0, 2.0]), "d": iter([5.0, 4.0, 6.0])}

    def time_way(way):
        order.append(way)
        return next(ms[way])
    times = tail.timed_ways(ok, time_way, 3)
    assert order == ["a", "d", "d", "a", "a", "d"] and times == {"a": [3.0, 1.0, 2.0], "d": [5.0, 4.0, 6.0]}
    tail.add_medians(row, {**times, "never": []})
    assert row["a_ms"] == 2.0 and row["d_ms"] == 5.0 and row["d_all_ms"] == [5.0, 4.0, 6.0]
    assert "never_ms" not in row
    row.update(format="fp8", heads=16, page_size=64, batch=32, flashmla_ms=None)
    assert (tail.ms_text(row, "a"), tail.ms_text(row, "b"), tail.ms_text(row, "flashmla")) == ("2.0000", "-", "-")
    assert (tail.change_text(row, "d", "a"), tail.change_text(row, "b", "a")) == ("+150.0%", "-")
    assert tail.cell_text(row) == "fp8 H=16 ps=64 B=32"


def test_the_probes_visit_each_cell_on_its_own_inputs(monkeypatch):
    """``reduce_tail.for_each_cell``: every cell, uniform and (when asked) ragged, on the inputs ``cell_inputs`` makes
    for it (the cells it has none for left out), the cache emptied after each."""
    import types
    tail = probe_module("reduce_tail")
    made, seen, emptied = [], [], []

    def inputs(lengths, fmt, heads, page, batch, sets):
        if lengths == "ragged" and page != 64:
            return None
        made.append((lengths, fmt, batch, sets))
        return [f"{lengths}-{batch}-{i}" for i in range(sets)], "ref", 2e-3
    monkeypatch.setattr(tail, "cell_inputs", inputs)
    monkeypatch.setattr(tail.torch.cuda, "empty_cache", lambda: emptied.append(len(seen)))
    args = types.SimpleNamespace(cells=[("fp8", 16, 64, 32), ("fp8", 16, 1, 64)], ragged=True, sets=2)
    tail.for_each_cell(args, lambda *cell: seen.append(cell))
    assert seen == [("uniform", "fp8", 16, 64, 32, ["uniform-32-0", "uniform-32-1"], "ref", 2e-3),
                    ("uniform", "fp8", 16, 1, 64, ["uniform-64-0", "uniform-64-1"], "ref", 2e-3),
                    ("ragged", "fp8", 16, 64, 32, ["ragged-32-0", "ragged-32-1"], "ref", 2e-3)]
    assert emptied == [1, 2, 3] and len(made) == 3
    seen.clear()
    tail.for_each_cell(types.SimpleNamespace(cells=args.cells, ragged=False, sets=1), lambda *cell: seen.append(cell))
    assert [c[0] for c in seen] == ["uniform", "uniform"]
