"""Issue 17's bad-input probes: each one fails with one clear line naming the argument and the value, where
graphtune is first used, never later inside the serving path."""
from __future__ import annotations

import textwrap

import pytest
import torch
import triton
import triton.language as tl

import graphtune
from graphtune import Buckets
from graphtune.cli import main
from graphtune.errors import ConfigError
from graphtune.state import STATE
from _bench_module import load_bench_mla_decode


@triton.jit
def _copy_kernel(x_ptr, out_ptr, n, B, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def _other_kernel(x_ptr, out_ptr, n, B, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in (16, 32) for w in (1, 2)]


def _kernel(name: str):
    return graphtune.autotune(CONFIGS, key=["B"], name=name, do_bench=lambda fn: 1.0)(_copy_kernel)


@pytest.mark.parametrize("params,message", [
    ({"num_warps": "abc"}, "num_warps='abc' is not a power of two >= 1"),
    ({"num_warps": -4}, "num_warps=-4 is not a power of two >= 1"),
    ({"num_warps": 3}, "num_warps=3 is not a power of two >= 1"),
    ({"num_stages": -1}, "num_stages=-1 is not an int >= 0"),     # (0 is Triton's: its HIP tutorials use it)
    ({"BLOCK": "abc"}, "BLOCK='abc' is not an int"),
    ({"BLOCK": 0}, "BLOCK=0 is not an int >= 1"),
], ids=["warps-text", "warps-negative", "warps-not-pow2", "stages-negative", "block-text", "block-0"])
def test_force_values_are_typed_against_the_kernel(params, message):
    _kernel("bi_force")
    with pytest.raises(ConfigError, match=message):
        graphtune.force("bi_force", **params)


@triton.jit
def _knob_kernel(x_ptr, out_ptr, n, B, BLOCK_N: tl.constexpr, CONVERT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x + 1 if CONVERT else x, mask=offs < n)


@pytest.mark.parametrize("params,message", [
    ({"CONVERT": 0}, None),             # a knob's "off": every config has CONVERT=1, 0 is still valid
    ({"CONVERT": 2, "BLOCK_N": 64}, None),
    ({"num_warps": 0}, "num_warps=0 is not a power of two >= 1"),
    ({"num_warps": 3}, "num_warps=3 is not a power of two >= 1"),
    ({"num_stages": -1}, "num_stages=-1 is not an int >= 0"),
    ({"BLOCK_N": -1}, "BLOCK_N=-1 is not an int >= 1"),
    ({"BLOCK_N": 0}, "BLOCK_N=0 is not an int >= 1"),
    ({"CONVERT": -1}, "CONVERT=-1 is not an int >= 0"),
    ({"CONVERT": True}, "CONVERT=True is not an int"),
], ids=["convert-0", "convert-2", "warps-0", "warps-3", "stages-negative", "block-negative", "block-0",
        "convert-negative", "convert-bool"])
def test_force_refuses_only_values_no_kernel_can_take(params, message):
    """The positivity rule refused any value below 1 for a parameter whose configs are all >= 1, so a valid
    off (CONVERT=0, CHAIN=0, PREFETCH=0) could not be forced: a knob takes any int >= 0, a tile size and the
    launch options stay positive."""
    graphtune.autotune([triton.Config({"BLOCK_N": 32, "CONVERT": 1}, num_warps=w) for w in (1, 2)], key=["B"],
                       name="bi_knob", do_bench=lambda fn: 1.0)(_knob_kernel)
    if message is None:
        graphtune.force("bi_knob", **params)
        assert STATE.forces["bi_knob"] == params
        return
    with pytest.raises(ConfigError, match=message) as err:
        graphtune.force("bi_knob", **params)
    assert "\n" not in str(err.value) and "bi_knob" not in STATE.forces


def test_force_takes_the_mla_kernels_off_values():
    from graphtune.kernels.mla_decode import interface, interface_hopper
    interface._tuned_kernel()
    interface_hopper.tuned_kernel(False, True)
    interface_hopper.tuned_second_kernel(False, "fp8")
    graphtune.force("mla_decode", CONVERT=0)                               # the hardware cvt (space.py)
    graphtune.force(interface_hopper.KERNEL_NAMES[(False, True)], CHAIN=0)     # every space config has CHAIN=1
    graphtune.force(interface_hopper.TOK_FP8_V2_NAME, PREFETCH=0, CHAIN=0)
    with pytest.raises(ConfigError, match="BLOCK_N=0 is not an int >= 1"):
        graphtune.force("mla_decode", BLOCK_N=0)


def test_env_force_values_are_typed_at_decoration(monkeypatch):
    monkeypatch.setenv("GRAPHTUNE_FORCE", "bi_env:num_warps=abc")
    with pytest.raises(ConfigError, match="force for kernel 'bi_env': num_warps='abc'"):
        _kernel("bi_env")


def test_force_for_a_kernel_never_defined_is_reported_at_freeze_and_warmup(monkeypatch):
    monkeypatch.setenv("GRAPHTUNE_FORCE", "no_such_kernel:num_warps=4")
    with pytest.raises(ConfigError, match=r"\['no_such_kernel'\] match no graphtune kernel"):
        graphtune.freeze()
    assert not graphtune.is_frozen()
    with pytest.raises(ConfigError, match="no_such_kernel"):
        graphtune.warmup(lambda b: None, [1], lambda b: (b,))


def test_bad_policy_fails_at_decoration_and_at_freeze(monkeypatch):
    monkeypatch.setenv("GRAPHTUNE_POLICY", "bogus")
    with pytest.raises(ValueError, match="GRAPHTUNE_POLICY='bogus'"):
        _kernel("bi_policy")
    with pytest.raises(ValueError, match="GRAPHTUNE_POLICY='bogus'"):
        graphtune.freeze()


@pytest.mark.parametrize("configs,error,message", [
    ([], ValueError, r"configs=\[\]"),
    (None, TypeError, "configs=None"),
    (triton.Config({"BLOCK": 16}), TypeError, "configs must be a list"),
    ([{"BLOCK": 16}], TypeError, "is not a triton.Config"),
], ids=["empty", "none", "one-config", "dict"])
def test_autotune_checks_its_configs(configs, error, message):
    with pytest.raises(error, match=message):
        graphtune.autotune(configs, key=["B"], name="bi_cfg")


def test_two_kernels_may_not_share_a_name():
    _kernel("bi_dup")
    _kernel("bi_dup")   # the same function decorated again (a re-import) keeps its name
    with pytest.raises(ValueError, match=r"two graphtune kernels are named 'bi_dup'.*_copy_kernel.*_other_kernel"):
        graphtune.autotune(CONFIGS, key=["B"], name="bi_dup")(_other_kernel)


def test_a_launch_without_the_key_argument_names_it():
    k = _kernel("bi_args")
    x = torch.randn(8)
    with pytest.raises(TypeError, match=r"kernel 'bi_args' launched with 3 positional argument\(s\) : missing "
                                        r"\['B', 'BLOCK'\]"):
        k[(1,)](x, torch.empty_like(x), 8)


def test_buckets_reject_unknown_kinds_and_negative_sizes():
    with pytest.raises(ValueError, match="Buckets\\(kind='bogus'\\)"):
        Buckets(kind="bogus")
    with pytest.raises(ValueError, match="bucketed key value -3 is negative"):
        Buckets.explicit([1, 2, 4])(-3)
    with pytest.raises(ValueError, match="negative"):
        Buckets.pow2(64)(-1)


def test_buckets_take_whole_numbers_only_and_are_built_whole():
    """A non-integral key value is refused (2.7 truncated to 2, a bucket below it); numpy / torch integers are sizes;
    a Buckets built by hand without its sizes (an IndexError at the first lookup) is refused when built."""
    import numpy as np
    with pytest.raises(TypeError, match=r"bucketed key value 2.7 is not an integer"):
        Buckets.pow2(8)(2.7)
    assert Buckets.pow2(8)(4.0) == 4 and Buckets.pow2(8)(torch.tensor(3)) == 4
    assert Buckets.explicit(np.array([4, 1, 2])).sizes == (1, 2, 4)
    assert all(type(v) is int for v in Buckets.explicit(torch.tensor([8, 16])).sizes)
    with pytest.raises(ValueError, match=r"Buckets\(kind='explicit', sizes=\(\)\): build it with Buckets.explicit"):
        Buckets("explicit")
    with pytest.raises(ValueError, match=r"build it with Buckets.pow2\(max\)"):
        Buckets("pow2", sizes=(1, 2))


@pytest.mark.parametrize("args,error,message", [
    ((lambda b: None, None, lambda b: (b,)), TypeError, "sizes=None"),
    ((lambda b: None, "1,2", lambda b: (b,)), TypeError, "sizes='1,2'"),
    ((lambda b: None, [1, 0], lambda b: (b,)), ValueError, "0 is not a batch size"),
    ((None, [1], lambda b: (b,)), TypeError, "fn=None"),
    ((lambda b: None, [1], None), TypeError, "make_args=None"),
    ((lambda b: None, [1], lambda b: b), TypeError, r"make_args\(1\) returned int 1; expected the step's positional"),
], ids=["sizes-none", "sizes-text", "size-0", "fn-none", "make-args-none", "make-args-returns-int"])
def test_warmup_checks_its_arguments(args, error, message):
    with pytest.raises(error, match=message):
        graphtune.warmup(*args)


# ------------------------------------------------------------------------------------------ the command line


def _one_line_error(capsys, argv, *needles) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("graphtune: error:"), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return err


def test_tune_with_a_target_of_the_wrong_type_is_one_line(capsys):
    _one_line_error(capsys, ["tune", "graphtune:Buckets"], "Buckets()")
    _one_line_error(capsys, ["tune", "graphtune.keys:key_to_json"], "lacks")


def test_tune_of_a_module_that_does_not_import_is_one_line(tmp_path, capsys):
    broken = tmp_path / "broken_syntax.py"
    broken.write_text("def f(:\n")
    _one_line_error(capsys, ["tune", f"{broken}:TARGET"], str(broken), "SyntaxError")
    raising = tmp_path / "raising_mod.py"
    raising.write_text("raise RuntimeError('boom at import')\n")
    _one_line_error(capsys, ["tune", f"{raising}:TARGET"], "RuntimeError: boom at import")
    _one_line_error(capsys, ["inspect", f"{raising}:kernel"], "boom at import")


def test_a_load_error_names_the_spec_given(tmp_path, capsys):
    """The object alone was named: "42 is not a Triton kernel", "tune target 5 lacks ..."."""
    mod = tmp_path / "kern.py"
    mod.write_text("not_a_kernel = 42\nNOTARGET = 5\n")
    _one_line_error(capsys, ["inspect", f"{mod}:not_a_kernel"], f"inspect {mod}:not_a_kernel: 42 is not a Triton kernel")
    _one_line_error(capsys, ["tune", f"{mod}:NOTARGET"], f"tune target {mod}:NOTARGET (5) lacks")


@pytest.mark.parametrize("command", ["inspect", "tune"])
@pytest.mark.parametrize("exit_call, status", [("sys.exit(3)", "3"), ("sys.exit()", "0"), ("sys.exit('bye')", "1 (bye)")],
                         ids=["3", "none", "text"])
def test_a_module_that_exits_while_imported_is_one_line(tmp_path, capsys, command, exit_call, status):
    """sys.exit() in the user's module ended the command with that status and no word why."""
    mod = tmp_path / "exiting_mod.py"
    mod.write_text(f"import sys\n{exit_call}\n")
    _one_line_error(capsys, [command, f"{mod}:kernel"], str(mod),
                    f"the module exited with status {status} while being imported")


def test_debug_and_verbose_are_taken_after_the_command(monkeypatch, capsys):
    """Every error line says "--debug shows the traceback", but `graphtune db ls --debug` was refused."""
    monkeypatch.setenv("GRAPHTUNE_TIMER", "fastest")
    for argv in (["db", "path", "--debug"], ["db", "path", "-v", "--debug"], ["--debug", "db", "path"],
                 ["audit", "tests/cpu/audit_corpus/hazards.py", "--debug"]):
        with pytest.raises(ValueError, match="GRAPHTUNE_TIMER='fastest'"):
            main(argv)
    _one_line_error(capsys, ["db", "path", "-v"], "GRAPHTUNE_TIMER='fastest'")   # -v alone: still one line
    monkeypatch.delenv("GRAPHTUNE_TIMER")
    assert main(["db", "path", "-vv"]) == 0 and main(["db", "path", "--debug"]) == 0


def test_verbose_counts_before_and_after_the_command_add_up(monkeypatch):
    """`graphtune -v db path -v` is -vv (debug): argparse copied the count after the command over the one before
    (a count of 1)."""
    import logging
    levels = []
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: levels.append(kw["level"]))
    for argv in (["-v", "db", "path", "-v"], ["db", "path", "-vv"], ["-v", "db", "path"], ["db", "path"]):
        assert main(argv) == 0
    assert levels == [logging.DEBUG, logging.DEBUG, logging.INFO, logging.WARNING]


