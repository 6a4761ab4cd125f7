"""The H < 64 (tokens-on-M) Hopper MLA kernels of kernel_hopper_tok.py and the bf16 tokens-on-M schedule PIPE = 1,
compiled for sm_90 on a CPU (no GPU needed): they fit an SM, hold the instructions their design rests on
(kernel_hopper_tok.py's docstring), and the relabelled P.V rows map back to the right dims.
tests/gpu/test_mla_hopper_tok_gpu.py runs them against the reference on an H200.
"""
from __future__ import annotations

import re

import pytest
import torch

from graphtune import resources
from graphtune.kernels.mla_decode import interface_hopper, kernel_hopper as kh, kernel_hopper_tok, kernel_hopper_tok2

from test_mla_decode import _sass as _sass_of_cubin
from test_mla_decode import SCHEDULED_WITH_THIS_TRITON
from test_mla_decode import _hopper_compile, compile_sm90 as _compile_fn

SM90_SHARED = 232448          # bytes of shared memory an sm_90 block may use
SM90_SM_SHARED = 233472       # per SM (228 KB); each block also takes 1 KB the driver reserves


def _compile(fmt: str, config: dict, heads: int = 16):
    return _hopper_compile(fmt, heads=heads, page_size=64, config=config)


def _sass(compiled) -> str:
    return _sass_of_cubin(compiled.asm["cubin"])


def _shared(compiled) -> int:
    usage = resources._resource_usage(compiled.asm["cubin"], compiled.metadata.name)
    assert usage["REG"] <= 255 and usage.get("LOCAL", 0) == 0
    return compiled.metadata.shared + resources.static_shared(usage, 90)


@pytest.mark.parametrize("num_buf,per_sm,prefetch,fast_max", [(2, 2, 0, 0), (2, 2, 1, 1), (3, 1, 1, 1), (5, 1, 1, 1)])
def test_tok_fp8_v2_compiles_for_sm90_fits_and_streams_v_by_32_bit_loads(num_buf, per_sm, prefetch, fast_max):
    compiled = _compile("fp8", dict(V2=1, NUM_BUF=num_buf, PREFETCH=prefetch, FAST_MAX=fast_max))
    shared = _shared(compiled)
    assert shared <= SM90_SHARED and per_sm * (shared + 1024) <= SM90_SM_SHARED, shared
    sass = _sass(compiled)
    # one score chain against the [hi | lo] query (N = 32), P.V in fp16 with V^T from registers
    assert sass.count("QGMMA.64x32x32.F32.E4M3.E4M3") == 20, "one chain of 20 fp8 score MMAs per tile"
    assert "QGMMA.64x16x32" not in sass
    assert sass.count("HGMMA.64x16x16.F32") == 32
    # the V^T chunks come by 32-bit shared loads: no byte gathers anywhere in the kernel
    assert "LDS.U8" not in sass and "LDS.S8" not in sass
    # two TMA messages a tile (latent + zero-padded rope), no rope loads through registers
    assert "UTMALDG.2D" in sass
    assert sass.count("WARPGROUP.DEPBAR") <= 8, "wgmmas serialised (ptxas C7514)"


def assert_output_stored_in_whole_sectors(sass: str, partial_bytes: int = 4) -> None:
    """The second fp8 tokens-on-M kernel puts each output chunk back in dim order before storing it
    (``kernel_hopper._in_dim_order``): a thread writes four adjacent dims of a head in one access, 8 bytes of the bf16
    output, 16 of an fp32 partial or 8 of an fp16 one (a per-tensor fp8 cache's, ``reduction.partial_dtype``), 16 of
    each a program (in the relabelled order the accesses were 2 and 4 bytes, 64 of each: session 17 measured the
    change 3-18% faster at H = 16, batch 8-128)."""
    if partial_bytes == 4:
        assert sass.count("STG.E.128") == 16 and sass.count("STG.E.64") >= 16, sass.count("STG")
    else:
        assert sass.count("STG.E.128") == 0 and sass.count("STG.E.64") >= 32, sass.count("STG")
    assert "STG.E.U16" not in sass


@pytest.mark.parametrize("gather", [0, 1], ids=["tma", "row-gather"])
def test_tok_fp8_v2_writes_its_output_in_whole_sectors(gather):
    """:func:`assert_output_stored_in_whole_sectors` on the fp8 kernel, TMA and row-gather loaders, with its fp16
    partials (fp8_ds_mla's, fp32 partials: test_mla_hopper_ds.py)."""
    compiled = _hopper_compile("fp8", heads=16, page_size=1 if gather else 64, config=dict(V2=1, GATHER=gather))
    assert_output_stored_in_whole_sectors(_sass(compiled), partial_bytes=2)


# the schedules: (buffers, programs per SM, PREFETCH = FAST_MAX, LOOK, RK64, PT_EARLY)
V2_SCHEDULES = [(2, 2, 1, 0, 1, 0), (2, 2, 1, 0, 0, 1), (2, 2, 1, 0, 1, 1), (2, 2, 1, 2, 1, 0), (2, 2, 1, 2, 1, 1),
                (2, 2, 1, 1, 1, 1), (3, 1, 1, 1, 1, 0), (3, 1, 1, 1, 1, 1), (3, 1, 1, 0, 1, 1), (2, 2, 0, 2, 1, 1),
                (3, 1, 0, 1, 1, 0), (2, 2, 1, 2, 0, 0), (3, 1, 1, 1, 0, 0)]


@pytest.mark.parametrize("num_buf,per_sm,pf,look,rk64,pt_early", V2_SCHEDULES)
def test_tok_fp8_v2_schedules_compile_for_sm90_fit_and_keep_wgmmas_asynchronous(num_buf, per_sm, pf, look, rk64,
                                                                                 pt_early):
    """LOOK 1 / 2 (S(i + 1) issued before tile i's softmax / between its P.V chunks 1 and 2) and RK64 (the rope's
    score MMAs over its 64 columns), PT_EARLY (the next tile's page ids loaded a tile ahead): each fits its programs per SM, holds 255 registers or fewer without local
    memory, and ptxas keeps the wgmmas asynchronous (a wait of the wrong shape serialises them all: C7514)."""
    # (CHAIN 0: the one-chain scores these schedules were written for; CHAIN has its own test below)
    compiled = _compile("fp8", dict(V2=1, NUM_BUF=num_buf, PREFETCH=pf, FAST_MAX=pf, LOOK=look, CHAIN=0,
                                    RK64=rk64, PT_EARLY=pt_early))
    shared = _shared(compiled)
    assert per_sm * (shared + 1024) <= SM90_SM_SHARED, shared
    assert interface_hopper._tok_fp8_v2_programs_per_sm(dict(NUM_BUF=num_buf)) == per_sm
    sass = _sass(compiled)
    # one chain per tile (LOOK: one more before each segment's first tile); RK64 drops the two k-steps that
    # multiplied the rope tile's zero padding
    per_tile = 18 if rk64 else 20
    assert sass.count("QGMMA.64x32x32.F32.E4M3.E4M3") == per_tile * (2 if look else 1)
    assert sass.count("HGMMA.64x16x16.F32") == 32
    assert "LDS.U8" not in sass and "UTMALDG.2D" in sass
    assert sass.count("WARPGROUP.DEPBAR") <= 8, "wgmmas serialised (ptxas C7514)"


@pytest.mark.parametrize("num_buf,per_sm,pf,rk64,gather", [(2, 2, 1, 0, 0), (2, 2, 0, 0, 0), (2, 2, 1, 1, 0),
                                                         (3, 1, 1, 0, 0), (2, 2, 1, 0, 1)])
