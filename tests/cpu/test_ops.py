"""The shipped kernels as graphtune:: torch custom ops, and graphtune.custom_op for users' own launchers.

On CPU the kernels run through the Triton interpreter. ``torch.library.opcheck`` checks each op's schema
(declared mutations, no undeclared ones), its fake implementation against the real one, and that AOT
dispatch with dynamic shapes works; it runs the op several times, so sizes are tiny. The fp8 MLA cache cannot
go through opcheck on CPU (its schema check compares fp8 tensors with allclose, which CPU torch lacks), so the
uint8 ``fp8_ds_mla`` layout is checked here and fp8 on the GPU.
"""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

import graphtune
from graphtune import Buckets
from graphtune.kernels import mla_decode, mla_decode_op, mla_decode_reference
from graphtune.kernels.rmsnorm import (fused_add_rmsnorm, fused_add_rmsnorm_op, fused_add_rmsnorm_reference,
                                       rmsnorm_kernel)

sys.path.insert(0, str(Path(__file__).parent))
from test_mla_decode import make_case, rel_err  # noqa: E402  (the MLA tests' input builder)

if "Interpreted" not in type(rmsnorm_kernel.fn).__name__:   # CPU tensors need the interpreter
    pytest.skip("the kernels were decorated before TRITON_INTERPRET=1 was set (run tests/cpu on its own)",
                allow_module_level=True)

MLA_TOL = 1e-2          # relative L2 error vs the fp32 reference, as in test_mla_decode.py


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """Each test compiles from scratch (no graph or guard of another test's kernel survives it)."""
    torch._dynamo.reset()
    with torch._dynamo.config.patch(cache_size_limit=64):   # dynamic=False compiles once per size
        yield
    torch._dynamo.reset()


def _rms_inputs(B: int, D: int, dtype=torch.float32):
    return torch.randn(B, D, dtype=dtype), torch.randn(B, D, dtype=dtype), torch.randn(D, dtype=dtype)


# ------------------------------------------------------------------------------------------ opcheck


def test_fused_add_rmsnorm_ops_pass_opcheck():
    x, res, w = _rms_inputs(3, 40)
    torch.library.opcheck(torch.ops.graphtune.fused_add_rmsnorm.default, (x, res, w, 1e-6))
    out, res_out = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    torch.library.opcheck(torch.ops.graphtune.fused_add_rmsnorm_out.default, (x, res, w, 1e-6, out, res_out))


@pytest.mark.parametrize("return_lse,precision", [(False, "bf16"), (True, "bf16"), (False, "e4m3")],
                         ids=["out", "out+lse", "out-e4m3"])
def test_mla_decode_ops_pass_opcheck(return_lse, precision):
    c = make_case(2, 16, 16, "fp8_ds_mla", [20, 9], torch.Generator().manual_seed(3))
    args = (c["q"], c["kv_cache"], c["page_table"], c["seq_lens"], 0.06, 1.0, None, "fp8_ds_mla")
    torch.library.opcheck(torch.ops.graphtune.mla_decode.default, args + (return_lse, precision, None, None))
    if not return_lse:
        out = torch.full((2, 16, 512), float("nan"), dtype=torch.bfloat16)
        torch.library.opcheck(torch.ops.graphtune.mla_decode_out.default, args + (out, precision, None, None))
    # an e4m3 query with its scale, as a float and as a tensor (called, not opchecked: torch's schema check compares
    # the inputs with allclose, which fp8 tensors do not have on the CPU)
    q8 = (c["q"].float() / 4).to(torch.float8_e4m3fn)
    want = mla_decode(q8, *args[1:4], 0.06, kv_format="fp8_ds_mla", q_scale=4.0)
    for scale_f, scale_t in ((4.0, None), (None, torch.tensor([4.0]))):
        got, _ = torch.ops.graphtune.mla_decode(q8, *args[1:], False, None, scale_f, scale_t)
        assert torch.equal(got, want)


