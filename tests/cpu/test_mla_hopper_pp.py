"""The bf16 heads-on-M ping-pong kernel (kernel_hopper_pp.py, config ``PP = 1``) compiled for sm_90 on a CPU (no
GPU needed): it fits an SM, runs as two 4-warp partitions, holds the MMAs its design rests on (each warpgroup a
whole [64, 64] score tile and a [64, 256] half of O), and its wgmmas stay asynchronous. The interface routes
``PP = 1`` to it with 256-column latent TMA boxes and refuses it where it does not apply.
tests/gpu/test_mla_decode_gpu.py (``HEADS_VARIANTS``) runs it against the reference on an H200.
"""
from __future__ import annotations

import re


import pytest
import torch

from graphtune import resources
from graphtune.sass import wgmma_findings
from graphtune.kernels.mla_decode import interface_hopper, kernel_hopper_pp

from test_mla_decode import _sass as _sass_of_cubin
from test_mla_decode import SCHEDULED_WITH_THIS_TRITON, _hopper_compile

SM90_SHARED = 232448          # bytes of shared memory an sm_90 block may use (the driver's 1 KB reserve aside)


@pytest.fixture(scope="module", params=[dict(PP=1), dict(PP=1, RELOAD=0), dict(PP=1, WG1_FIRST=1)],
                ids=["reload1", "reload0", "wg1-first"])
def compiled(request):
    return _hopper_compile("bf16", heads=128, page_size=64, config=request.param)


def _sass(compiled) -> str:
    return _sass_of_cubin(compiled.asm["cubin"])


def test_pp_kernel_fits_sm90_as_two_warpgroups(compiled):
    usage = resources._resource_usage(compiled.asm["cubin"], compiled.metadata.name)
    assert usage["REG"] <= 255
    # query 72 KB + two 72 KB tiles + P (8 KB) + maxima, sums and barriers: 231,260 B when written
    assert compiled.metadata.shared + resources.static_shared(usage, 90) <= SM90_SHARED, compiled.metadata.shared
    # 4 warps of the default partition (warpgroup 0) + a 4-warp worker (warpgroup 1): 256 threads
    assert compiled.metadata.num_warps == 8
    ptx = compiled.asm["ptx"]
    assert ".reqntid 256" in ptx
    if SCHEDULED_WITH_THIS_TRITON:
        assert "setmaxnreg" in ptx         # each partition sets its register count (triton 3.6)


def test_pp_kernel_mmas_and_schedule(compiled):
    sass = _sass(compiled)
    assert [str(u) for u in wgmma_findings(sass)] == []   # graphtune.sass
    # each warpgroup: a whole [64 heads, 64 tokens] score tile in nine K-chunks of 64 (4 k-steps each) ...
    assert sass.count("HGMMA.64x64x16.F32.BF16") == 2 * 9 * 4
    assert "HGMMA.64x32x16" not in sass, "score tiles split between the warpgroups (the other kernel's N = 32)"
    # ... and [64, 256] halves of O: WG0 P(own, registers) and P(other, shared); WG1 both, on two code paths
    # (WG1_FIRST: both from registers on the two-tile path)
    assert sass.count("HGMMA.64x256x16.F32.BF16") == 5 * 4
    assert "UTMALDG.2D" in sass
    if SCHEDULED_WITH_THIS_TRITON:
        assert sass.count("WARPGROUP.DEPBAR") <= 8, "wgmmas serialised (ptxas C7514)"


# (format, kernel, the latent descriptor's position and block, the other kernel's knobs that must be dropped)
ROUTES = [("bf16", "_mla_decode_hopper_pp_kernel", 2, [64, 256], ("XCH", "EARLY")),   # two 256-column TMA halves
          ("fp8", "_mla_decode_hopper_pp_fp8_kernel", 2, [64, 512], ("WOVL", "XCH"))]  # the whole fp8 tile