def test_tok_fp8_v2_chain_compiles_for_sm90_with_one_accumulator_per_128_dims(num_buf, per_sm, pf, rk64, gather):
    """CHAIN = 1: the scores as five fp8 MMA chains (four 128-dim latent groups and the rope) folded in fp32, not
    one chain over all 576 dims: the same QGMMAs in number and shape, now in five accumulators (ptxas keeps them
    asynchronous), fitting the programs per SM of its buffers with no local memory."""
    config = dict(V2=1, NUM_BUF=num_buf, PREFETCH=pf, FAST_MAX=1, RK64=rk64, CHAIN=1, GATHER=gather)
    compiled = _hopper_compile("fp8", heads=16, page_size=1 if gather else 64, config=config)
    shared = _shared(compiled)
    assert per_sm * (shared + 1024) <= SM90_SM_SHARED, shared
    sass = _sass(compiled)
    assert sass.count("QGMMA.64x32x32.F32.E4M3.E4M3") == (18 if rk64 else 20)
    # five fp8 dots a tile, each into its own accumulator (the shipped kernel: two, the rope's onto the latent's)
    dots = [line for line in compiled.asm["ttgir"].splitlines() if "warp_group_dot " in line and "f8E4M3" in line]
    assert len(dots) == 5, len(dots)
    assert sass.count("WARPGROUP.DEPBAR") <= 8, "wgmmas serialised (ptxas C7514)"


def _fp8_dots(compiled) -> int:
    return len([line for line in compiled.asm["ttgir"].splitlines() if "warp_group_dot " in line and "f8E4M3" in line])


@pytest.mark.parametrize("config", interface_hopper.HOPPER_TOK_FP8_SPACE,
                         ids=lambda c: f"buf{c['NUM_BUF']}-widen{c['WIDEN']}")
def test_tok_fp8_first_kernel_chain_compiles_for_sm90_with_one_accumulator_per_128_dims(config):
    """CHAIN = 1 in the first fp8 tokens-on-M kernel (``V2=0``, each config of its space): the hi scores as one fp8
    chain per 128-dim latent group plus the rope's, each from a fresh accumulator, the lo scores one chain, where
    CHAIN 0 has one chain for each half: the same QGMMAs, more accumulators; it fits the programs per SM the grid
    gives the config, holds 255 registers or fewer without local memory, and ptxas keeps the wgmmas asynchronous."""
    chained = _compile("fp8", dict(config, V2=0, CHAIN=1))
    plain = _compile("fp8", dict(config, V2=0, CHAIN=0))
    shared = _shared(chained)   # also: <= 255 registers, no local memory
    per_sm = interface_hopper._tok_fp8_programs_per_sm(config)
    assert shared <= SM90_SHARED and per_sm * (shared + 1024) <= SM90_SM_SHARED, shared
    sass, sass0 = _sass(chained), _sass(plain)
    groups = 512 // 128
    # two dots for each half of the query pair (latent, rope) without CHAIN; with it, hi's latent dot becomes one
    # per group and its rope dot takes its own accumulator
    assert _fp8_dots(plain) == 4 and _fp8_dots(chained) == 4 + groups - 1
    qgmma = "QGMMA.64x16x32.F32.E4M3.E4M3"
    assert sass.count(qgmma) == sass0.count(qgmma) > 0, "the same fp8 k-steps"
    # a chain's first MMA starts from zero (RZ, !UPT): two per tile without CHAIN, groups + 2 with it
    fresh = [line for line in sass.splitlines() if qgmma in line and "RZ, !UPT" in line]
    fresh0 = [line for line in sass0.splitlines() if qgmma in line and "RZ, !UPT" in line]
    assert len(fresh0) == 2 and len(fresh) == groups + 2, (len(fresh0), len(fresh))
    assert len({line.split()[2] for line in fresh}) == len(fresh), "a distinct accumulator per chain"
    assert sass.count("WARPGROUP.DEPBAR") <= 8, "wgmmas serialised (ptxas C7514)"
    if SCHEDULED_WITH_THIS_TRITON:
        # the extra accumulators spill nothing beyond what CHAIN 0 spills (its stack frame)
        usage = resources._resource_usage(chained.asm["cubin"], chained.metadata.name)
        usage0 = resources._resource_usage(plain.asm["cubin"], plain.metadata.name)
        assert usage.get("STACK", 0) <= usage0.get("STACK", 0), (usage, usage0)


@pytest.mark.parametrize("pipe", [1, 2])
def test_bf16_tok_pipe_compiles_for_sm90_without_serialised_wgmmas(pipe):
    compiled = _compile("bf16", dict(PIPE=pipe))
    assert _shared(compiled) <= SM90_SHARED
    sass = _sass(compiled)
    assert "HGMMA.64x16x16.F32.BF16" in sass
    if SCHEDULED_WITH_THIS_TRITON:   # triton 3.9's ptxas serialises them (docs/mla_decode.md, "Triton 3.9")
        assert sass.count("WARPGROUP.DEPBAR") <= 8, "wgmmas serialised (ptxas C7514)"


@pytest.mark.parametrize("fmt,rope_cols,rope_col,num_buf,gather",
                         [("fp8", 128, 512, 5, 0), ("bf16", 64, 0, 3, 0), ("fp8", 128, 512, 3, 1)])
def test_stream_ceiling_kernel_compiles_for_sm90_and_fits(fmt, rope_cols, rope_col, num_buf, gather):
    dtype = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}[fmt]
    kv2 = torch.empty(256, 576, dtype=dtype)
    nope = interface_hopper._descriptor(kv2, [64, 512])
    rope = interface_hopper._descriptor(kv2 if rope_col else kv2[:, 512:], [64, rope_cols])
    args = (nope, rope, kv2, torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32),
            torch.empty(4, dtype=torch.int32), 2, 2)
    consts = dict(PAGE_SIZE=1 if gather else 64, ROPE_COL=rope_col, B_CHUNK=128, BLOCK_N=64, NUM_BUF=num_buf,
                  num_warps=4, GATHER=gather)
    compiled = _compile_fn(kernel_hopper_tok._kv_stream_kernel, args, consts)
    assert _shared(compiled) <= SM90_SHARED
    sass = _sass(compiled)
    assert "GMMA" not in sass
    if gather:   # the decode kernel's row gather, no TMA
        assert "UTMALDG" not in sass and sass.count("LDGSTS.E.BYPASS.128") >= 20
    else:
        assert "UTMALDG.2D" in sass
    # the timeline's stamps (a cell with STREAM=1) only when given a buffer: entry, split, ready, tile landed and
    # done, exit by the SM clock, entry and exit by the global timer
    assert not re.search(r"SR_CLOCK|GLOBALTIMER", sass)
    stamped = _sass(_compile_fn(kernel_hopper_tok._kv_stream_kernel,
                                (*args, torch.empty(4, int(kh.STAMP_ROW), dtype=torch.int64)), consts))
    assert (len(re.findall(r"CS2R R\d+, SR_CLOCK", stamped)), len(re.findall(r"GLOBALTIMER", stamped))) == (6, 2)


def test_relabelled_rows_go_back_to_dim_order_before_the_store():
    """``_v_chunk`` moves a chunk's dim bit fields (w, q, a, s) to rows (a, w, s, q) by reshape and permute, so the
    P.V output chunks come out in that row order; ``kernel_hopper._in_dim_order``'s reshape and permute (the same
    ops on torch) must put every dim back in its place before the store."""
    x = torch.arange(64 * 128).view(64, 128)                                   # [tokens, dims]: value = 128 t + d
    rows = x.reshape(64, 4, 8, 2, 2).permute(3, 1, 4, 2, 0).reshape(128, 64)   # what _v_chunk does
    back = rows.reshape(2, 4, 2, 8, 64).permute(1, 3, 0, 2, 4).reshape(128, 64)  # what _in_dim_order does
    assert torch.equal(back, x.T)


def test_v2_config_is_rejected_outside_fp8_tokens_on_m():
    q = torch.empty(2, 128, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 576, dtype=torch.float8_e4m3fn)
    out = torch.empty(2, 128, 512, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"V2=1.*fp8 caches with H < 64"):
        interface_hopper.hopper_call(q, kv, torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32),
                                     0.04, 1.0, "fp8", out, False, sms=132, config=dict(V2=1))
    with pytest.raises(ValueError, match=r"kv_format 'bf16'"):
        interface_hopper.kernel_for(16, "bf16", v2=True)
    # the first kernel's keys under V2=1 are named in one line (hopper_call would drop them without a word)
    with pytest.raises(ValueError, match=r"parameters \['PIPE'\] that the second fp8 tokens-on-M kernel"):
        interface_hopper.pinned_config(16, "fp8", dict(V2=1, PIPE=2))
    assert interface_hopper.pinned_config(16, "fp8", dict(V2=1, NUM_BUF=3, CHAIN=1)) == dict(V2=1, NUM_BUF=3, CHAIN=1)
    assert interface_hopper.pinned_config(16, "fp8", dict(PIPE=2))["PIPE"] == 2          # the first kernel: fine


