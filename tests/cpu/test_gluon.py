"""graphtune on ``@gluon.jit`` kernels, without a GPU.

Compiling for sm_90 works on a CPU, so the resource figures (``graphtune.inspect``: warps, registers, shared
memory, warp-specialised partitions) are checked against Triton's own compile of the same kernel. Gluon
kernels cannot run here (no GPU, and the interpreter does not run Gluon), so the tuner's handling of them
(config pre-hooks that rebuild tensor descriptors per config, the fast launch path) runs against a stand-in
for the kernel's launch that records what each launch received and computes the result in torch.
tests/gpu/test_gluon_gpu.py runs the same kernels on a GPU.
"""
from __future__ import annotations

import dataclasses
import pickle
import re

import pytest
import torch
import triton

import _gluon_kernels as gk
import graphtune
from graphtune import Buckets, capture, resources, search, settings
from graphtune.descriptors import copy_arg, copy_nbytes, footprint_nbytes, is_descriptor, tensor_of
from graphtune.errors import InspectError
from graphtune.launch import FastLaunch, Miss

KERNELS = {"tma": gk._tma_scale_kernel, "warp-specialised": gk._ws_scale_kernel}


def _args(rows: int = 3 * 37, cols: int = 96, block=(64, 64), dtype=torch.float32) -> dict:
    x = torch.randn(rows, cols).to(dtype)
    out = torch.full((rows, cols), float("nan")).to(dtype)
    return dict(in_desc=gk.descriptor(x, list(block)), out_desc=gk.descriptor(out, list(block)), B=3, scale=2.0)