@pytest.mark.parametrize("fmt,kernel,pos,block,dropped", ROUTES, ids=[r[0] for r in ROUTES])
def test_pp_config_routes_to_the_ping_pong_kernel(fmt, kernel, pos, block, dropped):
    dtype = torch.float8_e4m3fn if fmt == "fp8" else torch.bfloat16
    q = torch.empty(2, 128, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 576, dtype=dtype)
    out = torch.empty(2, 128, 512, dtype=torch.bfloat16)
    pt, lens = torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32)
    args, grid, consts, _ = interface_hopper.hopper_call(q, kv, pt, lens, 0.04, 0.5, fmt, out, False, sms=132,
                                                         config=dict(PP=1))
    fn, consts = interface_hopper._kernel_and_params(128, fmt, consts)
    assert fn is getattr(kernel_hopper_pp, kernel)
    assert consts["num_warps"] == interface_hopper.PP_NUM_WARPS == 4
    assert not set(dropped) & set(consts)
    assert list(args[pos].block_shape) == block
    assert grid == (2, 66)
    assert interface_hopper.pinned_config(128, fmt, dict(BLOCK_N=64, NUM_BUF=2, PP=1))["PP"] == 1


@pytest.fixture(scope="module", params=[dict(PP=1), dict(PP=1, RELOAD=0), dict(PP=1, WG1_FIRST=1)],
                ids=["reload1", "reload0", "wg1-first"])
def compiled_fp8(request):
    return _hopper_compile("fp8", heads=128, page_size=64, config=request.param)


def test_pp_fp8_kernel_fits_sm90_and_keeps_the_bf16_kernels_mmas(compiled_fp8):
    """The fp8 ping-pong kernel: the bf16 kernel's shared memory (the fp8 tile lands in its fp16 buffer, widened
    in place: no staging buffer), two 4-warp partitions, the same MMAs on fp16 operands, asynchronous."""
    usage = resources._resource_usage(compiled_fp8.asm["cubin"], compiled_fp8.metadata.name)
    assert usage["REG"] <= 255
    shared = compiled_fp8.metadata.shared
    assert shared + resources.static_shared(usage, 90) <= SM90_SHARED, shared
    assert compiled_fp8.metadata.num_warps == 8
    sass = _sass(compiled_fp8)
    assert [str(u) for u in wgmma_findings(sass)] == []   # graphtune.sass
    # fp16 operands (no type suffix in the SASS): the score tiles and the [64, 256] halves of O
    assert sass.count("HGMMA.64x64x16.F32 ") == 2 * 9 * 4
    assert sass.count("HGMMA.64x256x16.F32 ") == 5 * 4
    assert "F32.BF16 " not in sass and "QGMMA" not in sass   # (F2FP.BF16 packs the bf16 output)
    assert "UTMALDG.2D" in sass                   # the fp8 tiles (the query and the rope rows by plain loads)
    if SCHEDULED_WITH_THIS_TRITON:
        assert sass.count("WARPGROUP.DEPBAR") <= 8, "wgmmas serialised (ptxas C7514)"


@pytest.mark.parametrize("heads,fmt,config,needle", [
    (16, "bf16", dict(PP=1), "H < 64"),
    (128, "fp8", dict(PP=1, BLOCK_N=32), "BLOCK_N=32"),
    (128, "bf16", dict(PP=1, BLOCK_N=32), "BLOCK_N=32"),
    (128, "bf16", dict(PP=1, RELOAD=2), "RELOAD=2")])
def test_pp_config_refused_where_it_does_not_apply(heads, fmt, config, needle):
    dtype = torch.float8_e4m3fn if fmt == "fp8" else torch.bfloat16
    q = torch.empty(2, heads, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 576, dtype=dtype)
    out = torch.empty(2, heads, 512, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="config (PP=1|RELOAD=)") as err:
        interface_hopper.hopper_call(q, kv, torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32),
                                     0.04, 1.0, fmt, out, False, sms=132, config=config)
    assert needle in str(err.value)


