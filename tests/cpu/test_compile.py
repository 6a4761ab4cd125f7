"""graphtune kernels under torch.compile, without a GPU: Dynamo traces the launch as one graphtune::launch op and
the kernel runs through the Triton interpreter when the compiled graph runs.

Checked: fullgraph=True traces (no graph break) with backends eager / aot_eager (inductor once: it compiles
C++ on a CPU box), dynamic False and True (int key arguments stay SymInts), per-bucket tuning and the miss
policy at run time, keyword / None / constexpr / tl.dtype arguments, one tensor passed twice, tuple grids,
clear errors (duplicate names, a config whose grid was not traced), and the patch_triton() Inductor warning.
"""
from __future__ import annotations

import itertools
import warnings

import pytest
import torch
import triton
import triton.language as tl

import graphtune
from graphtune import Buckets, UntunedError


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """Each test compiles from scratch (no graph or guard of another test's kernel survives it)."""
    torch._dynamo.reset()
    with torch._dynamo.config.patch(cache_size_limit=64):   # dynamic=False compiles once per size
        yield
    torch._dynamo.reset()


_ids = itertools.count()
SIZES = [1, 3, 8, 3, 5]                 # buckets 1, 4, 8, 4, 8
BUCKETS = [1, 2, 4, 8]


def _bucket(b: int) -> int:
    return next(s for s in BUCKETS if s >= b)


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, B, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def _affine_kernel(x_ptr, out_ptr, bias_ptr, n, B, alpha, HAS_BIAS: tl.constexpr, OUT: tl.constexpr,
                   NEGATE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = alpha * tl.load(x_ptr + offs, mask=mask)
    if HAS_BIAS:
        y += tl.load(bias_ptr + offs, mask=mask)
    if NEGATE:
        y = -y
    tl.store(out_ptr + offs, y.to(OUT), mask=mask)


if "Interpreted" not in type(_scale_kernel).__name__:   # CPU tensors need the interpreter
    pytest.skip("triton.jit ran before TRITON_INTERPRET=1 was set (run tests/cpu on its own)", allow_module_level=True)


class Bench:
    """Injected timer: counts calls, runs the candidate once, reports a made-up time."""

    def __init__(self):
        self.calls = 0

    def __call__(self, fn):
        self.calls += 1
        fn()
        return 1.0 + 0.01 * self.calls


def _kernel(jit_fn=_scale_kernel, name: str | None = None, bench: Bench | None = None, restore=None):
    return graphtune.autotune(restore_value=restore, configs=[triton.Config({"BLOCK": 16}, num_warps=1),
                                       triton.Config({"BLOCK": 64}, num_warps=1)],
                              key=["B"], buckets={"B": Buckets.explicit(BUCKETS)},
                              name=name or f"compile_test_{next(_ids)}", do_bench=bench or Bench())(jit_fn)


def _launch_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "call_function" and "graphtune.launch" in str(n.target)]


class Recorder:
    """A torch.compile backend that keeps every graph Dynamo hands it, then runs ``inner`` on it."""

    def __init__(self, inner: str = "eager"):
        self.inner = inner
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        if self.inner == "eager":
            return gm.forward
        from torch._dynamo.backends.registry import lookup_backend
        return lookup_backend(self.inner)(gm, example_inputs)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_fullgraph_traces_one_op_and_tunes_per_bucket(backend, dynamic):
    bench = Bench()
    kernel = _kernel(bench=bench)

    def step(x, out, B):
        kernel[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, out, x.numel(), B, 2.0)
        return out + 1

    rec = Recorder(backend)
    compiled = torch.compile(step, fullgraph=True, backend=rec, dynamic=dynamic)
    for B in SIZES:
        x = torch.randn(B * 37)
        out = torch.full_like(x, float("nan"))
        got = compiled(x, out, B)
        torch.testing.assert_close(out, 2 * x, msg=f"B={B}: the kernel's in-place output")
        torch.testing.assert_close(got, 2 * x + 1, msg=f"B={B}: the graph's output after the kernel")
    assert rec.graphs, "torch.compile produced no graph"
    for gm in rec.graphs:
        nodes = _launch_nodes(gm)
        assert len(nodes) == 1, gm.code
        # only out_ptr is declared written (x_ptr is only read through tl.load): x is not copied or guarded
        written, read = nodes[0].args[2], nodes[0].args[3]
        assert (len(written), len(read)) == (1, 1), gm.code
    # tuning happened when the op ran, per bucket of the key argument, once per bucket
    assert sorted(k[0] for k in kernel._cache) == sorted({_bucket(b) for b in SIZES})
    assert kernel.tune_count == 3
    assert bench.calls == 3 * 2, "each tuned bucket times its 2 configs once"
    assert not graphtune.coverage([kernel.name]).misses
    if dynamic:
        assert len(rec.graphs) == 1, "dynamic=True: one graph serves every size"
        ints = _launch_nodes(rec.graphs[0])[0].args[4]
        kinds = [type(a.meta["example_value"]).__name__ if isinstance(a, torch.fx.Node) else type(a).__name__
                 for a in ints]
        assert kinds == ["SymInt", "SymInt"], f"n and B must go through as SymInt, got {kinds}"