@pytest.mark.parametrize("batch", [3, 32])
def test_a_pinned_v2_config_may_set_its_grids_programs_per_sm(batch):
    """A pinned config of the second fp8 tokens-on-M kernel with ``PROGRAMS_PER_SM`` (a probe of grids of several
    waves, ``plan_probe.py --b3``): the grid has that many programs an SM and the scratch as many partial slots (plus
    one a request), its kernel arguments as without it (the key is the launcher's, not a kernel parameter); without
    it, two programs an SM for two buffers, one for three; 0, 9 or a bool is one clear line naming it."""
    q = torch.empty(batch, 16, 576, dtype=torch.bfloat16)
    kv = torch.empty(batch * 2, 64, 576, dtype=torch.float8_e4m3fn)
    out = torch.empty(batch, 16, 512, dtype=torch.bfloat16)

    def call(config):
        return interface_hopper.hopper_call(q, kv, torch.zeros(batch, 2, dtype=torch.int32),
                                            torch.ones(batch, dtype=torch.int32), 0.04, 1.0, "fp8", out, False,
                                            sms=132, config=config)
    for config, per_sm in ((dict(V2=1, NUM_BUF=2, PROGRAMS_PER_SM=4), 4), (dict(V2=1, NUM_BUF=3, PROGRAMS_PER_SM=3), 3),
                           (dict(V2=1, NUM_BUF=2), 2), (dict(V2=1, NUM_BUF=3), 1)):
        _, grid, consts, (_, part_o, part_lse, _) = call(config)
        assert grid == (1, 132 * per_sm) and part_o.shape[0] == part_lse.shape[0] == 132 * per_sm + batch, config
        assert "PROGRAMS_PER_SM" not in consts
    for bad in (0, 9, True):
        with pytest.raises(ValueError, match=f"PROGRAMS_PER_SM={bad!r}, expected 1 to 8") as err:
            call(dict(V2=1, PROGRAMS_PER_SM=bad))
        assert "\n" not in str(err.value)
    # a public call's pinned config passes interface_hopper.pinned_config first (plan_probe.py --b3 does; session 38's
    # first run of it stopped there: the V2 keys' check did not know the launcher's key)
    pinned = dict(V2=1, NUM_BUF=2, PREFETCH=1, FAST_MAX=1, PROGRAMS_PER_SM=4)
    assert interface_hopper.pinned_config(16, "fp8", pinned)["PROGRAMS_PER_SM"] == 4
    _, grid, _, _ = call(interface_hopper.pinned_config(16, "fp8", pinned))
    assert grid == (1, 132 * 4)


@pytest.mark.parametrize("num_buf,look,rk64,pt_early", [(2, 0, 0, 0), (3, 0, 0, 0), (2, 2, 1, 1), (3, 1, 1, 1),
                                                       (2, 0, 1, 1), (2, 0, 0, 1)])
def test_tok_fp8_v2_row_gather_compiles_for_page_size_1(num_buf, look, rk64, pt_early):
    """GATHER = 1 (page size 1): the tiles come by 16-byte cp.async copies through the page table (no TMA), into
    the same tiles, the kernel still fits two programs per SM with two buffers, and nothing spills."""
    q = torch.empty(2, 16, 576, dtype=torch.bfloat16)
    kv = torch.empty(256, 1, 576, dtype=torch.float8_e4m3fn)
    out = torch.empty(2, 16, 512, dtype=torch.bfloat16)
    args, _, consts, _ = interface_hopper.hopper_call(q, kv, torch.zeros(2, 128, dtype=torch.int32),
                                                      torch.ones(2, dtype=torch.int32), 0.04, 1.0, "fp8", out, False,
                                                      sms=132, config=dict(V2=1, GATHER=1, NUM_BUF=num_buf, LOOK=look,
                                                                                    CHAIN=0, RK64=rk64, PT_EARLY=pt_early))
    fn, consts = interface_hopper._kernel_and_params(16, "fp8", consts)
    assert consts["GATHER"] == 1 and consts["PAGE_SIZE"] == 1
    compiled = _compile_fn(fn, args, consts)
    shared = _shared(compiled)   # also: <= 255 registers, no local memory
    assert shared <= (SM90_SM_SHARED // 2 - 1024 if num_buf == 2 else SM90_SHARED)
    sass = _sass(compiled)
    assert "UTMALDG" not in sass
    # per tile and thread: 16 copies of the 512 latent bytes' share, 4 of the (zero-padded) rope tile's
    assert sass.count("LDGSTS.E.BYPASS.128") >= 20 and "LDGSTS.E.BYPASS.64" not in sass
    # the rope tile's padding columns: masked copies in the zero-fill form (a source-ignore predicate operand,
    # not a guard that would skip the write and leave stale bytes, NaN encodings included, under the MMA)
    import re
    assert re.search(r"LDGSTS\.E\.BYPASS\.128 \[[^]]+\], desc\[[^]]+\]\[[^]]+\], !?P\d ;", sass)
    assert "LDGSTSBAR.64.ARVCNT" in sass   # each thread's copies arrive on the tile's barrier
    if SCHEDULED_WITH_THIS_TRITON:
        assert sass.count("WARPGROUP.DEPBAR") <= 8, "wgmmas serialised (ptxas C7514)"


def test_page_sizes_that_are_not_whole_tiles_need_the_row_gather(monkeypatch):
    q = torch.empty(2, 16, 576, dtype=torch.bfloat16)
    kv8 = torch.empty(64, 1, 576, dtype=torch.float8_e4m3fn)
    assert interface_hopper.shape_supported(q, kv8, "fp8", explicit=True) is None
    monkeypatch.setitem(interface_hopper.GATHER_AUTO, "fp8", False)                            # path="auto"
    assert "row-gather kernel is not the measured faster" in interface_hopper.shape_supported(q, kv8, "fp8")
    monkeypatch.setitem(interface_hopper.GATHER_AUTO, "fp8", True)
    assert interface_hopper.shape_supported(q, kv8, "fp8") is None
    assert "not a multiple of 64" in interface_hopper.shape_supported(                         # heads on M
        torch.empty(2, 128, 576, dtype=torch.bfloat16), kv8, "fp8", explicit=True)
    assert "not a multiple of 64" in interface_hopper.shape_supported(
        q, kv8.to(torch.bfloat16), "bf16", explicit=True)
    with pytest.raises(ValueError, match=r"page size 1 on the Hopper path needs the row-gather loader"):
        interface_hopper._check_gather(1, dict(V2=1))
    with pytest.raises(ValueError, match=r"GATHER=1 is a loader of the second .* it needs V2=1"):
        interface_hopper._check_gather(64, dict(GATHER=1))
    interface_hopper._check_gather(1, dict(V2=1, GATHER=1))
    interface_hopper._check_gather(64, dict(V2=1))


def test_pinned_tokens_on_m_configs_run_as_given_and_bad_mixes_are_one_clear_line():
    """A pinned config runs what it says: the fold (CHAIN 1, both fp8 kernels' fixed configs) unless it names CHAIN 0,
    with no key taken from another kernel's module-level config; what cannot run is one ValueError naming it."""
    q = torch.empty(2, 16, 576, dtype=torch.bfloat16)
    out = torch.empty(2, 16, 512, dtype=torch.bfloat16)
    lens = torch.ones(2, dtype=torch.int32)

    def consts(kv, fmt, config, pages=2):
        _, _, c, _ = interface_hopper.hopper_call(q, kv, torch.zeros(2, pages, dtype=torch.int32), lens, 0.04, 1.0,
                                                  fmt, out, False, sms=132, config=config)
        return c

    fp8 = torch.empty(4, 64, 576, dtype=torch.float8_e4m3fn)
    for config in (dict(V2=0), dict(V2=1, NUM_BUF=3)):
        assert consts(fp8, "fp8", interface_hopper.pinned_config(16, "fp8", config))["CHAIN"] == 1, config
    assert consts(fp8, "fp8", dict(V2=1, NUM_BUF=2, CHAIN=0))["CHAIN"] == 0
    with pytest.raises(ValueError, match="LOOK=1 runs with one score chain only: pin CHAIN=0"):
        consts(fp8, "fp8", dict(V2=1, LOOK=1))
    with pytest.raises(ValueError, match=r"\{'PREFETCH': 2\} out of range for the second tokens-on-M kernel"):
        consts(fp8, "fp8", dict(V2=1, PREFETCH=2))
    ds = torch.empty(4, 64, 656, dtype=torch.uint8)
    assert consts(ds, "fp8_ds_mla", None).get("CHAIN", 0) == 0
    with pytest.raises(ValueError, match="CHAIN=1 is the per-tensor fp8 cache's fold"):
        consts(ds, "fp8_ds_mla", dict(V2=1, DS=1, CHAIN=1))
    # page size 16: a pinned V2 config without GATHER would read whole TMA tiles across pages: refused, whatever the
    # module's fixed config says
    small = torch.empty(64, 16, 576, dtype=torch.float8_e4m3fn)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(interface_hopper.HOPPER_TOK_FP8_CONFIG, "GATHER", 1)
        with pytest.raises(ValueError, match="page size 16 on the Hopper path needs the row-gather loader"):
            consts(small, "fp8", dict(V2=1, NUM_BUF=3), pages=8)
    assert consts(small, "fp8", dict(V2=1, NUM_BUF=3, GATHER=1), pages=8)["GATHER"] == 1


def test_pinned_tile_longer_than_a_page_is_refused():
    """A pinned BLOCK_N that does not divide the page size would take a TMA tile's second half from the physically
    next page, not the next page-table entry: one clear line instead (session 13's input review)."""
    q = torch.empty(2, 16, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 576, dtype=torch.float8_e4m3fn)
    cfg = interface_hopper.pinned_config(16, "fp8", {"BLOCK_N": 128})
    with pytest.raises(ValueError, match=r"BLOCK_N=128: a TMA tile of 128 tokens would cross pages of 64 tokens"):
        interface_hopper.hopper_call(q, kv, torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32),
                                     0.04, 1.0, "fp8", torch.empty(2, 16, 512, dtype=torch.bfloat16), False, sms=132,
                                     config=cfg)


