"""The fp8 ping-pong kernel with fp8 scores (kernel_hopper_pp8.py, config ``T8 = 1``) compiled for sm_90 on a CPU: it
fits an SM with two fp16-sized tile buffers, runs as two 4-warp partitions, scores from fp8 wgmmas on the landed tile,
widens each half of V once (by the warpgroup that multiplies it) for fp16 P.V with heads on M, and ptxas keeps its
wgmmas asynchronous. The interface routes ``T8 = 1`` to it with [64, 256] bf16 query boxes and [64, 512] fp8 latent
boxes, and refuses it where it does not apply. tests/gpu/test_mla_decode_gpu.py (``HEADS_VARIANTS``,
``ZERO_LEN_CASES``) runs it against the reference on an H200.
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import torch

from graphtune import resources
from graphtune.sass import wgmma_findings
from graphtune.kernels.mla_decode import interface, interface_hopper, kernel_hopper_pp8
from graphtune.kernels.mla_decode.kernel_hopper import _block_barrier

from test_mla_decode import _sass as _sass_of_cubin
from test_mla_decode import SCHEDULED_WITH_THIS_TRITON, _hopper_compile
from test_mla_hopper_pp import _tile_loop_local_loads

SM90_SHARED = 232448          # bytes of shared memory an sm_90 block may use (the driver's 1 KB reserve aside)


@pytest.fixture(scope="module")
def compiled():
    return _hopper_compile("fp8", heads=128, page_size=64, config=dict(T8=1))


def test_t8_kernel_fits_sm90_as_two_warpgroups(compiled):
    usage = resources._resource_usage(compiled.asm["cubin"], compiled.metadata.name)
    assert usage["REG"] <= 255
    # query pair 72 KB + 2 x fp16 tile 64 KB + 2 x fp8 rope tile 8 KB + fp16 P tile 8 KB + maxima, sums, barriers
    shared = compiled.metadata.shared
    assert 72 * 1024 + 2 * 64 * 1024 + 2 * 8 * 1024 + 8 * 1024 <= shared
    assert shared + resources.static_shared(usage, 90) <= SM90_SHARED, shared
    assert compiled.metadata.num_warps == 8
    assert ".reqntid 256" in compiled.asm["ptx"]


def test_t8_kernel_mmas(compiled):
    sass = _sass_of_cubin(compiled.asm["cubin"])
    # scores: the rope pair (K = 128) and hi + lo of four 128-column latent chunks, k = 32 each (36 a tile), from
    # three places (WG0's first tile of a segment and its next ones, WG1's), plus the placeholder where no tile
    # follows (the rope pair against itself, K = 128)
    qgmma = sass.count("QGMMA.64x64x32.F32.E4M3.E4M3")
    assert qgmma >= 3 * 36 and (qgmma - 3 * 36) % 4 == 0, qgmma
    # P.V with heads on M: [64, 256] halves of O, K = 64 (four k = 16 steps), on five code paths (each warpgroup's
    # own tile and the other's, WG1's of a segment's last, even tile); no register-A (V^T) wgmma
    assert sass.count("HGMMA.64x256x16.F32") == 5 * 4
    assert "HGMMA.64x64x16.F32 R" not in sass
    # each half of V widened once, at four places (WG0: its tile and WG1's; WG1: likewise): 128 values a thread
    assert sass.count("F2FP.F16.E4M3.UNPACK_B") >= 4 * 64
    assert "UTMALDG.2D" in sass
    assert _tile_loop_local_loads(sass, "QGMMA.64x64x32") == 0
    assert [str(u) for u in wgmma_findings(sass)] == []
    # the rope rows come by TMA: no plain loads of the cache's rows, so the fences of the widenings and hand-offs
    # (MEMBAR.ALL.CTA, which waits for a thread's loads in flight) wait for page-table loads at most, and no rope
    # stores, fence and barrier per tile (session 23's form: 16 MEMBARs)
    assert sass.count("MEMBAR.ALL.CTA") <= 13, sass.count("MEMBAR.ALL.CTA")
    if SCHEDULED_WITH_THIS_TRITON:
        # (serialised: a WARPGROUP.DEPBAR after each of the ~140 wgmmas, ptxas C7515)
        assert sass.count("WARPGROUP.DEPBAR") <= 12, "wgmmas serialised (ptxas C7511 / C7515)"


@pytest.fixture(scope="module")
def compiled_e4m3():
    """T8 as ``query_precision="e4m3"`` launches it (``Q_LO = 0``)."""
    from test_mla_decode import compile_sm90
    q, kv, pt, lens, out = _route_inputs()
    args, _, consts, _ = interface_hopper.hopper_call(q, kv, pt, lens, 0.04, 0.5, "fp8", out, False, sms=132,
                                                      config=dict(T8=1))
    fn, consts = interface_hopper._kernel_and_params(128, "fp8", {**consts, "Q_LO": 0})
    assert consts["Q_LO"] == 0
    return compile_sm90(fn, args, consts)


def test_t8_e4m3_query_halves_the_score_mmas_and_drops_the_lo_half(compiled, compiled_e4m3):
    """``Q_LO = 0``: each tile's scores are the rope's hi half and the four latent chunks' hi halves (18 wgmmas of
    k = 32 against the pair's 36), the lo half is neither converted (half the e4m3 conversions) nor given shared memory
    (its 32 KB [64, 512] tile is not allocated), and the schedule's properties hold as with the pair."""
    pair, single = (_sass_of_cubin(c.asm["cubin"]) for c in (compiled, compiled_e4m3))
    qgmma = single.count("QGMMA.64x64x32.F32.E4M3.E4M3")
    assert qgmma >= 3 * 18 and (qgmma - 3 * 18) % 4 == 0, qgmma
    assert pair.count("QGMMA.64x64x32.F32.E4M3.E4M3") - qgmma == 3 * 18
    assert single.count("F2FP.SATFINITE.E4M3") * 2 == pair.count("F2FP.SATFINITE.E4M3")
    assert compiled.metadata.shared - compiled_e4m3.metadata.shared == 64 * 512
    assert single.count("HGMMA.64x256x16.F32") == 5 * 4
    assert _tile_loop_local_loads(single, "QGMMA.64x64x32") == 0
    assert [str(u) for u in wgmma_findings(single)] == []
    if SCHEDULED_WITH_THIS_TRITON:
        assert single.count("WARPGROUP.DEPBAR") <= 12, "wgmmas serialised (ptxas C7511 / C7515)"


@pytest.fixture(scope="module")
def compiled_fp8_query():
    """T8 reading an e4m3 query as it is (``Q_FP8 = 1``, its scale a float)."""
    from test_mla_decode import compile_sm90
    q, kv, pt, lens, out = _route_inputs()
    q8 = q.to(torch.float8_e4m3fn)
    args, _, consts, _ = interface_hopper.hopper_call(q8, kv, pt, lens, 0.04, 0.5, "fp8", out, False, sms=132,
                                                      config=dict(T8=1))
    fn, consts = interface_hopper._kernel_and_params(128, "fp8", {**consts, "Q_LO": 0})
    args, consts = interface_hopper._fp8_query(args, consts, q8, 2.0, "T8")
    assert consts["Q_FP8"] == 1 and consts["q_descale"] == 2.0 and list(args[0].block_shape) == [64, 128]
    return compile_sm90(fn, args, consts)