def _direct_compile(fn, block, config: triton.Config):
    """Triton's own compile of ``fn`` for sm_90 with descriptors of ``block`` (the reference figures)."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import mangle_type
    desc = mangle_type(gk.descriptor(torch.zeros(128, 128), list(block)))
    consts = {**config.kwargs, "num_warps": config.num_warps}
    signature = {"in_desc": desc, "out_desc": desc, "B": "i32", "scale": "fp32",
                 **{k: "constexpr" for k in consts}}
    options = {"num_warps": config.num_warps}
    if config.maxnreg is not None:
        options["maxnreg"] = config.maxnreg
    with resources._compiler_mode(fn):   # tests/cpu run with TRITON_INTERPRET=1: compile with it off
        return triton.compile(GluonASTSource(fn, signature, consts, {}), target=GPUTarget("cuda", 90, 32),
                              options=options)


# ------------------------------------------------------------------------------- inspect, device limits


@pytest.mark.parametrize("which", list(KERNELS))
def test_inspect_compiles_a_gluon_kernel_for_sm90_with_descriptors_rebuilt_per_config(which):
    fn = KERNELS[which]
    configs = gk.configs_with_hooks()
    rows = graphtune.inspect(fn, target="sm_90", args=_args(), configs=configs)
    assert [r.label for r in rows] == [graphtune.configs.config_label(c) for c in configs]
    for config, row in zip(configs, rows):
        block = (config.kwargs["BM"], config.kwargs["BN"])
        ref = _direct_compile(fn, block, config)
        usage = resources._resource_usage(ref.asm["cubin"], ref.metadata.name)
        assert row.fits, f"{row.label}: {row.reason}"
        assert row.shared_dynamic == ref.metadata.shared, row.label
        assert row.registers == usage["REG"], row.label
        assert row.num_warps == config.num_warps
        assert row.total_warps == ref.metadata.num_warps
        assert row.threads_per_block == ref.metadata.num_warps * 32
    # the tile is the config's: a 32 x 64 tile needs half the shared memory of a 64 x 64 one
    assert rows[0].shared_dynamic < rows[1].shared_dynamic


def test_a_descriptor_left_at_another_block_shape_fails_to_compile_with_the_reason():
    # no pre-hook: the descriptors keep their 64 x 64 tiles, the config says 32 x 64; the kernel asserts it
    rows = graphtune.inspect(gk._tma_scale_kernel, target="sm_90", args=_args(block=(64, 64)),
                             configs=[triton.Config({"BM": 32, "BN": 64}, num_warps=4)])
    assert not rows[0].fits and rows[0].limiter == "compile"
    assert rows[0].reason.startswith("compile failed for sm_90: CompileTimeAssertionFailure")


@pytest.mark.parametrize("maxnreg", [None, 128], ids=["maxnreg-default", "maxnreg-128"])
def test_warp_specialised_kernel_reports_its_real_warps_and_partition_registers(maxnreg):
    config = triton.Config({"BM": 64, "BN": 64}, num_warps=4, maxnreg=maxnreg, pre_hook=gk.set_block_shape)
    row, = graphtune.inspect(gk._ws_scale_kernel, target="sm_90", args=_args(), configs=[config])
    ref = _direct_compile(gk._ws_scale_kernel, (64, 64), config)
    # 4 warps of the default partition + 1 worker warp, padded by Triton to whole warpgroups: 8
    assert ref.metadata.num_warps == 8
    assert (row.num_warps, row.total_warps, row.threads_per_block) == (4, 8, 256)
    default, loader = row.partitions
    assert (default.name, default.warps, default.requested_registers) == ("default", 4, None)
    assert (loader.name, loader.warps, loader.requested_registers) == ("partition0", 1, 24)
    emitted = {int(v) for v in re.findall(r"setmaxnreg\.(?:inc|dec)\.sync\.aligned\.u32\s+(\d+)", ref.asm["ptx"])}
    assert {default.registers, loader.registers} <= emitted
    assert loader.registers == 24      # its warpgroup's largest request (24; the padding asks 16)
    if maxnreg == 128:
        assert row.registers == 128
        # the default warpgroup gets what the worker warpgroup gives up: 128 + (128 - 24)
        assert default.registers == 232
        assert row.blocks_by_registers == 2           # 128 x 256 threads = 32,768 registers per block
    # occupancy counts every warp of the block: 8, not the config's 4
    assert row.blocks_by_threads == 64 // 8
    four = resources.occupancy("sm_90", row.registers, row.shared_bytes, 4)
    assert row.blocks_by_threads < four.blocks_by_threads


def test_kernel_without_warp_specialisation_reports_no_partitions():
    row, = graphtune.inspect(gk._tma_scale_kernel, target="sm_90", args=_args(), configs=gk.configs_with_hooks()[:1])
    assert row.partitions == () and row.total_warps == row.num_warps == 4


def test_partition_registers_are_none_when_the_ptx_disagrees_with_the_rule():
    ttgir = ("ttg.warp_specialize(%a) attributes {requestedRegisters = array<i32: 24, 48>}\n"
             "    partition0(%arg1: i32) num_warps(1) {\n    partition1(%arg1: i32) num_warps(2) {\n")
    ptx = ".maxnreg 128\nsetmaxnreg.dec.sync.aligned.u32 \t208;\nsetmaxnreg.inc.sync.aligned.u32 \t48;\n"
    parts = resources.warp_partitions(ttgir, ptx, 4, 128)
    assert [(p.name, p.warps, p.requested_registers, p.registers) for p in parts] == [
        ("default", 4, None, 208), ("partition0", 1, 24, 48), ("partition1", 2, 48, 48)]
    parts = resources.warp_partitions(ttgir, ptx.replace("208", "200"), 4, 128)
    assert [p.registers for p in parts] == [None, None, None]
    # no register requests: no reallocation, every partition keeps the kernel's count
    parts = resources.warp_partitions(ttgir.replace(" attributes {requestedRegisters = array<i32: 24, 48>}", ""),
                                      ".maxnreg 255\n", 4, 168)
    assert [p.registers for p in parts] == [168, 168, 168]


class _StubCompiled:
    def __init__(self, shared: int, regs: int, warps: int):
        self.metadata = type("M", (), {"shared": shared, "num_warps": warps})()
        self.n_regs, self.n_spills = regs, 0

    def _init_handles(self):
        pass


@pytest.mark.parametrize("total_warps,expect", [
    (8, None),
    (36, "needs 1152 threads per block (36 warps), sm_90 allows 1024"),
    (16, "registers per block"),
], ids=["fits", "threads", "registers"])
def test_device_check_counts_the_worker_warps_and_runs_the_pre_hook_first(monkeypatch, total_warps, expect):
    k = graphtune.autotune(gk.configs_with_hooks(), key=["B"], name="g_devcheck")(gk._ws_scale_kernel)
    seen = []

    def warmup(*args, grid, **kwargs):
        seen.append((tuple(args[0].block_shape), kwargs["BM"], kwargs["BN"]))
        return _StubCompiled(16444, 255, total_warps)
    monkeypatch.setattr(k.fn, "warmup", warmup)
    config = triton.Config({"BM": 128, "BN": 32}, num_warps=4, pre_hook=gk.set_block_shape)
    a = _args()
    found: dict = {}
    why = search._check_compiled(k.space, config, tuple(a.values()), {}, (1,), resources.get_target("sm_90"),
                                 found, 0)
    assert seen == [((128, 32), 128, 32)]          # the descriptors were rebuilt before the compile
    assert found[0]["threads"] == total_warps * 32
    if expect is None:
        assert why is None
    else:
        assert expect in why


# -------------------------------------------------------------------------- bad input to inspect


def test_inspect_bad_input_is_one_clear_line():
    a = _args()
    with pytest.raises(InspectError, match=r"give signature= or args=, not both"):
        graphtune.inspect(gk._tma_scale_kernel, args=a, signature={"B": "i32"})
    with pytest.raises(InspectError, match=r"args=\[1, 2\] must map parameter names to values"):
        graphtune.inspect(gk._tma_scale_kernel, args=[1, 2])
    with pytest.raises(InspectError, match=r"launches with num_warps=4 but constexprs set num_warps=8"):
        graphtune.inspect(gk._tma_scale_kernel, args=a, constexprs={"num_warps": 8},
                          configs=gk.configs_with_hooks()[:1])


def test_signature_from_args_types_a_descriptor_as_triton_mangles_it():
    from triton.runtime.jit import mangle_type
    a = _args(block=(32, 64))
    signature, constexprs = resources.signature_from_args(gk._tma_scale_kernel, a)
    assert signature["in_desc"] == mangle_type(a["in_desc"])
    assert signature["in_desc"].startswith("tensordesc<fp32[32, 64],NVMMASharedLayout(")
    assert "in_desc" not in resources.aligned_args(gk._tma_scale_kernel, a)   # never given tt.divisibility


# ------------------------------------------------------------------- the tuner, with a launch stand-in


class _Recorder:
    """Stands in for ``GluonJITFunction.run``: records what each compile / launch received and computes the
    kernel's result in torch. A launch whose descriptors do not have the config's tile fails, as the real
    kernel's compile does (its static_assert)."""

    def __init__(self):
        self.launches: list[dict] = []
        self.compiles: list[dict] = []

    def __call__(self, in_desc, out_desc, B, scale, *rest, grid, warmup, **kwargs):
        seen = {"BM": kwargs["BM"], "BN": kwargs["BN"], "num_warps": kwargs["num_warps"],
                "blocks": (tuple(in_desc.block_shape), tuple(out_desc.block_shape)),
                "layouts": (in_desc.layout, out_desc.layout), "B": B}
        (self.compiles if warmup else self.launches).append(seen)
        want = (kwargs["BM"], kwargs["BN"])
        if seen["blocks"] != (want, want) or seen["layouts"] != (gk.layout_for(list(want)),) * 2:
            raise RuntimeError(f"CompileTimeAssertionFailure: descriptors {seen['blocks']} for tile {want}")
        if not warmup:
            out_desc.base.copy_(in_desc.base * scale)
        return None