def _tile_loop_local_loads(sass: str, mma: str = "HGMMA.64x64x16") -> int:
    """Local-memory loads inside the innermost loops that issue score MMAs (a backward branch's body holding
    ``mma`` and no nested backward branch)."""
    import re
    ins = []
    for line in sass.splitlines():
        m = re.search(r"/\*([0-9a-f]{4,5})\*/\s+(.*?);", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2)))
    loops = []
    for a, t in ins:
        m = re.search(r"BRA (?:`\(\.L_x_\d+\) )?0x([0-9a-f]+)", t)
        if m and int(m.group(1), 16) < a:
            loops.append((int(m.group(1), 16), a))
    inner = [(lo, hi) for lo, hi in loops if not any(lo < lo2 and hi2 < hi for lo2, hi2 in loops)]
    total = 0
    for lo, hi in inner:
        body = [t for a, t in ins if lo <= a <= hi]
        if any(mma in t for t in body):
            total += sum("LDL" in t for t in body)
    return total


@pytest.mark.parametrize("fmt", ["bf16", "fp8"])
def test_pp_tile_loops_do_not_reload_spills(fmt):
    """With 231 KB of shared memory an SM keeps ~25 KB of L1, so a ping-pong kernel's local memory lives in L2: the
    query chunks' addresses, hoisted out of the tile loop as invariants and spilled, put an L2 round trip before every
    tile's score MMAs (13 local loads in WG0's loop, 160 bytes of stack; on the H200 the bf16 kernel ran 8-11% faster
    without them, session 18). Indexed through a loop value (``kernel_hopper_heads._q_chunks``), no tile loop reloads
    a spill and the stack stays small."""
    compiled = _hopper_compile(fmt, heads=128, page_size=64, config=dict(PP=1, RELOAD=1, WG1_FIRST=1))
    usage = resources._resource_usage(compiled.asm["cubin"], compiled.metadata.name)
    if SCHEDULED_WITH_THIS_TRITON:      # (ptxas of triton 3.6, the one timed)
        # (fp8: 64 bytes before session 21's whole-sector output stores, 72 with them, 80 with session 35's fp16
        # partials in whole sectors, each spilled at the segment's end, outside the tile loops)
        assert usage["STACK"] <= 80, usage
        assert _tile_loop_local_loads(_sass(compiled)) == 0


def test_fp8_query_conversion_is_compact_code():
    """The fp8 ping-pong kernel converts its landed bf16 query to scaled fp16 once a segment: unrolled (1,526
    instructions between the timeline probe's "query landed" and "query converted" marks, compiled for sm_90) that took
    10.6-11.7 us on the H200, as loops that stay loops (617) 5.0-5.1 us (session 19, prologue marks at H = 128, batch 8
    and 64). A rewrite that unrolls it again fails here. The marks' stores name their slots (``STAMP_PRO`` + 3 and
    + 4, 8 bytes each), which bracket the conversion in WG0's code."""
    import re
    from test_mla_decode import compile_sm90
    q = torch.empty(2, 128, 576, dtype=torch.bfloat16)
    out = torch.empty(2, 128, 512, dtype=torch.bfloat16)
    args, _, consts, _ = interface_hopper.hopper_call(q, torch.empty(4, 64, 576, dtype=torch.float8_e4m3fn),
                                                      torch.zeros(2, 2, dtype=torch.int32),
                                                      torch.ones(2, dtype=torch.int32), 0.04, 1.0, "fp8", out, False,
                                                      sms=132, config=dict(PP=1, RELOAD=1, WG1_FIRST=1))
    fn, consts = interface_hopper._kernel_and_params(128, "fp8", consts)
    sass = _sass(compile_sm90(fn, list(args) + [torch.empty(4, 256, dtype=torch.int64)], consts))
    addrs = [int(a, 16) for a in re.findall(r"/\*([0-9a-f]{4,5})\*/", sass)]

    def store_of(slot: int, after: int = -1) -> int:
        found = [int(m.group(1), 16) for m in re.finditer(
            r"/\*([0-9a-f]{4,5})\*/\s+[^;]*STG\.E\.64[^;]*\+" + hex(slot * 8) + r"\]", sass)]
        found = [a for a in found if a > after]
        assert found, f"no stamp store to slot {slot}"
        return found[0]

    landed = store_of(kernel_hopper_pp.STAMP_PRO + 3)
    converted = store_of(kernel_hopper_pp.STAMP_PRO + 4, landed)
    between = sum(landed < a < converted for a in addrs)
    assert 0 < between <= 800, between


