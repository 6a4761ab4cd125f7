"""The resource inspector: real cross-compilation for sm_90 / sm_120 (no GPU), occupancy arithmetic, bad input, CLI.

Compiles are the slow part (about 0.5 s each on 2 cores): the kernels below are compiled 7 times in all and
every later use hits the inspector's in-process cache.
"""
from __future__ import annotations

import json
import types

import pytest
import torch
import triton
import triton.language as tl

from graphtune import cli, resources
from graphtune.errors import InspectError
from graphtune.resources import (aligned_args, check_configs_for_device, get_target, inspect, list_targets,
                                 occupancy, signature_from_args)

# M, N, K: matrix sizes; rows of A and C are contiguous along K and N (the layout a launch pipelines).


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b = b_ptr + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        acc += tl.dot(tl.load(a), tl.load(b))
        a += BLOCK_K
        b += BLOCK_K * stride_bk
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(tl.bfloat16))


_MATMUL_SIGNATURE = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32",
                     "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"}
# 128x128x64 bf16 tiles: 32 KB per pipeline stage. On sm_90 Triton 3.6 keeps num_stages buffers (4 -> 131072 B,
# 5 -> 163840 B, both under 232448); on sm_120 it keeps num_stages - 1 (4 -> 98304 B fits in 101376, 5 -> 131072 B
# does not).
_MATMUL_CONFIGS = [triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=8, num_stages=s)
                   for s in (4, 5)]
_matmul_tuned = triton.autotune(configs=_MATMUL_CONFIGS, key=["M", "N", "K"])(_matmul_kernel)
_matmul_tuned.graphtune_signature = _MATMUL_SIGNATURE


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # The whole row stays live across the max and the sum: BLOCK / (32 * num_warps) registers per thread.
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + tl.program_id(0) * n + offs, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + tl.program_id(0) * n + offs, e / tl.sum(e, 0), mask=mask)


_SOFTMAX_SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}


@triton.jit
def _scale_kernel(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)
    else:
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


_scale_heuristic = triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})(_scale_kernel)


def _by_stages(rows):
    return {row.num_stages: row for row in rows}


# ------------------------------------------------------------------------------------ real compiles

def test_matmul_fits_sm90_not_sm120():
    sm90 = _by_stages(inspect(_matmul_tuned, target="sm_90", signature=_MATMUL_SIGNATURE))
    sm120 = _by_stages(inspect(_matmul_tuned, target="sm_120", signature=_MATMUL_SIGNATURE))

    assert sm90[4].shared_dynamic == 131072  # FACTS.md: 128x128x64, 4 stages, divisibility specialised
    assert sm90[5].shared_dynamic == 163840
    assert all(r.fits and r.reason == "" for r in sm90.values())
    assert sm90[4].shared_bytes == sm90[4].shared_static + sm90[4].shared_dynamic
    assert 0 < sm90[4].registers <= 255 and sm90[4].spill_bytes == 0
    assert sm90[4].resident_blocks == 1 and sm90[4].limiter == "shared_memory"

    assert sm120[4].fits, sm120[4].reason
    bad = sm120[5]
    assert not bad.fits and bad.resident_blocks == 0 and bad.occupancy_pct == 0.0
    assert 101376 < bad.shared_dynamic <= 232448
    assert bad.reason == f"needs {bad.shared_bytes} B shared memory, sm_120 allows 101376 B per block"
    assert bad.blocks_by_shared is None and bad.limiter == "shared_memory"
    assert bad.config == {"BLOCK_K": 64, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 5,
                          "num_ctas": 1}
    json.dumps([r.to_dict() for r in sm120.values()])


def test_without_divisibility_loads_are_not_pipelined():
    # What a launch with unaligned tensors or odd sizes gets: one buffer, whatever num_stages says.
    config = _MATMUL_CONFIGS[0]
    (row,) = inspect(_matmul_kernel, target="sm_90", signature=_MATMUL_SIGNATURE, configs=[config],
                     specialize=False)
    assert row.shared_dynamic == 32768