class _TableBench:
    """Injected timer: a config's time by (bucket, BM) from a table; records which configs were timed."""

    def __init__(self, recorder: _Recorder, table):
        self.recorder, self.table, self.calls = recorder, table, 0

    def __call__(self, fn):
        self.calls += 1
        fn()
        last = self.recorder.launches[-1]
        return self.table(last["B"], last["BM"])


@pytest.fixture
def stand_in(monkeypatch):
    recorder = _Recorder()
    for fn in KERNELS.values():
        monkeypatch.setattr(fn, "run", recorder)
    return recorder


def _counting_hooks():
    calls = []

    def hook(nargs):
        calls.append((nargs["BM"], nargs["BN"], nargs["num_warps"]))
        gk.set_block_shape(nargs)
    configs = [triton.Config(dict(c.kwargs), num_warps=c.num_warps, pre_hook=hook) for c in gk.configs_with_hooks()]
    return configs, calls


def _launch(kernel, b: int, block=(16, 16), dtype=torch.float32):
    a = _args(rows=37 * b, block=block, dtype=dtype)
    a["B"] = b
    m, n = a["in_desc"].base.shape
    kernel[gk.grid(m, n)](*a.values())
    return a


def test_pre_hook_runs_for_every_candidate_and_before_every_launch_with_the_chosen_config(stand_in):
    configs, hook_calls = _counting_hooks()
    # BM = 64 wins bucket 1, BM = 128 wins bucket 8
    bench = _TableBench(stand_in, lambda b, bm: {1: {64: 1.0}, 8: {128: 1.0}}[b].get(bm, 2.0))
    k = graphtune.autotune(configs, key=["B"], buckets={"B": Buckets.explicit([1, 8])}, name="g_hooks",
                           do_bench=bench)(gk._tma_scale_kernel)
    a = _launch(k, 1)     # descriptors built at 16 x 16: every launch must rebuild them
    torch.testing.assert_close(a["out_desc"].base, a["in_desc"].base * 2.0)
    assert sorted(set(hook_calls)) == [(32, 64, 4), (64, 64, 4), (128, 32, 4)]   # every candidate, its values
    assert all(s["blocks"] == ((s["BM"], s["BN"]),) * 2 for s in stand_in.launches)   # (the stand-in checks too)
    assert k.best_config.kwargs == {"BM": 64, "BN": 64}
    _launch(k, 8)
    assert k.best_config.kwargs == {"BM": 128, "BN": 32}
    tuned = len(stand_in.launches)
    for b, block in ((1, (64, 64)), (8, (128, 32)), (5, (128, 32))):    # 5 pads to bucket 8
        del hook_calls[:]
        a = _launch(k, b)
        assert hook_calls == [(*block, 4)]                              # the chosen config's hook, once
        assert stand_in.launches[-1]["blocks"] == (block, block)
        torch.testing.assert_close(a["out_desc"].base, a["in_desc"].base * 2.0)
    calls = bench.calls
    capture.simulate_capture(True)
    try:
        for b, block in ((1, (64, 64)), (8, (128, 32))):
            del hook_calls[:]
            a = _launch(k, b)
            assert hook_calls == [(*block, 4)] and stand_in.launches[-1]["blocks"] == (block, block)
            torch.testing.assert_close(a["out_desc"].base, a["in_desc"].base * 2.0)
    finally:
        capture.simulate_capture(None)
    assert bench.calls == calls                                          # nothing timed inside capture
    assert len(stand_in.launches) > tuned
    graphtune.assert_covered(["g_hooks"])