def _assert_refused_in_one_line(config: dict, fmt: str, match: str) -> None:
    """hopper_call at H = 128 with a pinned ``config`` the ping-pong kernel does not take: one ValueError line."""
    q = torch.empty(2, 128, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 576, dtype=torch.bfloat16 if fmt == "bf16" else torch.float8_e4m3fn)
    with pytest.raises(ValueError, match=match) as err:
        interface_hopper.hopper_call(q, kv, torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32),
                                     0.04, 1.0, fmt, torch.empty(2, 128, 512, dtype=torch.bfloat16), False, sms=132,
                                     config=config)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("fmt", ["bf16", "fp8"])
def test_indep_keeps_the_schedule_and_the_tile_loops_free_of_spills(fmt):
    """INDEP = 1 (pinned only; its GPU tests gated in tests/gpu/_unproven.py until they have run): WG1 runs its
    tile's softmax from its own running max before waiting for WG0's P and max (the pair's two softmaxes at once
    instead of one after the other), then scales its P and sum to the pair's max in registers. Compiled for sm_90:
    the same shared memory, wgmmas asynchronous, no local loads in the tile loops; 0 or 1, with WG1_FIRST only."""
    shipped = _hopper_compile(fmt, heads=128, page_size=64, config=dict(PP=1, RELOAD=1, WG1_FIRST=1))
    indep = _hopper_compile(fmt, heads=128, page_size=64, config=dict(PP=1, RELOAD=1, WG1_FIRST=1, INDEP=1))
    assert indep.metadata.shared == shipped.metadata.shared
    sass = _sass(indep)
    assert sass.count("WARPGROUP.DEPBAR") == _sass(shipped).count("WARPGROUP.DEPBAR")
    if SCHEDULED_WITH_THIS_TRITON:      # (ptxas of triton 3.6, the one timed; 3.9's reloads 28 spills in the fp8 loop)
        assert _tile_loop_local_loads(sass) == 0
    for cfg in (dict(PP=1, WG1_FIRST=1, INDEP=2), dict(PP=1, INDEP=1)):
        _assert_refused_in_one_line(cfg, fmt, f"config INDEP={cfg['INDEP']}: ")


@pytest.mark.parametrize("fmt", ["bf16", "fp8"])
def test_whole_outputs_are_stored_in_whole_sectors(fmt):
    """OUT32 (1 unless pinned 0): a whole request's 16-bit output half leaves through
    ``kernel_hopper.SECTORS_HEADS_ON_M``, four adjacent dims a thread (64-bit stores, 32 bytes of each head a warp's
    store: whole sectors), the layout change by warp shuffles (no shared memory added); with OUT32 = 0 the wgmma
    layout's 32-bit stores (16 bytes of each head: two partial writes a sector), as before session 21. fp8's fp16
    partials take the same route (``kernel_hopper._store_partial_sectors``). On the H200
    (session 21, run 2) the whole sectors took the stores at the end of a whole request from ~6.5 to ~2.0 us (bf16,
    H = 128, batch 64)."""
    import re
    cfg = dict(PP=1, RELOAD=1, WG1_FIRST=1)
    new = _hopper_compile(fmt, heads=128, page_size=64, config=cfg)
    old = _hopper_compile(fmt, heads=128, page_size=64, config={**cfg, "OUT32": 0})
    assert new.metadata.shared == old.metadata.shared

    def stores(compiled) -> tuple[int, int]:
        sass = _sass(compiled)
        return (len(re.findall(r"STG\.E desc", sass)), len(re.findall(r"STG\.E\.64 desc", sass)))
    (narrow_new, wide_new), (narrow_old, wide_old) = stores(new), stores(old)
    # per warpgroup, 128 bf16 values a thread: 64 32-bit stores before, 32 64-bit ones now; the fp16 partials (fp8's
    # since session 35, bf16's scaled since session 37: reduction.partial_layout) leave as the whole outputs do
    kinds = 2
    assert narrow_old - narrow_new == kinds * 2 * 64 and wide_new - wide_old == kinds * 2 * 32, (stores(new),
                                                                                                 stores(old))
    assert "SHFL" in _sass(new)
    q = torch.empty(2, 128, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 576, dtype=torch.bfloat16 if fmt == "bf16" else torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="config OUT32=2: ") as err:
        interface_hopper.hopper_call(q, kv, torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32),
                                     0.04, 1.0, fmt, torch.empty(2, 128, 512, dtype=torch.bfloat16), False,
                                     sms=132, config={**cfg, "OUT32": 2})
    assert "\n" not in str(err.value)