def _check_resources_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "check_resources.py"
    spec = importlib.util.spec_from_file_location("_graphtune_check_resources_cpu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shared_reserve_configs_count_the_driver_reserve_once():
    """benchmarks/check_resources.py's SHARED_RESERVE_CONFIGS, compiled for sm_90: the sizes at which counting the
    1 KB that cuobjdump reports on sm_90+ (``.nv.shared.reserved.0``) as static AND adding the driver's 1 KB
    per-block reserve gives one block fewer than counting it once. The GPU decided it (an H200, session 33,
    tests/gpu/test_resources_gpu.py::test_sm90_static_1kb_against_the_driver_reserve): the driver reports no static
    shared memory for this kernel and 9 / 4 resident blocks, so the 1 KB is the reserve, counted once.

    24,576 B dynamic at 4 warps, 46 registers: 24576 + 1024 reserve = 25600 B -> 233472 // 25600 = 9 blocks (8 when
    the 1 KB was counted twice). 57,344 B dynamic, 58 registers: 58368 B -> 4 blocks (3).
    """
    check = _check_resources_script()
    rows = inspect(check.dot_kernel, target="sm_90", signature=check.DOT_SIGNATURE,
                   configs=check.SHARED_RESERVE_CONFIGS)
    assert len(rows) == len(check.SHARED_RESERVE_SM90)
    for row, (dynamic, twice, once) in zip(rows, check.SHARED_RESERVE_SM90):
        assert row.fits and row.spill_bytes == 0, row.label
        assert row.shared_static == 0 and row.shared_dynamic == dynamic, (row.label, row.shared_static)
        assert row.shared_bytes == dynamic and row.threads_per_block == 128
        assert (row.resident_blocks, row.limiter) == (once, "shared_memory"), row.to_dict()
        assert row.blocks_by_registers > once and row.blocks_by_threads > once, row.to_dict()
        # the reserve counted twice would give the block fewer that the driver did not
        assert occupancy("sm_90", row.registers, dynamic + 1024, row.num_warps).blocks == twice < once


def test_static_shared_before_sm90_is_what_cuobjdump_reports():
    """Before sm_90 cuobjdump's SHARED has no reserved section to take off: a Triton kernel's static size is 0 there
    and the reserve is occupancy()'s alone (the 32x32x64 dot config on sm_80)."""
    check = _check_resources_script()
    (row,) = inspect(check.dot_kernel, target="sm_80", signature=check.DOT_SIGNATURE,
                     configs=check.SHARED_RESERVE_CONFIGS[:1])
    assert row.fits and row.shared_static == 0 and row.shared_bytes == row.shared_dynamic > 0, row.to_dict()


def test_check_configs_for_device_reports_and_caches(monkeypatch):
    first = check_configs_for_device(_matmul_tuned, _MATMUL_CONFIGS, _MATMUL_SIGNATURE, target="sm_120")
    assert list(first) == [1] and "sm_120 allows 101376 B" in first[1]
    assert check_configs_for_device(_matmul_tuned, _MATMUL_CONFIGS, _MATMUL_SIGNATURE, target="9.0") == {}

    def no_more_work(*args, **kwargs):
        raise AssertionError("a repeated check must come from the cache")

    monkeypatch.setattr(resources, "inspect", no_more_work)
    again = check_configs_for_device(_matmul_tuned, _MATMUL_CONFIGS, _MATMUL_SIGNATURE, target="sm_120")
    assert again == first


def test_forced_register_limit_spills():
    config = triton.Config({"BLOCK": 4096}, num_warps=1, maxnreg=64)  # 128 live fp32 values per thread
    (row,) = inspect(_softmax_kernel, target="sm_90", signature=_SOFTMAX_SIGNATURE, configs=[config])
    assert row.fits
    assert row.registers <= 64
    assert row.spill_bytes >= 64 * 4 and row.spill_bytes == row.stack_bytes + row.local_bytes
    assert row.shared_dynamic == 0 and row.config["maxnreg"] == 64


def test_heuristics_wrapper_under_a_tuner_object_and_default_config():
    # Any object with .fn and .configs (graphtune's kernels) over a triton.heuristics wrapper over the JIT.
    tuner_like = types.SimpleNamespace(fn=_scale_heuristic, configs=None)
    with pytest.raises(InspectError, match=r"constexpr \['EVEN'\].*heuristics wrapper computes \['EVEN'\]"):
        inspect(tuner_like, signature={"x_ptr": "*fp32", "n": "i32"}, constexprs={"BLOCK": 256})
    (row,) = inspect(tuner_like, target="sm_90", signature={"x_ptr": "*fp32", "n": "i32"},
                     constexprs={"BLOCK": 256, "EVEN": True})
    assert row.config == {"num_warps": 4, "num_stages": 3, "num_ctas": 1}  # triton.Config({}) defaults
    assert row.fits and row.threads_per_block == 128 and row.registers > 0


def test_compile_failure_is_a_row_not_an_exception():
    # Clusters need sm_90+: Triton refuses before code generation, so this costs no compile.
    config = triton.Config({"BLOCK": 256, "EVEN": True}, num_warps=4, num_ctas=2)
    (row,) = inspect(_scale_kernel, target="sm_80", signature={"x_ptr": "*fp32", "n": "i32"}, configs=[config])
    assert not row.fits and row.limiter == "compile" and row.registers is None
    assert row.reason.startswith("compile failed for sm_80: ValueError") and "num_ctas" in row.reason


# -------------------------------------------------------------------------------- occupancy arithmetic

@pytest.mark.parametrize(
    "target, registers, shared, warps, expected",
    [
        # 115 regs x 32 = 3680 -> 3840 per warp -> 17 warps -> 16 (groups of 4) -> 2 blocks of 8 warps;
        # 132096 + 1024 reserved = 133120 B -> 233472 // 133120 = 1 block.
        ("sm_90", 115, 132096, 8, dict(blocks_by_registers=2, blocks_by_shared=1, blocks_by_threads=8,
                                       blocks_by_limit=32, blocks=1, warps=8, occupancy_pct=12.5,
                                       limiter="shared_memory")),
        # 32 regs -> 1024 per warp -> 64 warps -> 16 blocks of 4 warps; 64 warps / 4 = 16: tie, registers first.
        ("sm_90", 32, 0, 4, dict(blocks_by_registers=16, blocks_by_shared=228, blocks_by_threads=16,
                                 blocks=16, occupancy_pct=100.0, limiter="registers")),
        # 168 x 32 = 5376 = 21 x 256 -> 12 warps -> 1 block of 8 warps out of 48 warps.
        ("sm_120", 168, 0, 8, dict(blocks_by_registers=1, blocks_by_threads=6, blocks=1, warps=8,
                                   occupancy_pct=16.67, limiter="registers")),
        # 80 x 32 = 2560 -> 25 warps, rounded down to 24 by the 4-warp granularity -> 24 one-warp blocks.
        ("sm_80", 80, 0, 1, dict(blocks_by_registers=24, blocks_by_limit=32, blocks=24, occupancy_pct=37.5,
                                 limiter="registers")),
        # 33076 + 1024 = 34100 B, allocated in 128 B units: 34176 B; three would need 102528 > 102400 B.
        ("sm_86", 32, 33076, 1, dict(blocks_by_shared=2, blocks_by_limit=16, blocks=2, warps=2,
                                     occupancy_pct=4.17, limiter="shared_memory")),
        # 255 regs, 8 warps: 8192 x 8 = 65536 registers, exactly one block's worth.
        ("sm_89", 255, 0, 8, dict(registers_per_block=65536, blocks_by_registers=1, blocks=1, limiter="registers")),
    ],
    ids=["sm90-r115-smem132096-w8", "sm90-r32-w4-tie", "sm120-r168-w8", "sm80-r80-w1-granularity",
         "sm86-smem33076-w1-rounding", "sm89-r255-w8-full-file"],
)
def test_occupancy_hand_computed(target, registers, shared, warps, expected):
    occ = occupancy(target, registers, shared, warps)
    assert occ.fits and occ.reason == ""
    for name, value in expected.items():
        assert getattr(occ, name) == value, name


@pytest.mark.parametrize(
    "target, registers, shared, warps, reason",
    [
        ("sm_90", 32, 232449, 4, "needs 232449 B shared memory, sm_90 allows 232448 B per block"),
        ("sm_90", 32, 0, 64, "needs 2048 threads per block (64 warps), sm_90 allows 1024"),
        ("sm_120", 256, 0, 1, "needs 256 registers per thread, sm_120 allows 255"),
        ("sm_80", 130, 0, 16, "needs 69632 registers per block (130 x 512 threads), sm_80 allows 65536"),
    ],
    ids=["smem-one-byte-over", "threads-2048", "regs-256", "regs-per-block"],
)
def test_occupancy_cannot_launch(target, registers, shared, warps, reason):
    occ = occupancy(target, registers, shared, warps)
    assert not occ.fits and occ.blocks == 0 and occ.occupancy_pct == 0.0
    assert occ.reason == reason


def test_occupancy_rejects_nonsense():
    with pytest.raises(ValueError, match="num_warps=0"):
        occupancy("sm_90", 32, 0, 0)


# ------------------------------------------------------------------------------------------- targets

@pytest.mark.parametrize("spelling, name", [("sm_90", "sm_90"), ("90", "sm_90"), ("sm90", "sm_90"),
                                            ("9.0", "sm_90"), (90, "sm_90"), ("SM_90a", "sm_90"),
                                            ("12.0", "sm_120"), ("sm_100", "sm_100"), ("8.6", "sm_86")],
                         ids=lambda v: str(v))
def test_target_spellings(spelling, name):
    assert get_target(spelling).name == name


def test_target_table():
    targets = {t.name: t for t in list_targets()}
    assert list(targets) == ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"]
    assert targets["sm_120"].shared_per_block_optin == 101376
    assert targets["sm_90"].shared_per_block_optin == 232448
    assert targets["sm_86"].max_threads_per_sm == 1536 and targets["sm_89"].max_blocks_per_sm == 24


@pytest.mark.parametrize("bad", ["sm_70", "sm_91", "hopper", "9.9", ""], ids=lambda v: v or "empty")
def test_unknown_target(bad):
    with pytest.raises(InspectError, match=r"unknown target .*known: sm_80, sm_86, sm_89, sm_90, sm_100, sm_120"):
        get_target(bad)
    assert issubclass(InspectError, ValueError)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given without a GPU")
def test_device_target_without_gpu():
    with pytest.raises(InspectError, match="needs a CUDA GPU"):
        get_target("device")


# ----------------------------------------------------------------------------------------- bad input

def _sig(**changes):
    sig = dict(_MATMUL_SIGNATURE, **changes)
    return {k: v for k, v in sig.items() if v is not None}


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(signature=_sig(lda="i32")), r"signature names \['lda'\], not parameters of _matmul_kernel; "
                                          r"parameters: \['a_ptr'"),
        (dict(signature=_sig(K=None, stride_cm=None)), r"signature is missing \['K', 'stride_cm'\]"),
        (dict(signature=_sig(a_ptr="*bf61")), r"signature type '\*bf61' for 'a_ptr'"),
        (dict(signature=_sig(BLOCK_M="i32")), r"'BLOCK_M' of _matmul_kernel is a tl.constexpr parameter"),
        (dict(constexprs={"BLOCK_Z": 1}), r"constexprs name \['BLOCK_Z'\]"),
        (dict(constexprs={"BLOCK_M": 64}), r"config #0 .* and constexprs both set \['BLOCK_M'\]"),
        (dict(constexprs={"K": 64}), r"'K' of _matmul_kernel is given both in signature"),
        (dict(configs=[triton.Config({"BLOCK_M": 64, "BLOCK_N": 64})]),
         r"constexpr \['BLOCK_K'\] of _matmul_kernel has no value: not in constexprs \[\] nor in config #0"),
        (dict(configs=[triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "SPLIT": 2})]),
         r"config #0 .* sets \['SPLIT'\], not parameters"),
        (dict(specialize={"a_ptr", "lda"}), r"specialize names \['lda'\]"),
        (dict(target="sm_75"), r"unknown target 'sm_75'"),
    ],
    ids=["unknown-signature-key", "missing-signature-keys", "bad-type", "constexpr-in-signature",
         "unknown-constexpr", "constexpr-and-config", "runtime-in-both", "missing-constexpr",
         "unknown-config-kwarg", "unknown-specialize-name", "unknown-target"],
)
def test_bad_input_names_the_problem(kwargs, pattern):
    call = dict(target="sm_90", signature=_MATMUL_SIGNATURE) | kwargs
    with pytest.raises(InspectError, match=pattern):
        inspect(_matmul_tuned, **call)