def test_kernel_warmup_compiles_each_config_with_its_descriptors(stand_in):
    configs, hook_calls = _counting_hooks()
    k = graphtune.autotune(configs, key=["B"], name="g_warm", default=configs[2])(gk._tma_scale_kernel)
    a = _args(block=(16, 16))
    k.warmup(*a.values(), grid=(1,))
    assert [(c["BM"], c["BN"]) for c in stand_in.compiles] == [(32, 64), (64, 64), (128, 32), (128, 32)]
    assert hook_calls == [(32, 64, 4), (64, 64, 4), (128, 32, 4), (128, 32, 4)]


def test_search_compiles_every_candidate_after_its_pre_hook(stand_in, monkeypatch):
    # the GPU search compiles all candidates first (parallel, then one by one): each compile must see its
    # own tile, though all candidates share the caller's descriptor objects
    monkeypatch.setattr(capture, "on_gpu", lambda: True)
    configs, hook_calls = _counting_hooks()
    k = graphtune.autotune(configs, key=["B"], name="g_search", do_bench=lambda fn: fn() or 1.0)(gk._tma_scale_kernel)
    a = _args(block=(16, 16))
    result = search.search(k.space, k.key_of(tuple(a.values())), tuple(a.values()), {}, gk.grid(111, 96))
    assert result.alive == (0, 1, 2) and not result.failures
    assert {(c["BM"], c["BN"]) for c in stand_in.compiles} == {(32, 64), (64, 64), (128, 32)}
    assert all(c["blocks"] == ((c["BM"], c["BN"]),) * 2 for c in stand_in.compiles)