def test_t8_reads_an_e4m3_query_as_it_is(compiled_e4m3, compiled_fp8_query):
    """``Q_FP8 = 1``: no conversion of the query at all (not one e4m3 conversion in the kernel), five TMA boxes for it
    instead of the bf16 query's three, the e4m3 query's score wgmmas, no more shared memory, and the schedule's
    properties."""
    single, fp8q = (_sass_of_cubin(c.asm["cubin"]) for c in (compiled_e4m3, compiled_fp8_query))
    assert single.count("F2FP.SATFINITE.E4M3") > 0 and fp8q.count("F2FP.SATFINITE.E4M3") == 0
    assert fp8q.count("QGMMA.64x64x32.F32.E4M3.E4M3") == single.count("QGMMA.64x64x32.F32.E4M3.E4M3")
    assert fp8q.count("UTMALDG") > single.count("UTMALDG")
    assert compiled_fp8_query.metadata.shared <= compiled_e4m3.metadata.shared
    assert _tile_loop_local_loads(fp8q, "QGMMA.64x64x32") == 0
    assert [str(u) for u in wgmma_findings(fp8q)] == []
    if SCHEDULED_WITH_THIS_TRITON:
        assert fp8q.count("WARPGROUP.DEPBAR") <= 12, "wgmmas serialised (ptxas C7511 / C7515)"


def test_e4m3_query_routes_fp8_heads_on_m_to_t8_tuned_apart():
    """``query_precision="e4m3"`` runs T8 from ``T8_E4M3_MIN_BATCH`` (the pair: from ``T8_MIN_BATCH``), as its own tuned
    kernel (``T8_E4M3_NAME``, launched with ``Q_LO = 0``); the classes without a T8 route as with the pair."""
    hopper = interface_hopper
    assert hopper.T8_E4M3_MIN_BATCH == hopper.T8_MIN_BATCH == 1     # (every batch since session 37)
    b = hopper.T8_E4M3_MIN_BATCH
    for batch in (b, 4, 8, 64):
        assert hopper._tuned_route(128, "fp8", batch, 64, q_lo=False) == "third"
        assert hopper._tuned_route(128, "fp8", batch, 64) == "third"
    assert hopper._tuned_route(16, "fp8", 64, 64, q_lo=False) == hopper._tuned_route(16, "fp8", 64, 64)
    e4m3 = hopper.tuned_for(128, "fp8", b, 64, q_lo=False)
    assert e4m3.name == hopper.T8_E4M3_NAME
    assert e4m3 is hopper.tuned_second_kernel(True, "fp8", third=True, q_lo=False)
    assert e4m3 is not hopper.tuned_for(128, "fp8", hopper.T8_MIN_BATCH, 64)
    assert hopper.tuned_for(128, "fp8", hopper.T8_MIN_BATCH, 64).name == hopper.T8_NAME
    # (the second kernel has no lo half to drop: one object whatever the precision)
    assert hopper.tuned_second_kernel(True, "fp8", q_lo=False) is hopper.tuned_second_kernel(True, "fp8")
    q, kv, pt, lens, out = _route_inputs()
    for q_lo in (True, False):
        _, _, consts, _ = hopper.tuned_second_call(q, kv, pt, lens, 0.04, 0.5, "fp8", out, False, sms=132, third=True,
                                                   q_lo=q_lo)
        assert consts["Q_LO"] == int(q_lo)


def _route_inputs(heads=128, fmt="fp8"):
    dtype = torch.float8_e4m3fn if fmt == "fp8" else torch.bfloat16
    q = torch.empty(2, heads, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 576, dtype=dtype)
    out = torch.empty(2, heads, 512, dtype=torch.bfloat16)
    return q, kv, torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32), out


def test_t8_config_routes_to_the_kernel():
    q, kv, pt, lens, out = _route_inputs()
    args, grid, consts, _ = interface_hopper.hopper_call(q, kv, pt, lens, 0.04, 0.5, "fp8", out, False, sms=132,
                                                         config=dict(T8=1))
    fn, consts = interface_hopper._kernel_and_params(128, "fp8", consts)
    assert fn is kernel_hopper_pp8._mla_decode_hopper_pp8_kernel
    assert consts["num_warps"] == interface_hopper.PP_NUM_WARPS == 4 and consts["T8"] == 1
    assert list(args[0].block_shape) == [64, 256]         # the bf16 query's latent halves
    assert list(args[1].block_shape) == [64, 64]          # its rope
    assert list(args[2].block_shape) == [64, 512]         # the whole fp8 latent tile
    # the rope rows by TMA with the tile, as a 128-column box at column 512 (columns 576.. zero-filled); no cache
    # pointer: the kernel reads the cache through the two descriptors only (session 24)
    assert list(args[3].block_shape) == [64, 128] and args[3].base is args[2].base
    names = [n for n in fn.arg_names if n not in consts]
    assert names[:5] == ["q_nope_desc", "q_rope_desc", "kv_nope_desc", "kv_rope_desc", "kv_scale_ptr"]
    assert grid == (2, 66)
    assert interface_hopper.pinned_config(128, "fp8", dict(BLOCK_N=64, T8=1))["T8"] == 1


@pytest.mark.parametrize("heads,fmt,config,needle", [
    (16, "fp8", dict(T8=1), "H < 64"),
    (128, "bf16", dict(T8=1), "'bf16'"),
    (128, "fp8", dict(T8=1, BLOCK_N=32), "BLOCK_N=32"),
    (128, "fp8", dict(T8=1, PP=1), "PP=1")])
def test_t8_config_refused_where_it_does_not_apply(heads, fmt, config, needle):
    q, kv, pt, lens, out = _route_inputs(heads, fmt)
    with pytest.raises(ValueError, match="T8=1") as err:
        interface_hopper.hopper_call(q, kv, pt, lens, 0.04, 1.0, fmt, out, False, sms=132, config=config)
    assert needle in str(err.value)


