"""Engine plugins without the engines: fake vLLM / SGLang modules in sys.modules that mimic the capture classes
of vllm 0.34.0 and sglang 0.5.23, the registered functions called directly, the entry points checked in
pyproject.toml and (when this checkout is the installed one) in the installed metadata."""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import logging
import os
import sys
import textwrap
import types
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
import torch
import triton
import triton.language as tl

import graphtune
from graphtune import capture, state
from graphtune.errors import UntunedError
from graphtune.plugins import _hooks, _report
from graphtune.plugins import sglang as sglang_plugin
from graphtune.plugins import vllm as vllm_plugin

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINTS = {"vllm.general_plugins": ("graphtune", "graphtune.plugins.vllm:register"),
                "sglang.srt.plugins": ("graphtune", "graphtune.plugins.sglang:register")}
CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in (16, 32) for w in (1, 2)]
TUNED_N, MISSED_N = 37, 99


# a third-party kernel the engine would call: stock triton.autotune, reached only through patch_triton()
@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def _plugin_stock_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)


def launch(n: int) -> None:
    x = torch.randn(n)
    out = torch.full((n,), float("nan"))
    _plugin_stock_kernel[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, out, n)
    torch.testing.assert_close(out, x * 3.0)


def capture_sizes(sizes) -> None:
    """What an engine's capture does to graphtune: launches while a graph is being recorded."""
    capture.simulate_capture(True)
    try:
        for n in sizes:
            launch(n)
    finally:
        capture.simulate_capture(None)


# --------------------------------------------------------------------------------------------- fixtures


@pytest.fixture
def out_dir(tmp_path) -> Path:
    return tmp_path / "coverage"


@pytest.fixture
def plugin_env(monkeypatch, out_dir):
    """GRAPHTUNE_PLUGIN=1 with a report directory; plugin state, patch and import hooks restored afterwards."""
    monkeypatch.setenv("GRAPHTUNE_PLUGIN", "1")
    monkeypatch.setenv("GRAPHTUNE_COVERAGE_OUT", str(out_dir))
    for name in ("GRAPHTUNE_LOAD", "RANK"):
        monkeypatch.delenv(name, raising=False)
    for mod in (vllm_plugin, sglang_plugin):
        monkeypatch.setattr(mod, "_registered", False)
        monkeypatch.setattr(mod, "_reporter", None)
    added = set(sys.modules)
    yield monkeypatch
    graphtune.unpatch_triton()
    _hooks.clear_pending()
    # modules the tests imported for real (not through monkeypatch) go too
    for name in set(sys.modules) - added:
        if name.startswith(("vllm", "sglang")):
            del sys.modules[name]


def fake_module(monkeypatch, name: str, source: str = "", path: Path | None = None, **env) -> types.ModuleType:
    """A module named ``name`` in sys.modules whose functions have the engine's module and qualified names."""
    module = types.ModuleType(name)
    if path is not None:
        module.__path__ = [str(path)]
    module.__dict__.update(env)
    exec(compile(textwrap.dedent(source), f"<fake {name}>", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, name, module)
    return module


def fake_packages(monkeypatch, dotted: str, last_path: Path | None = None) -> None:
    parts = dotted.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        fake_module(monkeypatch, name, path=last_path if i == len(parts) else None)


VLLM_RUNNER = """
class GPUModelRunner:
    # mimics vllm 0.34.0 vllm/v1/worker/gpu/model_runner.py: capture_model(self, *, profile_only=False) -> int
    def capture_model(self, *, profile_only: bool = False) -> int:
        capture_sizes(SIZES)
        return 1234
"""


def install_fake_vllm(monkeypatch, sizes=(TUNED_N, MISSED_N)) -> types.ModuleType:
    fake_packages(monkeypatch, "vllm.v1.worker.gpu")
    return fake_module(monkeypatch, "vllm.v1.worker.gpu.model_runner", VLLM_RUNNER, capture_sizes=capture_sizes,
                       SIZES=list(sizes))


def reports(out_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out_dir.glob("*.json"))]


def graphtune_lines(caplog, level=logging.WARNING) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "graphtune" and r.levelno >= level]