@pytest.mark.parametrize("scale_as", ["float", "tensor"])
def test_tok_fp8_v2_reads_an_e4m3_query_as_it_is(scale_as):
    """The second fp8 tokens-on-M kernel given the query in e4m3 (``Q_FP8 = 1``: ``mla_decode``'s fp8 ``q``, its value
    ``q * q_scale``): compiled for sm_90 with an fp8 query pointer, it loads the query's bytes (no bf16 copy made by
    a torch op before the launch: 3 small kernels, ~6 us at H = 16 batch 1 on the H200 in session 28's run 1),
    reads a tensor scale from its pointer, and keeps the schedule's properties; without it, the SASS is the shipped
    build's (no query scale loaded)."""
    from test_mla_decode import _hopper_compile, compile_sm90
    from graphtune.sass import wgmma_findings
    q8 = torch.empty(2, 16, 576, dtype=torch.float8_e4m3fn)
    kv = torch.empty(4, 64, 576, dtype=torch.float8_e4m3fn)
    out = torch.empty(2, 16, 512, dtype=torch.bfloat16)
    config = dict(interface_hopper.HOPPER_TOK_FP8_V2_CONFIG, V2=1)
    args, _, consts, _ = interface_hopper.hopper_call(q8, kv, torch.zeros(2, 2, dtype=torch.int32),
                                                      torch.ones(2, dtype=torch.int32), 0.04, 1.0, "fp8", out,
                                                      False, sms=132, config=config)
    scale = 0.5 if scale_as == "float" else torch.tensor([0.5])
    args, consts = interface_hopper._fp8_query(args, consts, q8, scale, "V2")
    assert args[0] is q8 and consts["Q_FP8"] == 1 and consts["Q_DESCALE_FROM_PTR"] == int(scale_as == "tensor")
    fn, consts = interface_hopper._kernel_and_params(16, "fp8", consts)
    fp8q = _sass_of_cubin(compile_sm90(fn, args, consts).asm["cubin"])
    shipped = _sass(_hopper_compile("fp8", heads=16, page_size=64, config=config))
    assert [str(u) for u in wgmma_findings(fp8q)] == []
    # the query's rows: 16-byte loads of bf16 in the shipped build, as many 8-byte loads of e4m3 here (half the
    # bytes), and one more 4-byte load where the scale is a tensor
    assert fp8q.count("LDG.E.128") == 0 and fp8q.count("LDG.E.64 ") == shipped.count("LDG.E.128 ") > 0
    assert fp8q.count("LDG.E ") == shipped.count("LDG.E ") + (scale_as == "tensor")
    assert fp8q.count("HGMMA") == shipped.count("HGMMA") and fp8q.count("QGMMA") == shipped.count("QGMMA")
    if SCHEDULED_WITH_THIS_TRITON:
        assert fp8q.count("WARPGROUP.DEPBAR") <= shipped.count("WARPGROUP.DEPBAR") + 1


def test_a_query_given_in_e4m3_routes_to_the_kernels_that_read_it():
    """Unpinned, an e4m3 query runs T8 at every batch on an fp8 heads-on-M cache (no bf16 copy: the first kernel with
    the copy took 0.0279 ms at batch 1, H = 128 against T8's route at 8 and up, H200 session 28 run 1) and the second
    tokens-on-M kernel, which reads it too, with H < 64; a bf16 query routes as before."""
    hopper = interface_hopper
    for b in (1, 4, hopper.T8_E4M3_MIN_BATCH, 64):
        assert hopper._tuned_route(128, "fp8", b, 64, q_lo=False, fp8_q=True) == "third"
        assert hopper._tuned_route(16, "fp8", b, 64, q_lo=False, fp8_q=True) == "second"
        assert hopper._tuned_route(16, "fp8", b, 1, q_lo=False, fp8_q=True) == "gather"
    assert hopper._tuned_route(128, "fp8", 1, 64, q_lo=False) == "third"      # (T8 at every batch since session 37)
    assert hopper._tuned_route(128, "bf16", 1, 64) == "first"
    assert hopper.tuned_for(128, "fp8", 1, 64, q_lo=False, fp8_q=True).name == hopper.T8_E4M3_NAME


def _barriers_before_the_first_copy(sass: str, copies: tuple[str, ...] = ("UTMALDG", "UBLKCP")) -> int:
    """Block barriers in a kernel's SASS before its first tile copy (TMA by default; ``("LDGSTS",)``: cp.async)."""
    count = 0
    for line in sass.splitlines():
        if any(c in line for c in copies):
            return count
        count += "BAR.SYNC" in line or "BAR.ARV" in line or "BAR.RED" in line
    return count


@pytest.mark.parametrize("heads,config", [(16, dict(V2=1, NUM_BUF=2, PREFETCH=1, FAST_MAX=1)),
                                          (128, dict(NUM_BUF=2, PSMEM=1, WOVL=1, XCH=1))],
                         ids=["tok-fp8-v2", "heads-on-m-fp8"])
def test_the_split_pass_is_one_scan_and_one_reduction_a_chunk(heads, config):
    """``kernel_hopper._split_start``'s even pass with the priced split's sums (the fp8 kernels: FP8_SEG_COST) takes
    each chunk in one scan and one reduction, so a program's first copy waits behind few barriers. Compiled for
    sm_90a, both kernels: 16 with triton 3.6 and 29 with 3.9, against 45 and 40 with a scan a column and a reduction a
    sum (``FUSED = 0``, the form the ping-pong kernels keep; session 33 on an H200: fp8 H = 16 batch 1 0.0114 ->
    0.0103 ms with the fused pass)."""
    barriers = _barriers_before_the_first_copy(_sass(_compile("fp8", config, heads=heads)))
    assert 0 < barriers <= 32, barriers