def _swizzled(row: int, byte: int) -> int:
    """Byte address of (row, byte) in a 128-byte-swizzled tile of 128-byte rows (the NVMMA layout of the fp8 tile's
    128-column blocks and of the fp16 tile's 64-column blocks): 16-byte chunk ^ row % 8."""
    return (byte // 128) * 128 * 64 + row * 128 + (((byte % 128) // 16) ^ (row % 8)) * 16 + byte % 16


def _wavefronts(addresses) -> int:
    """Shared-memory wavefronts of 8 lanes' 16-byte accesses (a quarter-warp: how a 128-bit access is served): the
    most accesses that fall on one of the 32 four-byte banks."""
    banks = [0] * 32
    for a in addresses:
        for k in range(4):
            banks[(a // 4 + k) % 32] += 1
    return max(banks)


def _positions(reg_bases, lane_bases, warp_bases, regs: int, lanes: int = 32, warps: int = 4):
    def at(bases, index):
        r = c = 0
        for bit, (dr, dc) in enumerate(bases):
            if index >> bit & 1:
                r ^= dr
                c ^= dc
        return r, c
    return {(w, lane, g): tuple(a ^ b ^ d for a, b, d in zip(at(warp_bases, w), at(lane_bases, lane),
                                                           at(reg_bases, g)))
            for w in range(warps) for lane in range(lanes) for g in range(regs)}


@pytest.mark.parametrize("rows,num_warps", [(64, 4), (64, 8)])
def test_widen_layout_reads_and_writes_without_bank_conflicts(rows, num_warps):
    """kernel_hopper.widen_layout (T8's and the fp8 ping-pong kernel's widening, session 24): every element of the
    [rows, 128] block once, 16 consecutive columns a thread, and each quarter-warp's 16-byte fp8 loads and fp16 stores
    one wavefront under the tiles' 128-byte swizzle; the blocked layout it replaced wrote two wavefronts (on the H200,
    session 24 run 8: T8 at batch 64 0.1578 -> 0.1452 ms, the fp8 ping-pong kernel 0.1979 -> 0.1798)."""
    from graphtune.kernels.mla_decode.kernel_hopper import widen_layout
    layout = widen_layout(rows, num_warps)
    pos = _positions(layout.reg_bases, layout.lane_bases, layout.warp_bases, 1 << len(layout.reg_bases),
                     warps=num_warps)
    assert sorted(set(pos.values())) == [(r, c) for r in range(rows) for c in range(128)]
    assert len(pos) == rows * 128
    for w in range(num_warps):
        for g in range(0, 1 << len(layout.reg_bases), 16):      # one 16-column run of registers
            for lane in range(32):
                r, c = pos[(w, lane, g)]
                assert [pos[(w, lane, g + k)] for k in range(16)] == [(r, c + k) for k in range(16)]
            for q in range(4):
                lanes = [pos[(w, lane, g)] for lane in range(8 * q, 8 * q + 8)]
                assert _wavefronts([_swizzled(r, c) for r, c in lanes]) == 1          # fp8 load, 16 bytes
                for half in range(2):                                                  # fp16 stores, 2 x 16 bytes
                    assert _wavefronts([_swizzled(r, 2 * (c + 8 * half)) for r, c in lanes]) == 1
    # the blocked layout before it, [1, 16] a thread and 8 lanes along a row: its fp16 stores took two wavefronts
    blocked = [(lane // 8, 16 * (lane % 8)) for lane in range(8)]
    assert _wavefronts([_swizzled(r, 2 * c) for r, c in blocked]) == 2


def _t8_with_pair(plan: bool):
    """T8 as the tuned path launches it from a bf16 query (``Q8PRE = 1``: the pre-pass's pair by TMA), with a plan's
    rows as ``plan_ptr`` or without."""
    from test_mla_decode import compile_sm90
    q, kv, pt, lens, out = _route_inputs()
    args, grid, consts, _ = interface_hopper.hopper_call(q, kv, pt, lens, 0.04, 0.5, "fp8", out, False, sms=132,
                                                         config=dict(T8=1), query_replaced=True)
    fn, consts = interface_hopper._kernel_and_params(128, "fp8", {**consts, "Q_LO": 1})
    rows = q.shape[0] * q.shape[1]
    f8 = torch.float8_e4m3fn
    args, consts = interface_hopper.with_query_pair(args, consts, torch.empty(rows, 1024, dtype=f8),
                                                    torch.empty(rows, 128, dtype=f8), torch.empty(rows))
    if plan:
        consts = {**consts, "plan_ptr": torch.empty(grid[1], 8, dtype=torch.int32)}
    return compile_sm90(fn, args, consts)


def test_t8_reads_its_split_from_a_plan():
    """T8 given a plan's rows (``plan_ptr``: both warpgroups read the program's row, WG0 the first segment's two page
    ids): no more shared memory, the same MMAs, wgmmas asynchronous, no tile loop reloading a spill, its first copy
    sooner in the code and fewer barriers (no split pass); the plan is filled by the launch itself, before the query
    pre-pass (T8's configs carry no pre-hook), for the one grid every T8 config runs."""
    from test_mla_hopper_pp import _first_copy_line
    base, plan = _t8_with_pair(False), _t8_with_pair(True)
    assert plan.metadata.shared <= base.metadata.shared     # (the split pass's scratch gone)
    sass, sass0 = _sass_of_cubin(plan.asm["cubin"]), _sass_of_cubin(base.asm["cubin"])
    for mma in ("QGMMA.64x64x32.F32.E4M3.E4M3", "HGMMA.64x256x16.F32"):
        assert sass.count(mma) == sass0.count(mma), mma
    assert [str(u) for u in wgmma_findings(sass)] == []
    assert _first_copy_line(sass) < _first_copy_line(sass0)
    assert sass.count("BAR.SYNC") < sass0.count("BAR.SYNC")
    if SCHEDULED_WITH_THIS_TRITON:
        assert _tile_loop_local_loads(sass, "QGMMA.64x64x32") == 0
        assert sass.count("WARPGROUP.DEPBAR") <= 12, "wgmmas serialised (ptxas C7511 / C7515)"
    for q_lo in (True, False):
        kernel = interface_hopper.tuned_second_kernel(True, "fp8", third=True, q_lo=q_lo)
        assert all(c.pre_hook is None for c in kernel.configs)
    assert len({tuple(sorted((k, v) for k, v in c.items() if k in ("SPLIT_MAX", "PROGRAMS_PER_SM")))
                for c in interface_hopper.HOPPER_T8_SPACE}) == 1
    with pytest.raises(ValueError, match="T8's configs run grids of \\[66, 132\\] programs") as err:
        interface_hopper._plan_first({}, [dict(P=132), dict(P=66), dict(P=132)], lambda c: (2, c["P"]))
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="T8's configs split with MIN_TILES \\[1, 2\\]") as err:
        interface_hopper._plan_first({}, [dict(P=66), dict(P=66, MIN_TILES=2)], lambda c: (2, c["P"]))
    assert "\n" not in str(err.value)
    for space in (interface_hopper.HOPPER_T8_SPACE, interface_hopper.HOPPER_T8_P8_SPACE):
        assert len({c.get("MIN_TILES", 1) for c in space}) == 1


@pytest.mark.parametrize("tuned,split_max,least", [(True, 0, 1), (False, 0, 1), (True, 32, 1), (False, 32, 1),
                                                   (True, 0, 2), (False, 0, 2)],
                         ids=["tuned", "pinned", "tuned-split32", "pinned-split32", "tuned-pair", "pinned-pair"])
def test_t8_plan_is_filled_before_its_query_pre_pass(monkeypatch, tuned, split_max, least):
    """T8 runs as the query pre-pass's programmatic dependent and reads its plan row before it waits for that pass,
    so ``launch`` fills the plan (one launch of the plan kernel) before it launches the pass, on the tuned path (the
    fill for T8's one grid, not a config pre-hook at T8's own launch) and on a pinned one; T8 gets the rows. The fill
    is for the grid T8 runs: with SPLIT_MAX 32 in its space (or pinned) at batch 1, 32 programs a head block, not the
    132 of the constexprs alone (session 38: that plan, on an H100, gave wrong results, then an illegal address), and
    for the split T8 runs: with MIN_TILES in its space (or pinned) the plan's ranges at least that many tiles."""
    from graphtune.kernels.mla_decode import MLADecodePlan, plan as plan_mod, query8
    order = []
    monkeypatch.setattr(plan_mod.MLADecodePlan, "fill",
                        lambda self, seq_lens, page_table, page_size, programs, seg_cost, b_chunk, min_tiles=1,
                        slots=False, counted=False, geometry=(16, 1):
                        order.append(("fill", programs, seg_cost, min_tiles)))

    def pre_pass(q, pdl=False, lo=True):
        order.append(("pre-pass", pdl))
        rows = q.shape[0] * q.shape[1]
        f8 = torch.float8_e4m3fn
        return torch.empty(rows, 1024, dtype=f8), torch.empty(rows, 128, dtype=f8), torch.empty(rows)
    monkeypatch.setattr(query8, "query_pair", pre_pass)

    knobs = {**({"SPLIT_MAX": split_max} if split_max else {}), "MIN_TILES": least}
    if knobs:
        key = (True, "fp8")
        monkeypatch.setitem(interface_hopper.THIRD, key, dataclasses.replace(
            interface_hopper.THIRD[key], space=[{**c, **knobs} for c in interface_hopper.THIRD[key].space]))
    grids = []

    class Launcher:
        def __getitem__(self, grid):
            grids.append(grid(interface_hopper.THIRD[(True, "fp8")].space[0]) if callable(grid) else grid)

            def run(*args, **consts):
                order.append(("T8", consts.get("plan_ptr") is not None, consts.get("Q8PRE")))
            return run
    monkeypatch.setattr(interface_hopper, "_route_kernel", lambda *a, **k: Launcher())
    batch = interface_hopper.T8_MIN_BATCH
    q = torch.empty(batch, 128, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 576, dtype=torch.float8_e4m3fn)
    pt, lens = torch.zeros(batch, 2, dtype=torch.int32), torch.ones(batch, dtype=torch.int32)
    out = torch.empty(batch, 128, 512, dtype=torch.bfloat16)
    if not tuned:
        monkeypatch.setattr(interface_hopper, "_kernel_and_params", lambda heads, fmt, consts: (Launcher(), consts))
    interface_hopper.launch(q, kv, pt, lens, 0.04, 0.5, "fp8", out, False, sms=132,
                            config=None if tuned else dict(T8=1, **knobs), plan=MLADecodePlan())
    assert [o[0] for o in order] == ["fill", "pre-pass", "T8"], order
    assert batch == 1 and order[0][1] == grids[0][1] == (32 if split_max else 66), (order, grids)
    assert order[0][2] == int(interface_hopper.kernel_hopper.FP8_SEG_COST) and order[0][3] == least
    assert order[1] == ("pre-pass", True) and order[2] == ("T8", True, 1)



def _prmt(a: int, b: int, sel: int) -> int:
    """PTX ``prmt.b32`` (default mode): byte k of the result is byte ``(sel >> 4 k) & 7`` of {b, a} (a's bytes 0-3)."""
    pool = a.to_bytes(4, "little") + b.to_bytes(4, "little")
    return int.from_bytes(bytes(pool[(sel >> (4 * k)) & 7] for k in range(4)), "little")


def _linear(bases: list, index: int) -> tuple:
    """A linear layout's coordinate of ``index``: the XOR of the bases of its set bits."""
    out = [0] * len(bases[0])
    for bit, base in enumerate(bases):
        if index >> bit & 1:
            out = [o ^ b for o, b in zip(out, base)]
    return tuple(out)


def _unswizzle64(rows: int, flat: np.ndarray) -> np.ndarray:
    """A [rows, 64]-byte tile under the 64-byte NVMMA swizzle (byte bits 4-5 XOR bits 7-8; checked against Triton's
    own lowering in test_p8_shared_views_are_nvmmas_swizzle) in logical order."""
    out = np.empty((rows, 64), dtype=flat.dtype)
    for n in range(rows):
        for k in range(64):
            out[n, k] = flat[64 * n + 16 * ((k // 16) ^ ((n >> 1) & 3)) + k % 16]
    return out


def test_p8_transposition_and_p_share_one_token_order():
    """P8's transposition (session 46): each thread's int16 registers as ``_TRL`` lays them out (what LDSM.16.MT88.4 delivers from a
    warpgroup's [64 tokens, 256 fp8 columns] half of the tile), ``_TR2_ASM``'s PRMTs emulated on each four of them (two
    32-bit registers, the first element low, as Triton packs 16-bit elements for inline asm), stored through ``_VT_TR``
    into V^T's 64-byte swizzle, and a random P stored through ``_P_TR``: V^T's row n is column n of V and P's row h its
    row, both with the tokens in one order k' -> t, so P.V over k' is P.V over the tokens."""
    lay = kernel_hopper_pp8._TRL.value
    rng = np.random.default_rng()
    v = rng.integers(0, 256, size=(64, 256), dtype=np.uint8)
    v16 = v.view("<u2")                                                     # [64 tokens, 128]: two columns each
    vt_offset = {_linear(kernel_hopper_pp8._VT_TR.value.offset_bases, o): o for o in range(64 * 128)}
    vt = np.zeros(256 * 32, dtype=np.uint16)
    sel = [int(x, 16) for x in re.findall(r"0x[0-9a-f]+", kernel_hopper_pp8._TR2_ASM.value)]
    n_regs = 1 << len(lay.reg_bases)
    for thread in range(128):
        lane, warp = thread % 32, thread // 32
        base = tuple(a ^ b for a, b in zip(_linear(lay.lane_bases, lane), _linear(lay.warp_bases, warp)))
        coords = [tuple(a ^ b for a, b in zip(base, _linear(lay.reg_bases, i))) for i in range(n_regs)]
        for g in range(0, n_regs, 4):
            e = [int(v16[c]) for c in coords[g:g + 4]]
            x, y = e[0] | e[1] << 16, e[2] | e[3] << 16
            outs = [_prmt(x, y, sel[0]), _prmt(x, y, sel[1])]
            for i, c in enumerate(coords[g:g + 4]):
                vt[vt_offset[c]] = outs[i // 2] >> (16 * (i % 2)) & 0xFFFF
    vt_logical = _unswizzle64(256, vt.view(np.uint8))                       # [256 columns, 64 k']
    p = rng.integers(0, 256, size=(64, 64), dtype=np.uint8)                 # [64 heads, 64 tokens]
    p_offset = {_linear(kernel_hopper_pp8._P_TR.value.offset_bases, o): o for o in range(64 * 64)}
    p_flat = np.zeros(64 * 64, dtype=np.uint8)
    for h in range(64):
        for t in range(64):
            p_flat[p_offset[(h, t)]] = p[h, t]
    p_logical = _unswizzle64(64, p_flat)                                    # [64 heads, 64 k']
    order = [16 * (k // 16) + 2 * ((k // 4) % 4) + 8 * ((k // 2) % 2) + k % 2 for k in range(64)]
    assert sorted(order) == list(range(64))
    np.testing.assert_array_equal(vt_logical, v[order].T)
    np.testing.assert_array_equal(p_logical, p[:, order])


def _swap03(n: int) -> int:
    """``n`` with bits 0 and 3 swapped."""
    return (n & ~9) | (n & 1) << 3 | (n >> 3) & 1


def test_vs_rows_swapped_conflict_free_and_undone_by_the_epilogue():
    """VS (session 46, not run on a GPU yet): ``_VT_TRS`` stores V^T's row for column n at row n with bits 0 and 3
    swapped (the same emulated chain as ``_VT_TR`` otherwise), so the eight rows one STSM matrix takes (columns n, n +
    2, .., n + 14: the transposing load's lanes 4, 8, 16) land in eight different 16-byte bank groups of the 64-byte
    swizzle, where ``_VT_TR`` puts them in four (two wavefronts a matrix); P.V's column p then holds dim swap(p), which
    ``kernel_hopper_pp._cols_unswapped``'s reshapes and permute (emulated in numpy, as Gluon's follow numpy's) undo."""
    import inspect
    from graphtune.kernels.mla_decode import kernel_hopper_pp

    def offsets(view):
        return {_linear(view.value.offset_bases, o): o for o in range(64 * 128)}

    def bank_groups(where, r, e0):          # the 16-byte bank groups of one matrix's eight rows (int16 offsets)
        return len({(2 * where[(r, e0 + e)] >> 4) & 7 for e in range(8)})

    plain, swapped = offsets(kernel_hopper_pp8._VT_TR), offsets(kernel_hopper_pp8._VT_TRS)
    for r in range(64):
        for e0 in range(0, 128, 8):
            assert bank_groups(plain, r, e0) == 4 and bank_groups(swapped, r, e0) == 8, (r, e0)
    # the same element lands in row swap(n) under VS where _VT_TR puts it in row n, at the same k' pair
    for key, o in plain.items():
        n, kp = divmod(o, 32)
        chunk = (kp // 8) ^ ((n >> 1) & 3)
        m = _swap03(n)
        assert swapped[key] == 32 * m + 8 * (chunk ^ ((m >> 1) & 3)) + kp % 8, key
    body = inspect.getsource(kernel_hopper_pp._cols_unswapped.fn)
    assert "gl.permute(gl.reshape(o, [o.shape[0], 16, 2, 4, 2]), (0, 1, 4, 3, 2))" in body
    assert "gl.reshape(x, [o.shape[0], 256])" in body
    acc = np.random.default_rng().standard_normal((4, 256))
    out = acc.reshape(4, 16, 2, 4, 2).transpose(0, 1, 4, 3, 2).reshape(4, 256)
    np.testing.assert_array_equal(out[:, [_swap03(p) for p in range(256)]], acc)


def test_p8_shared_views_are_nvmmas_swizzle():
    """The swizzle ``_unswizzle64`` assumes is Triton's: a tile stored through ``NVMMASharedLayout(64, w)`` and
    through a shared linear layout whose offset bits name the logical index that swizzle gives compile to the same
    SASS (V^T as int16 [256, 32], a P tile as int8 [64, 64]), and to other SASS once the swizzle's XOR is dropped."""
    from test_mla_decode import compile_sm90
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    @gluon.jit
    def store_load(src, dst, ROWS: gl.constexpr, COLS: gl.constexpr, VIEW: gl.constexpr, num_warps: gl.constexpr):
        blocked: gl.constexpr = gl.BlockedLayout([1, 2], [8, 4], [num_warps, 1], [1, 0])
        bits: gl.constexpr = src.dtype.element_ty.primitive_bitwidth
        buf = gl.allocate_shared_memory(src.dtype.element_ty, [ROWS, COLS], gl.NVMMASharedLayout(64, bits))
        r = gl.arange(0, ROWS, layout=gl.SliceLayout(1, blocked))[:, None]
        c = gl.arange(0, COLS, layout=gl.SliceLayout(0, blocked))[None, :]
        x = gl.load(src + r * COLS + c)
        if VIEW is None:
            buf.store(x)
        else:
            kernel_hopper_pp8._view(buf, src.dtype.element_ty, [ROWS, COLS], VIEW).store(x)
        _block_barrier()
        gl.store(dst + r * COLS + c, buf.load(blocked))

    def sass(rows, cols, dtype, view):
        a = torch.empty(rows * cols, dtype=dtype)
        compiled = compile_sm90(store_load, [a, a], dict(ROWS=rows, COLS=cols, VIEW=view, num_warps=4))
        return re.sub(r"/\*[0-9a-f]+\*/|/\* 0x[0-9a-f]+ \*/", "", _sass_of_cubin(compiled.asm["cubin"]))

    def view(cols, row_bits, swizzled):
        col_bits = cols.bit_length() - 1
        bases = [[0, 1 << i] for i in range(col_bits)] + [[1 << i, 0] for i in range(row_bits)]
        if swizzled:            # (offset bits 7-8 XOR the 16-byte chunk: logical column + 16 / + 32 bytes)
            per_chunk = 16 * cols // 64
            for i, row in ((1, 2), (2, 4)):
                bases[col_bits + i] = [row, per_chunk * i]
        return gl.SharedLinearLayout(offset_bases=bases)

    for rows, cols, dtype, row_bits in ((256, 32, torch.int16, 8), (64, 64, torch.int8, 6)):
        plain = sass(rows, cols, dtype, None)
        assert sass(rows, cols, dtype, view(cols, row_bits, True)) == plain
        assert sass(rows, cols, dtype, view(cols, row_bits, False)) != plain


def _p8_compile(config: dict):
    """T8 as a query given in e4m3 launches it (``Q_FP8 = 1``, ``Q_LO = 0``), with ``config``."""
    from test_mla_decode import compile_sm90
    q, kv, pt, lens, out = _route_inputs()
    q8 = q.to(torch.float8_e4m3fn)
    args, _, consts, _ = interface_hopper.hopper_call(q8, kv, pt, lens, 0.04, 0.5, "fp8", out, False, sms=132,
                                                      config=config)
    fn, consts = interface_hopper._kernel_and_params(128, "fp8", {**consts, "Q_LO": 0})
    args, consts = interface_hopper._fp8_query(args, consts, q8, 2.0, "T8")
    return compile_sm90(fn, args, consts)


@pytest.mark.parametrize("wl1", [0, 1])
def test_p8_multiplies_an_e4m3_p_by_a_transposed_v(compiled_fp8_query, wl1):
    """P8 = 1 (pinned only; its GPU tests passed in session 43, call M), FlashMLA's fp8 accuracy
    class: P in e4m3 and P.V as fp8 wgmmas (QGMMA.64x256x32, half the tensor work of T8's fp16 P.V) on each half of V
    transposed into bytes [32 K, 64 K) of its buffer (where T8 writes its widened halves). Compiled for sm_90 with a
    query given in e4m3: no fp16 P.V left, the same score MMAs and shared memory as T8, every wgmma's operands set on
    every path into it (one P.V call site per warpgroup and tile after the pair loop's branches join: a copy in each
    branch compiled with ptxas 12.8 to a wgmma reading a descriptor only the other branch sets, as PV8's did in session
    25), no tile loop reloading a spill, the wgmmas asynchronous."""
    t8 = _sass_of_cubin(compiled_fp8_query.asm["cubin"])
    p8 = _p8_compile(dict(T8=1, P8=1, WL1=wl1))
    sass = _sass_of_cubin(p8.asm["cubin"])
    assert t8.count("HGMMA.64x256x16.F32") > 0 and sass.count("HGMMA.64x256x16.F32") == 0
    assert sass.count("QGMMA.64x256x32.F32.E4M3.E4M3") == 8      # two k-steps at each of four call sites
    assert sass.count("QGMMA.64x64x32.F32.E4M3.E4M3") == t8.count("QGMMA.64x64x32.F32.E4M3.E4M3")
    assert p8.metadata.shared == compiled_fp8_query.metadata.shared
    assert [str(u) for u in wgmma_findings(sass)] == []
    if SCHEDULED_WITH_THIS_TRITON:
        # (with triton 3.9 P8 + WL1 reloads a spill in its tile loop: its register allocation differs)
        assert _tile_loop_local_loads(sass, "QGMMA.64x64x32") == 0
        assert sass.count("WARPGROUP.DEPBAR") <= 12, "wgmmas serialised (ptxas C7511 / C7515)"
    # (wgmma_findings includes graphtune.sass.stores_of_unwritten_registers: with WG1's own P converted beside its
    # hand-off, 8 of the 32 16-bit P-tile stores stored the rows h % 16 < 8 from registers only written later in the
    # pair: stale P, NaN in a program's first segment, session 43 calls E-L.) V transposed by transposing loads, P and
    # V^T stored by STSM: eight LDSM.16.MT88.4 and eight STSM a transposition (four places), two STSM a P hand-off
    # (two), no 16-bit P stores
    assert sass.count("LDSM.16.MT88.4") == 32 and sass.count("STSM.16.M88.4") == 36
    assert sass.count("STS.U16") == 0


def test_p8_schedule_variants_compile_clean():
    """P8's schedule variants (pinned, session 44): EI (tile r + 2's and r + 3's copies issued once their buffer's
    bytes are read, not after the P.V retires: P8's V^T has buffers of its own), TE (WG0's half of V transposed under
    its score MMAs) and NF (with TE, the transpositions' proxy fences left to the hand-offs', two fewer): compiled for
    sm_90, the same fp8 MMAs as P8, every wgmma's operands and every stored register set on every path, no tile loop
    reloading a spill, and NF's build two fences fewer than P8's."""
    base = _sass_of_cubin(_p8_compile(dict(T8=1, P8=1)).asm["cubin"])
    for config in (dict(EI=1), dict(EI=1, TE=1), dict(EI=1, TE=1, NF=1), dict(EI=1, WL1=1), dict(VS=1),
                   dict(EI=1, TE=1, NF=1, VS=1)):
        compiled = _p8_compile(dict(T8=1, P8=1, **config))
        sass = _sass_of_cubin(compiled.asm["cubin"])
        assert compiled.metadata.shared <= SM90_SHARED, (config, compiled.metadata.shared)
        assert sass.count("QGMMA.64x256x32.F32.E4M3.E4M3") == 8, config
        assert [str(u) for u in wgmma_findings(sass)] == [], config
        if SCHEDULED_WITH_THIS_TRITON:
            # (with triton 3.9 TE reloads 13 spills in the tile loop, WL1 one: the schedule is 3.6's)
            assert _tile_loop_local_loads(sass, "QGMMA.64x64x32") == 0, config
        if config.get("NF") and SCHEDULED_WITH_THIS_TRITON:
            # (triton 3.9 puts a proxy fence of its own into the build with the transposing loads, one more with NF)
            assert sass.count("FENCE.VIEW.ASYNC.S") == base.count("FENCE.VIEW.ASYNC.S") - 2


def test_p8_refused_where_it_does_not_apply():
    """P8 takes 0 or 1, runs with the query pair made before the kernel and with the query in e4m3; EI, TE and NF take
    0 or 1, and 1 with P8 (NF with TE), and so does VS: one line each, naming the key and its value."""
    q, kv, pt, lens, out = _route_inputs()
    for config, needle in ((dict(T8=1, P8=2), "P8=2"), (dict(T8=1, P8=1, Q8PRE=0), "Q8PRE=0"),
                           (dict(T8=1, EI=1), "EI=1"), (dict(T8=1, P8=1, NF=1), "NF=1"),
                           (dict(T8=1, P8=1, TE=2), "TE=2"), (dict(T8=1, VS=1), "VS=1")):
        with pytest.raises(ValueError, match="config ") as err:
            interface_hopper.hopper_call(q, kv, pt, lens, 0.04, 1.0, "fp8", out, False, sms=132, config=config)
        assert needle in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ValueError, match="P8=1") as err:
        interface_hopper.launch(q, kv, pt, lens, 0.04, 1.0, "fp8", out, False, sms=132, config=dict(T8=1, P8=1))
    assert "query_precision='e4m3'" in str(err.value) and "\n" not in str(err.value)


def test_p_precision_e4m3_routes_t8_to_p8_tuned_apart():
    """``p_precision="e4m3"`` with the e4m3 query: where the tuned path runs T8 (fp8, H % 64 == 0, every batch) it runs
    P8's schedules (``HOPPER_T8_P8_SPACE``) as a tuned kernel of its own (``T8_P8_NAME``), one object however asked
    for; with the pair's query, or where T8 does not run (H < 64, page size 1), the kernel without it."""
    hopper = interface_hopper
    for batch in (1, 8, 64):
        p8 = hopper.tuned_for(128, "fp8", batch, 64, q_lo=False, p8=True)
        assert p8.name == hopper.T8_P8_NAME
        assert p8 is hopper.tuned_second_kernel(True, "fp8", third=True, q_lo=False, p8=True)
        assert p8 is not hopper.tuned_for(128, "fp8", batch, 64, q_lo=False)
    assert [c.kwargs for c in p8.configs] == hopper.HOPPER_T8_P8_SPACE
    assert all(c.kwargs["P8"] == 1 and c.kwargs["T8"] == 1 for c in p8.configs)
    assert all(c.num_warps == hopper.PP_NUM_WARPS for c in p8.configs)
    # (the pair's query has no e4m3 P; H = 16 and page size 1 run no T8: the same kernels as without it)
    assert hopper.tuned_for(128, "fp8", 8, 64, p8=True) is hopper.tuned_for(128, "fp8", 8, 64)
    assert hopper.tuned_for(16, "fp8", 8, 64, q_lo=False, p8=True) is hopper.tuned_for(16, "fp8", 8, 64, q_lo=False)
    assert hopper.tuned_for(16, "fp8", 8, 1, q_lo=False, p8=True) is hopper.tuned_for(16, "fp8", 8, 1, q_lo=False)
    # its launch: Q_LO = 0, the grid of T8's (one for every config: its plan is filled before the query pre-pass)
    q, kv, pt, lens, out = _route_inputs()
    args, grid, consts, _ = hopper.tuned_second_call(q, kv, pt, lens, 0.04, 0.5, "fp8", out, False, sms=132,
                                                     third=True, q_lo=False, p8=True)
    assert consts["Q_LO"] == 0
    assert len({grid(c) for c in hopper.HOPPER_T8_P8_SPACE}) == 1
    for config in hopper.HOPPER_T8_P8_SPACE:     # each a config the pinned path accepts too
        assert hopper.pinned_config(128, "fp8", config)["P8"] == 1


def test_p_precision_serving_kernel_and_its_one_line_refusals(monkeypatch):
    """``serving_kernel`` names P8's tuned kernel for ``p_precision="e4m3"`` with an e4m3 query (given, or
    ``query_precision="e4m3"``); a value not in ``P_PRECISIONS``, a bf16 cache or the bf16 query's precision is
    refused in one line naming ``p_precision`` and the value, by the public call, the custom op's wrapper and
    ``serving_kernel`` alike."""
    from graphtune.kernels.mla_decode import op
    monkeypatch.setattr(interface_hopper, "supported", lambda *a, **k: None)
    monkeypatch.setattr(interface.settings, "interpret", lambda: False)
    fp8_cache = torch.empty(8, 64, 576, dtype=torch.float8_e4m3fn)
    bf16_cache = torch.empty(8, 64, 576, dtype=torch.bfloat16)
    q = torch.empty(8, 128, 576, dtype=torch.bfloat16)
    q8 = torch.empty(8, 128, 576, dtype=torch.float8_e4m3fn)
    assert interface.serving_kernel(q, fp8_cache, query_precision="e4m3",
                                    p_precision="e4m3").name == interface_hopper.T8_P8_NAME
    assert interface.serving_kernel(q8, fp8_cache, p_precision="e4m3").name == interface_hopper.T8_P8_NAME
    assert interface.serving_kernel(q8, fp8_cache).name == interface_hopper.T8_E4M3_NAME
    pt, lens = torch.zeros(8, 2, dtype=torch.int32), torch.ones(8, dtype=torch.int32)
    cases = [(q, fp8_cache, dict(query_precision="e4m3", p_precision="fp8"), "p_precision: 'fp8', expected one of"),
             (q, fp8_cache, dict(query_precision="e4m3", p_precision=None), "p_precision: None, expected one of"),
             (q, bf16_cache, dict(p_precision="e4m3"), "p_precision: 'e4m3' applies to an fp8 cache"),
             (q, fp8_cache, dict(p_precision="e4m3"), "p_precision: 'e4m3' with query_precision='bf16'"),
             (q, fp8_cache, dict(query_precision="bf16", p_precision="e4m3"), "with query_precision='bf16'")]
    for qq, kv, kw, needle in cases:
        calls = [lambda: interface.mla_decode(qq, kv, pt, lens, 0.04, **kw),
                 lambda: op.mla_decode_op(qq, kv, pt, lens, 0.04, **kw),
                 lambda: interface.serving_kernel(qq, kv, **kw)]
        for call in calls:
            with pytest.raises(ValueError) as err:
                call()
            assert needle in str(err.value) and "\n" not in str(err.value), (kw, str(err.value))


def test_p_precision_is_in_the_custom_ops_schema():
    """The ``graphtune::`` ops take ``p_precision`` (a torch.compile'd call passes it through the schema)."""
    from graphtune.kernels.mla_decode import op
    names = ["mla_decode", "mla_decode_out"] + (["mla_decode_planned", "mla_decode_out_planned"]
                                                if op.PLAN_UNDER_COMPILE else [])
    for name in names:
        schema = getattr(torch.ops.graphtune, name).default._schema
        assert "p_precision" in [a.name for a in schema.arguments], name


def test_p8_protocol_model_holds_for_every_schedule():
    """The hand-written model of P8's tile-buffer protocol (benchmarks/probes/p8_protocol_model.py: EI x TE x WL1,
    random interleavings and TMA completion orders) finds no failure, and finds them when EI's copy of the tile two on
    is moved before WG0's wait for WG1's read of the buffer (so the model checks something). The kernel keeps that
    order: in WG0 the wait for rsrc comes before EI's copy into the buffer."""
    import inspect
    import subprocess
    import sys
    from pathlib import Path
    model = Path(__file__).resolve().parents[2] / "benchmarks" / "probes" / "p8_protocol_model.py"
    run = subprocess.run([sys.executable, str(model)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip().endswith("failures 0"), run.stdout + run.stderr
    run = subprocess.run([sys.executable, str(model), "--mutate"], capture_output=True, text=True, timeout=120)
    assert int(run.stdout.strip().rsplit(" ", 1)[-1]) > 0, run.stdout
    body = inspect.getsource(kernel_hopper_pp8._pp8_wg0.fn)
    wait = body.index("mbarrier.wait(rsrc.index(stage), (g // 2) & 1)")
    assert wait < body.index("_issue8(kv_nope_desc, kv_rope_desc, k8_bufs, kr_bufs, land, row2, stage)")


def test_pl_multiplies_both_halves_of_an_e4m3_pair():
    """PL (pinned, session 47): P as an e4m3 pair, each half multiplied by the transposed fp8 V. Compiled for sm_90
    with a query given in e4m3, alone and in P8's schedules: twice P8's P.V wgmmas (each call site's hi then lo), the
    same score MMAs, two more P stores a hand-off (the lo tile), 8 KB more shared memory (two lo tiles) within sm_90's
    block limit, every wgmma's operands and stored register set on every path, no tile loop reloading a spill."""
    base = _p8_compile(dict(T8=1, P8=1))
    base_sass = _sass_of_cubin(base.asm["cubin"])
    for config in (dict(), dict(EI=1), dict(EI=1, TE=1, NF=1), dict(EI=1, WL1=1)):
        compiled = _p8_compile(dict(T8=1, P8=1, PL=1, **config))
        sass = _sass_of_cubin(compiled.asm["cubin"])
        assert compiled.metadata.shared == base.metadata.shared + 2 * 64 * 64, (config, compiled.metadata.shared)
        assert compiled.metadata.shared <= SM90_SHARED
        assert sass.count("QGMMA.64x256x32.F32.E4M3.E4M3") == 16, config
        assert sass.count("QGMMA.64x64x32.F32.E4M3.E4M3") == base_sass.count("QGMMA.64x64x32.F32.E4M3.E4M3")
        assert sass.count("STSM.16.M88.4") == base_sass.count("STSM.16.M88.4") + 4, config
        assert [str(u) for u in wgmma_findings(sass)] == [], config
        if SCHEDULED_WITH_THIS_TRITON:
            assert _tile_loop_local_loads(sass, "QGMMA.64x64x32") == 0, config
    with pytest.raises(ValueError, match="config PL=1") as err:
        q, kv, pt, lens, out = _route_inputs()
        interface_hopper.hopper_call(q, kv, pt, lens, 0.04, 1.0, "fp8", out, False, sms=132, config=dict(T8=1, PL=1))
    assert "P8=0" in str(err.value) and "\n" not in str(err.value)


def _e4m3_bits(x: np.ndarray) -> np.ndarray:
    """float values rounded to e4m3 (to nearest, ties to even; finite), as their bytes."""
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(torch.float8_e4m3fn).view(torch.uint8).numpy()


def _e4m3_value(bits: np.ndarray) -> np.ndarray:
    return torch.from_numpy(np.ascontiguousarray(bits, dtype=np.uint8)).view(torch.float8_e4m3fn).float().numpy()


def _run_f16x2_asm(asm: str, regs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The PTX of ``asm`` (the handful of operations ``_p8_scaled_pair`` uses) run lane-wise over numpy arrays:
    ``regs`` maps ``$k`` to uint32 arrays (f32 operands as their bits); returns every register written. Each f16x2
    operation rounds each half as PTX's ``.rn`` does (the float32 result of two fp16 operands rounded to fp16)."""
    def halves(v):
        return (v & 0xFFFF).astype(np.uint16), (v >> 16).astype(np.uint16)

    def f16(bits):
        return bits.astype(np.uint16).view(np.float16)

    def bits16(x):
        return np.asarray(x, dtype=np.float16).view(np.uint16)

    def pack(lo, hi):
        return lo.astype(np.uint32) | (hi.astype(np.uint32) << 16)

    r = dict(regs)
    body = asm.strip().strip("{}")
    for stmt in (s.strip() for s in body.split(";")):
        if not stmt or stmt.startswith(".reg"):
            continue
        op, rest = stmt.split(None, 1)
        ops = [o.strip() for o in re.split(r",(?![^{]*})", rest)]
        if op == "mov.b32" and ops[0].startswith("{"):          # unpack a 32-bit register into two 16-bit ones
            a, b = (x.strip() for x in ops[0].strip("{}").split(","))
            r[a], r[b] = halves(r[ops[1]])
        elif op == "mov.b32":                                   # pack two 16-bit registers
            a, b = (x.strip() for x in ops[1].strip("{}").split(","))
            r[ops[0]] = pack(r[a], r[b])
        elif op == "cvt.rn.f16x2.e4m3x2":
            v = r[ops[1]].astype(np.uint16)
            r[ops[0]] = pack(bits16(_e4m3_value(v & 0xFF)), bits16(_e4m3_value(v >> 8)))
        elif op in ("add.rn.f16x2", "sub.rn.f16x2", "mul.rn.f16x2"):
            fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op.split(".")[0]]
            (a0, a1), (b0, b1) = halves(r[ops[1]]), halves(r[ops[2]])
            r[ops[0]] = pack(*(bits16(fn(f16(x).astype(np.float32), f16(y).astype(np.float32)))
                               for x, y in ((a0, b0), (a1, b1))))
        elif op == "cvt.rn.f16.f32":
            r[ops[0]] = bits16(r[ops[1]].astype(np.uint32).view(np.float32))
        elif op == "cvt.rn.f16x2.f32":                          # d = {f16(a) upper, f16(b) lower}
            a, b = (r[o].astype(np.uint32).view(np.float32) for o in ops[1:])
            r[ops[0]] = pack(bits16(b), bits16(a))
        elif op == "cvt.rn.satfinite.e4m3x2.f32":               # d = {e4m3(a) upper byte, e4m3(b) lower}
            a, b = (np.clip(r[o].astype(np.uint32).view(np.float32), -448, 448) for o in ops[1:])
            r[ops[0]] = _e4m3_bits(b).astype(np.uint16) | (_e4m3_bits(a).astype(np.uint16) << 8)
        elif op == "cvt.rn.satfinite.e4m3x2.f16x2":
            h0, h1 = halves(r[ops[1]])
            lo, hi = (_e4m3_bits(np.clip(f16(h).astype(np.float32), -448, 448)) for h in (h0, h1))
            r[ops[0]] = lo.astype(np.uint16) | (hi.astype(np.uint16) << 8)
        else:
            raise AssertionError(f"an operation this emulation does not know: {stmt!r}")
    return r


def _bytes_values(word: np.ndarray) -> np.ndarray:
    """A register of four e4m3 (element i in byte i) as their values [n, 4]."""
    return _e4m3_value(np.stack([(word >> (8 * i)) & 0xFF for i in range(4)], 1))


def _pair_of(asm: str, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``asm`` (``_p_pair_store``'s) on 2^8 P, four values a row of ``p`` [n, 4]: the pair's registers (hi, lo)."""
    y = (p * 256.0).astype(np.float32).view(np.uint32)
    out = _run_f16x2_asm(asm, {f"${2 + i}": y[:, i] for i in range(4)})
    return out["$0"], out["$1"]


def _pair_rescaled(asm: str, hi: np.ndarray, lo: np.ndarray, beta: np.ndarray):
    """``asm`` (``_p8_scaled_pair``'s) on the pair's registers with ``beta``: the values of hi' and lo' [n, 4]."""
    out = _run_f16x2_asm(asm, {"$2": hi, "$6": lo, "$10": beta.astype(np.float32).view(np.uint32)})
    return _bytes_values(out["$0"]), _bytes_values(out["$1"])


def test_pl_pair_holds_p_to_bf16s_class_through_its_rescale():
    """PL's numerics, its two asm blocks run as written (``_p_pair_store``'s and ``_p8_scaled_pair``'s PTX, emulated
    lane by lane): P from softmax-like scores (exp2 of random logits minus the row max, so values from 1 down past
    2^-20) made into the pair holds 2^8 P within 2^-8 of itself (plus an absolute 2^-9, e4m3's smallest step), and
    rescaled by a max step beta comes out as hi' + lo' within that of 2^8 P beta, where the e4m3 P alone is off by up
    to 2^-4 of itself; the rescale with the add of lo dropped, or the pair with its remainder not taken, falls back to
    e4m3's class."""
    rng = np.random.default_rng()
    s = rng.normal(0.0, 3.0, (4096, 4)).astype(np.float32)
    p = np.exp2(s - s.max()).astype(np.float32)
    beta = np.exp2(-rng.uniform(0.0, 6.0, 4096)).astype(np.float32)
    make, rescale = _PAIR_ASMS()

    def close(got, want):
        return np.abs(got - want) <= want * 2.0 ** -8 + 2.0 ** -9

    hi, lo = _pair_of(make, p)
    assert close(_bytes_values(hi) + _bytes_values(lo), p * 256.0).all()
    hi2, lo2 = _pair_rescaled(rescale, hi, lo, beta)
    want = p * 256.0 * beta[:, None]
    assert close(hi2 + lo2, want).all(), float((np.abs(hi2 + lo2 - want) / np.maximum(want, 1e-30)).max())
    single = _e4m3_value(_e4m3_bits(want))
    assert not close(single, want).all()      # the single e4m3 P's class, for contrast
    broken = rescale.replace("add.rn.f16x2 h0, h0, l0; add.rn.f16x2 h1, h1, l1;", "")
    assert not close(sum(_pair_rescaled(broken, hi, lo, beta)), want).all()
    no_rest = make.replace("sub.rn.f16x2 y0, y0, h0; sub.rn.f16x2 y1, y1, h1;", "")
    hi3, lo3 = _pair_of(no_rest, p)
    assert not close(_bytes_values(hi3) + _bytes_values(lo3), p * 256.0).all()


def _PAIR_ASMS() -> tuple[str, str]:
    """``_p_pair_store``'s and ``_p8_scaled_pair``'s PTX as the kernel module holds them (the asm string literals)."""
    import inspect
    return tuple(re.search(r'"""(\{.*?\})"""', inspect.getsource(fn.fn), re.S).group(1)
                 for fn in (kernel_hopper_pp8._p_pair_store, kernel_hopper_pp8._p8_scaled_pair))


@pytest.mark.parametrize("least", [0, 17, True, 2.0, "2"])
def test_t8_min_tiles_out_of_range_is_one_line(least):
    """``MIN_TILES`` (each program's range at least that many tiles) takes an int in 1..MIN_TILES_MAX: anything else is
    one line naming it and the value, before any launch."""
    with pytest.raises(ValueError, match=f"config MIN_TILES={least!r}: ") as err:
        interface_hopper._check_t8(True, "fp8", dict(T8=1, MIN_TILES=least))
    assert "\n" not in str(err.value)
    interface_hopper._check_t8(True, "fp8", dict(T8=1, MIN_TILES=interface_hopper.MIN_TILES_PAIR))


def test_a_plans_least_tiles_reach_its_kernel_and_a_change_refills_it(monkeypatch):
    """The plan's fill passes the reading config's ``MIN_TILES`` (1 without one) to the plan kernel as its constexpr,
    and a fill for another MIN_TILES over the same grid launches the plan kernel again (a plan's rows hold one
    split)."""
    from graphtune.kernels.mla_decode import MLADecodePlan, kernel_hopper, plan as plan_mod
    launches = []

    class PlanKernel:
        def __getitem__(self, grid):
            return lambda *args, **consts: launches.append((grid, consts["MIN_TILES"], consts["SEG_COST"]))
    monkeypatch.setattr(kernel_hopper, "_mla_decode_plan_kernel", PlanKernel())
    lens, pt = torch.ones(2, dtype=torch.int32), torch.zeros(2, 2, dtype=torch.int32)
    plan = MLADecodePlan()
    rows = plan_mod.attach(plan, lens, pt, 64, 66, lambda config: 66, 128, fp8=True)
    for nargs in ({}, {}, {"MIN_TILES": 2}, {"MIN_TILES": 2}, {}):
        plan_mod.plan_hook({**nargs, "plan_ptr": rows})
    seg = int(kernel_hopper.FP8_SEG_COST)
    assert launches == [((1, 66), 1, seg), ((1, 66), 2, seg), ((1, 66), 1, seg)]


def test_p8_with_a_pair_of_tiles_a_program_compiles_as_without():
    """``MIN_TILES = 2`` (a pair of tiles a program at least: the split's ``per`` raised, one max in its pass) changes
    only the split: P8 + EI + VS and T8 compiled for sm_90 with it keep their shared memory, wgmmas, registers and
    local memory accesses, and no wgmma hazard; and the plan kernel compiles with it."""
    from test_mla_decode import _hopper_compile, compile_sm90
    from graphtune.kernels.mla_decode import kernel_hopper as kh
    pair = dict(MIN_TILES=interface_hopper.MIN_TILES_PAIR)
    for build in (lambda extra: _p8_compile(dict(T8=1, P8=1, EI=1, VS=1, **extra)),
                  lambda extra: _hopper_compile("fp8", heads=128, page_size=64, config=dict(T8=1, **extra))):
        base, with_pair = build({}), build(pair)
        sass, sass0 = _sass_of_cubin(with_pair.asm["cubin"]), _sass_of_cubin(base.asm["cubin"])
        assert with_pair.metadata.shared == base.metadata.shared
        for mma in ("QGMMA.64x256x32", "QGMMA.64x64x32", "HGMMA.64x256x16"):
            assert sass.count(mma) == sass0.count(mma), mma
        for local in ("LDL", "STL"):
            assert sass.count(local) == sass0.count(local), local
        regs = [resources._resource_usage(c.asm["cubin"], c.metadata.name)["REG"] for c in (with_pair, base)]
        assert regs[0] == regs[1], regs
        assert resources.wgmma_hazards(with_pair) == ()
    args = (torch.ones(2, dtype=torch.int32), torch.zeros(2, 2, dtype=torch.int32),
            torch.empty(132, int(kh.PLAN_COLS), dtype=torch.int32), 2, 2)
    compiled = compile_sm90(kh._mla_decode_plan_kernel, args, dict(PAGE_SIZE=64, B_CHUNK=128, BLOCK_N=64, SEG_COST=4,
                                                                      MIN_TILES=2, num_warps=4))
    assert "STG" in _sass_of_cubin(compiled.asm["cubin"])