def test_not_a_kernel():
    with pytest.raises(InspectError, match="not a Triton kernel"):
        inspect(lambda x: x, signature={})


def test_no_signature_lists_runtime_parameters():
    with pytest.raises(InspectError, match=r"no signature for _softmax_kernel: give Triton types for "
                                           r"\['x_ptr', 'y_ptr', 'n'\]"):
        inspect(_softmax_kernel, configs=[triton.Config({"BLOCK": 64})])


# ------------------------------------------------------------------------------ arguments of a launch

def test_signature_from_args_matches_a_launch():
    a = torch.empty(100, dtype=torch.bfloat16)
    args = {"a_ptr": a, "b_ptr": torch.empty(7, dtype=torch.float8_e4m3fn), "c_ptr": a[1:], "M": 1, "N": 17,
            "K": 2**31 + 16, "stride_am": -32, "stride_bk": 64, "stride_cm": 0, "BLOCK_K": 32}
    signature, constexprs = signature_from_args(_matmul_tuned, args)
    assert signature == {"a_ptr": "*bf16", "b_ptr": "*fp8e4nv", "c_ptr": "*bf16", "N": "i32", "K": "i64",
                         "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"}
    assert constexprs == {"M": 1, "BLOCK_K": 32}  # Triton specialises the int 1 into a constant
    aligned = aligned_args(_matmul_tuned, args)
    assert aligned == {"a_ptr", "b_ptr", "K", "stride_am", "stride_bk", "stride_cm"} - (
        set() if a.data_ptr() % 16 == 0 else {"a_ptr"})  # c_ptr is a + 2 bytes: never aligned
    with pytest.raises(InspectError, match=r"miss runtime parameters \['stride_cm'\]"):
        signature_from_args(_matmul_tuned, {k: v for k, v in args.items() if k != "stride_cm"})
    with pytest.raises(InspectError, match=r"arguments \['lda'\] are not parameters"):
        signature_from_args(_matmul_tuned, {**args, "lda": 3})