def _first_copy_line(sass: str) -> int:
    """The index of the first TMA copy (``UTMALDG``) among a kernel's SASS instructions."""
    lines = [line for line in sass.splitlines() if re.search(r"/\*[0-9a-f]{4,5}\*/", line)]
    return next(i for i, line in enumerate(lines) if "UTMALDG" in line)


def test_bf16_pp_reads_its_split_from_a_plan():
    """The bf16 ping-pong kernel given a plan's rows (``plan_ptr``; both warpgroups read the program's row and the
    first segment's two page ids): the same shared memory and MMAs, wgmmas asynchronous, no tile loop reloading a
    spill, and less code before its first copy (no split pass: fewer instructions and barriers); its tuned configs
    carry the plan's pre-hook, the fp8 heads-on-M kernels' do not (the fp8 ping-pong kernel computes its split
    itself; T8's plan is filled before its query pre-pass, test_mla_hopper_pp8)."""
    from graphtune.kernels.mla_decode import plan as plan_mod
    from test_mla_decode import compile_sm90

    def build(plan: bool):
        q = torch.empty(2, 128, 576, dtype=torch.bfloat16)
        kv = torch.empty(4, 64, 576, dtype=torch.bfloat16)
        args, grid, consts, _ = interface_hopper.hopper_call(
            q, kv, torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32), 0.04, 1.0, "bf16",
            torch.empty(2, 128, 512, dtype=torch.bfloat16), False, sms=132, config=dict(PP=1, RELOAD=1, WG1_FIRST=1))
        fn, consts = interface_hopper._kernel_and_params(128, "bf16", consts)
        if plan:
            consts = {**consts, "plan_ptr": torch.empty(grid[1], 8, dtype=torch.int32)}
        return compile_sm90(fn, args, consts)
    base, plan = build(False), build(True)
    assert plan.metadata.shared == base.metadata.shared
    sass, sass0 = _sass(plan), _sass(base)
    assert sass.count("HGMMA") == sass0.count("HGMMA")
    assert sass.count("WARPGROUP.DEPBAR") == sass0.count("WARPGROUP.DEPBAR")
    if SCHEDULED_WITH_THIS_TRITON:
        assert _tile_loop_local_loads(sass) == 0
    assert _first_copy_line(sass) < _first_copy_line(sass0)
    assert sass.count("BAR.SYNC") < sass0.count("BAR.SYNC")
    assert all(c.pre_hook is plan_mod.plan_hook for c in interface_hopper.tuned_second_kernel(True, "bf16").configs)
    assert all(c.pre_hook is None for c in interface_hopper.tuned_second_kernel(True, "fp8").configs)
    assert all(c.pre_hook is None for c in interface_hopper.tuned_second_kernel(True, "fp8", third=True).configs)