def _plan_build(num_buf: int, plan: bool, gather: bool = False, counts: bool = False, heads: int = 16,
                fmt: str = "fp8", extra: dict | None = None, pdl: int = 0):
    """The second tokens-on-M kernel compiled for sm_90a, ``extra`` keys over its pinned config, with a plan (and
    ``pdl``, its PDL mode) or without, with the streamed reduction's counters (``counts``) or without."""
    from test_mla_decode import compile_sm90
    q = torch.empty(2, heads, 576, dtype=torch.bfloat16)
    page = 1 if gather else 64
    if fmt == "fp8_ds_mla":
        kv = torch.empty(256 // page, page, 656, dtype=torch.uint8)
        config = dict(V2=1, DS=1, NUM_BUF=num_buf, PREFETCH=0, FAST_MAX=1, GATHER=int(gather), **(extra or {}))
    else:
        kv = torch.empty(256 // page, page, 576, dtype=torch.float8_e4m3fn)
        config = dict(V2=1, NUM_BUF=num_buf, PREFETCH=1, FAST_MAX=1, GATHER=int(gather), **(extra or {}))
    args, grid, consts, _ = interface_hopper.hopper_call(
        q, kv, torch.zeros(2, 128 // page, dtype=torch.int32), torch.ones(2, dtype=torch.int32), 0.04, 1.0, fmt,
        torch.empty(2, heads, 512, dtype=torch.bfloat16), False, sms=132, config=config)
    fn, consts = interface_hopper._kernel_and_params(heads, fmt, consts)
    if plan:
        consts = {**consts, "plan_ptr": torch.empty(grid[1], int(kh.PLAN_COLS), dtype=torch.int32),
                  **({"PDL": pdl} if pdl else {})}
    if counts:
        consts = {**consts, "done_ptr": torch.zeros(2, 2, int(kh.STREAM_GROUPS), dtype=torch.int32)}
    return compile_sm90(fn, args, consts)


STREAM_BUILDS = [(2, False, 16, "fp8"), (3, False, 16, "fp8"), (2, True, 16, "fp8"), (2, False, 32, "fp8"),
                 (2, False, 16, "fp8_ds_mla"), (3, False, 16, "fp8_ds_mla")]


@pytest.mark.parametrize("num_buf,gather,heads,fmt", STREAM_BUILDS,
                         ids=[f"{f}-buf{n}-H{h}{'-gather' if g else ''}" for n, g, h, f in STREAM_BUILDS])
def test_tok_fp8_v2_counts_its_written_segments_for_the_streamed_reduction(num_buf, gather, heads, fmt):
    """Given the plan's counters (``done_ptr``, ``reduction.STREAM``), a two-buffer config counts each partial
    segment at its end, after a block barrier, by one thread's release-ordered add (compiled for sm_90: a predicated
    ``MEMBAR.ALL.GPU`` then ``REDG.E.ADD.STRONG.GPU``); a three-buffer config (one program an SM) does not count
    (``kernel_hopper.STREAM_MAX_BUF``: its build is the one without). Nothing else moves: the same MMAs, waits on
    them, copies and shared memory as the build without, no local memory. The same kernel on fp8_ds_mla rows
    (``DS``, streamed from session 54) alike."""
    base = _plan_build(num_buf, True, gather, heads=heads, fmt=fmt)
    counted = _plan_build(num_buf, True, gather, True, heads, fmt)
    assert _shared(counted) == _shared(base)
    sass, sass0 = _sass(counted), _sass(base)
    for op in ("QGMMA.64x32x32.F32.E4M3.E4M3", "HGMMA.64x16x16.F32", "HGMMA.64x16x16.F32.BF16", "WARPGROUP.DEPBAR",
               "SYNCS.ARRIVE", "UTMALDG", "LDGSTS"):
        assert sass.count(op) == sass0.count(op), op
    lines = sass.splitlines()
    red = [i for i, ln in enumerate(lines) if "REDG.E.ADD.STRONG.GPU" in ln]
    fence = [i for i, ln in enumerate(lines) if "MEMBAR.ALL.GPU" in ln]
    assert "REDG" not in sass0 and "MEMBAR.ALL.GPU" not in sass0
    if num_buf > int(kh.STREAM_MAX_BUF):
        assert not red and not fence and sass.count("BAR.SYNC") == sass0.count("BAR.SYNC")
        return
    assert len(red) == len(fence) == 1 and fence[0] < red[0] <= fence[0] + 6, [lines[r] for r in red]
    # (one thread adds: the PTX's add is predicated; triton 3.9 puts a barrier of its own before it too)
    adds = re.findall(r"@%p\d+ (?:red|atom)\.global\.gpu\.release\.add\.u32", counted.asm["ptx"])
    assert len(adds) == 1, adds
    assert sass.count("BAR.SYNC") > sass0.count("BAR.SYNC")
    assert any("BAR.SYNC" in ln for ln in lines[fence[0] - 40:fence[0]]), "no block barrier before the count"


@pytest.mark.parametrize("num_buf", [2, 3])
def test_tok_fp8_v2_reads_its_split_from_a_plan(num_buf):
    """Given a plan's rows (``plan_ptr``: the program's split and first segment, plan.py): the same shared memory and
    MMAs, wgmmas asynchronous, no local memory, and fewer barriers before the first tile's copy than the split's pass
    needs (it reads eight values instead); the plan kernel itself compiles for sm_90 with the split's code."""
    from test_mla_decode import compile_sm90
    from graphtune.kernels.mla_decode import kernel_hopper as kh
    base, plan = _plan_build(num_buf, False), _plan_build(num_buf, True)
    assert _shared(plan) == _shared(base)
    sass, sass0 = _sass(plan), _sass(base)
    for mma in ("QGMMA.64x32x32.F32.E4M3.E4M3", "HGMMA.64x16x16.F32"):
        assert sass.count(mma) == sass0.count(mma), mma
    assert sass.count("WARPGROUP.DEPBAR") <= 8, "wgmmas serialised (ptxas C7514)"
    assert _barriers_before_the_first_copy(sass) < _barriers_before_the_first_copy(sass0)
    args = (torch.ones(2, dtype=torch.int32), torch.zeros(2, 2, dtype=torch.int32), torch.empty(132, 8, dtype=torch.int32),
            2, 2)
    compiled = compile_sm90(kh._mla_decode_plan_kernel, args, dict(PAGE_SIZE=64, B_CHUNK=128, BLOCK_N=64, SEG_COST=4,
                                                                      num_warps=4))
    assert "STG" in _sass(compiled)


def test_a_plan_is_one_clear_line_when_misused_and_the_tuned_kernels_that_read_it_fill_it():
    """``plan=`` takes an MLADecodePlan (else one line naming the argument); a plan serves one step's seq_lens and
    page table (another batch's is one line); the tuned second tokens-on-M kernels (fp8, fp8_ds_mla) carry the
    pre-hook that fills it for each config's grid, the row-gather kernel (which does not read it) does not."""
    from graphtune.kernels.mla_decode import MLADecodePlan, interface, mla_decode, plan as plan_mod
    x = dict(q=torch.randn(2, 16, 576, dtype=torch.bfloat16), kv=torch.randn(2, 64, 576).to(torch.float8_e4m3fn),
             pt=torch.arange(2, dtype=torch.int32).view(2, 1), lens=torch.tensor([3, 64], dtype=torch.int32))
    for bad in ("plan", 3, object()):
        with pytest.raises(ValueError, match="mla_decode: plan: ") as err:
            mla_decode(x["q"], x["kv"], x["pt"], x["lens"], 0.04, plan=bad)
        assert "\n" not in str(err.value) and "MLADecodePlan" in str(err.value)
    plan = MLADecodePlan()
    assert "empty" in repr(plan)
    plan.rows(x["lens"], x["pt"], 132)
    with pytest.raises(ValueError, match="another batch") as err:
        plan.rows(x["lens"].clone(), x["pt"], 132)
    assert "\n" not in str(err.value)
    for fmt in ("fp8", "fp8_ds_mla"):
        kernel = interface_hopper.tuned_second_kernel(False, fmt)
        assert kernel.configs and all(c.pre_hook is plan_mod.plan_hook for c in kernel.configs)
    for fmt in ("fp8", "fp8_ds_mla"):       # (the row gather reads the split and the first segment from it too)
        gather = interface_hopper.tuned_second_kernel(False, fmt, gather=True)
        assert gather.configs and all(c.pre_hook is plan_mod.plan_hook for c in gather.configs)
    # on the CPU the portable kernel runs (interpreted) and the plan is not read: the call is the same as without it
    assert interface.MLADecodePlan is MLADecodePlan
    scale = 1.0 / 24.0
    kv = torch.randn(2, 64, 576).to(torch.float8_e4m3fn)
    without = mla_decode(x["q"], kv, x["pt"], x["lens"], scale, kv_scale=0.5)
    with_plan = mla_decode(x["q"], kv, x["pt"], x["lens"], scale, kv_scale=0.5, plan=MLADecodePlan())
    assert torch.isfinite(without.float()).all() and torch.equal(without, with_plan)


def test_bf16_tokens_on_m_kernel_reads_its_split_from_a_plan():
    """The bf16 tokens-on-M kernel given a plan's rows (``plan_ptr``: the program's split and its first tile's page
    id): the same shared memory and MMAs, wgmmas as asynchronous, no local memory, its first copy sooner in the code
    and fewer barriers (no split pass); its tuned configs carry the plan's pre-hook."""
    from graphtune.kernels.mla_decode import plan as plan_mod
    from test_mla_hopper_pp import _first_copy_line
    from test_mla_decode import compile_sm90

    def build(plan: bool):
        q = torch.empty(2, 16, 576, dtype=torch.bfloat16)
        kv = torch.empty(4, 64, 576, dtype=torch.bfloat16)
        args, grid, consts, _ = interface_hopper.hopper_call(
            q, kv, torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32), 0.04, 1.0, "bf16",
            torch.empty(2, 16, 512, dtype=torch.bfloat16), False, sms=132)
        fn, consts = interface_hopper._kernel_and_params(16, "bf16", consts)
        if plan:
            consts = {**consts, "plan_ptr": torch.empty(grid[1], int(kh.PLAN_COLS), dtype=torch.int32)}
        return compile_sm90(fn, args, consts)
    base, plan = build(False), build(True)
    assert _shared(plan) == _shared(base)
    sass, sass0 = _sass(plan), _sass(base)
    assert sass.count("HGMMA") == sass0.count("HGMMA")
    if SCHEDULED_WITH_THIS_TRITON:  # (triton 3.9's ptxas serialises the base kernel's wgmmas: 68 waits against 3)
        assert sass.count("WARPGROUP.DEPBAR") == sass0.count("WARPGROUP.DEPBAR")
    else:
        assert sass.count("WARPGROUP.DEPBAR") <= sass0.count("WARPGROUP.DEPBAR")
    assert _first_copy_line(sass) < _first_copy_line(sass0)
    assert sass.count("BAR.SYNC") < sass0.count("BAR.SYNC")
    assert all(c.pre_hook is plan_mod.plan_hook for c in interface_hopper.tuned_kernel(False, False).configs)
    assert all(c.pre_hook is not plan_mod.plan_hook for c in interface_hopper.tuned_kernel(True, False).configs)


def test_a_plans_start_price_is_the_reading_kernels(monkeypatch):
    """The split a plan holds prices a request's start as the kernel that reads it would: the fp8 kernels'
    ``FP8_SEG_COST`` for a per-tensor fp8 cache, none for fp8_ds_mla (``DS``: the even split), and
    ``plan.BF16_PLAN_SEG_COST`` for a bf16 cache (the plan's own knob: its pass runs once a step, so the price costs no
    call anything)."""
    from graphtune.kernels.mla_decode import MLADecodePlan, kernel_hopper, plan as plan_mod
    got = []
    monkeypatch.setattr(plan_mod.MLADecodePlan, "fill",
                        lambda self, seq_lens, page_table, page_size, programs, seg_cost, b_chunk, min_tiles=1,
                        slots=False, counted=False, geometry=(16, 1):
                        got.append(seg_cost))
    lens, pt = torch.ones(2, dtype=torch.int32), torch.zeros(2, 2, dtype=torch.int32)
    for price in (0, 4):
        monkeypatch.setattr(plan_mod, "BF16_PLAN_SEG_COST", price)
        got.clear()
        for fp8, nargs in ((True, {}), (True, {"DS": 1}), (False, {})):
            rows = plan_mod.attach(MLADecodePlan(), lens, pt, 64, 132, lambda config: 132, 128, fp8=fp8)
            plan_mod.plan_hook({**nargs, "plan_ptr": rows})
        assert got == [int(kernel_hopper.FP8_SEG_COST), 0, price]


@pytest.mark.parametrize("num_buf", [2, 3])
def test_row_gather_reads_its_split_from_a_plan(num_buf):
    """The row gather (``GATHER``, page size 1) given a plan's rows: the split and the first segment's request and
    length from the row (its page ids, one a row, it still loads): the same shared memory and MMAs, wgmmas as
    asynchronous, and fewer barriers before the first row copy (``LDGSTS``) than the split's pass needs."""
    base, plan = _plan_build(num_buf, False, gather=True), _plan_build(num_buf, True, gather=True)
    assert _shared(plan) == _shared(base)
    sass, sass0 = _sass(plan), _sass(base)
    for mma in ("QGMMA.64x32x32.F32.E4M3.E4M3", "HGMMA.64x16x16.F32"):
        assert sass.count(mma) == sass0.count(mma), mma
    assert sass.count("WARPGROUP.DEPBAR") == sass0.count("WARPGROUP.DEPBAR")
    assert _barriers_before_the_first_copy(sass, ("LDGSTS",)) < _barriers_before_the_first_copy(sass0, ("LDGSTS",))


# the split kernels that take PDL, as a pinned launch runs them: (format, heads, config, the MMAs they issue)
PDL_KERNELS = {
    "fp8-v2-buf2": ("fp8", 16, dict(V2=1, NUM_BUF=2, PREFETCH=1, FAST_MAX=1, PT_EARLY=1, RK64=1, CHAIN=1),
                    ("QGMMA.64x32x32.F32.E4M3.E4M3", "HGMMA.64x16x16.F32")),
    "fp8-v2-buf3": ("fp8", 16, dict(V2=1, NUM_BUF=3, PREFETCH=1, FAST_MAX=1, PT_EARLY=1, RK64=1, CHAIN=1),
                    ("QGMMA.64x32x32.F32.E4M3.E4M3", "HGMMA.64x16x16.F32")),
    "bf16-tok": ("bf16", 16, {}, ("HGMMA.64x16x16.F32.BF16",)),
    "bf16-pp": ("bf16", 128, dict(PP=1, SM1=1, RA=1), ("HGMMA.64x64x16.F32.BF16", "HGMMA.64x256x16.F32.BF16")),
}


def _pdl_build(kernel: str, pdl: int):
    from test_mla_decode import compile_sm90
    fmt, heads, config, _ = PDL_KERNELS[kernel]
    q = torch.empty(2, heads, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 576, dtype=torch.float8_e4m3fn if fmt == "fp8" else torch.bfloat16)
    args, grid, consts, _ = interface_hopper.hopper_call(
        q, kv, torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32), 0.04, 1.0, fmt,
        torch.empty(2, heads, 512, dtype=torch.bfloat16), False, sms=132, config=config)
    fn, consts = interface_hopper._kernel_and_params(heads, fmt, consts)
    assert "PDL" in fn.arg_names, kernel
    consts = {**consts, "plan_ptr": torch.empty(grid[1], int(kh.PLAN_COLS), dtype=torch.int32),
              **({"PDL": pdl} if pdl else {})}
    return compile_sm90(fn, args, consts)


@pytest.mark.parametrize("kernel", list(PDL_KERNELS))
def test_the_split_launched_behind_the_kernel_ahead_waits_where_its_mode_says(kernel):
    """``PDL`` (``interface_hopper.SPLIT_PDL``), compiled for sm_90 with a plan, in each kernel that takes it: one
    ``griddepcontrol.wait`` (``ACQBULK`` in the SASS) a warpgroup (two in the ping-pong kernel), none without; mode
    1 before the kernel's first global load, mode 2 after the plan row's loads (all from one base) and before every
    other load and the first tile's copy; the same shared memory, MMAs and copies as the build without."""
    mmas = PDL_KERNELS[kernel][3]
    warpgroups = 2 if kernel == "bf16-pp" else 1
    base = _pdl_build(kernel, 0)
    sass0 = _sass(base)
    assert "griddepcontrol.wait" not in base.asm["ptx"] and "ACQBULK" not in sass0
    assert all(sass0.count(op) for op in mmas), mmas
    for mode in (1, 2):
        built = _pdl_build(kernel, mode)
        assert _shared(built) == _shared(base)
        sass = _sass(built)
        for op in (*mmas, "UTMALDG"):
            assert sass.count(op) == sass0.count(op), (mode, op)
        lines = sass.splitlines()
        waits = [i for i, ln in enumerate(lines) if "ACQBULK" in ln]
        assert len(waits) == warpgroups, (mode, waits)
        assert built.asm["ptx"].count("griddepcontrol.wait") == warpgroups, mode
        copy = next(i for i, ln in enumerate(lines) if "UTMALDG" in ln)
        assert waits[0] < copy, mode
        # each warpgroup's code from its start (the kernel's, or the worker partition's first instruction after the
        # default partition's code ends at an EXIT) up to its wait
        starts = [0] + [i + 1 for i, ln in enumerate(lines) if re.search(r"\bEXIT\b", ln)][:warpgroups - 1]
        for start, wait in zip(sorted(starts), waits):
            loads = [ln for ln in lines[start:wait] if re.search(r"\bLDG", ln)]
            if mode == 1:
                assert not loads, (mode, loads)
            else:
                bases = {re.search(r"\[(R\d+)\.64", ln).group(1) for ln in loads}
                assert 4 <= len(loads) <= 10 and len(bases) == 1, loads     # (the plan's row: one base, its columns)


# COPY_FIRST (session 58): a segment's first copies issued before its query's loads. (format, buffers, row gather): the
# builds the tuned path's spaces would hold it in.
COPY_FIRST_BUILDS = [("fp8", 2, False), ("fp8", 3, False), ("fp8", 2, True), ("fp8_ds_mla", 2, False)]


@pytest.mark.parametrize("fmt,num_buf,gather", COPY_FIRST_BUILDS,
                         ids=[f"{f}-buf{n}" + ("-gather" if g else "") for f, n, g in COPY_FIRST_BUILDS])
def test_the_first_copies_go_out_before_the_querys_loads(fmt, num_buf, gather):
    """``COPY_FIRST=1`` compiled for sm_90a with a plan and PDL 2: the same shared memory (so the same programs per
    SM), no local memory, 255 registers or fewer, the same MMAs, copies and waits as without; the segment's first copy
    ahead of the query's 16-byte loads, where without it the copies follow them and the query's maxima (which wait for
    those loads: ptxas put them ahead of the copies whatever the source order)."""
    copy = "LDGSTS" if gather else "UTMALDG"
    rk64 = {} if fmt == "fp8_ds_mla" else {"RK64": 1}      # (as the tuned space's rows)
    base, built = (_plan_build(num_buf, True, gather, fmt=fmt, extra={**rk64, "COPY_FIRST": c}, pdl=2) for c in (0, 1))
    assert _shared(built) == _shared(base)
    sass0, sass = _sass(base), _sass(built)
    for op in ("QGMMA", "HGMMA", "UTMALDG", "LDGSTS", "WARPGROUP.DEPBAR", "SYNCS.PHASECHK"):
        assert sass.count(op) == sass0.count(op), op

    def first(text: str, what: str) -> int:
        return next(i for i, ln in enumerate(text.splitlines()) if what in ln)
    assert first(sass0, "LDG.E.128") < first(sass0, copy)
    assert first(sass, copy) < first(sass, "LDG.E.128")


def test_copy_first_is_a_pinned_flag_of_the_second_kernel_and_other_values_are_one_clear_line():
    """``COPY_FIRST`` reaches the kernel from a pinned config, is off unless pinned, and takes 0 or 1."""
    q = torch.empty(2, 16, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 576, dtype=torch.float8_e4m3fn)

    def consts(config):
        return interface_hopper.hopper_call(q, kv, torch.zeros(2, 2, dtype=torch.int32),
                                            torch.ones(2, dtype=torch.int32), 0.04, 1.0, "fp8",
                                            torch.empty(2, 16, 512, dtype=torch.bfloat16), False, sms=132,
                                            config=config)[2]
    assert consts(dict(V2=1, COPY_FIRST=1))["COPY_FIRST"] == 1
    assert consts(dict(V2=1)).get("COPY_FIRST", 0) == 0
    assert interface_hopper.pinned_config(16, "fp8", dict(V2=1, COPY_FIRST=1, NUM_BUF=3))["COPY_FIRST"] == 1
    with pytest.raises(ValueError, match=r"\{'COPY_FIRST': 2\} out of range") as err:
        consts(dict(V2=1, COPY_FIRST=2))
    assert len(str(err.value).splitlines()) == 1


def test_the_split_pdl_switch_adds_its_launch_options_where_they_apply(monkeypatch):
    """``SPLIT_PDL``: nothing at 0 or for other kernels than the second tokens-on-M one; mode 2 falls back to 1
    without a plan, where the call just filled it (the plan kernel is then the kernel ahead) or where a scale is a
    tensor; anything else is one clear line."""
    pdl = interface_hopper._split_pdl
    monkeypatch.setattr(interface_hopper, "SPLIT_PDL", 0)
    assert pdl(True, {"plan_ptr": 1}, False) == {}
    monkeypatch.setattr(interface_hopper, "SPLIT_PDL", 2)
    assert pdl(True, {"plan_ptr": 1}, False) == {"PDL": 2, "launch_pdl": True}
    assert pdl(True, {"plan_ptr": 1}, True) == {"PDL": 1, "launch_pdl": True}
    assert pdl(True, {}, False) == {"PDL": 1, "launch_pdl": True}
    for scale in ("KV_SCALE_FROM_PTR", "Q_DESCALE_FROM_PTR"):       # (a scale tensor: read after the wait)
        assert pdl(True, {"plan_ptr": 1, scale: 1}, False) == {"PDL": 1, "launch_pdl": True}
    assert pdl(False, {"plan_ptr": 1}, False) == {}
    monkeypatch.setattr(interface_hopper, "SPLIT_PDL", 3)
    with pytest.raises(ValueError, match="SPLIT_PDL 3: expected 0, 1 or 2"):
        pdl(True, {}, False)
    # which kernels take it: the second fp8 tokens-on-M kernel, the bf16 tokens-on-M and bf16 ping-pong kernels; not
    # T8 (launched behind its query's pre-pass already) nor the heads-on-M first kernels
    # (the bf16 ones with SPLIT_PDL_BF16, on since session 57)
    from graphtune.kernels.mla_decode import kernel_hopper_pp, kernel_hopper_pp8
    takes = interface_hopper._takes_pdl
    assert takes(kernel_hopper_tok._mla_decode_hopper_tok_fp8_v2_kernel, "fp8")
    assert takes(kernel_hopper_tok._mla_decode_hopper_tok_fp8_v2_kernel, "fp8_ds_mla")
    for bf16 in (kh._mla_decode_hopper_tok_kernel, kernel_hopper_pp._mla_decode_hopper_pp_kernel,
                 interface_hopper.tuned_kernel(False, False)):
        monkeypatch.setattr(interface_hopper, "SPLIT_PDL_BF16", False)
        assert not takes(bf16, "bf16")
        monkeypatch.setattr(interface_hopper, "SPLIT_PDL_BF16", True)
        assert takes(bf16, "bf16")
    assert not takes(kernel_hopper_pp8._mla_decode_hopper_pp8_kernel, "fp8")
    assert not takes(kh._mla_decode_hopper_kernel, "bf16")
    assert not takes(interface_hopper.tuned_kernel(True, False), "bf16")
    assert not takes(kernel_hopper_pp._mla_decode_hopper_pp_fp8_kernel, "fp8")


class _Launches:
    """The plan kernel's launches, counted (``plan.fill`` launches it; no GPU here)."""

    def __init__(self):
        self.count = 0

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.count += 1
        return launch


class _Picked:
    """The tuner's side of a tuned launch: ``chosen`` returns the pick (None: not made yet); ``takes``: whether its
    kernel takes ``PDL``."""

    def __init__(self, pick, takes=True):
        self.pick = pick
        self.arg_names = ("q", "B", *(("PDL",) if takes else ()))

    def chosen(self, args, kwargs=None):
        return self.pick


def test_a_tuned_split_reads_its_plan_before_waiting_only_where_pick_and_plan_are_ready(monkeypatch):
    """A tuned launch's ``SPLIT_PDL = 2``: mode 2 only where the tuner has a pick for the launch and the plan holds that
    pick's split (its pre-hook then launches nothing right ahead of the split); mode 1 before the pick, where the
    pre-hook is about to fill the plan (the step's first layer), or where the plan holds another grid's split; no
    PDL without ``SPLIT_PDL`` or for other kernels."""
    import triton
    from graphtune.kernels.mla_decode import plan as plan_mod
    launches = _Launches()
    monkeypatch.setattr(kh, "_mla_decode_plan_kernel", launches)
    monkeypatch.setattr(interface_hopper, "SPLIT_PDL", 2)
    seq_lens = torch.randint(1, 9000, (8,), dtype=torch.int32)
    page_table = torch.randint(0, 1000, (8, 141), dtype=torch.int32)
    plan = plan_mod.MLADecodePlan()
    rows = plan_mod.attach(plan, seq_lens, page_table, 64, 264, lambda nargs: 132 * nargs["PER_SM"], 16)
    consts = {"plan_ptr": rows, "PAGE_SIZE": 64}
    one, two = (triton.Config({"PER_SM": n, "NUM_BUF": 2}) for n in (1, 2))
    tuned = interface_hopper._tuned_split_pdl
    wait_first, plan_first = {"PDL": 1, "launch_pdl": True}, {"PDL": 2, "launch_pdl": True}
    args = (None, 8)
    assert tuned(_Picked(None), "fp8", args, consts) == wait_first      # (the tuner will time its configs)
    assert tuned(_Picked(two), "fp8", args, consts) == wait_first       # (its pre-hook fills the plan next)
    assert plan_mod.plan_hook({**consts, **two.all_kwargs()}) and launches.count == 1
    assert tuned(_Picked(two), "fp8", args, consts) == plan_first       # (a later layer: nothing filled ahead)
    assert not plan_mod.plan_hook({**consts, **two.all_kwargs()}) and launches.count == 1
    assert tuned(_Picked(one), "fp8", args, consts) == wait_first       # (another grid's split: filled again)
    assert tuned(_Picked(two), "fp8", args, {"PAGE_SIZE": 64}) == wait_first    # (no plan)
    assert tuned(_Picked(two, takes=False), "fp8", args, consts) == {}  # (no PDL: T8, the first kernels)
    monkeypatch.setattr(interface_hopper, "SPLIT_PDL", 0)
    assert tuned(_Picked(two), "fp8", args, consts) == {}


# ------------------------------------------------------------------------ WG2: two warpgroups and a producer warp

WG2_BUILDS = [(3, False, 0), (4, False, 0), (4, True, 2), (5, True, 2), (5, True, 1)]


@pytest.mark.parametrize("num_buf,plan,pdl", WG2_BUILDS,
                         ids=[f"buf{n}{'-plan' if p else ''}{f'-pdl{d}' if d else ''}" for n, p, d in WG2_BUILDS])
def test_tok_fp8_two_warpgroups_fit_sm90_as_three_partitions(num_buf, plan, pdl):
    """``WG2=1`` (kernel_hopper_tok2.py) compiled for sm_90a: its buffers, query, P tiles and mbarriers fit one block
    (five 40 KB buffers: 231,792 B); the block is the default partition (WG0, 4 warps), WG1 (4 warps, ``WG1_REGS``)
    and the producer (1 warp, padded to a warpgroup: 384 threads), each with its own register count (``setmaxnreg``),
    as graphtune.resources reports them; each warpgroup runs its own score chain (20 fp8 MMAs against the [hi | lo]
    query) and the P.V of its half of V for its own and the other's tiles (2 x 2 chunks of 8 fp16 MMAs) with V^T by
    32-bit loads; the copies are TMA messages; no wgmma is serialised."""
    from graphtune.sass import wgmma_findings
    compiled = _plan_build(num_buf, plan, counts=plan, extra={"WG2": 1}, pdl=pdl)
    shared = _shared(compiled)
    assert shared <= SM90_SHARED, shared
    assert compiled.metadata.num_warps == 12
    assert ".reqntid 384" in compiled.asm["ptx"]
    usage = resources._resource_usage(compiled.asm["cubin"], compiled.metadata.name)
    parts = resources.warp_partitions(compiled.asm["ttgir"], compiled.asm["ptx"], 4, usage["REG"])
    assert [(p.name, p.warps) for p in parts] == [("default", 4), ("partition0", 4), ("partition1", 1)]
    assert [p.requested_registers for p in parts[1:]] == [232, int(kernel_hopper_tok2.PRODUCER_REGS)]
    assert all(p.registers is not None for p in parts)
    assert 128 * sum(p.registers for p in parts) <= 65536, [p.registers for p in parts]
    sass = _sass(compiled)
    assert sass.count("QGMMA.64x32x32.F32.E4M3.E4M3") == 2 * 20
    assert sass.count("HGMMA.64x16x16.F32") == 2 * 4 * 8
    # (one byte load: the warps' dispatch to their partition, Triton's warp specialisation)
    assert sass.count("LDS.U8") <= 1 and "LDS.S8" not in sass
    assert "UTMALDG.2D" in sass
    assert [str(u) for u in wgmma_findings(sass)] == []
    if plan:
        # (a plan-less build's split scan spills in the partitions; the planned path's loop does not)
        assert usage.get("STACK", 0) <= 32, usage


@pytest.mark.parametrize("extra,message", [
    (dict(GATHER=1), "WG2=1 (the two-warpgroup kernel) takes TMA tiles"),
    (dict(LOOK=1, CHAIN=0), "not {'LOOK': 1}"),
    (dict(PT_EARLY=1), "not {'PT_EARLY': 1}"),
    (dict(NUM_BUF=6), "WG2=1 takes NUM_BUF 3 to 5, got 6"),
    (dict(NUM_BUF=2), "WG2=1 takes NUM_BUF 3 to 5, got 2"),
    (dict(WG1_REGS=100), "WG1_REGS=100, expected a multiple of 8"),
    (dict(WG1_REGS=True), "WG1_REGS=True"),
], ids=["gather", "look", "pt-early", "six-buffers", "two-buffers", "regs-not-8", "regs-bool"])
def test_tok_fp8_two_warpgroups_refuse_what_they_do_not_run(extra, message):
    """A pinned ``WG2=1`` config with the one-warpgroup kernel's loaders or schedules, more buffers than fit or a
    register count setmaxnreg cannot take: one line naming the key and its value."""
    page = 1 if extra.get("GATHER") else 64
    q = torch.empty(2, 16, 576, dtype=torch.bfloat16)
    kv = torch.empty(256 // page, page, 576, dtype=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        interface_hopper.hopper_call(q, kv, torch.zeros(2, 128 // page, dtype=torch.int32),
                                     torch.ones(2, dtype=torch.int32), 0.04, 1.0, "fp8",
                                     torch.empty(2, 16, 512, dtype=torch.bfloat16), False, sms=132,
                                     config={**dict(V2=1, WG2=1, NUM_BUF=4), **extra})
    assert "\n" not in str(err.value)


def test_tok_fp8_two_warpgroups_run_one_program_an_sm():
    """Whatever its buffers, a ``WG2`` config's grid is one program an SM (its 12 warps and up to 231,792 B)."""
    q = torch.empty(2, 16, 576, dtype=torch.bfloat16)
    kv = torch.empty(4, 64, 576, dtype=torch.float8_e4m3fn)
    for num_buf in (3, 4, 5):
        _, grid, consts, _ = interface_hopper.hopper_call(
            q, kv, torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32), 0.04, 1.0, "fp8",
            torch.empty(2, 16, 512, dtype=torch.bfloat16), False, sms=132, config=dict(V2=1, WG2=1, NUM_BUF=num_buf))
        assert grid == (1, 132) and consts["WG2"] == 1