def _typed_params(x_ptr, plain, fixed_type: tl.int64, no_spec, no_align, BLOCK: tl.constexpr):
    pass  # only its parameters matter: a JITFunction is built from it below, never compiled


@pytest.mark.parametrize(
    "value",
    [0, 1, 16, 17, -16, 2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**63, 1.5, True, None,
     torch.float16, torch.bfloat16, torch.float32, torch.int8, torch.uint8, torch.int64, torch.bool,
     torch.float8_e4m3fn, torch.float8_e5m2],
    ids=lambda v: str(v),
)
def test_argument_types_agree_with_triton(value):
    # Triton's own launch binder is the oracle (private API: skip if it moves).
    jit = pytest.importorskip("triton.runtime.jit")
    if not hasattr(jit, "create_function_from_signature"):
        pytest.skip("triton.runtime.jit.create_function_from_signature is gone in this triton")
    from triton.backends.compiler import BaseBackend

    fn = jit.JITFunction(_typed_params, do_not_specialize=["no_spec"], do_not_specialize_on_alignment=["no_align"])
    arg = torch.empty(4, dtype=value) if isinstance(value, torch.dtype) else value
    args = {"x_ptr": torch.empty(3, dtype=torch.float16)[1:], "plain": arg,
            "fixed_type": arg if isinstance(arg, int) and not isinstance(arg, bool) and abs(arg) < 2**62 else 48,
            "no_spec": arg, "no_align": arg, "BLOCK": 64}
    _, triton_spec, _ = jit.create_function_from_signature(fn.signature, fn.params, BaseBackend)(*args.values())
    signature, constexprs = signature_from_args(fn, args)
    aligned = aligned_args(fn, args)
    ours = [("constexpr" if name in constexprs else signature[name], name in aligned) for name in args]
    theirs = [(kind, attr == "D") for kind, attr in triton_spec]
    assert ours == theirs