def test_bf16_pp_counts_each_warpgroups_half_of_a_segment_for_the_streamed_reduction():
    """Given the plan's counters (``done_ptr``, ``reduction.STREAM_PP``), the bf16 ping-pong kernel (the shipped
    space's config, with a plan) counts each partial segment twice, once per warpgroup after its own stores: one
    release-ordered add in each partition, each after a barrier of that partition's 128 threads and made by its
    thread 0 (the partition's own thread index: ``tid & 127``); nothing else moves (the same MMAs, waits on them and
    copies; shared memory within a block's limit), and the build without the counters is the build as shipped."""
    from graphtune.kernels.mla_decode import kernel_hopper as kh
    from test_mla_decode import compile_sm90

    def build(counts: bool):
        q = torch.empty(2, 128, 576, dtype=torch.bfloat16)
        kv = torch.empty(4, 64, 576, dtype=torch.bfloat16)
        args, grid, consts, _ = interface_hopper.hopper_call(
            q, kv, torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32), 0.04, 1.0, "bf16",
            torch.empty(2, 128, 512, dtype=torch.bfloat16), False, sms=132,
            config=dict(interface_hopper.HOPPER_PP_SPACE[0]))
        fn, consts = interface_hopper._kernel_and_params(128, "bf16", consts)
        consts = {**consts, "plan_ptr": torch.empty(grid[1], int(kh.PLAN_COLS), dtype=torch.int32)}
        if counts:
            consts["done_ptr"] = torch.zeros(2, 2, int(kh.STREAM_GROUPS), dtype=torch.int32)
        return compile_sm90(fn, args, consts)
    base, counted = build(False), build(True)
    usage = resources._resource_usage(counted.asm["cubin"], counted.metadata.name)
    assert counted.metadata.shared + resources.static_shared(usage, 90) <= SM90_SHARED
    assert usage["REG"] <= 255 and usage.get("LOCAL", 0) == 0
    sass, sass0 = _sass(counted), _sass(base)
    for op in ("HGMMA.64x64x16.F32.BF16", "HGMMA.64x256x16.F32.BF16", "WARPGROUP.DEPBAR", "UTMALDG"):
        assert sass.count(op) == sass0.count(op), op
    assert "REDG" not in sass0 and "ATOMG" not in sass0 and "MEMBAR.ALL.GPU" not in sass0
    ptx = counted.asm["ptx"]
    lines = ptx.splitlines()
    adds = [i for i, line in enumerate(lines) if re.search(r"(red|atom)\.global\.gpu\.release\.add", line)]
    assert len(adds) == 2, [lines[i] for i in adds]
    threads = []
    for i in adds:
        # a barrier of one partition's 128 threads shortly before; the add predicated on one thread
        assert any(re.search(r"bar\.sync\s+\d+, 128;", line) for line in lines[i - 14:i]), lines[i - 14:i + 1]
        pred = re.search(r"@(%p\d+) ", lines[i]).group(1)
        threads.append([tid for tid in range(256) if _ptx_value(lines, pred, tid)])
    # one add in each partition (threads 0-127: warpgroup 0, 128-255: warpgroup 1), made by one of its threads
    # (triton 3.6 tests the partition's own index, tid & 127, so both predicates hold for threads 0 and 128, each
    # add running in one partition only; triton 3.9 tests the block's: thread 0, thread 128)
    def one_in(tids: list[int], part: int) -> bool:
        return len([t for t in tids if t // 128 == part]) == 1
    assert (one_in(threads[0], 0) and one_in(threads[1], 1)) or (one_in(threads[0], 1) and one_in(threads[1], 0)), \
        threads
    assert all(len(tids) <= 2 and len({t // 128 for t in tids}) == len(tids) for tids in threads), threads


def _ptx_value(lines: list[str], reg: str, tid: int, depth: int = 0):
    """The value of PTX register ``reg`` in thread ``tid`` of the block, from the one instruction that writes it
    (the integer and predicate arithmetic a thread-index test compiles to; anything else fails the test)."""
    assert depth < 16, reg
    writes = [line.strip() for line in lines if re.match(rf"\s*[a-z][\w.]*\s+{re.escape(reg)},", line)]
    assert len(writes) == 1, (reg, writes)
    op, rest = writes[0].rstrip(";").split(None, 1)
    src = [a.strip() for a in rest.split(",")[1:]]

    def val(a: str, t: int = tid):
        if a == "%tid.x":
            return t
        if a.startswith("%"):
            return _ptx_value(lines, a, t, depth + 1)
        return int(a, 0)
    if op.startswith("mov"):
        return val(src[0])
    if op.startswith("shfl.sync.idx"):      # (lane ``src[1]`` of the warp's value)
        return val(src[0], (tid & ~31) + val(src[1]))
    a, b = val(src[0]), val(src[1])
    binary = {"and": lambda: a & b, "or": lambda: a | b, "shr": lambda: a >> b, "shl": lambda: a << b,
              "add": lambda: a + b, "sub": lambda: a - b}
    kind = op.split(".")[0]
    if kind in binary:
        return binary[kind]()
    if kind == "setp":
        return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[op.split(".")[1]]
    raise AssertionError(f"{writes[0]}: not modelled")


def test_pp_protocol_model_holds_for_every_reload(tmp_path):
    """The hand-written model of the ping-pong kernel's mbarrier / buffer protocol (benchmarks/probes/
    pp_protocol_model.py, RELOAD 0 / 1 x WG1_FIRST, random interleavings and TMA completion orders) finds no failure,
    and finds them when RELOAD 1's reload of tile r + 3's left half is moved before the wait that retires the P.V
    reading that buffer (so the model checks something)."""
    import subprocess
    import sys
    from pathlib import Path
    model = Path(__file__).resolve().parents[2] / "benchmarks" / "probes" / "pp_protocol_model.py"
    run = subprocess.run([sys.executable, str(model)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip().endswith("failures 0"), run.stdout + run.stderr
    source = model.read_text()
    ordered = ("                    S.wait_mma(0, 0)\n"
               "                    if r + 3 < n: S.tma((1 - st, 0), (seg, r + 3), S.c[(1 - st, 0)])\n")
    assert source.count(ordered) == 1
    mutated = tmp_path / "mutated.py"
    mutated.write_text(source.replace(ordered, "".join(reversed(ordered.splitlines(keepends=True)))))
    run = subprocess.run([sys.executable, str(mutated)], capture_output=True, text=True, timeout=120)
    failures = int(run.stdout.strip().rsplit(" ", 1)[-1])
    assert failures > 0, run.stdout


@pytest.mark.parametrize("knobs", [dict(SM1=1), dict(RA=1), dict(SM1=1, RA=1)], ids=["sm1", "ra", "sm1-ra"])
def test_softmax_and_rope_copies_off_the_hand_off_path(knobs):
    """SM1 / RA (bf16, in HOPPER_PP_SPACE since session 42's call D): SM1's softmax (masks in a request's last tile
    only, the scale in the exponent, the row sums after the hand-off) and RA's rope copies after the hand-off.
    Compiled for sm_90 (RELOAD 1, WG1_FIRST 1): the same MMAs, mbarrier waits and copies, wgmmas asynchronous, no tile
    loop reloading a spill, and fewer instructions in WG0 between its scores' retirement and its hand-off's arrival
    (with triton 3.6 and 3.9); 0 or 1, bf16 only, in one line."""
    import re
    config = dict(PP=1, RELOAD=1, WG1_FIRST=1)
    base = _hopper_compile("bf16", heads=128, page_size=64, config=config)
    new = _hopper_compile("bf16", heads=128, page_size=64, config={**config, **knobs})
    sass, sass0 = _sass(new), _sass(base)
    for op in ("HGMMA", "TRYWAIT", "UTMALDG"):
        assert sass.count(op) == sass0.count(op), op
    if SCHEDULED_WITH_THIS_TRITON:
        assert _tile_loop_local_loads(sass) == 0

    def wg0_path(text: str) -> int:     # WG0's P hand-off (the first mbarrier arrival after the listing's last P
        ins = re.findall(r"/\*[0-9a-f]{4,}\*/\s+([^;]*);", text)     # stmatrix store), back to the wgmma wait before it
        last_p = max(i for i, t in enumerate(ins) if "STSM" in t)    # (triton 3.9 puts ~120 instructions between them)
        a = min(i for i, t in enumerate(ins) if i > last_p and "SYNCS.ARRIVE.TRANS64" in t)
        return a - max(i for i in range(a) if "WARPGROUP.DEPBAR" in ins[i])
    assert wg0_path(sass) < wg0_path(sass0)
    for knob in knobs:
        for cfg, fmt in ((dict(PP=1, **{knob: 2}), "bf16"), (dict(PP=1, **{knob: 1}), "fp8")):
            _assert_refused_in_one_line(cfg, fmt, f"config {knob}={cfg[knob]}: ")