# ------------------------------------------------------------------------------------------ entry points


def test_entry_points_declared_in_pyproject():
    tomllib = pytest.importorskip("tomllib")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    for group, (name, value) in ENTRY_POINTS.items():
        assert declared[group] == {name: value}
        module, attr = value.split(":")
        assert callable(getattr(importlib.import_module(module), attr))


def _why_installed_metadata_is_not_ours() -> str | None:
    """None when the installed graphtune metadata was built from this checkout's pyproject.toml (as in CI:
    ``pip install -e .`` of the clone under test), else why the check cannot apply here."""
    try:
        dist = importlib.metadata.distribution("graphtune")
    except importlib.metadata.PackageNotFoundError:
        return "graphtune is not installed"
    raw = dist.read_text("direct_url.json")
    url = json.loads(raw).get("url", "") if raw else ""
    if not url.startswith("file:") or Path(unquote(urlparse(url).path)).resolve() != ROOT:
        return f"the installed graphtune metadata comes from {url or 'elsewhere (no direct_url.json)'}, not {ROOT}"
    metadata = [f.locate() for f in dist.files or () if f.name == "METADATA"]
    # entry points are written at install time: a pyproject.toml edited since then is not reflected yet
    if metadata and Path(metadata[0]).stat().st_mtime < (ROOT / "pyproject.toml").stat().st_mtime:
        return "pyproject.toml changed after the editable install: run pip install -e . again"
    return None


@pytest.mark.skipif(_why_installed_metadata_is_not_ours() is not None,
                    reason=str(_why_installed_metadata_is_not_ours()))
def test_entry_points_in_installed_metadata():
    # what vLLM's load_plugins_by_group and SGLang's load_plugins_by_group do: entry_points(group=...).load()
    for group, (name, value) in ENTRY_POINTS.items():
        found = {ep.name: ep for ep in importlib.metadata.entry_points(group=group)}
        assert found[name].value == value
        assert found[name].load() is getattr(importlib.import_module(value.split(":")[0]), "register")


# ------------------------------------------------------------------------------------------------ off / bad


def test_off_unless_enabled(plugin_env, caplog, out_dir):
    plugin_env.delenv("GRAPHTUNE_PLUGIN")
    install_fake_vllm(plugin_env)
    vllm_plugin.register()
    sglang_plugin.register()
    assert not graphtune.patch.is_patched()
    runner = sys.modules["vllm.v1.worker.gpu.model_runner"].GPUModelRunner
    assert not _hooks.is_wrapped(runner.capture_model) and _hooks.pending() == []
    assert graphtune_lines(caplog) == [] and not out_dir.exists()


@pytest.mark.parametrize("name,value", [("GRAPHTUNE_POLICY", "bogus"), ("GRAPHTUNE_PLUGIN", "maybe"),
                                        ("GRAPHTUNE_PLUGIN_AGREE", "all")],
                         ids=["policy-bogus", "plugin-maybe", "agree-all"])
def test_bad_setting_is_one_error_line_and_nothing_applied(plugin_env, caplog, name, value):
    plugin_env.setenv(name, value)
    install_fake_vllm(plugin_env)
    vllm_plugin.register()     # never raises: vLLM does not catch a general plugin's exceptions
    errors = graphtune_lines(caplog, logging.ERROR)
    assert len(errors) == 1 and f"{name}={value!r}" in errors[0]
    assert not graphtune.patch.is_patched()
    assert not _hooks.is_wrapped(sys.modules["vllm.v1.worker.gpu.model_runner"].GPUModelRunner.capture_model)


# ----------------------------------------------------------------------------------------------------- vLLM