def test_cuobjdump_parsing_picks_the_kernel():
    text = """
Resource usage:
 Common:
  GLOBAL:0
 Function helper:
  REG:12 STACK:8 SHARED:0 LOCAL:0 CONSTANT[0]:0 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function _k:
  REG:96 STACK:40 SHARED:1024 LOCAL:16 CONSTANT[0]:560 TEXTURE:0 SURFACE:0 SAMPLER:0
"""
    assert resources._parse_resource_usage(text, "_k") == {"REG": 96, "STACK": 40, "SHARED": 1024, "LOCAL": 16}


# ------------------------------------------------------------------------------------------------ CLI

def test_cli_json_for_sm120(capsys):
    code = cli.main(["inspect", f"{__file__}:_matmul_tuned", "--target", "sm_120", "--json"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["num_stages"], r["fits"]) for r in rows] == [(4, True), (5, False)]
    assert rows[1]["reason"].endswith("sm_120 allows 101376 B per block")
    assert rows[0]["target"] == "sm_120" and rows[0]["registers"] > 0


def test_cli_table_marks_infeasible_rows(capsys):
    code = cli.main(["inspect", f"{__file__}:_matmul_tuned", "--target", "sm_120"])
    out = capsys.readouterr().out
    assert code == 0
    assert "1 cannot run" in out and "no: needs" in out and "101376" in out