def test_tune_whose_make_args_raises_is_one_line(tmp_path, capsys):
    mod = tmp_path / "target_mod.py"
    mod.write_text(textwrap.dedent('''
        import triton, triton.language as tl, graphtune

        @triton.jit
        def _k(x_ptr, B, BLOCK: tl.constexpr):
            pass

        class Target:
            kernel = graphtune.autotune([triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})],
                                        key=["B"], name="bi_make_args")(_k)
            default_sizes = [1, 2]

            def make_args(self, size):
                raise KeyError("no inputs for this size")

        TARGET = Target()
    '''))
    _one_line_error(capsys, ["tune", f"{mod}:TARGET", "--out", str(tmp_path / "o.json")],
                    "Target.make_args(1) raised KeyError")


def test_tune_without_a_gpu_or_the_interpreter_is_one_line(tmp_path, monkeypatch, capsys):
    """Every candidate failed with "RuntimeError: 0 active drivers": 13 lines for one missing GPU."""
    import _dist_workers as W
    W.TIMER.timed.clear()
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "x.json"
    _one_line_error(capsys, ["tune", "_dist_workers:CLI_TARGET", "--sizes", "2", "--out", str(out)],
                    "tune needs a CUDA GPU", "TRITON_INTERPRET=1")
    assert W.TIMER.timed == [] and not out.exists()