def test_written_parameters_are_found_conservatively():
    from graphtune.compiled import _written_params
    assert {"x_ptr", "bias_ptr"}.isdisjoint(_written_params(_kernel(_affine_kernel)))
    assert "out_ptr" in _written_params(_kernel(_affine_kernel))

    @triton.jit
    def aliased(x_ptr, y_ptr, n, B, BLOCK: tl.constexpr):
        p = x_ptr + tl.arange(0, BLOCK)          # a pointer kept in a local: counted as written
        tl.store(p, tl.load(y_ptr + tl.arange(0, BLOCK)))
    assert "x_ptr" in _written_params(_kernel(aliased)) and "y_ptr" not in _written_params(_kernel(aliased))


def test_hooks_and_reset_names_count_as_written():
    from graphtune.compiled import _kernel_info
    k = _kernel(restore=["x_ptr"])
    assert "x_ptr" in _kernel_info(k.name)[3]
    hooked = graphtune.autotune(configs=[triton.Config({"BLOCK": 16}, pre_hook=lambda nargs: None)], key=["B"],
                                name=f"compile_test_{next(_ids)}")(_scale_kernel)
    assert set(_kernel_info(hooked.name)[3]) == set(hooked.arg_names)


@triton.heuristics({"BLOCK": lambda args: 16 if args["n"] < 100 else 64})
@triton.jit
def _heuristic_kernel(x_ptr, out_ptr, n, B, alpha, WIDE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = alpha * tl.load(x_ptr + offs, mask=mask)
    if WIDE:
        y = y + 1.0
    tl.store(out_ptr + offs, y, mask=mask)


def test_heuristics_values_feed_the_traced_grid():
    kernel = graphtune.autotune(configs=[triton.Config({"WIDE": w}, num_warps=1) for w in (0, 1)],
                                key=["B"], buckets={"B": Buckets.explicit(BUCKETS)}, name=f"compile_test_{next(_ids)}",
                                do_bench=Bench())(_heuristic_kernel)

    def step(x, out, B):
        kernel[lambda m: (triton.cdiv(m["n"], m["BLOCK"]),)](x, out, x.numel(), B, 2.0)
        return out

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    for B in (1, 5):
        x = torch.randn(B * 45)
        out = torch.full_like(x, float("nan"))
        compiled(x, out, B)
        wide = kernel._cache[(_bucket(B), torch.float32, torch.float32)].config.kwargs["WIDE"]
        torch.testing.assert_close(out, 2 * x + wide, msg=f"B={B}")


def test_compiled_results_equal_eager():
    kernel = _kernel()

    def step(x, out, B):
        kernel[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, out, x.numel(), B, -0.5)
        return out * 3

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager", dynamic=True)
    for B in (2, 7):
        x = torch.randn(B * 53)
        eager_out = torch.full_like(x, float("nan"))
        comp_out = torch.full_like(x, float("nan"))
        want = step(x, eager_out, B)
        got = compiled(x, comp_out, B)
        assert torch.equal(got, want) and torch.equal(comp_out, eager_out), f"B={B}"


def test_no_graph_break_reported_by_explain():
    kernel = _kernel()

    def step(x, out, B):
        y = x * 2
        kernel[lambda m: (triton.cdiv(y.numel(), m["BLOCK"]),)](y, out, y.numel(), B, 1.0)
        return out.sum()

    x = torch.randn(40)
    report = torch._dynamo.explain(step)(x, torch.empty_like(x), 2)
    assert report.graph_break_count == 0, report.break_reasons
    assert report.graph_count == 1


def test_miss_policy_applies_when_the_compiled_op_runs():
    kernel = _kernel()

    def step(x, out, B):
        kernel[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, out, x.numel(), B, 2.0)
        return out

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager", dynamic=True)
    x = torch.randn(20)
    compiled(x, torch.empty_like(x), 1)          # tunes bucket 1
    graphtune.freeze()
    x = torch.randn(160)
    out = torch.full_like(x, float("nan"))
    with pytest.warns(RuntimeWarning, match="no tuned config"):
        compiled(x, out, 8)                       # frozen: falls back to the nearest tuned bucket, never tunes
    torch.testing.assert_close(out, 2 * x)
    misses = graphtune.coverage([kernel.name]).misses
    assert [(m.key[0], m.where, m.action) for _, m in misses] == [(8, "frozen", "fallback")]
    graphtune.set_policy("raise")
    with pytest.raises(UntunedError, match=kernel.name):
        compiled(torch.randn(40), torch.empty(40), 2)
    assert kernel.tune_count == 1


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_keyword_none_constexpr_and_dtype_arguments(dynamic):
    kernel = _kernel(_affine_kernel)

    def step(x, out, B, alpha, bias):
        kernel[lambda m: (triton.cdiv(m["n"], m["BLOCK"]),)](
            x, out, bias, n=x.numel(), B=B, alpha=alpha, HAS_BIAS=bias is not None, OUT=tl.float32,
            NEGATE=B > 2)
        return out

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager", dynamic=dynamic)
    for B, with_bias in ((1, False), (3, True), (3, False)):
        x = torch.randn(B * 29)
        bias = torch.randn_like(x) if with_bias else None
        out = torch.full_like(x, float("nan"))
        compiled(x, out, B, 0.75, bias)
        want = 0.75 * x + (bias if bias is not None else 0)
        torch.testing.assert_close(out, -want if B > 2 else want, msg=f"B={B} bias={with_bias}")


@triton.jit
def _rowscale_kernel(x_ptr, out_ptr, R, B, D: tl.constexpr):
    r = tl.program_id(0)
    offs = tl.arange(0, D)
    tl.store(out_ptr + r * D + offs, 2 * tl.load(x_ptr + r * D + offs))


def test_a_constexpr_from_a_symbolic_shape_is_specialised():
    """``D=x.shape[1]`` under ``dynamic=True``: a constexpr given a SymInt is specialised (one graph per value, as
    Dynamo does for a stock kernel's); until session 31 ``int()`` kept it symbolic and the trace failed on the
    launch's layout ("repr_impl not implemented")."""
    kernel = graphtune.autotune([triton.Config({}, num_warps=1)], key=["B"], name=f"c_rows_{next(_ids)}")(
        _rowscale_kernel)

    def step(x, B):
        out = torch.empty_like(x)
        kernel[(x.shape[0], )](x, out, x.shape[0], B, D=x.shape[1])
        return out

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager", dynamic=True)
    for rows, width in ((2, 16), (3, 32), (5, 32)):
        x = torch.randn(rows, width)
        assert torch.equal(compiled(x, rows), 2 * x), (rows, width)


def test_the_shipped_ops_take_float_arguments_of_the_compiled_function():
    """``eps`` / ``sm_scale`` / ``kv_scale`` as float arguments of the compiled function (SymFloats from the
    second value on, torch's default): the ops' checks compare them instead of calling math.isfinite, which
    Dynamo cannot trace on a SymFloat ("torch.* op returned non-Tensor"); results equal eager for each value."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from test_mla_decode import make_case

    from graphtune.kernels import mla_decode, mla_decode_op
    from graphtune.kernels.rmsnorm import fused_add_rmsnorm, fused_add_rmsnorm_op

    norm = torch.compile(lambda h, r, w, eps: fused_add_rmsnorm_op(h, r, w, eps), fullgraph=True,
                         backend="aot_eager")
    h, r, w = torch.randn(2, 32), torch.randn(2, 32), torch.randn(32)
    for eps in (1e-6, 1e-5, 1e-4):
        got, want = norm(h, r, w, eps), fused_add_rmsnorm(h, r, w, eps)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), eps
    attend = torch.compile(lambda q, kv, pt, lens, s, ks: mla_decode_op(q, kv, pt, lens, s, kv_scale=ks),
                           fullgraph=True, backend="aot_eager")
    x = make_case(2, 16, 16, "fp8", [20, 9], torch.Generator().manual_seed(3))
    for sm_scale, kv_scale in ((0.06, x["kv_scale"]), (0.07, x["kv_scale"]), (0.07, 2 * x["kv_scale"])):
        got = attend(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], sm_scale, kv_scale)
        want = mla_decode(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], sm_scale, kv_scale=kv_scale)
        assert torch.equal(got, want), (sm_scale, kv_scale)


def test_same_tensor_twice_and_tuple_grid():
    kernel = _kernel(restore=["x_ptr"])     # in place: tuning runs it several times

    def step(x, B):
        kernel[(triton.cdiv(x.numel(), 16),)](x, x, x.numel(), B, 3.0)   # in place; grid fits BLOCK=16 and 64
        return x

    rec = Recorder("aot_eager")
    compiled = torch.compile(step, fullgraph=True, backend=rec)
    x = torch.randn(50)
    want = 3 * x
    compiled(x, 2)
    torch.testing.assert_close(x, want)
    node = _launch_nodes(rec.graphs[0])[0]
    assert (len(node.args[2]), len(node.args[3])) == (1, 0), "one tensor passed twice crosses the op once, written"


def test_duplicate_kernel_names_are_a_clear_error():
    name = f"compile_dup_{next(_ids)}"
    _kernel(name=name)
    second = _kernel(name=name)

    def step(x):
        second[(1,)](x, x, x.numel(), 1, 1.0)
        return x

    with pytest.raises(Exception, match=f"2 graphtune kernels are named '{name}'"):
        torch.compile(step, fullgraph=True, backend="eager")(torch.randn(8))


def test_unknown_kernel_name_is_a_clear_error():
    from graphtune import compiled
    with pytest.raises(RuntimeError, match="no graphtune kernel named 'no_such_kernel'"):
        compiled._launch_impl("no_such_kernel", repr(((), (), ())), [], [], [], [], [1, 1, 1])


def test_force_after_compile_names_the_untraced_grid():
    kernel = _kernel()

    def step(x, out, B):
        kernel[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, out, x.numel(), B, 2.0)
        return out

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    x = torch.randn(64)
    compiled(x, torch.empty_like(x), 1)
    graphtune.force(kernel.name, BLOCK=32)
    with pytest.raises(RuntimeError, match="whose grid was not traced"):
        compiled(x, torch.empty_like(x), 1)
    torch._dynamo.reset()     # the next trace includes the forced config's grid
    out = torch.full_like(x, float("nan"))
    torch.compile(step, fullgraph=True, backend="aot_eager")(x, out, 1)
    torch.testing.assert_close(out, 2 * x)
    assert kernel.best_config.kwargs == {"BLOCK": 32}


def test_launch_op_passes_opcheck():
    kernel = _kernel()
    from graphtune import compiled as compiled_mod  # noqa: F401  (registers graphtune::launch)
    x = torch.randn(40)
    out = torch.full_like(x, float("nan"))
    # x_ptr -> read-only list[0], out_ptr -> written list[0], n, B -> ints, alpha -> floats
    layout = repr(((("r", 0), ("m", 0), ("i", 0), ("i", 1), ("f", 0)), (), ((("BLOCK", 16),), (("BLOCK", 64),))))
    args = (kernel.name, layout, [out], [x], [40, 2], [2.0], [3, 1, 1, 1, 1, 1])
    torch.library.opcheck(torch.ops.graphtune.launch.default, args)   # runs on copies of the inputs
    torch.ops.graphtune.launch(*args)
    torch.testing.assert_close(out, 2 * x)


def test_inductor_backend_runs_the_op():
    """Inductor (C++ on a CPU box) keeps graphtune::launch opaque and re-inplaces the declared mutations."""
    kernel = _kernel()

    def step(x, out, B):
        kernel[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, out, x.numel(), B, 2.0)
        return out + x

    compiled = torch.compile(step, fullgraph=True, backend="inductor", dynamic=True)
    for B in (1, 6):
        x = torch.randn(B * 41)
        out = torch.full_like(x, float("nan"))
        got = compiled(x, out, B)
        torch.testing.assert_close(out, 2 * x)
        torch.testing.assert_close(got, 3 * x)
    assert sorted(k[0] for k in kernel._cache) == [1, 8]


# ------------------------------------------------------------------------------- patch_triton + Inductor


def _stock_autotuner():
    return triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})], key=["n"])(
        _scale_kernel)


def test_patch_warns_once_per_kernel_when_inductor_lowers_a_stock_kernel(monkeypatch):
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table, triton_kernel_wrapper_mutation
    from torch._inductor.lowering import lowerings

    from graphtune import patch

    lowered = []
    monkeypatch.setitem(lowerings, triton_kernel_wrapper_mutation, lambda **kw: lowered.append(kw["kernel_idx"]))
    monkeypatch.setattr(graphtune.state.STATE, "warned", set())
    stock = _stock_autotuner()
    idx = kernel_side_table.add_kernel(stock)
    with graphtune.patch_triton():
        # what Dynamo does when it meets the launch (add_kernel) and what Inductor does when it lowers it
        kernel_side_table.add_kernel(stock)
        with pytest.warns(RuntimeWarning, match=r"Inductor .* '_scale_kernel' .*backend='aot_eager'"):
            lowerings[triton_kernel_wrapper_mutation](kernel_idx=idx, constant_args_idx=0, grid=[], kwargs={},
                                                      tma_descriptor_metadata={})
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # the second lowering of the same kernel stays quiet
            lowerings[triton_kernel_wrapper_mutation](kernel_idx=idx, constant_args_idx=0, grid=[], kwargs={},
                                                      tma_descriptor_metadata={})
    assert lowered == [idx, idx], "the lowering itself still runs"
    assert "add_kernel" not in kernel_side_table.__dict__, "unpatch_triton() removes the Dynamo hook"
    assert lowerings[triton_kernel_wrapper_mutation] is not None
    assert "lowering" not in graphtune.state.STATE.compile_hooks


def test_patch_warns_at_trace_time_for_an_inductor_backend(monkeypatch):
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table

    from graphtune import patch

    monkeypatch.setattr(graphtune.state.STATE, "warned", set())
    monkeypatch.setattr(patch, "_hook_inductor_lowering", lambda: None)
    stock = _stock_autotuner()
    with graphtune.patch_triton():
        monkeypatch.setattr(patch, "_backend_is_inductor", lambda: False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # aot_eager / eager: the patched run applies, nothing to say
            kernel_side_table.add_kernel(stock)
        monkeypatch.setattr(patch, "_backend_is_inductor", lambda: True)
        with pytest.warns(RuntimeWarning, match="'_scale_kernel'"):
            kernel_side_table.add_kernel(stock)


@pytest.mark.parametrize("options,inductor", [
    (dict(backend="inductor"), True), (dict(mode="reduce-overhead"), True),
    (dict(mode="max-autotune-no-cudagraphs"), True), (dict(backend="aot_eager"), False), (dict(backend="eager"), False),
], ids=["inductor", "reduce-overhead", "max-autotune-no-cudagraphs", "aot_eager", "eager"])
def test_backend_detection_in_a_real_trace(options, inductor, monkeypatch):
    """What patch_triton()'s trace-time hook reads, read while Dynamo really traces (from graphtune's trace hook)."""
    from graphtune import compiled, patch
    seen = []
    real = compiled._kernel_info

    def spy(name):
        seen.append(patch._backend_is_inductor())
        return real(name)
    monkeypatch.setattr(compiled, "_kernel_info", spy)
    kernel = _kernel()

    def step(x, out):
        kernel[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, out, x.numel(), 1, 1.0)
        return out

    x = torch.randn(8)
    torch.compile(step, fullgraph=True, **options)(x, torch.empty_like(x))
    assert seen == [inductor]
    assert patch._backend_is_inductor() is False      # outside a trace