# ------------------------------------------------------------------------------------- torch.compile


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_decode_step_of_both_ops_compiles_fullgraph_and_matches(dynamic):
    """A decode step (rmsnorm, then MLA into a preallocated buffer) under fullgraph=True, several batches."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        from torch._dynamo.backends.registry import lookup_backend
        return lookup_backend("aot_eager")(gm, example_inputs)

    def step(h, res, w, c, out):
        normed, res = fused_add_rmsnorm_op(h, res, w, 1e-6)
        q = c["q"] + normed[:, :1, None].to(torch.bfloat16)      # make the attention depend on the norm
        mla_decode_op(q, c["kv_cache"], c["page_table"], c["seq_lens"], 0.06, kv_scale=c["scale_t"], out=out)
        return normed, res, q

    compiled = torch.compile(step, fullgraph=True, backend=backend, dynamic=dynamic)
    gen = torch.Generator().manual_seed(11)
    for B, lens in ((1, [17]), (3, [5, 40, 1])):
        c = make_case(B, 16, 16, "fp8", lens, gen)
        c["scale_t"] = torch.tensor([c["kv_scale"]], dtype=torch.float32)   # the Tensor? argument
        h, res, w = _rms_inputs(B, 48)
        out = torch.full((B, 16, 512), float("nan"), dtype=torch.bfloat16)
        normed, res_out, q = compiled(h, res, w, c, out)
        ref_n, ref_h = fused_add_rmsnorm_reference(h, res, w, 1e-6)
        torch.testing.assert_close(normed, ref_n, rtol=1e-5, atol=1e-5, msg=f"B={B}: rmsnorm")
        torch.testing.assert_close(res_out, ref_h, rtol=1e-5, atol=1e-5, msg=f"B={B}: residual")
        ref = mla_decode_reference(q, c["kv_cache"], c["page_table"], c["seq_lens"], 0.06, kv_scale=c["kv_scale"])
        assert torch.isfinite(out.float()).all(), f"B={B}: unwritten (NaN) outputs"
        assert rel_err(out, ref) <= MLA_TOL, f"B={B}: relative error {rel_err(out, ref):.3e}"
    targets = [str(n.target) for gm in graphs for n in gm.graph.nodes if n.op == "call_function"]
    assert any("graphtune.fused_add_rmsnorm" in t for t in targets), targets
    assert any("graphtune.mla_decode_out" in t for t in targets), targets
    # the rmsnorm kernel (2 configs under the interpreter) was tuned per batch bucket when the op ran
    assert sorted(k[0] for k in rmsnorm_kernel._cache) == [1, 4]


def test_op_wrappers_match_the_plain_functions():
    c = make_case(2, 16, 16, "fp8", [33, 7], torch.Generator().manual_seed(5))
    got, lse = mla_decode_op(c["q"], c["kv_cache"], c["page_table"], c["seq_lens"], 0.06, kv_scale=c["kv_scale"],
                             return_lse=True)
    want, want_lse = mla_decode(c["q"], c["kv_cache"], c["page_table"], c["seq_lens"], 0.06,
                                kv_scale=c["kv_scale"], return_lse=True)
    assert torch.equal(got, want) and torch.equal(lse, want_lse)
    x, res, w = _rms_inputs(5, 24)
    out, res_out = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    got = fused_add_rmsnorm_op(x, res, w, 1e-5, out=out, residual_out=res_out)
    want = fused_add_rmsnorm(x, res, w, 1e-5)
    assert got[0] is out and got[1] is res_out
    assert torch.equal(out, want[0]) and torch.equal(res_out, want[1])


def test_op_validates_like_the_plain_function():
    x, res, w = _rms_inputs(2, 8)
    with pytest.raises(ValueError, match=r"weight: shape \(7,\), expected \(8,\)"):
        fused_add_rmsnorm_op(x, res, torch.randn(7))
    c = make_case(1, 16, 16, "fp8", [10], torch.Generator().manual_seed(6))
    with pytest.raises(ValueError, match="sm_scale: nan"):
        mla_decode_op(c["q"], c["kv_cache"], c["page_table"], c["seq_lens"], float("nan"), kv_scale=c["kv_scale"])


@pytest.mark.parametrize("kwargs,match", [
    (dict(sm_scale=None), r"sm_scale: None, expected a finite float > 0"),
    (dict(sm_scale=True), r"sm_scale: True"),
    (dict(kv_scale="abc"), r"kv_scale: 'abc'"),
    (dict(kv_format=None), r"kv_format: None, expected a string"),
    (dict(out=torch.empty(1, 16, 512), return_lse=True), r"out: dtype torch.float32, expected torch.bfloat16"),
    (dict(out=torch.empty(1, 16, 576, dtype=torch.bfloat16), return_lse=True), r"out: shape \(1, 16, 576\)"),
    (dict(sm_scale=0.0), r"sm_scale: 0.0, expected a finite float > 0"),
    # (on meta the dispatcher ran the fake implementation: no check, uninitialised memory returned; session 31)
    (dict(kv_cache="meta"), r"kv_cache: on device meta, expected cpu \(the device of q\)"),
    (dict(page_table="meta"), r"page_table: on device meta, expected cpu"),
    (dict(seq_lens="meta"), r"seq_lens: on device meta, expected cpu"),
    (dict(kv_scale=torch.ones(1, device="meta")), r"kv_scale: on device meta, expected cpu"),
    (dict(q="list"), r"mla_decode: q: expected a torch.Tensor, got list"),
    (dict(seq_lens="list"), r"mla_decode: seq_lens: expected a torch.Tensor, got list")])
def test_op_arguments_get_one_line_naming_them(kwargs, match):
    """What the op schema would reject naming no argument (a float() of None, a list dumped whole) or let through (a
    bool scale, an out the op copies into after the fact, a tensor on another device) is one ValueError naming the
    argument (session 13's input review; devices and non-tensors, session 31's)."""
    c = make_case(1, 16, 16, "fp8", [10], torch.Generator().manual_seed(6))
    for name in ("q", "kv_cache", "page_table", "seq_lens"):
        if kwargs.get(name) == "meta":
            c[name] = c[name].to("meta")
        elif kwargs.get(name) == "list":
            c[name] = c[name].tolist()
    args = {"kv_scale": c["kv_scale"], **{k: v for k, v in kwargs.items()
                                          if k not in ("sm_scale", "q", "kv_cache", "page_table", "seq_lens")}}
    sm_scale = kwargs.get("sm_scale", 0.06)
    with pytest.raises(ValueError, match=match) as err:
        mla_decode_op(c["q"], c["kv_cache"], c["page_table"], c["seq_lens"], sm_scale, **args)
    assert "\n" not in str(err.value)


# ----------------------------------------------------------------------------- graphtune.custom_op

_ids = itertools.count()


@triton.jit
def _shift_kernel(x_ptr, out_ptr, n, B, shift, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + shift, mask=mask)


_shift = graphtune.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=1) for b in (16, 32)],
                            key=["B"], buckets={"B": Buckets.pow2(8)}, name="ops_test_shift",
                            do_bench=lambda fn: (fn(), 1.0)[1])(_shift_kernel)


@graphtune.custom_op("graphtune_test::shift_", mutates_args=("out",))
def shift_(x: torch.Tensor, out: torch.Tensor, shift: float) -> None:
    _shift[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, out, x.numel(), x.shape[0], shift)


def _shifted_fake(x: torch.Tensor, shift: float) -> torch.Tensor:
    return torch.empty_like(x)


@graphtune.custom_op("graphtune_test::shifted", fake=_shifted_fake)
def shifted(x: torch.Tensor, shift: float) -> torch.Tensor:
    out = torch.empty_like(x)
    shift_(x, out, shift)
    return out


def test_custom_op_helper_registers_a_users_launcher():
    x = torch.randn(3, 10)
    out = torch.full_like(x, float("nan"))
    torch.library.opcheck(torch.ops.graphtune_test.shift_.default, (x, out, 0.5))
    torch.library.opcheck(torch.ops.graphtune_test.shifted.default, (x, 0.5))

    def step(x, out):
        shift_(x, out, 1.5)
        return shifted(out, -0.5)

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager", dynamic=True)
    for B in (1, 3, 6):
        x = torch.randn(B, 10)
        out = torch.full_like(x, float("nan"))
        got = compiled(x, out)
        torch.testing.assert_close(out, x + 1.5)
        torch.testing.assert_close(got, x + 1.0)
    assert sorted(k[0] for k in _shift._cache) == [1, 4, 8]


@pytest.mark.parametrize("kwargs,match", [
    (dict(name="no_namespace"), r"expected 'namespace::op_name'"),
    (dict(name="a::b", mutates_args="out"), r"must be a tuple of argument names"),
    (dict(name="a::b", mutates_args=("outt",)), r"mutates_args \['outt'\] are not parameters"),
    # (session 31's review: torch's parser error of three lines naming no argument, or accepted)
    (dict(name="ns::bad-name"), r"custom_op\(name='ns::bad-name'\): expected 'namespace::op_name' of identifiers"),
    (dict(name="ns::op.out"), r"expected 'namespace::op_name' of identifiers"),
    (dict(name="aten::my_op"), r"namespace 'aten' is torch's own"),
    (dict(name="graphtune::mla_decode"), r"an op of that name is already registered in this process"),
    (dict(name="a::c", fake=3), r"fake=3 must be a function of the op's arguments"),
], ids=["name", "mutates-string", "mutates-unknown", "name-dash", "name-overload", "aten", "taken", "fake-3"])
def test_custom_op_helper_bad_input(kwargs, match):
    def launcher(x: torch.Tensor, out: torch.Tensor) -> None:
        pass
    kwargs = dict(kwargs)
    name = kwargs.pop("name")
    with pytest.raises((ValueError, TypeError), match=match) as got:
        graphtune.custom_op(name, **kwargs)(launcher)
    assert "\n" not in str(got.value)


def test_custom_op_helper_names_a_missing_return_annotation():
    """A launcher without a return annotation was told it "returns <class 'inspect._empty'>; give fake=": the
    wrong fix for a launcher that returns nothing."""
    def launcher(x: torch.Tensor, out: torch.Tensor):
        pass
    with pytest.raises(ValueError, match=r"'launcher' has no return annotation; annotate it \(-> None"):
        graphtune.custom_op("a::noann", mutates_args=("out", ))(launcher)


def test_custom_op_helper_needs_fake_for_returned_tensors():
    def launcher(x: torch.Tensor) -> torch.Tensor:
        return x.clone()
    with pytest.raises(ValueError, match="give fake="):
        graphtune.custom_op(f"graphtune_test::needs_fake_{next(_ids)}")(launcher)


def test_plain_mla_decode_traces_fullgraph_as_the_op():
    """``graphtune.kernels.mla_decode`` itself (not only mla_decode_op) compiles with fullgraph=True: under
    Dynamo it routes to the graphtune:: op, whose implementation runs the interface eagerly."""
    import torch._dynamo

    from graphtune.kernels.mla_decode import mla_decode, mla_decode_reference
    from graphtune.kernels.mla_decode.reference import quantize_ds_mla
    torch._dynamo.reset()
    B, H, P, PS = 2, 16, 4, 16
    q = torch.randn(B, H, 576, dtype=torch.bfloat16)
    kv = quantize_ds_mla(torch.randn(P, PS, 576) * 0.5)
    page_table = torch.arange(P, dtype=torch.int32).reshape(B, P // B)
    seq_lens = torch.tensor([PS + 3, 2 * PS], dtype=torch.int32)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    fn = torch.compile(lambda *a: mla_decode(*a, 0.07, kv_format="fp8_ds_mla"), backend=backend, fullgraph=True)
    got = fn(q, kv, page_table, seq_lens)
    ref = mla_decode_reference(q, kv, page_table, seq_lens, 0.07, kv_format="fp8_ds_mla")
    assert len(graphs) == 1
    assert any("graphtune.mla_decode" in str(n.target) for n in graphs[0].graph.nodes)
    err = ((got.float() - ref).norm() / ref.norm()).item()
    assert err < 2e-2, err


def _plan_case():
    q = torch.randn(2, 16, 576, dtype=torch.bfloat16)
    kv = torch.randn(2, 16, 576, dtype=torch.bfloat16)
    page_table = torch.arange(2, dtype=torch.int32).reshape(2, 1)
    seq_lens = torch.tensor([5, 16], dtype=torch.int32)
    return q, kv, page_table, seq_lens


def test_a_plan_under_torch_compile_reaches_the_implementation(monkeypatch):
    """``mla_decode(..., plan=)`` traced by torch.compile(fullgraph=True): the plan, an input of the compiled
    function, reaches the op's implementation as the same object (``graphtune::mla_decode_planned`` /
    ``mla_decode_out_planned``), a new plan each step recompiles nothing, and the results equal the eager call's
    (out, out with the LSE, a given out buffer)."""
    from graphtune.kernels.mla_decode import MLADecodePlan, interface, mla_decode, op
    if not op.PLAN_UNDER_COMPILE:
        pytest.skip(f"torch {torch.__version__} has no opaque custom-op arguments")
    torch._dynamo.reset()
    seen = []
    real = interface.mla_decode

    def spy(*args, plan=None, **kwargs):
        seen.append(plan)
        return real(*args, plan=plan, **kwargs)
    monkeypatch.setattr(interface, "mla_decode", spy)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    def step(q, kv, page_table, seq_lens, plan, out):
        a = mla_decode(q, kv, page_table, seq_lens, 0.07, plan=plan)
        b, lse = mla_decode(q, kv, page_table, seq_lens, 0.07, plan=plan, return_lse=True)
        mla_decode(q, kv, page_table, seq_lens, 0.07, plan=plan, out=out)
        return a, b, lse
    fn = torch.compile(step, backend=backend, fullgraph=True)
    for _ in range(3):
        q, kv, page_table, seq_lens = _plan_case()
        plan, out = MLADecodePlan(), torch.full((2, 16, 512), float("nan"), dtype=torch.bfloat16)
        seen.clear()
        a, b, lse = fn(q, kv, page_table, seq_lens, plan, out)
        assert len(seen) == 3 and all(p is plan for p in seen), seen
        want, want_lse = real(q, kv, page_table, seq_lens, 0.07, return_lse=True)
        assert not want.isnan().any()
        for got in (a, b, out):
            assert torch.equal(got, want)
        assert torch.equal(lse, want_lse)
    assert len(graphs) == 1
    code = graphs[0].code
    assert "mla_decode_planned" in code and "mla_decode_out_planned" in code, code


def test_a_torch_that_refuses_the_plan_type_leaves_the_ops_without_it(monkeypatch, caplog):
    """Where this torch's ``register_opaque_type`` refuses MLADecodePlan (an API that moved), importing the ops still
    works: the planned ops are not offered (``PLAN_UNDER_COMPILE`` False, so ``plan=`` under compile is one line) and
    one warning says why."""
    import logging
    import torch._library.opaque_object as opaque
    from graphtune.kernels.mla_decode import op

    def refuse(cls, **kwargs):
        raise TypeError("opaque types take a different form here")
    monkeypatch.setattr(opaque, "register_opaque_type", refuse)
    with caplog.at_level(logging.WARNING, logger="graphtune"):
        assert op._plan_type_registered() is False
    assert any("refused MLADecodePlan" in r.getMessage() and "different form" in r.getMessage()
               for r in caplog.records), caplog.text


def test_a_wrong_plan_under_torch_compile_is_one_clear_line(monkeypatch):
    """Traced by torch.compile, ``plan=`` that is not an MLADecodePlan, or any plan where this torch has no opaque
    custom-op arguments (``op.PLAN_UNDER_COMPILE`` off), is a ValueError naming the argument, not a dropped plan."""
    from graphtune.kernels.mla_decode import MLADecodePlan, mla_decode, op
    args = _plan_case()
    torch._dynamo.reset()
    fn = torch.compile(lambda *a: mla_decode(*a, 0.07, plan="plan"), backend="eager", fullgraph=True)
    with pytest.raises(Exception, match="mla_decode: plan: str 'plan', expected a graphtune.kernels.MLADecodePlan"):
        fn(*args)
    monkeypatch.setattr(op, "PLAN_UNDER_COMPILE", False)
    torch._dynamo.reset()
    plan = MLADecodePlan()
    fn = torch.compile(lambda *a: mla_decode(*a, 0.07, plan=plan), backend="eager", fullgraph=True)
    with pytest.raises(Exception, match="mla_decode: plan: .*no opaque custom-op arguments") as err:
        fn(*args)
    assert "call without it" in str(err.value)