def test_vllm_capture_end_writes_tuned_hit_missed(plugin_env, out_dir, caplog):
    module = install_fake_vllm(plugin_env)
    vllm_plugin.register()
    assert graphtune.patch.is_patched()
    launch(TUNED_N)                                   # the engine's warm-up run tunes this key
    with pytest.warns(RuntimeWarning, match="_plugin_stock_kernel"):
        assert module.GPUModelRunner().capture_model() == 1234     # the return value passes through
    (doc,) = reports(out_dir)
    (path,) = out_dir.glob("*.json")
    assert path.name == f"graphtune-coverage-vllm-pid{os.getpid()}.json"
    assert doc["engine"] == "vllm" and doc["pid"] == os.getpid() and doc["policy"] == "fallback"
    assert doc["event"] == {"after": "vllm.v1.worker.gpu.model_runner.GPUModelRunner.capture_model",
                            "status": "ok", "report": 1}
    (kernel,) = [k for k in doc["coverage"]["kernels"] if k["name"] == "_plugin_stock_kernel"]
    assert [t["key"][0] for t in kernel["tuned"]] == [TUNED_N] and kernel["tuned"][0]["hits"] >= 1
    assert [(m["key"][0], m["where"], m["action"]) for m in kernel["misses"]] == [(MISSED_N, "capture", "fallback")]
    assert doc["summary"]["missed_keys"] == 1 and doc["summary"]["tuned_keys"] >= 1
    # the log has the summary and the table, at WARNING because a key missed
    lines = graphtune_lines(caplog)
    assert any("graphtune coverage after vllm.v1.worker.gpu.model_runner.GPUModelRunner.capture_model" in s
               and "1 missed keys" in s for s in lines)
    assert any("_plugin_stock_kernel" in s and str(MISSED_N) in s for s in lines)


def test_vllm_wraps_the_runner_when_it_is_imported_later(plugin_env, tmp_path, out_dir):
    # the plugin runs before vLLM imports its model runner (and in processes that never import it)
    pkg = tmp_path / "fake_vllm_gpu"
    pkg.mkdir()
    (pkg / "model_runner.py").write_text(textwrap.dedent(VLLM_RUNNER))
    fake_packages(plugin_env, "vllm.v1.worker.gpu", last_path=pkg)
    vllm_plugin.register()
    assert "vllm.v1.worker.gpu.model_runner" in _hooks.pending()
    module = importlib.import_module("vllm.v1.worker.gpu.model_runner")
    assert _hooks.is_wrapped(module.GPUModelRunner.capture_model)
    # the module looks as a normal import leaves it: real loader, source available
    assert type(module.__loader__).__name__ == "SourceFileLoader" and module.__spec__.loader is module.__loader__
    assert "def capture_model" in inspect.getsource(module)
    assert _hooks.pending() == [] and _hooks._finder not in sys.meta_path
    module.capture_sizes, module.SIZES = capture_sizes, [TUNED_N]
    launch(TUNED_N)
    module.GPUModelRunner().capture_model()
    (doc,) = reports(out_dir)
    assert doc["summary"]["missed_keys"] == 0 and doc["event"]["status"] == "ok"


def test_vllm_profiling_capture_is_not_reported(plugin_env, out_dir):
    module = install_fake_vllm(plugin_env, sizes=[TUNED_N])
    vllm_plugin.register()
    launch(TUNED_N)
    module.GPUModelRunner().capture_model(profile_only=True)
    assert not out_dir.exists()
    module.GPUModelRunner().capture_model()
    assert len(reports(out_dir)) == 1


def test_vllm_failed_profiling_capture_is_reported(plugin_env, out_dir):
    """vLLM's profiling pass (``profile_only=True``) is where an UntunedError of GRAPHTUNE_POLICY=raise first fires:
    a failed one is reported (status failed, the miss as a raise), only a successful one is skipped; the report
    file is readable by others (0666 less the umask, not mkstemp's 0600)."""
    plugin_env.setenv("GRAPHTUNE_POLICY", "raise")
    module = install_fake_vllm(plugin_env)
    vllm_plugin.register()
    launch(TUNED_N)
    with pytest.raises(UntunedError, match="_plugin_stock_kernel"):
        module.GPUModelRunner().capture_model(profile_only=True)
    (path, ) = sorted(out_dir.glob("*.json"))
    doc = json.loads(path.read_text())
    assert doc["event"]["status"] == "failed" and doc["summary"]["missed_keys"] == 1, doc["summary"]
    mask = os.umask(0o022)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask


@pytest.mark.parametrize("variable", ["GRAPHTUNE_COVERAGE_OUT", "GRAPHTUNE_LOAD"])
def test_an_unknown_home_in_a_plugin_path_is_one_line(plugin_env, caplog, variable):
    """``~nosuchuser/...``: one error line naming the variable (pathlib's RuntimeError and a traceback before), the
    plugin off, the engine going on."""
    plugin_env.setenv(variable, "~graphtune_no_such_user_31/cov")
    install_fake_vllm(plugin_env)
    vllm_plugin.register()
    lines = graphtune_lines(caplog, logging.ERROR)
    assert len(lines) == 1 and f"{variable}='~graphtune_no_such_user_31/cov'" in lines[0], lines
    assert not any(r.exc_info for r in caplog.records if r.name == "graphtune")


def test_a_bad_tuning_setting_turns_the_plugin_off_in_one_line(plugin_env, caplog):
    """The tuning variables are checked when the plugin activates, as autotune / warmup / the CLI check them."""
    plugin_env.setenv("GRAPHTUNE_DIST_TIMEOUT_S", "abc")
    install_fake_vllm(plugin_env)
    vllm_plugin.register()
    lines = graphtune_lines(caplog, logging.ERROR)
    assert len(lines) == 1 and "GRAPHTUNE_DIST_TIMEOUT_S" in lines[0] and "is off" in lines[0], lines


def test_vllm_failed_capture_is_reported_and_the_error_propagates(plugin_env, out_dir):
    plugin_env.setenv("GRAPHTUNE_POLICY", "raise")
    module = install_fake_vllm(plugin_env)
    vllm_plugin.register()
    launch(TUNED_N)
    with pytest.raises(UntunedError, match="_plugin_stock_kernel"):
        module.GPUModelRunner().capture_model()
    (doc,) = reports(out_dir)
    assert doc["policy"] == "raise" and doc["event"]["status"] == "failed"
    (kernel,) = [k for k in doc["coverage"]["kernels"] if k["name"] == "_plugin_stock_kernel"]
    assert [(m["key"][0], m["action"]) for m in kernel["misses"]] == [(MISSED_N, "raise")]


def test_vllm_nested_capture_reports_once(plugin_env, out_dir):
    # vllm 0.34.0's encoder-only runner overrides capture_model; out-of-tree runners call super() inside theirs
    install_fake_vllm(plugin_env, sizes=[TUNED_N])
    fake_module(plugin_env, "vllm.v1.worker.mm_encoder_model_runner", """
        from vllm.v1.worker.gpu.model_runner import GPUModelRunner
        class MMEncoderModelRunner(GPUModelRunner):
            def capture_model(self, *, profile_only: bool = False) -> int:
                return super().capture_model(profile_only=profile_only) + 1
    """)
    vllm_plugin.register()
    launch(TUNED_N)
    assert sys.modules["vllm.v1.worker.mm_encoder_model_runner"].MMEncoderModelRunner().capture_model() == 1235
    (doc,) = reports(out_dir)
    assert doc["event"]["after"] == "vllm.v1.worker.mm_encoder_model_runner.MMEncoderModelRunner.capture_model"
    assert vllm_plugin._reporter.reports == 1


def test_vllm_without_capture_function_logs_one_line_and_still_applies(plugin_env, caplog, out_dir):
    fake_packages(plugin_env, "vllm.v1.worker.gpu")
    fake_module(plugin_env, "vllm.v1.worker.gpu.model_runner", "class GPUModelRunner:\n    pass\n")
    vllm_plugin.register()
    (line,) = graphtune_lines(caplog)
    assert "vllm.v1.worker.gpu.model_runner.GPUModelRunner.capture_model not found" in line
    assert graphtune.patch.is_patched()


def test_vllm_layout_unknown_logs_one_line_and_still_applies(plugin_env, caplog):
    # no vllm importable at all: none of the read layouts exists
    plugin_env.setitem(sys.modules, "vllm", None)
    vllm_plugin.register()
    (line,) = graphtune_lines(caplog)
    for target in vllm_plugin.CAPTURE_TARGETS:
        assert target.dotted in line
    assert "patch_triton and GRAPHTUNE_LOAD are applied" in line and graphtune.patch.is_patched()