def test_descriptor_element_type_is_part_of_the_key():
    k = graphtune.autotune(gk.configs_with_hooks(), key=["B"], name="g_key")(gk._tma_scale_kernel)
    fp32 = k.key_of(tuple(_args().values()))
    bf16 = k.key_of(tuple(_args(dtype=torch.bfloat16).values()))
    assert fp32 == (3, torch.float32, torch.float32) and bf16 == (3, torch.bfloat16, torch.bfloat16)
    assert k.key_of((), _args(dtype=torch.bfloat16)) == bf16       # passed by name: the same key


# --------------------------------------------------------------------------------- the fast launch path


class _Payload:
    hits = 0


class _StandInCompiled:
    packed_metadata = function = None

    def __init__(self):
        self.launches = []

    def run(self, *args):
        self.launches.append(args)

    def launch_metadata(self, *args):
        return None


def test_descriptor_signature_is_what_triton_specialises_on():
    from triton.backends.compiler import BaseBackend
    from triton._C.libtriton import native_specialize_impl
    from triton.runtime.jit import mangle_type
    fast = FastLaunch(gk._tma_scale_kernel, gk._tma_scale_kernel.arg_names)

    def sig(desc):
        return fast.hit((desc, desc, 3, 2.0), (1,)).key[1][0]
    x = torch.zeros(128, 128)
    base = gk.descriptor(x, [64, 64])
    # Triton specialises a descriptor on its mangled type alone (no alignment attribute) ...
    assert native_specialize_impl(BaseBackend, base, False, True, True) == (mangle_type(base), None)
    # ... which the base, shape, strides and padding do not change, and the signature follows the same way
    same = [gk.descriptor(torch.zeros(256, 128), [64, 64]), gk.descriptor(x[:, :64], [64, 64]),
            dataclasses.replace(base, padding="nan")]
    for d in same:
        assert mangle_type(d) == mangle_type(base) and sig(d) == sig(base)
    # while the element type, the block shape and the layout each change both
    gl = gk.gl
    different = [dataclasses.replace(base, base=x.to(torch.bfloat16),
                                     layout=gl.NVMMASharedLayout.get_default_for([64, 64], gl.bfloat16)),
                 gk.descriptor(x, [32, 64]),
                 dataclasses.replace(base, layout=gl.NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=32,
                                                                       rank=2))]
    for d in different:
        assert mangle_type(d) != mangle_type(base) and sig(d) != sig(base)


def test_config_options_fill_option_named_parameters_of_a_gluon_kernel():
    fast = FastLaunch(gk._tma_scale_kernel, gk._tma_scale_kernel.arg_names)
    config = triton.Config({"BM": 64, "BN": 32}, num_warps=8)
    assert fast.tail(config.kwargs, 4, config.all_kwargs()) == (64, 32, 8)        # BM, BN, num_warps
    plain = triton.Config({}, num_warps=4)
    assert fast.tail(plain.kwargs, 6, plain.all_kwargs()) == (4,)                  # BM, BN given as arguments
    assert fast.tail(config.kwargs, 6, config.all_kwargs()) is None                # BM, BN twice
    assert fast.tail({"BM": 64}, 4, {"BM": 64, "num_warps": 4}) is None              # BN from nowhere


