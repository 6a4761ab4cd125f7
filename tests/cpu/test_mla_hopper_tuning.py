"""The Hopper MLA decode kernels under ``graphtune.autotune``, without a GPU: every config of each kernel's
space compiles for sm_90 and fits (``graphtune.inspect`` with the launch's own arguments, each config's
pre-hook run first), the tuned kernels' key, buckets and default, the pre-hook that rebuilds the KV
descriptors, when a launch is pinned instead of tuned, and the launch path against a stand-in for the
kernel's run (the Gluon kernels cannot run here). tests/gpu/test_mla_decode_gpu.py runs them on an H200.
"""
from __future__ import annotations

import pytest
import torch

import graphtune
from graphtune.kernels.mla_decode import interface_hopper as hopper
from graphtune.kernels.mla_decode import kernel_hopper, space
from graphtune.resources import get_target

KINDS = [(128, "bf16"), (16, "bf16"), (128, "fp8"), (16, "fp8")]
IDS = ["heads-on-M", "tokens-on-M", "heads-on-M-fp8", "tokens-on-M-fp8"]


def _inputs(heads: int, fmt: str, batch: int = 3, page_size: int = 64):
    q = torch.randn(batch, heads, 576).to(torch.bfloat16)
    if fmt == "fp8_ds_mla":   # (656-byte rows; compiled only, so any bytes)
        kv = torch.randint(0, 256, (2 * batch, page_size, 656), dtype=torch.uint8)
    else:
        kv = torch.randn(2 * batch, page_size, 576).to({"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}[fmt])
    out = torch.full((batch, heads, 512), float("nan")).to(torch.bfloat16)
    pt = torch.arange(2 * batch, dtype=torch.int32).view(batch, 2)
    lens = torch.full((batch,), page_size + 5, dtype=torch.int32)
    return q, kv, pt, lens, out


def _named(heads: int, fmt: str, sms: int = 132):
    q, kv, pt, lens, out = _inputs(heads, fmt)
    args, grid, consts, scratch = hopper.tuned_call(q, kv, pt, lens, 0.04, 1.0, fmt, out, False, sms=sms)
    fn = hopper.kernel_for(heads, fmt)
    names = [n for n in fn.arg_names if n not in consts]
    return dict(zip(names, args)), grid, consts, scratch


@pytest.mark.parametrize("heads,fmt", KINDS, ids=IDS)
def test_every_config_of_each_hopper_space_compiles_for_sm90_and_fits(heads, fmt):
    on_m, fp8 = hopper._heads_on_m(heads), fmt == "fp8"
    kernel = hopper.tuned_kernel(on_m, fp8)
    named, _, consts, _ = _named(heads, fmt)
    rows = graphtune.inspect(kernel, target="sm_90", args=named, constexprs=consts)
    limit = get_target("sm_90").shared_per_block_optin
    assert len(rows) == len(kernel.configs)
    for row in rows:
        assert row.fits, f"{row.label}: {row.reason}"
        assert row.shared_bytes <= limit and row.registers <= 255, row
        assert row.total_warps == row.num_warps == (hopper.NUM_WARPS if on_m else hopper.TOK_NUM_WARPS)
    if (on_m, fp8) == (True, False):
        # each config was compiled after its pre-hook: the descriptors end at the last config's 32-token tile
        # (the compile alone cannot tell: the buffers follow BLOCK_N, a wrong TMA box only shows on the GPU)
        assert kernel.configs[-1].kwargs["BLOCK_N"] == 32
        assert named["kv_nope_desc"].block_shape == [32, 512] and named["kv_rope_desc"].block_shape == [32, 64]


@pytest.mark.parametrize("heads,fmt", KINDS, ids=IDS)
def test_forcing_a_space_config_runs_that_config_and_nothing_of_the_default(heads, fmt):
    """``graphtune.force(name, **config)`` keeps the default config's values for keys the config leaves out, so
    a space config that left out a knob of the fixed config would be forced with the fixed config's value (the
    H200 run of session 9: the 32-token PIPE 1 config forced with the fixed EARLY 1, which does not compile)."""
    on_m = hopper._heads_on_m(heads)
    kernels = [hopper.tuned_kernel(on_m, fmt == "fp8")]
    kernels += [hopper.tuned_second_kernel(on_m, fmt)] if (on_m, fmt) in hopper.SECOND else []
    kernels += [hopper.tuned_second_kernel(on_m, fmt, third=True)] if (on_m, fmt) in hopper.THIRD else []
    for kernel in kernels:
        for config in kernel.configs:
            assert kernel._forced_from(dict(config.kwargs)).kwargs == config.kwargs, (kernel.name, config)


@pytest.mark.parametrize("heads,fmt,partial", [(128, "bf16", dict(BLOCK_N=64, NUM_BUF=2, PSMEM=1, MAX1=1)),
                                                (128, "bf16", dict(BLOCK_N=64, XCH=2)),
                                                (128, "fp8", dict(BLOCK_N=64, WOVL=0)),
                                                (16, "fp8", dict(NUM_BUF=4))])
def test_pinned_config_of_a_partial_config_binds_every_knob_the_kernel_requires(heads, fmt, partial):
    """A partial config (a variant, an A/B candidate) as a pinned launch runs it: every constexpr of its kernel
    that the launch does not set and that has no default gets a value (the H200 run of session 9: a variant
    without PIPE failed to bind: "missing 1 required positional argument: 'PIPE'"), knobs with a default that
    the config leaves out take the kernel's default, not the fixed config's."""
    cfg = hopper.pinned_config(heads, fmt, partial)
    fn, params = hopper._kernel_and_params(heads, fmt, cfg)
    required = {p.name for p in fn.params if p.is_constexpr and not p.has_default} - hopper._LAUNCH_CONSTEXPRS
    assert required <= set(params), (fn.__name__, sorted(required - set(params)))
    defaults = {p.name: p.default for p in fn.params if p.is_constexpr and p.has_default}
    assert all(params[k] == defaults[k] for k in defaults if k in params and k not in partial)


def test_pinned_config_names_a_required_knob_the_config_and_the_fixed_config_leave_out(monkeypatch):
    # the bf16 heads-on-M kernel's PIPE has no default: a fixed config without it cannot fill it in
    monkeypatch.setattr(hopper, "HOPPER_CONFIG", {k: v for k, v in hopper.HOPPER_CONFIG.items() if k != "PIPE"})
    with pytest.raises(ValueError, match=r"leaves out \['PIPE'\]"):
        hopper.pinned_config(128, "bf16", dict(BLOCK_N=64, NUM_BUF=2))


@pytest.mark.parametrize("heads,fmt", KINDS, ids=IDS)
def test_tuned_kernels_key_on_the_capture_buckets_with_the_fixed_config_as_default(heads, fmt):
    on_m, fp8 = hopper._heads_on_m(heads), fmt == "fp8"
    kernel = hopper.tuned_kernel(on_m, fp8)
    assert kernel.name == hopper.KERNEL_NAMES[(on_m, fp8)]
    assert kernel.keys == ["B", "H", "PAGE_SIZE", "RETURN_LSE"]
    assert tuple(kernel.buckets["B"].sizes) == tuple(space.CAPTURE_SIZES)
    fixed = {k: v for k, v in hopper._SHIPPED[(on_m, fp8)].items() if k != "PROGRAMS_PER_SM"}
    assert kernel.default is kernel.configs[0] and kernel.default.kwargs == fixed
    assert all(c.num_warps == (hopper.NUM_WARPS if on_m else hopper.TOK_NUM_WARPS) for c in kernel.configs)
    varies = len({c.kwargs["BLOCK_N"] for c in kernel.configs}) > 1
    assert all((c.pre_hook is hopper._kv_tiles) == varies for c in kernel.configs)


SM90_SM_SHARED = 233472       # per SM (228 KB); each block also takes 1 KB the driver reserves


@pytest.mark.parametrize("heads,fmt,third", [(16, "fp8", False), (128, "bf16", False), (16, "fp8_ds_mla", False),
                                              (128, "fp8", True)],
                         ids=["tokens-on-M-fp8-v2", "heads-on-M-pp", "tokens-on-M-ds", "heads-on-M-fp8-t8"])
def test_second_kernels_tuned_space_compiles_for_sm90_fits_and_its_grid_follows_its_programs_per_sm(heads, fmt, third):
    """The per-bucket space of a shape class's second kernel (``SECOND``; ``third``: its third, ``THIRD``) through
    ``graphtune.inspect`` with the tuned launch's own arguments: named, keyed and defaulted as the first; the grid's
    programs per SM as its configs fit (the second fp8 tokens-on-M kernel: two for two buffers, one for more; the
    ping-pong kernels: one, 8 warps as two 4-warp partitions); scratch for the most programs."""
    on_m = hopper._heads_on_m(heads)
    second = (hopper.THIRD if third else hopper.SECOND)[(on_m, fmt)]
    head_blocks = heads // (hopper.BLOCK_H if on_m else hopper.TOK_BLOCK_H)
    q, kv, pt, lens, out = _inputs(heads, fmt)
    args, grid, consts, (_, part_o, _, _) = hopper.tuned_second_call(q, kv, pt, lens, 0.04, 1.0, fmt, out, False,
                                                                     sms=132, third=third)
    kernel = hopper.tuned_second_kernel(on_m, fmt, third=third)
    assert kernel.name == second.name and kernel.default is kernel.configs[0]
    assert [c.kwargs for c in kernel.configs] == second.space
    assert kernel.keys == ["B", "H", "PAGE_SIZE", "RETURN_LSE"]
    assert tuple(kernel.buckets["B"].sizes) == tuple(space.CAPTURE_SIZES)
    names = [n for n in kernel.fn.arg_names if n not in consts]
    named = dict(zip(names, args))
    if second.flag == "PP":   # the latent as two 256-column TMA halves
        assert named["kv_nope_desc"].block_shape == [64, hopper.PP_CHUNK]
    if second.flag == "T8":   # the whole fp8 latent tile, the bf16 query as [64, 256] halves
        assert named["kv_nope_desc"].block_shape == [64, 512] and named["q_nope_desc"].block_shape == [64, 256]
    rows = graphtune.inspect(kernel, target="sm_90", args=named, constexprs=consts)
    assert len(rows) == len(kernel.configs)
    limit = get_target("sm_90").shared_per_block_optin
    for config, row in zip(kernel.configs, rows):
        assert row.fits and row.shared_bytes <= limit and row.registers <= 255, row
        per_sm = grid(config.all_kwargs())[1] * head_blocks // 132
        ping_pong = second.flag in ("PP", "T8")
        assert per_sm == (2 if not ping_pong and config.kwargs["NUM_BUF"] == 2 else 1), config
        assert per_sm * (row.shared_bytes + 1024) <= SM90_SM_SHARED
        assert row.total_warps == (8 if ping_pong else 4), row
    assert part_o.shape[0] == max(second.programs_per_sm(c) for c in second.space) * 132 // head_blocks + q.shape[0]


@pytest.mark.parametrize("fmt", ["fp8", "fp8_ds_mla"])
def test_row_gather_kernel_is_tuned_per_bucket_over_its_formats_space_with_gather_on(fmt):
    """Page sizes that are not whole TMA tiles (``GATHER``): the second tokens-on-M kernel tuned per bucket as its own
    kernel name, over the format's second-kernel space (less COPY_FIRST) with GATHER = 1 in every config (the
    descriptors unread: the rows come by cp.async through the page table), compiled for sm_90 through
    ``graphtune.inspect`` with the tuned launch's arguments at page size 1, each fitting and with the grid its programs
    per SM give."""
    gather = hopper.GATHER[fmt]
    base = hopper.SECOND[(False, fmt)]
    assert gather.min_batch == 1 and gather.flag == base.flag and gather.name != base.name
    # (COPY_FIRST, in the fp8 space's two-buffer rows since session 58, was timed on TMA tiles only: not in the gather's)
    assert [{k: v for k, v in c.items() if k != "GATHER"} for c in gather.space] == \
        [{k: v for k, v in c.items() if k != "COPY_FIRST"} for c in base.space]
    assert all(c["GATHER"] == 1 for c in gather.space)
    q, _, _, lens, out = _inputs(16, fmt)
    kv = torch.empty(64, 1, 656 if fmt == "fp8_ds_mla" else 576,
                     dtype=torch.uint8 if fmt == "fp8_ds_mla" else torch.float8_e4m3fn)
    pt = torch.zeros(q.shape[0], 96, dtype=torch.int32)
    args, grid, consts, _ = hopper.tuned_second_call(q, kv, pt, lens, 0.04, 1.0, fmt, out, False, sms=132,
                                                     gather=True)
    assert consts["PAGE_SIZE"] == 1
    kernel = hopper.tuned_second_kernel(False, fmt, True)
    assert kernel.name == gather.name and [c.kwargs for c in kernel.configs] == gather.space
    assert kernel.keys == ["B", "H", "PAGE_SIZE", "RETURN_LSE"]
    named = dict(zip([n for n in kernel.fn.arg_names if n not in consts], args))
    rows = graphtune.inspect(kernel, target="sm_90", args=named, constexprs=consts)
    for config, row in zip(kernel.configs, rows):
        assert row.fits and row.registers <= 255, row
        assert grid(config.all_kwargs())[1] // 132 == gather.programs_per_sm(config.kwargs), config


def test_second_kernels_apply_from_their_measured_batch():
    for (on_m, fmt), second in hopper.SECOND.items():
        heads = 128 if on_m else 16
        lo = second.min_batch
        assert hopper.second_applies(heads, fmt, lo) and hopper.second_applies(heads, fmt, 128)
        assert not hopper.second_applies(heads, fmt, lo - 1)
    assert hopper.SECOND[(False, "fp8")].min_batch == hopper.TOK_FP8_V2_MIN_BATCH
    assert hopper.SECOND[(True, "bf16")].min_batch == hopper.PP_MIN_BATCH
    assert hopper.SECOND[(True, "fp8")].min_batch == hopper.PP_FP8_MIN_BATCH
    # fp8_ds_mla: its only tuned Hopper kernel, every batch
    assert hopper.SECOND[(False, "fp8_ds_mla")].min_batch == 1
    # no second kernel for bf16 tokens on M; fp8 heads on M only from its measured batch
    assert not hopper.second_applies(16, "bf16", 64) and not hopper.second_applies(128, "fp8", 1)
    # the third (fp8 heads on M, T8) from its own measured batch: since session 37 every batch (faster than the first
    # kernel at 1 and 4, and than the ping-pong kernel at 8), so the class's first kernel and the fp8 ping-pong kernel
    # serve no tuned bucket
    assert list(hopper.THIRD) == [(True, "fp8")]
    third = hopper.THIRD[(True, "fp8")]
    assert third.min_batch == hopper.T8_MIN_BATCH == 1 and third.flag == "T8"
    assert not hopper.third_applies(16, "fp8", 128) and not hopper.third_applies(128, "bf16", 128)
    for batch in (1, 2, 7, 8, 16, 128):
        assert hopper.third_applies(128, "fp8", batch) and hopper._tuned_route(128, "fp8", batch, 64) == "third"
        assert hopper._tuned_route(64, "fp8", batch, 128) == "third"


def test_kv_tiles_pre_hook_rebuilds_the_kv_descriptors_for_the_configs_tile():
    named, _, _, _ = _named(128, "bf16")
    q_before = (named["q_nope_desc"].block_shape, named["q_rope_desc"].block_shape)
    hopper._kv_tiles({**named, "BLOCK_N": 32})
    assert named["kv_nope_desc"].block_shape == [32, 512] and named["kv_rope_desc"].block_shape == [32, 64]
    assert named["kv_nope_desc"].layout == hopper._layout((32, 512), torch.bfloat16)
    assert named["kv_rope_desc"].layout == hopper._layout((32, 64), torch.bfloat16)
    assert (named["q_nope_desc"].block_shape, named["q_rope_desc"].block_shape) == q_before   # BLOCK_H: fixed
    hopper._kv_tiles({**named, "BLOCK_N": 64})
    assert named["kv_nope_desc"].block_shape == [64, 512] and named["kv_rope_desc"].block_shape == [64, 64]


def test_pinned_when_a_config_is_given_or_the_module_config_was_changed(monkeypatch):
    assert not hopper.pinned(128, "bf16") and not hopper.pinned(16, "fp8")
    assert hopper.pinned(128, "bf16", {"PIPE": 1})
    monkeypatch.setitem(hopper.HOPPER_TOK_FP8_CONFIG, "PROGRAMS_PER_SM", 1)    # as --hopper-variants does
    assert hopper.pinned(16, "fp8") and not hopper.pinned(128, "fp8")


def test_tokens_on_m_fp8_grid_gives_each_config_the_programs_that_fit_and_scratch_covers_them():
    sms, heads = 132, 16
    named, grid, _, (lse, part_o, part_lse, seg) = _named(heads, "fp8", sms=sms)
    configs = hopper.tuned_kernel(False, True).configs
    programs = {c.kwargs["NUM_BUF"] * 10 + c.kwargs["WIDEN"]: grid(c.all_kwargs())[1] for c in configs}
    assert programs == {20: sms * 2, 40: sms, 22: sms * 2}
    assert part_o.shape[0] == part_lse.shape[0] == max(programs.values()) + 3   # + batch
    # the pinned launch keeps the fixed config's two programs per SM
    q, kv, pt, lens, out = _inputs(heads, "fp8")
    _, pinned_grid, consts, _ = hopper.hopper_call(q, kv, pt, lens, 0.04, 1.0, "fp8", out, False, sms=sms)
    assert pinned_grid == (1, sms * 2) and consts["NUM_BUF"] == 2 and consts["num_warps"] == 4


class _Run:
    """Stands in for a Gluon kernel's run: records the config and the KV descriptors' tiles of each launch, and
    writes what every split kernel writes for the reduction that follows each timed launch (each request's first and
    last partial slot, here slot 0: the reduction then reads only slots the scratch has; its values do not matter)."""

    def __init__(self):
        self.launches: list[tuple[int, tuple, tuple]] = []

    def __call__(self, *args, grid, warmup, **kwargs):
        if not warmup:
            self.launches.append((kwargs["BLOCK_N"], tuple(args[2].block_shape), tuple(args[3].block_shape)))
            named = dict(zip(kernel_hopper._mla_decode_hopper_kernel.arg_names, args))
            named["seg_ptr"].zero_()
            named["part_o_ptr"].zero_()
            named["part_lse_ptr"].zero_()


@pytest.fixture
def stand_in(monkeypatch):
    run = _Run()
    monkeypatch.setattr(kernel_hopper._mla_decode_hopper_kernel, "run", run)
    yield run
    hopper.tuned_kernel(True, False).reset()


def _launch(**kw):
    q, kv, pt, lens, out = _inputs(128, "bf16", batch=5)
    return hopper.launch(q, kv, pt, lens, 0.04, 1.0, "bf16", out, False, sms=7, **kw)


def test_launch_tunes_per_bucket_and_every_launch_gets_its_configs_tiles(stand_in):
    _launch()
    kernel = hopper.tuned_kernel(True, False)
    assert kernel.tune_count == 1
    assert {n for n, _, _ in stand_in.launches} == {64, 32}            # every candidate ran
    assert all(nope == (n, 512) and rope == (n, 64) for n, nope, rope in stand_in.launches)
    cov = graphtune.coverage(["mla_decode_hopper"]).to_dict()["kernels"][0]
    assert [t["key"][0] for t in cov["tuned"]] == [8]                   # batch 5 is the bucket of 8


def test_forced_hopper_config_keeps_its_pre_hook_and_pinned_launches_skip_the_tuner(stand_in):
    graphtune.force("mla_decode_hopper", BLOCK_N=32, NUM_BUF=4, PIPE=1)
    try:
        _launch()
    finally:
        graphtune.unforce("mla_decode_hopper")
    assert stand_in.launches == [(32, (32, 512), (32, 64))]
    assert hopper.tuned_kernel(True, False).tune_count == 0
    del stand_in.launches[:]
    _launch(config={"BLOCK_N": 32, "NUM_BUF": 3})                       # pinned: the plain kernel, no tuner
    assert stand_in.launches == [(32, (32, 512), (32, 64))]
    assert hopper.tuned_kernel(True, False).tune_count == 0


@pytest.mark.parametrize("heads,fmt", KINDS, ids=IDS)
def test_ab_target_times_the_space_each_config_pinned_as_the_tuned_grid_runs_it(heads, fmt):
    from graphtune.ab import resolve_target
    from graphtune.kernels.mla_decode.bench import MlaDecodeHopperTarget

    target = MlaDecodeHopperTarget(heads=heads, kv_format=fmt)
    on_m = hopper._heads_on_m(heads)
    second = [{**c, s.flag: 1} for extra in (hopper.SECOND, hopper.THIRD) if (s := extra.get((on_m, fmt)))
              for c in s.space]
    pinned_only = hopper.SPLIT_MAX_PINNED[fmt] if on_m else []    # (the ping-pong kernels with SPLIT_MAX)
    assert [c.kwargs for c in target.configs] == hopper._SPACES[(on_m, fmt == "fp8")] + second + pinned_only
    assert target.page_size == 64 and target.name == "mla_decode_hopper"
    for config in target.configs:
        pinned = hopper.pinned_config(heads, fmt, config.kwargs)
        # what the tuned kernel runs: the config, and the kernel's own defaults where the config is silent (a
        # pinned launch overlays the fixed config, whose EARLY 1 would not compile under PIPE 1)
        fn = hopper.kernel_for(heads, fmt, v2=bool(config.kwargs.get("V2")), pp=bool(config.kwargs.get("PP")),
                               t8=bool(config.kwargs.get("T8")))
        defaults = {p.name: p.default for p in fn.params if p.is_constexpr and p.has_default}
        added = {k: v for k, v in pinned.items() if k not in config.kwargs and k != "PROGRAMS_PER_SM"}
        assert {k: v for k, v in pinned.items() if k in config.kwargs} == config.kwargs
        assert all(defaults[k] == v for k, v in added.items()), (config.kwargs, added)
        assert set(hopper._base_config(on_m, fmt == "fp8")) - set(config.kwargs) - {"PROGRAMS_PER_SM"} \
            <= set(pinned) or config.kwargs.get("V2") or config.kwargs.get("PP") or config.kwargs.get("T8")
        if (on_m, fmt) == (False, "fp8") and not config.kwargs.get("V2"):   # the tuned grid's programs per SM
            assert pinned["PROGRAMS_PER_SM"] == hopper._tok_fp8_programs_per_sm(pinned)
    alias = resolve_target("mla_decode_hopper")   # graphtune ab mla_decode_hopper: fp8, H = 16
    assert isinstance(alias, MlaDecodeHopperTarget) and (alias.heads, alias.kv_format) == (16, "fp8")
    for name, fmt128 in (("mla_decode_hopper_h128", "fp8"), ("mla_decode_hopper_h128_bf16", "bf16")):
        alias = resolve_target(name)
        assert (alias.name, alias.heads, alias.kv_format) == (name, 128, fmt128)
        assert [c.kwargs for c in alias.configs] == [c.kwargs for c in MlaDecodeHopperTarget(heads=128,
                                                                                             kv_format=fmt128).configs]
    # graphtune ab mla_decode_hopper_h128_e4m3: the fp8 heads-on-M spaces, every launch with the e4m3 query
    e4m3 = resolve_target("mla_decode_hopper_h128_e4m3")
    assert (e4m3.heads, e4m3.kv_format, e4m3.query_precision) == (128, "fp8", "e4m3")
    assert [c.kwargs for c in e4m3.configs] == [c.kwargs for c in resolve_target("mla_decode_hopper_h128").configs]
    assert resolve_target("mla_decode_hopper_h128").query_precision == "bf16"
    # graphtune ab mla_decode_hopper_h128_p8: T8's space with the e4m3 query, PL and P8's tuned space, each pinned
    p8 = resolve_target("mla_decode_hopper_h128_p8")
    assert (p8.heads, p8.kv_format, p8.query_precision, p8.path) == (128, "fp8", "e4m3", "hopper")
    assert [c.kwargs for c in p8.configs] == [*hopper.HOPPER_T8_SPACE, hopper.T8_PL_CONFIG, *hopper.HOPPER_T8_P8_SPACE]
    for config in p8.configs:
        assert hopper.pinned_config(128, "fp8", config.kwargs)["T8"] == 1
    with pytest.raises(ValueError, match=r"\['BLOCK_H'\] that the Hopper kernel"):
        hopper.pinned_config(heads, fmt, {"BLOCK_H": 16, "BLOCK_N": 64})


def test_serving_kernel_names_the_tuned_kernel_the_public_call_runs(monkeypatch):
    """``interface.serving_kernel``: the portable kernel off sm_90 (here: CPU tensors, interpreted); with the Hopper
    path taken (``supported`` stubbed to say so, not interpreted) the tuned kernel of the launch's route: the row gather at pages below a tile,
    the class's second kernel from its min_batch, else the first; None under a pinned fixed config."""
    from graphtune.kernels.mla_decode import interface
    q16 = torch.empty(8, 16, 576, dtype=torch.bfloat16)
    fp8_page1 = torch.empty(64, 1, 576, dtype=torch.float8_e4m3fn)
    assert interface.serving_kernel(q16, fp8_page1).name == "mla_decode"
    with pytest.raises(ValueError, match="kv_format: 'fp9'"):
        interface.serving_kernel(q16, fp8_page1, "fp9")
    monkeypatch.setattr(hopper, "supported", lambda *a, **k: None)
    monkeypatch.setattr(interface.settings, "interpret", lambda: False)
    assert interface.serving_kernel(q16, fp8_page1).name == hopper.GATHER["fp8"].name
    ds_page16 = torch.empty(8, 16, 656, dtype=torch.uint8)
    assert interface.serving_kernel(q16, ds_page16, "fp8_ds_mla").name == hopper.GATHER["fp8_ds_mla"].name
    bf16_page64 = torch.empty(8, 64, 576, dtype=torch.bfloat16)
    q128 = torch.empty(hopper.PP_MIN_BATCH, 128, 576, dtype=torch.bfloat16)
    assert interface.serving_kernel(q128, bf16_page64).name == hopper.PP_NAME
    assert interface.serving_kernel(q128[:1], bf16_page64).name == hopper.KERNEL_NAMES[(True, False)]
    # query_precision="e4m3": T8 tuned apart from its own min_batch; a bf16 cache refuses it in one line
    fp8_page64 = torch.empty(8, 64, 576, dtype=torch.float8_e4m3fn)
    q8 = torch.empty(hopper.T8_E4M3_MIN_BATCH, 128, 576, dtype=torch.bfloat16)
    assert interface.serving_kernel(q8, fp8_page64, query_precision="e4m3").name == hopper.T8_E4M3_NAME
    pair = hopper.T8_NAME if hopper.T8_E4M3_MIN_BATCH >= hopper.T8_MIN_BATCH else hopper.PP_FP8_NAME
    assert interface.serving_kernel(q8, fp8_page64).name == pair
    with pytest.raises(ValueError, match="query_precision: 'e4m3' applies to an fp8 cache"):
        interface.serving_kernel(q8, bf16_page64, query_precision="e4m3")
    monkeypatch.setitem(hopper.HOPPER_CONFIG, "NUM_BUF", hopper.HOPPER_CONFIG["NUM_BUF"] + 1)
    assert interface.serving_kernel(q128[:1], bf16_page64) is None


def test_tuned_kernels_are_one_object_per_kernel_however_asked_for():
    """``tuned_for`` (the launch's choice) and ``tuned_second_kernel`` called with or without its default give the same
    autotuned object: two objects of one kernel name would tune and report apart (a warm-up of one, a launch of the
    other)."""
    assert hopper.tuned_second_kernel(True, "bf16") is hopper.tuned_second_kernel(True, "bf16", False)
    assert hopper.tuned_for(128, "bf16", hopper.PP_MIN_BATCH, 64) is hopper.tuned_second_kernel(True, "bf16")
    assert hopper.tuned_for(16, "fp8", 64, 64) is hopper.tuned_second_kernel(False, "fp8")
    assert hopper.tuned_for(16, "fp8", 1, 64) is hopper.tuned_second_kernel(False, "fp8")   # (from batch 1)
    assert hopper.tuned_for(128, "bf16", 1, 64) is hopper.tuned_kernel(True, False)
    assert hopper.tuned_for(16, "fp8", 1, 1) is hopper.tuned_second_kernel(False, "fp8", gather=True)
    assert hopper.tuned_for(128, "fp8", hopper.T8_MIN_BATCH, 64) is hopper.tuned_second_kernel(True, "fp8", third=True)
    assert hopper.tuned_second_kernel(True, "fp8", third=True) is not hopper.tuned_second_kernel(True, "fp8")
    assert hopper.tuned_second_kernel(True, "fp8", third=True).name == hopper.T8_NAME


@pytest.mark.parametrize("fmt", ["bf16", "fp8"])
def test_split_max_caps_the_grid_by_the_batch_alone(fmt):
    """``SPLIT_MAX`` (the heads-on-M spaces' grid knob): at most that many programs a request, from the batch size
    alone (capture-safe), so at batch 1 and H = 128 a 64-tile request is split in 32 instead of 66 (half the
    partial outputs); from 3 requests up on 132 SMs the grid is the uncapped one. Every heads-on-M kernel takes it
    (an unused constexpr: the grid is the interface's), the tokens-on-M kernels do not."""
    for batch, want in ((1, hopper.SPLIT_MAX_SMALL), (2, 2 * hopper.SPLIT_MAX_SMALL), (3, 66)):
        q, kv, pt, lens, out = _inputs(128, fmt, batch=batch)
        _, grid, _, _ = hopper.tuned_call(q, kv, pt, lens, 0.04, 1.0, fmt, out, False, sms=132)
        assert grid({"SPLIT_MAX": hopper.SPLIT_MAX_SMALL}) == (2, min(want, 66))
        assert grid({}) == (2, 66)
        _, pinned_grid, consts, _ = hopper.hopper_call(q, kv, pt, lens, 0.04, 1.0, fmt, out, False, sms=132,
                                                       config={"SPLIT_MAX": hopper.SPLIT_MAX_SMALL})
        assert pinned_grid == (2, min(want, 66)) and consts["SPLIT_MAX"] == hopper.SPLIT_MAX_SMALL
    # in the first kernel's tuned space (bf16 batch 1-7; fp8's first kernel serves no bucket since session 37); the
    # ping-pong kernels' only pinned (the A/B's): the tuned path runs them from batch 8, where the cap never bites
    first = hopper.HOPPER_SPACE if fmt == "bf16" else hopper.HOPPER_FP8_SPACE
    assert sorted(c["SPLIT_MAX"] for c in first if c.get("SPLIT_MAX")) == [hopper.SPLIT_MAX_FEWER,
                                                                           hopper.SPLIT_MAX_SMALL]
    for batch, want in ((1, 16), (4, 64), (5, 66)):     # SPLIT_MAX_FEWER: batch 1-4 on 132 SMs
        q, kv, pt, lens, out = _inputs(128, fmt, batch=batch)
        _, grid, _, _ = hopper.tuned_call(q, kv, pt, lens, 0.04, 1.0, fmt, out, False, sms=132)
        assert grid({"SPLIT_MAX": hopper.SPLIT_MAX_FEWER}) == (2, want)
    second = hopper.SECOND[(True, fmt)]
    assert not any(c.get("SPLIT_MAX") for c in second.space), second.name
    q, kv, pt, lens, out = _inputs(128, fmt, batch=second.min_batch)
    _, grid, _, _ = hopper.tuned_call(q, kv, pt, lens, 0.04, 1.0, fmt, out, False, sms=132)
    assert grid({"SPLIT_MAX": hopper.SPLIT_MAX_SMALL}) == grid({}), second.name
    # T8 (fp8, every batch since session 37): no cap in its space, whose configs run one grid (its plan is filled
    # before its query pre-pass, for one grid: interface_hopper._plan_first)
    if (True, fmt) in hopper.THIRD:
        assert not any(c.get("SPLIT_MAX") for c in hopper.THIRD[(True, fmt)].space)
    assert [c.get("PP", 0) + c.get("T8", 0) for c in hopper.SPLIT_MAX_PINNED[fmt]] == [1]
    from graphtune.kernels.mla_decode import bench
    target = bench.MlaDecodeHopperTarget(heads=128, kv_format=fmt)
    assert all(any(c.kwargs == dict(p) for c in target.configs) for p in hopper.SPLIT_MAX_PINNED[fmt])
    for fn in (hopper.kernel_for(128, fmt), hopper.kernel_for(128, fmt, pp=True),
               *([hopper.kernel_for(128, fmt, t8=True)] if fmt == "fp8" else [])):
        assert "SPLIT_MAX" in fn.arg_names
    assert "SPLIT_MAX" not in hopper.kernel_for(16, fmt).arg_names