@pytest.mark.parametrize("value,mode", [(None, "off"), ("merge", "merge"), ("broadcast", "broadcast")],
                         ids=["unset-off", "merge", "broadcast"])
def test_rank_agreement_is_off_unless_asked(plugin_env, value, mode):
    # graphtune alone agrees over the whole default group; an engine's holds ranks that run other shapes
    if value is not None:
        plugin_env.setenv("GRAPHTUNE_PLUGIN_AGREE", value)
    assert state.STATE.agreement == (None, "merge")   # graphtune's default (the test starts from a clean state)
    vllm_plugin.register()
    assert state.STATE.agreement == (None, mode)


@pytest.mark.parametrize("freeze", [False, True], ids=["default-tunes-new-keys", "freeze"])
def test_freeze_after_capture(plugin_env, freeze):
    if freeze:
        plugin_env.setenv("GRAPHTUNE_PLUGIN_FREEZE", "1")
    module = install_fake_vllm(plugin_env, sizes=[TUNED_N])
    vllm_plugin.register()
    launch(TUNED_N)
    module.GPUModelRunner().capture_model(profile_only=True)
    assert not graphtune.is_frozen()
    module.GPUModelRunner().capture_model()
    assert graphtune.is_frozen() is freeze
    gk = graphtune.patch.graphtune_kernel_of(_plugin_stock_kernel)
    calls = gk.bench_calls
    if freeze:   # serving: a new key is not tuned, it follows the policy and is recorded
        with pytest.warns(RuntimeWarning, match="_plugin_stock_kernel"):
            launch(MISSED_N)
        assert gk.bench_calls == calls
        (kernel,) = [k for k in graphtune.coverage().to_dict()["kernels"] if k["name"] == "_plugin_stock_kernel"]
        assert [(m["key"][0], m["where"]) for m in kernel["misses"]] == [(MISSED_N, "frozen")]
    else:
        launch(MISSED_N)
        assert gk.bench_calls > calls


def test_register_twice_wraps_once(plugin_env):
    module = install_fake_vllm(plugin_env)
    vllm_plugin.register()
    first = module.GPUModelRunner.capture_model
    plugin_env.setattr(vllm_plugin, "_registered", False)
    vllm_plugin.register()
    assert module.GPUModelRunner.capture_model is first
    assert not _hooks.is_wrapped(first.__wrapped__)


# ---------------------------------------------------------------------------------------- GRAPHTUNE_LOAD


def test_load_export_then_capture_without_benchmarks(plugin_env, tmp_path, out_dir, caplog):
    # tune in one "process", export, then start a fresh one that only loads the export
    with graphtune.patch_triton():
        launch(TUNED_N)
    export = tmp_path / "tuned.json"
    assert graphtune.TuningDB().export(export) >= 1
    for ks in graphtune.tuner.kernels().values():   # a fresh process: nothing tuned in memory
        for k in ks:
            k.reset()
    plugin_env.setenv("GRAPHTUNE_NO_DB", "1")
    missing = tmp_path / "not-there.json"
    plugin_env.setenv("GRAPHTUNE_LOAD", os.pathsep.join([str(export), str(missing)]))
    module = install_fake_vllm(plugin_env, sizes=[TUNED_N])
    vllm_plugin.register()
    (error,) = graphtune_lines(caplog, logging.ERROR)
    assert "GRAPHTUNE_LOAD" in error and str(missing) in error
    gk = graphtune.patch.graphtune_kernel_of(_plugin_stock_kernel)
    module.GPUModelRunner().capture_model()      # untuned in this process, but loaded: a hit inside capture
    assert gk.bench_calls == 0
    (doc,) = reports(out_dir)
    assert doc["loaded"][0]["path"] == str(export) and doc["loaded"][0]["added"] >= 1
    assert doc["loaded"][1]["path"] == str(missing) and "error" in doc["loaded"][1]
    (kernel,) = [k for k in doc["coverage"]["kernels"] if k["name"] == "_plugin_stock_kernel"]
    assert [(t["key"][0], t["source"]) for t in kernel["tuned"]] == [(TUNED_N, "database")]
    assert kernel["misses"] == []