def test_direct_launch_of_a_gluon_kernel_with_descriptors(monkeypatch):
    import graphtune.launch as launch
    monkeypatch.setattr(launch, "_get_device", lambda: 0)
    monkeypatch.setattr(launch, "_get_stream", lambda device: 0)
    fast = FastLaunch(gk._tma_scale_kernel, gk._tma_scale_kernel.arg_names, key_positions=[2])
    a = _args(block=(64, 64))
    args = tuple(a.values())
    miss = fast.hit(args, (1,))
    assert type(miss) is Miss and miss.key[0] == (3,)
    compiled, payload = _StandInCompiled(), _Payload()
    fast.remember(miss.key, payload, compiled, (64, 64, 4))
    assert fast.hit(args, gk.grid(111, 96)) is compiled
    launched = compiled.launches[-1]
    assert launched[:3] == (2, 2, 1)                 # the grid from the appended BM, BN
    assert launched[-7:] == (*args, 64, 64, 4) and launched[-7] is a["in_desc"]   # the descriptor object itself
    a2 = _args(block=(32, 64))                        # another tile: another compiled kernel, the slow path once
    assert type(fast.hit(tuple(a2.values()), (1,))) is Miss


def test_fast_path_applies_to_a_gluon_kernel_without_pre_hooks_and_never_with_them(monkeypatch):
    """The tuner's own decision: a Gluon kernel whose chosen config has no pre-hook is launched directly
    after its first slow launch; one whose config has a pre-hook always goes through its run."""
    import graphtune.launch as launch
    monkeypatch.setattr(launch, "_get_device", lambda: 0)
    monkeypatch.setattr(launch, "_get_stream", lambda device: 0)
    compiled = _StandInCompiled()
    slow = []

    def run(*args, grid, warmup, **kwargs):
        slow.append(kwargs)
        return compiled
    monkeypatch.setattr(gk._tma_scale_kernel, "run", run)
    monkeypatch.setattr(settings, "interpret", lambda: False)     # the fast path is off under the interpreter
    plain = graphtune.autotune([triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)], key=["B"],
                               name="g_fast", do_bench=lambda fn: fn() or 1.0)(gk._tma_scale_kernel)
    hooked = graphtune.autotune(gk.configs_with_hooks(), key=["B"], name="g_fast_hooks",
                                do_bench=lambda fn: fn() or 1.0)(gk._tma_scale_kernel)
    assert plain._fast is not None and hooked._fast is not None
    a = _args(block=(64, 64))
    plain[gk.grid(111, 96)](*a.values(), 64, 64)                  # tunes, then launches through run()
    tuned = len(slow)
    for _ in range(3):
        plain[gk.grid(111, 96)](*a.values(), 64, 64)
    assert len(slow) == tuned and len(compiled.launches) == 3      # direct launches, no run()
    assert compiled.launches[-1][-1] == plain.best_config.num_warps   # num_warps appended from the config
    for _ in range(3):
        hooked[gk.grid(111, 96)](*a.values())
    n = len(slow)
    for _ in range(3):
        hooked[gk.grid(111, 96)](*a.values())
    assert len(slow) == n + 3 and not hooked._fast.cache            # every launch through run (the hook)


# ------------------------------------------------------------------- descriptors: copies, isolation


def test_a_descriptor_copy_keeps_its_tile_layout_and_the_base_strides():
    x = torch.randn(40, 96)
    view = x[:, 32:]                                  # a view with gaps: clone() would make it contiguous
    d = gk.descriptor(view, [32, 64])
    c = copy_arg(d)
    assert is_descriptor(d) and is_descriptor(c) and not is_descriptor(x) and not is_descriptor(gk.TensorDescriptor)
    assert c.base.data_ptr() != d.base.data_ptr() and torch.equal(c.base, d.base)
    assert c.base.stride() == d.base.stride() == tuple(c.strides)
    assert (c.block_shape, c.layout, c.shape, c.padding) == (d.block_shape, d.layout, d.shape, d.padding)
    assert tensor_of(c) is c.base and tensor_of(x) is x and tensor_of(3) is None
    # what the timer counts against GRAPHTUNE_TIMER_MEM_MB is what the copy allocates: the strided extent
    assert copy_nbytes(d) == c.base.untyped_storage().nbytes() == (39 * 96 + 64) * 4
    assert copy_nbytes(x) == x.numel() * 4 and copy_nbytes(3) == 0
    # what an isolated worker receives: a CPU copy that survives pickling with its tile and layout
    back = pickle.loads(pickle.dumps(copy_arg(d, "cpu")))
    assert (back.block_shape, back.layout, back.base.stride()) == (d.block_shape, d.layout, d.base.stride())