def test_cli_signature_and_constexpr_flags(capsys):
    code = cli.main(["inspect", f"{__file__}:_scale_heuristic", "--signature", "x_ptr=*fp32", "--signature",
                     "n=i32", "--constexpr", "BLOCK=256,EVEN=true", "--json"])
    assert code == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["fits"] and row["target"] == "sm_90" and row["threads_per_block"] == 128


def test_cli_targets(capsys):
    assert cli.main(["inspect", "--targets", "--json"]) == 0
    names = [t["name"] for t in json.loads(capsys.readouterr().out)]
    assert names == ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"]
    assert cli.main(["inspect", "--targets"]) == 0
    assert "232,448" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["inspect", f"{__file__}:_matmul_tuned", "--target", "sm_70"], "unknown target 'sm_70'"),
        (["inspect", f"{__file__}:_no_such_kernel"], "has no attribute '_no_such_kernel'"),
        (["inspect", "no_colon_here"], "is not MODULE:KERNEL"),
        (["inspect", f"{__file__}:_softmax_kernel", "--signature", "x_ptr"], "is not NAME=TYPE"),
        (["inspect"], "give MODULE:KERNEL"),
    ],
    ids=["unknown-target", "unknown-attribute", "no-colon", "bad-signature-flag", "nothing"],
)
def test_cli_errors(capsys, argv, message):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


@triton.jit
def _max_then_scale(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    v = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, v / tl.max(tl.abs(v), 0))


@triton.jit
def _rowmax_dot(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs[:, None] * BLOCK + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * BLOCK + offs[None, :])
    c = tl.dot(a, b)
    tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], c - tl.max(c, 1)[:, None])


def test_compiles_after_an_interpreted_kernel_left_triton_language_patched(tmp_path, monkeypatch):
    # Under the interpreter, tl.max is a @jit helper whose call patches triton.language.core and (triton 3.6)
    # never restores it; a compile that then runs code generation (a fresh Triton cache) must still work.
    import triton.language.core as core

    x = torch.randn(32)
    y = torch.full_like(x, float("nan"))
    _max_then_scale[(1,)](x, y, N=32)
    torch.testing.assert_close(y, x / x.abs().max())
    before = dict(vars(core))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    (row,) = inspect(_rowmax_dot, target="sm_90", signature={"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"},
                     configs=[triton.Config({"BLOCK": 64}, num_warps=4)])
    assert row.fits and row.reason == "" and row.registers > 0, row
    assert list(tmp_path.iterdir()), "the compile ran (nothing came from an earlier cache)"
    assert {k: v for k, v in vars(core).items()} == before   # the interpreter's state is left as it was


@triton.jit
def _bad_bitcast(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, x.to(tl.int32, bitcast=True))


def test_a_front_end_compile_error_reads_as_its_place_line_and_cause():
    (row,) = inspect(_bad_bitcast, target="sm_90", signature={"x_ptr": "*fp16"},
                     configs=[triton.Config({"BLOCK": 64})])
    assert not row.fits and "\n" not in row.reason
    assert row.reason.startswith("compile failed for sm_90: CompilationError at 4:")
    assert "(tl.store(x_ptr + offs, x.to(tl.int32, bitcast=True)))" in row.reason
    assert "Cannot bitcast data-type of size 16 to data-type of size 32" in row.reason