# ------------------------------------------------------------------------------------------- report files


def test_report_never_overwrites_another_process_file(plugin_env, out_dir):
    out_dir.mkdir()
    theirs = out_dir / f"graphtune-coverage-vllm-pid{os.getpid()}.json"   # e.g. an earlier run, same pid
    theirs.write_text("not ours")
    module = install_fake_vllm(plugin_env, sizes=[TUNED_N])
    vllm_plugin.register()
    launch(TUNED_N)
    module.GPUModelRunner().capture_model()
    module.GPUModelRunner().capture_model()     # a second capture replaces this process's own report
    assert theirs.read_text() == "not ours"
    ours = out_dir / f"graphtune-coverage-vllm-pid{os.getpid()}-2.json"
    assert json.loads(ours.read_text())["event"]["report"] == 2
    assert sorted(p.name for p in out_dir.iterdir()) == sorted([theirs.name, ours.name])   # no temp files left


def test_report_path_forms(tmp_path):
    expected = tmp_path / "d" / "graphtune-coverage-sglang-rank3-pid77.json"
    assert _report.report_path(tmp_path / "d", "sglang", 3, 77) == expected
    assert _report.report_path(tmp_path / "cov.json", "vllm", None, 77, 2) == tmp_path / "cov-vllm-pid77-2.json"


def test_report_rank_from_environment(plugin_env, tmp_path):
    plugin_env.setenv("RANK", "5")
    plugin_env.setenv("GRAPHTUNE_COVERAGE_OUT", str(tmp_path / "run" / "cov.json"))
    module = install_fake_vllm(plugin_env, sizes=[TUNED_N])
    vllm_plugin.register()
    launch(TUNED_N)
    module.GPUModelRunner().capture_model()
    path = tmp_path / "run" / f"cov-vllm-rank5-pid{os.getpid()}.json"
    assert json.loads(path.read_text())["rank"] == 5