def test_tune_with_empty_sizes_is_an_error(capsys):
    _one_line_error(capsys, ["tune", "_dist_workers:CLI_TARGET", "--sizes", ""], "--sizes: no sizes")


def test_tune_reports_a_force_for_a_kernel_that_does_not_exist(monkeypatch, capsys):
    monkeypatch.setenv("GRAPHTUNE_FORCE", "not_a_kernel:num_warps=4")
    _one_line_error(capsys, ["tune", "_dist_workers:CLI_TARGET", "--sizes", "2"], "not_a_kernel")


def test_cli_refuses_bad_settings_at_start(monkeypatch, capsys):
    monkeypatch.setenv("GRAPHTUNE_TIMER", "fastest")
    _one_line_error(capsys, ["db", "path"], "GRAPHTUNE_TIMER='fastest'")


@pytest.mark.parametrize("name, value", [("GRAPHTUNE_TIMER_BUDGET_MS", "nan"), ("GRAPHTUNE_DIST_TIMEOUT_S", "nan"),
                                         ("GRAPHTUNE_ISOLATE_TIMEOUT_S", "nan"), ("GRAPHTUNE_TIMER_MEM_MB", "inf"),
                                         ("GRAPHTUNE_DIST_TIMEOUT_S", "-inf")])
def test_cli_refuses_non_finite_numeric_settings(monkeypatch, capsys, name, value):
    """nan passed the >= minimum check (every comparison with nan is false) and inf is no limit."""
    monkeypatch.setenv(name, value)
    _one_line_error(capsys, ["db", "path"], f"{name}={value!r}: expected a finite number")