def test_the_timer_rotates_enough_copies_of_what_a_launch_touches():
    """The MLA decode passes its cache as a pointer and as descriptors over it (and over a view of it): a set of
    copies allocates the cache three times, but one launch touches it once, so the timer's copies are counted by
    the distinct storage (session 20: counted by allocation, batch 8 on an H200 rotated 2 sets, about 56 MB of
    touched bytes through a 50 MB L2, and the tuner picked configs that run ~2 us slower cold)."""
    cache = torch.randn(256, 576)                                   # 576 KB
    args = [cache, gk.descriptor(cache, [64, 64]), gk.descriptor(cache[:, 512:], [64, 64]), 3]
    alloc = sum(copy_nbytes(a) for a in args)
    assert footprint_nbytes(args) == cache.untyped_storage().nbytes() and alloc > 2.9 * footprint_nbytes(args)
    l2 = 2 * 2**20                                                  # twice the L2 is 7.1 caches: 8 sets
    assert search.rotation_copies(args, l2, 1e12) == (8, True)
    # memory for 4 sets only: fewer than twice the L2 cold, so the timer flushes it instead
    assert search.rotation_copies(args, l2, 4 * alloc) == (4, False)
    assert search.rotation_copies(args, l2, alloc) == (1, False)
    # small arguments: 16 sets, all of them likely in L2, rotated without a flush as before
    assert search.rotation_copies([torch.empty(16)], l2, 1e12) == (16, True)


def test_isolated_worker_finds_the_configs_pre_hooks_in_its_own_copy_of_the_kernel(tmp_path):
    from graphtune.isolate import KernelRef, _load_kernel
    module = tmp_path / "gluon_tuned_for_isolate.py"
    module.write_text("import graphtune, _gluon_kernels as gk\n"
                      "tuned = graphtune.autotune(gk.configs_with_hooks(), key=['B'], name='g_isolated')"
                      "(gk._tma_scale_kernel)\n")
    ref = KernelRef(module="gluon_tuned_for_isolate", path=str(module), qualname="tuned")
    jit, configs = _load_kernel(ref)
    assert jit is gk._tma_scale_kernel
    assert [c.all_kwargs()["BM"] for c in configs] == [32, 64, 128]
    assert all(c.pre_hook is gk.set_block_shape for c in configs)


def test_isolated_worker_gets_each_candidates_pre_hook():
    from graphtune.errors import ConfigError
    from graphtune.isolate import Job, KernelRef, _pickled, _pre_hook
    kwargs = gk.configs_with_hooks()[0].all_kwargs()
    on_kernel = [triton.Config(dict(kwargs, BM=32), num_warps=4, pre_hook=gk.set_block_shape)]
    job = Job(ref=KernelRef("m", None, "k"), device=0, args=(), kwargs={}, candidates=(),
              reset_to_zero=(), arg_names=(), sys_path=(),
              hooks={0: _pickled(gk.set_block_shape), 1: _pickled(lambda nargs: None)})
    assert job.hooks[0] and job.hooks[1] == b""                 # a module-level function travels by reference
    assert _pre_hook(job, 0, kwargs, []) is gk.set_block_shape
    assert _pre_hook(job, 1, kwargs, on_kernel) is gk.set_block_shape   # a lambda: the worker's own config's hook
    assert _pre_hook(job, 2, kwargs, on_kernel) is None                   # no pre-hook: none
    with pytest.raises(ConfigError, match=r"pre_hook does not pickle and no config of m\.k with .* has one here"):
        _pre_hook(job, 1, kwargs, [])


def test_inspect_table_shows_the_worker_warps_of_a_warp_specialised_kernel(capsys):
    from graphtune.cli.inspect import _print_rows
    rows = graphtune.inspect(gk._ws_scale_kernel, target="sm_90", args=_args(), configs=gk.configs_with_hooks()[:1])
    _print_rows("ws", rows)
    assert "4+4" in capsys.readouterr().out        # 4 warps of the config, 4 more: the worker's warpgroup