def test_report_write_failure_is_logged_and_not_claimed(plugin_env, tmp_path, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    plugin_env.setenv("GRAPHTUNE_COVERAGE_OUT", str(blocker / "sub"))
    module = install_fake_vllm(plugin_env, sizes=[TUNED_N])
    vllm_plugin.register()
    launch(TUNED_N)
    assert module.GPUModelRunner().capture_model() == 1234     # the engine carries on
    (error,) = graphtune_lines(caplog, logging.ERROR)
    assert "could not write the coverage report" in error and str(blocker) in error
    assert not any("wrote coverage report" in r.getMessage() for r in caplog.records)
    assert vllm_plugin._reporter.written == [] and blocker.read_text() == "x"


# --------------------------------------------------------------------------------------------------- SGLang


HOOK_REGISTRY = """
import enum

class HookType(enum.Enum):
    BEFORE = "before"
    AFTER = "after"
    AROUND = "around"
    REPLACE = "replace"

class HookRegistry:
    # the part of sglang 0.5.23's registry the plugin uses: register(target, hook, type), then
    # apply_hooks() resolves the dotted target and installs hook(original_fn, *args, **kwargs)
    hooks = []

    @classmethod
    def register(cls, target, hook, hook_type=HookType.AFTER):
        cls.hooks.append((target, hook, hook_type))

    @classmethod
    def apply_hooks(cls):
        import functools, importlib
        for target, hook, hook_type in cls.hooks:
            assert hook_type is HookType.AROUND
            module_name, owner_name, attr = target.rsplit(".", 2)
            owner = getattr(importlib.import_module(module_name), owner_name)
            original = getattr(owner, attr)
            def wrapper(*args, _original=original, _hook=hook, **kwargs):
                return _hook(_original, *args, **kwargs)
            setattr(owner, attr, functools.wraps(original)(wrapper))
"""

SGLANG_MODEL_RUNNER = """
class ModelRunner:
    # mimics sglang 0.5.23: init_cuda_graphs captures every runner of one model
    def init_cuda_graphs(self, capture_decode_cuda_graph: bool = True):
        capture_sizes(SIZES)

    def init_decode_cuda_graph(self):
        capture_sizes(SIZES)
"""

SGLANG_SCHEDULER = """
from sglang.srt.model_executor.model_runner import ModelRunner

class Scheduler:
    # mimics sglang 0.5.23: the target model's graphs, then the draft model's
    def init_all_cuda_graphs(self):
        ModelRunner().init_cuda_graphs()
        ModelRunner().init_cuda_graphs(capture_decode_cuda_graph=False)
"""


def install_fake_sglang(monkeypatch, *, registry: bool = True, sizes=(TUNED_N, MISSED_N)) -> None:
    for name in ("sglang", "sglang.srt", "sglang.srt.model_executor", "sglang.srt.managers", "sglang.srt.plugins"):
        fake_module(monkeypatch, name)
    fake_module(monkeypatch, "sglang.srt.model_executor.model_runner", SGLANG_MODEL_RUNNER,
                capture_sizes=capture_sizes, SIZES=list(sizes))
    fake_module(monkeypatch, "sglang.srt.managers.scheduler", SGLANG_SCHEDULER)
    if registry:
        fake_module(monkeypatch, "sglang.srt.plugins.hook_registry", HOOK_REGISTRY)


def test_sglang_around_hooks_report_once_per_outer_capture(plugin_env, out_dir, caplog):
    install_fake_sglang(plugin_env)
    sglang_plugin.register()
    registry = sys.modules["sglang.srt.plugins.hook_registry"]
    assert [(t, h.__name__, k.name) for t, h, k in registry.HookRegistry.hooks] == [
        (t.dotted, "around", "AROUND") for t in sglang_plugin.CAPTURE_TARGETS]
    registry.HookRegistry.apply_hooks()        # what sglang's load_plugins does after running the plugins
    launch(TUNED_N)
    with pytest.warns(RuntimeWarning, match="_plugin_stock_kernel"):
        sys.modules["sglang.srt.managers.scheduler"].Scheduler().init_all_cuda_graphs()
    (doc,) = reports(out_dir)
    assert doc["engine"] == "sglang" and doc["event"]["after"].endswith("Scheduler.init_all_cuda_graphs")
    assert sglang_plugin._reporter.reports == 1     # target + draft captures inside: one report
    (kernel,) = [k for k in doc["coverage"]["kernels"] if k["name"] == "_plugin_stock_kernel"]
    assert [m["key"][0] for m in kernel["misses"]] == [MISSED_N]
    # a later decode capture (prefill-to-decode role switch) reports again, into the same file
    sys.modules["sglang.srt.model_executor.model_runner"].ModelRunner().init_decode_cuda_graph()
    (doc,) = reports(out_dir)
    assert doc["event"]["report"] == 2 and doc["event"]["after"].endswith("ModelRunner.init_decode_cuda_graph")


def test_sglang_without_hook_registry_wraps_directly(plugin_env, out_dir):
    install_fake_sglang(plugin_env, registry=False, sizes=[TUNED_N])
    sglang_plugin.register()
    launch(TUNED_N)
    sys.modules["sglang.srt.managers.scheduler"].Scheduler().init_all_cuda_graphs()
    (doc,) = reports(out_dir)
    assert doc["summary"]["missed_keys"] == 0 and sglang_plugin._reporter.reports == 1


def test_sglang_missing_targets_log_one_line_and_still_apply(plugin_env, caplog):
    for name in ("sglang", "sglang.srt", "sglang.srt.managers"):
        fake_module(plugin_env, name)
    fake_module(plugin_env, "sglang.srt.managers.scheduler", "class Scheduler:\n    pass\n")
    sglang_plugin.register()
    (line,) = graphtune_lines(caplog)
    assert "Scheduler.init_all_cuda_graphs (no Scheduler.init_all_cuda_graphs)" in line
    assert "ModelRunner.init_cuda_graphs" in line and graphtune.patch.is_patched()


# ------------------------------------------------------------------------------------------------- logging


def test_graphtune_lines_go_where_vllm_lines_go():
    from graphtune.plugins._setup import share_engine_handlers
    ours, theirs = logging.getLogger("graphtune"), logging.getLogger("vllm")
    saved = (list(ours.handlers), ours.propagate, ours.level, list(theirs.handlers))
    handler = logging.NullHandler()
    try:
        ours.handlers.clear()
        theirs.addHandler(handler)
        share_engine_handlers("vllm")
        assert ours.handlers == [handler] and ours.propagate is False
        assert ours.getEffectiveLevel() == theirs.getEffectiveLevel()
    finally:
        ours.handlers[:] = saved[0]
        ours.propagate, theirs.handlers[:] = saved[1], saved[3]
        ours.setLevel(saved[2])


# ------------------------------------------------------------- the engines' real plugin loaders (opt-in)
# PLUGIN_ENGINE_SOURCES=<dir> with the two wheels unzipped in it (pip download --no-deps --only-binary=:all:
# vllm==0.34.0 sglang==0.5.23, then unzip each into <dir>/vllm and <dir>/sglang): the loaders' own files run
# against the fake capture classes above. Never in CI (the engines are not installed there).

ENGINE_SOURCES = os.environ.get("PLUGIN_ENGINE_SOURCES", "")
needs_sources = pytest.mark.skipif(not ENGINE_SOURCES, reason="PLUGIN_ENGINE_SOURCES (unzipped engine wheels) not set")


def _our_entry_points(group: str) -> list[importlib.metadata.EntryPoint]:
    name, value = ENTRY_POINTS[group]
    return [importlib.metadata.EntryPoint(name, value, group)]


def _load_file(monkeypatch, name: str, path: Path, package: bool = False) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(
        name, path / "__init__.py" if package else path, submodule_search_locations=[str(path)] if package else None)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


@needs_sources
def test_real_vllm_load_general_plugins(plugin_env, out_dir):
    root = Path(ENGINE_SOURCES) / "vllm" / "vllm"
    install_fake_vllm(plugin_env)
    fake_module(plugin_env, "vllm.envs", "VLLM_PLUGINS = None\n")
    plugins = _load_file(plugin_env, "vllm.plugins", root / "plugins", package=True)
    plugin_env.setattr(importlib.metadata, "entry_points", lambda group: _our_entry_points(group))
    plugins.load_general_plugins()
    launch(TUNED_N)
    with pytest.warns(RuntimeWarning, match="_plugin_stock_kernel"):
        sys.modules["vllm.v1.worker.gpu.model_runner"].GPUModelRunner().capture_model()
    (doc,) = reports(out_dir)
    assert doc["summary"]["missed_keys"] == 1


@needs_sources
def test_real_sglang_load_plugins_and_hook_registry(plugin_env, out_dir):
    root = Path(ENGINE_SOURCES) / "sglang" / "sglang" / "srt"
    install_fake_sglang(plugin_env, registry=False)
    fake_module(plugin_env, "sglang.srt.environ", """
        class _Var:
            def get(self):
                return ""
        class envs:
            SGLANG_PLUGINS = _Var()
            SGLANG_PLATFORM = _Var()
    """)
    plugins = _load_file(plugin_env, "sglang.srt.plugins", root / "plugins", package=True)
    plugin_env.setattr(plugins, "entry_points", lambda group: _our_entry_points(group))
    registry = sys.modules["sglang.srt.plugins.hook_registry"].HookRegistry
    registry.reset()
    plugins.load_plugins()      # runs our register, then the real HookRegistry.apply_hooks()
    assert sorted(registry._patched) == sorted(t.dotted for t in sglang_plugin.CAPTURE_TARGETS)
    launch(TUNED_N)
    with pytest.warns(RuntimeWarning, match="_plugin_stock_kernel"):
        sys.modules["sglang.srt.managers.scheduler"].Scheduler().init_all_cuda_graphs()
    (doc,) = reports(out_dir)
    assert doc["summary"]["missed_keys"] == 1 and sglang_plugin._reporter.reports == 1
    registry.reset()