class _ClosedPipe:
    """A stdout whose reader has gone away (``graphtune db ls | head -1``): every write raises."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        import io
        raise io.UnsupportedOperation("fileno")


@pytest.mark.parametrize("debug", [[], ["--debug"]], ids=["plain", "debug"])
def test_a_closed_pipe_is_no_error(monkeypatch, capsys, debug):
    """It was "graphtune: error: BrokenPipeError" and exit 2; a Unix tool stops quietly (status 141, SIGPIPE's)."""
    import sys
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert main([*debug, "db", "path"]) == 141
    assert capsys.readouterr().err == ""


def test_another_broken_pipe_is_an_error_not_a_gone_reader(monkeypatch, capsys):
    """A broken pipe that is not stdout's (a worker process that died, a subprocess) is reported as an error, in
    one line, not taken for a reader that went away (status 141 and no word)."""
    from graphtune import settings

    def broken():
        raise BrokenPipeError(32, "Broken pipe (to a worker)")
    monkeypatch.setattr(settings, "validate_all", broken)
    _one_line_error(capsys, ["db", "path"], "Broken pipe (to a worker)")


def test_config_tables_show_what_varies_and_never_cut_a_value(capsys, monkeypatch):
    from graphtune.configs import shared_and_varying
    shared, varying = shared_and_varying([{"BLOCK_H": 16, "BLOCK_N": 32, "PROGRAMS_PER_SM": 2},
                                          {"BLOCK_H": 16, "BLOCK_N": 64, "PROGRAMS_PER_SM": 2}])
    assert shared == {"BLOCK_H": 16, "PROGRAMS_PER_SM": 2} and varying == ["BLOCK_N"]
    monkeypatch.setenv("COLUMNS", "60")   # a narrow terminal
    path = __file__.replace("test_bad_input.py", "test_resources.py")
    assert main(["inspect", f"{path}:_matmul_tuned", "--target", "sm_120"]) == 0
    out = capsys.readouterr().out
    assert "every config: BLOCK_K=64, BLOCK_M=128, BLOCK_N=128" in out
    assert "…" not in out


# ------------------------------------------------------------------------------------ benchmarks/bench_mla_decode.py


def _bench_mla_decode():
    return load_bench_mla_decode("_bench_mla_decode_flags_under_test")


@pytest.mark.parametrize("argv,needles", [
    (["--batches", "1,x"], ["argument --batches:", "'x' is not an integer", "'1,x'"]),
    (["--batches", "0"], ["argument --batches:", "0 is not a size >= 1"]),
    (["--page-sizes", "64,a"], ["argument --page-sizes:", "'a'"]),
    (["--check-heads", "16,h"], ["argument --check-heads:", "'h'"]),
    (["--vs-batches-h16", "1,-8"], ["argument --vs-batches-h16:", "-8"]),
    (["--vs-batches-h128", "1,y"], ["argument --vs-batches-h128:", "'y'"]),
    (["--hopper-batches", "8,x"], ["argument --hopper-batches:", "'x'"]),
    (["--hopper-heads", "32"], ["argument --hopper-heads:", "'32' is not one of [16, 128]"]),
    (["--hopper-kinds", "tokens-on-N"], ["argument --hopper-kinds:", "'tokens-on-N'"]),
    (["--formats", "fp8,fp9"], ["argument --formats:", "'fp9'"]),
    (["--vs-formats", "bf17"], ["argument --vs-formats:", "'bf17'"]),
    (["--hopper-overlay", "GATHER"], ["argument --hopper-overlay:", "'GATHER' is not NAME=VALUE"]),
    (["--hopper-overlay", "GATHER=x"], ["argument --hopper-overlay:", "'GATHER=x'"]),
    (["--configs", "BLOCK_N=x"], ["argument --configs:", "BLOCK_N='x'"]),
    (["--configs", "BLOKN=32"], ["argument --configs:", "unknown parameter 'BLOKN'"]),
    (["--configs", "BLOCK_N"], ["argument --configs:", "'BLOCK_N' is not NAME=VALUE"]),
    (["--configs-file", "/nonexistent/configs.txt"], ["argument --configs-file", "/nonexistent/configs.txt"]),
], ids=lambda v: v[0] if isinstance(v, list) and v[0].startswith("--") else None)
def test_bench_mla_decode_flags_name_the_flag_and_the_value(argv, needles, capsys):
    """A bad list item once failed with a bare int() ValueError naming no flag (and only on a GPU machine, past
    the CUDA check): now argparse's one error line names the flag and the value, exit status 2."""
    bench_mod = _bench_mla_decode()
    with pytest.raises(SystemExit) as exit_:
        bench_mod.main(argv)
    assert exit_.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in errors[0], errors
    assert all(needle in errors[0] for needle in needles), errors[0]


def test_bench_mla_decode_list_flags_parse_to_lists_and_empty_means_none():
    bench_mod = _bench_mla_decode()
    args = bench_mod.build_parser().parse_args(
        ["--batches", "1, 8,128", "--vs-batches-h128", "", "--hopper-overlay", "GATHER=1",
         "--hopper-kinds", "tokens-on-M fp8", "--configs", "BLOCK_N=32,CONVERT=1; BLOCK_N=128,num_warps=8"])
    assert args.batches == [1, 8, 128] and args.vs_batches_h16 == [1, 8, 32, 64, 128]
    assert args.vs_batches_h128 == []          # (an empty list leaves H = 128 out of --vs-flashmla)
    assert args.hopper_overlay == [("GATHER", 1)] and args.hopper_kinds == ["tokens-on-M fp8"]
    assert args.formats == ["fp8", "fp8_ds_mla"] and args.hopper_batches == [] and args.hopper_heads == [16, 128]
    assert [(c.kwargs["BLOCK_N"], c.num_warps) for c in args.configs] == [(32, 4), (128, 8)]
    assert args.configs[0].kwargs == {**bench_mod.space.DEFAULT.kwargs, "BLOCK_N": 32}   # (over the default)
