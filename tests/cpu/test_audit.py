"""graphtune audit: the static audit of autotuned kernels, over the corpus in tests/cpu/audit_corpus."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from graphtune.audit import AuditReport, KernelAudit, audit_paths, audit_source
from graphtune.cli import main

CORPUS = Path(__file__).parent / "audit_corpus"
# The files at the top of the corpus (the engine package below it has its own tests).
ROOT_FILES = sorted(CORPUS.glob("*.py"))

TUNES = "tunes-at-runtime"
SAFE = "capture-safe"
DYN = "dynamic-configs"
ONE = "single-config"
INPLACE = "in-place-without-restore"
UNKNOWN = "unknown-key"
FIRST = "tunes-on-first-call"

# (file, kernel name, n_configs, hazard codes in report order, wrapper)
EXPECTED = [
    ("spellings.py", "plain_kernel", 2, (TUNES,), "triton"),
    ("spellings.py", "alias_module_kernel", 2, (TUNES,), "triton"),
    ("spellings.py", "alias_function_kernel", 2, (TUNES,), "triton"),
    ("spellings.py", "dotted_kernel", 2, (TUNES,), "triton"),
    ("spellings.py", "submodule_kernel", 2, (TUNES,), "triton"),
    ("spellings.py", "heuristics_outside_kernel", 2, (TUNES,), "triton"),
    ("spellings.py", "heuristics_inside_kernel", 2, (TUNES,), "triton"),
    ("spellings.py", "applied_kernel", 2, (TUNES,), "triton"),
    ("spellings.py", "applied_alias_kernel", 2, (TUNES,), "triton"),
    ("spellings.py", "applied_stack_kernel", 2, (TUNES,), "triton"),
    ("spellings.py", "graphtune_kernel", 2, (SAFE,), "graphtune"),
    ("spellings.py", "graphtune_alias_kernel", 2, (SAFE,), "graphtune"),
    ("spellings.py", "graphtune_function_kernel", 2, (SAFE,), "graphtune"),
    ("configs.py", "literal_list", 3, (TUNES,), "triton"),
    ("configs.py", "nested_comprehension", 30, (TUNES,), "triton"),
    ("configs.py", "concatenated", 32, (TUNES,), "triton"),
    ("configs.py", "arithmetic", 3, (TUNES,), "triton"),
    ("configs.py", "positional_config", 1, (ONE,), "triton"),
    ("configs.py", "helper_literal", 6, (TUNES,), "triton"),
    ("configs.py", "env_dynamic", 1, (ONE,), "triton"),  # os.environ.get's default: one config
    ("configs.py", "loop_dynamic", None, (TUNES, DYN), "triton"),
    ("configs.py", "rebound_dynamic", None, (TUNES, DYN), "triton"),
    ("configs.py", "huge_dynamic", None, (TUNES, DYN), "triton"),
    ("configs.py", "pruned", 3, (TUNES,), "triton"),
    ("hazards.py", "runtime_tuner", 2, (TUNES,), "triton"),
    ("hazards.py", "misspelled_key", 2, (TUNES, UNKNOWN), "triton"),
    ("hazards.py", "in_place_direct", 2, (TUNES, INPLACE), "triton"),
    ("hazards.py", "in_place_through_locals", 2, (TUNES, INPLACE), "triton"),
    ("hazards.py", "in_place_restored", 2, (TUNES,), "triton"),
    ("hazards.py", "atomic_accumulate", 2, (TUNES, INPLACE), "triton"),
    ("hazards.py", "atomic_reset", 2, (TUNES,), "triton"),
    ("hazards.py", "block_pointer_in_place", 2, (TUNES, INPLACE), "triton"),
    ("hazards.py", "single", 1, (ONE,), "triton"),
    ("hazards.py", "empty_key", 2, (FIRST,), "triton"),
    ("hazards.py", "dynamic_triton", None, (TUNES, DYN), "triton"),
    ("hazards.py", "graphtune_tuned", 2, (SAFE, INPLACE), "graphtune"),
    ("hazards.py", "graphtune_dynamic", None, (SAFE, DYN), "graphtune"),
]


def _line_of(file: str, name: str) -> int:
    """Where the corpus defines ``name``: its ``def`` line, or the assignment that applies the decorators."""
    pattern = re.compile(rf"^(def {name}\(|{name} = )")
    lines = (CORPUS / file).read_text().splitlines()
    hits = [i + 1 for i, text in enumerate(lines) if pattern.match(text)]
    assert len(hits) == 1, (file, name, hits)
    return hits[0]


@pytest.fixture(scope="module")
def corpus() -> AuditReport:
    return audit_paths(ROOT_FILES)


@pytest.fixture(scope="module")
def by_name(corpus: AuditReport) -> dict[str, KernelAudit]:
    return {k.name: k for k in corpus.kernels}


# ------------------------------------------------------------------------------------------- discovery


def test_finds_exactly_the_corpus_kernels(corpus: AuditReport):
    found = sorted((Path(k.file).name, k.name) for k in corpus.kernels)
    assert found == sorted((file, name) for file, name, *_ in EXPECTED)
    # Not kernels: plain @triton.jit, an unapplied decorator factory, a local function called autotune.
    assert not {"jit_only", "unused_factory", "not_triton", "applied_body", "applied_jitted"} & {
        k.name for k in corpus.kernels}


@pytest.mark.parametrize("file,name,n_configs,codes,wrapper", EXPECTED, ids=[e[1] for e in EXPECTED])
def test_kernel_findings(by_name, file, name, n_configs, codes, wrapper):
    kernel = by_name[name]
    assert Path(kernel.file).name == file
    assert kernel.line == _line_of(file, name)
    assert kernel.n_configs == n_configs
    assert kernel.configs == ("dynamic" if n_configs is None else "static")
    assert kernel.wrapper_name.endswith(".autotune")  # as resolved: triton.runtime.autotuner.autotune stays so
    assert kernel.codes == codes
    assert kernel.wrapper == wrapper


def test_corpus_summary(corpus: AuditReport):
    assert corpus.files_scanned == 5  # conftest.py, the three corpora and the broken file
    assert [(Path(f.file).name, f.error) for f in corpus.files_failed] == [
        ("broken_syntax.py", "SyntaxError: '(' was never closed (line 4)")]
    assert corpus.by_hazard == {TUNES: 28, SAFE: 5, DYN: 5, ONE: 3, INPLACE: 5, UNKNOWN: 1, FIRST: 1}
    # no launches in these files: every key binding is unknown, so every tunes-at-runtime is a hazard
    assert corpus.hazards_by_code == {TUNES: 28, INPLACE: 5, UNKNOWN: 1}
    assert corpus.n_hazards == 28 + 5 + 1


def test_fields_of_stacked_and_applied_kernels(by_name):
    outside = by_name["heuristics_outside_kernel"]
    assert outside.params == ("x_ptr", "n", "BLOCK", "EVEN")
    assert outside.key == ("n",)
    assert outside.heuristics == ("EVEN",)
    assert outside.do_not_specialize == ("n",)
    applied = by_name["applied_alias_kernel"]
    assert (applied.function, applied.params, applied.do_not_specialize) == (
        "applied_jitted", ("x_ptr", "n", "BLOCK"), (1,))
    stacked = by_name["applied_stack_kernel"]
    assert (stacked.function, stacked.heuristics, stacked.do_not_specialize) == ("applied_body", ("EVEN",), None)
    assert by_name["plain_kernel"].constexprs == (("BLOCK", (64, 128)),)


@pytest.mark.parametrize("name,warps,stages,constexprs", [
    ("literal_list", (4, 8), (3, 5), {"BLOCK": (64, 128, 256)}),
    ("nested_comprehension", (4, 8), (2, 3), {"BLOCK_M": (32, 64, 128), "BLOCK_N": (16, 32, 48, 64)}),
    ("concatenated", (1, 2, 4, 8), (1, 2, 3), {"BLOCK_M": (8, 16, 32, 64, 128), "BLOCK_N": (8, 16, 32, 48, 64)}),
    ("arithmetic", (1, 2, 8), (3,), {"BLOCK": (32, 128, 512)}),
    ("positional_config", (2,), (1,), {"BLOCK_M": (16,), "BLOCK_N": (16,)}),
    ("helper_literal", (2, 4), (3,), {"BLOCK": (16, 32, 64)}),
    # dynamic lists: the values written in the Config calls are still shown, unknown ones left out
    ("loop_dynamic", (8,), (4,), {}),
    ("env_dynamic", (4,), (3,), {"BLOCK": (64,)}),  # counted with the default of BLOCKS
], ids=lambda v: v if isinstance(v, str) else None)
def test_config_values_seen(by_name, name, warps, stages, constexprs):
    kernel = by_name[name]
    assert (kernel.num_warps, kernel.num_stages, dict(kernel.constexprs)) == (warps, stages, constexprs)


def test_dynamic_reasons_name_the_expression(by_name):
    # through the helper function to the part that is not static
    assert by_name["env_dynamic"].configs_reason is None
    assert by_name["env_dynamic"].configs_env == ("BLOCKS",)
    assert by_name["loop_dynamic"].configs_reason == "looped_helper()"
    assert by_name["rebound_dynamic"].configs_reason == "REBOUND"
    assert "more than 100000 elements" in by_name["huge_dynamic"].configs_reason
    assert by_name["graphtune_dynamic"].configs_reason == "make_configs()"


def test_prune_restore_and_reset_are_reported(by_name):
    assert by_name["pruned"].prune_configs_by.startswith("{'early_config_prune': lambda configs")
    assert by_name["plain_kernel"].prune_configs_by is None
    assert by_name["in_place_restored"].restore_value == ("x_ptr",)
    assert by_name["atomic_reset"].reset_to_zero == ("total_ptr",)
    assert by_name["atomic_reset"].restore_value is None


# ------------------------------------------------------------------------------------------- hazards


def _message(kernel: KernelAudit, code: str) -> str:
    return next(h.message for h in kernel.hazards if h.code == code)


def test_unknown_key_names_only_the_missing_names(by_name):
    message = _message(by_name["misspelled_key"], UNKNOWN)
    assert "['seq_len']" in message and "BLOCK" not in message.split(":")[0]


@pytest.mark.parametrize("name,pointers", [
    ("in_place_direct", "['x_ptr']"),  # the message then names the lines
    ("in_place_through_locals", "['out_ptr']"),  # traced through p = out_ptr + offs; q = p; not in_ptr/start
    ("atomic_accumulate", "['total_ptr']"),
    ("block_pointer_in_place", "['x_ptr']"),
    ("graphtune_tuned", "['x_ptr']"),
])
def test_in_place_names_the_pointer(by_name, name, pointers):
    assert _message(by_name[name], INPLACE).startswith(pointers + " loaded and stored")


def test_severities(corpus: AuditReport):
    severities = {h.code: h.severity for k in corpus.kernels for h in k.hazards}
    assert severities == {TUNES: "hazard", UNKNOWN: "hazard", INPLACE: "hazard",
                          SAFE: "info", ONE: "info", DYN: "info", FIRST: "info"}


CONFIG_HEAD = "import triton\nimport triton.language as tl\nfrom triton import Config as C\n"


@pytest.mark.parametrize("expr,expected", [
    ("[C({'B': b}) for b in range(3)] * 2", 6),
    ("[C({'B': b}, num_warps=w) for b, w in zip([1], [2])]", None),  # zip is not evaluated
    ("[C({'B': 2 ** i}) for i in range(4) if i % 2 == 0 and i != 2]", 1),
    ("[C({'B': b}) for b in SIZES[1:]] + [C({})]", 3),
    ("[C({'B': b, 'S': s}) for b, s in PAIRS if b > s]", 2),
    ("list(BASE) + list(BASE)", 2),
    ("[*BASE, C({'B': 9})]", 2),
    ("[C(kw) for kw in [{'B': 1}, {'B': 2}, {**{'B': 3}, 'S': 1}]]", 3),
    ("[C({'B': b}) for b in range(len(SIZES) * 2 - 1)]", 5),
    ("[C({'B': 1})] if FLAG else []", 1),
    ("get()", None),
    ("[C({'B': b}) for b in range(10 ** 7)]", None),
    ("[C({})] * 10 ** 8", None),
    ("[C({'B': b}) for b in open('x')]", None),
    ("[C({'B': 1 << 400})]", None),
    ("[C({'B': b}) for b in SELF]", None),
], ids=["repeat", "zip", "condition", "slice-plus", "unpack-filter", "list-call", "starred", "dict-merge",
        "len", "ifexp", "call", "huge-range", "huge-repeat", "open", "huge-int", "self-reference"])
def test_static_evaluator(expr, expected):
    source = CONFIG_HEAD + textwrap.dedent(f"""
        SIZES = [16, 32, 64]
        PAIRS = [(64, 2), (32, 3), (2, 8)]
        BASE = [C({{'B': 1}})]
        FLAG = 1 + 1 == 2
        SELF = SELF2
        SELF2 = SELF

        @triton.autotune(configs={expr}, key=["n"])
        @triton.jit
        def k(x_ptr, n, B: tl.constexpr):
            pass
        """)
    (kernel,) = audit_source(source, "inline.py")
    assert kernel.n_configs == expected


def test_key_and_restore_that_are_not_static():
    source = CONFIG_HEAD + textwrap.dedent("""
        KEYS = compute_keys()

        @triton.autotune(configs=[C({}), C({})], key=KEYS, restore_value=names())
        @triton.jit
        def k(x_ptr, n, B: tl.constexpr):
            tl.store(x_ptr, tl.load(x_ptr))
        """)
    (kernel,) = audit_source(source, "inline.py")
    assert (kernel.key, kernel.key_expr, kernel.restore_value) == (None, "KEYS", "names()")
    # An unreadable restore list might cover the pointer: no in-place accusation; the key is assumed non-empty.
    assert kernel.codes == (TUNES,)


def test_relative_import_of_graphtune_inside_its_package(tmp_path):
    package = tmp_path / "graphtune" / "kernels" / "demo"
    package.mkdir(parents=True)
    for directory in (tmp_path / "graphtune", tmp_path / "graphtune" / "kernels", package):
        (directory / "__init__.py").write_text("")
    (package / "kernel.py").write_text(textwrap.dedent("""
        import triton
        from ...tuner import autotune

        @autotune([triton.Config({})], ["n"])
        @triton.jit
        def k(x_ptr, n):
            pass
        """))
    (kernel,) = audit_paths([package / "kernel.py"]).kernels
    assert (kernel.wrapper, kernel.codes) == ("graphtune", (SAFE, ONE))


# ------------------------------------------------------------------------------------------- robustness


@pytest.mark.parametrize("content,error", [
    (b"import triton\nx = 1\x00\n", "contains null bytes"),
    (b"# -*- coding: utf-8 -*-\ns = '\xff\xfe'\n", "SyntaxError: (unicode error)"),
    (b"# -*- coding: no-such-codec -*-\nx = 1\n", "SyntaxError: unknown encoding"),
    (b"def f(:\n", "SyntaxError: invalid syntax"),
    (b"x = (" * 300 + b")" * 300 + b"\n", "SyntaxError"),
], ids=["null-bytes", "bad-utf8", "unknown-codec", "syntax", "nesting"])
def test_unparsable_files_are_reported_not_raised(tmp_path, content, error):
    (tmp_path / "bad.py").write_bytes(b"# @triton.autotune(configs=[], key=[])\n" + content)
    (tmp_path / "good.py").write_text(CONFIG_HEAD + "@triton.autotune(configs=[C({})], key=[])\n"
                                      "@triton.jit\ndef k(x_ptr):\n    pass\n")
    report = audit_paths([tmp_path])
    assert report.files_scanned == 2
    assert [k.name for k in report.kernels] == ["k"]
    (failure,) = report.files_failed
    assert Path(failure.file).name == "bad.py" and error in failure.error


def test_files_that_cannot_hold_a_kernel_are_not_parsed_unless_named(tmp_path):
    (tmp_path / "bad.py").write_bytes(b"def f(:\n")  # broken, but no autotuner in it: skipped in a directory
    report = audit_paths([tmp_path])
    assert (report.files_scanned, report.files_parsed, report.files_failed) == (1, 0, ())
    named = audit_paths([tmp_path / "bad.py"])  # named explicitly: parsed, and its failure reported
    assert [f.error for f in named.files_failed] == ["SyntaxError: invalid syntax (line 1)"]


def test_empty_path_is_an_error_not_the_current_directory():
    with pytest.raises(ValueError, match=r"PATH is empty \(''\)"):
        audit_paths([""])


def test_declared_encoding_is_honoured(tmp_path):
    source = ("# -*- coding: latin-1 -*-\n" + CONFIG_HEAD
              + "# r\xe9sum\xe9\n@triton.autotune(configs=[C({}), C({})], key=['n'])\n@triton.jit\n"
                "def k(x_ptr, n):\n    pass\n").encode("latin-1")
    (tmp_path / "latin.py").write_bytes(source)
    (kernel,) = audit_paths([tmp_path]).kernels
    assert (kernel.line, kernel.codes) == (8, (TUNES,))


def test_audit_never_runs_the_code(tmp_path):
    marker = tmp_path / "ran"
    (tmp_path / "k.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n" + CONFIG_HEAD
        + "@triton.autotune(configs=[C({}), C({})], key=['n'])\n@triton.jit\ndef k(x_ptr, n):\n    pass\n")
    assert len(audit_paths([tmp_path]).kernels) == 1
    assert not marker.exists()


def test_missing_path_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        audit_paths([tmp_path / "nope"])


def _kernel_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CONFIG_HEAD + "@triton.autotune(configs=[C({})], key=[])\n@triton.jit\n"
                                  f"def {path.stem}(x_ptr):\n    pass\n")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_gitignore_is_respected(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("ignored_kernel.py\ngenerated/\n")
    for rel in ("kept_kernel.py", "pkg/nested_kernel.py", "ignored_kernel.py", "generated/gen_kernel.py",
                ".venv/lib/venv_kernel.py", "build/build_kernel.py"):
        _kernel_file(repo / rel)
    subprocess.run(["git", "-C", str(repo), "add", "pkg/nested_kernel.py"], check=True)  # tracked and untracked
    names = {k.name for k in audit_paths([repo]).kernels}
    assert names == {"kept_kernel", "nested_kernel"}
    # Named explicitly, an ignored file or directory is audited.
    assert {k.name for k in audit_paths([repo / "ignored_kernel.py"]).kernels} == {"ignored_kernel"}
    assert {k.name for k in audit_paths([repo / "generated"]).kernels} == {"gen_kernel"}


def test_walk_outside_git_skips_environments_and_build_dirs(tmp_path):
    for rel in ("a_kernel.py", "sub/b_kernel.py", ".venv/v_kernel.py", "venv/w_kernel.py", "build/x_kernel.py",
                "__pycache__/y_kernel.py", "node_modules/z_kernel.py", ".git/g_kernel.py"):
        _kernel_file(tmp_path / rel)
    (tmp_path / "notes.txt").write_text("@triton.autotune")
    report = audit_paths([tmp_path, tmp_path / "sub"])  # the second path overlaps: no duplicates
    assert sorted(k.name for k in report.kernels) == ["a_kernel", "b_kernel"]
    assert report.files_scanned == 2


def _unlistable(monkeypatch, *locked: Path) -> None:
    """Directories os.walk cannot list, as after chmod 000 for a user who is not root (tests run as root,
    whom chmod does not stop): os.scandir raises PermissionError for them."""
    import os
    real = os.scandir

    def scandir(path="."):
        if Path(path).resolve() in {p.resolve() for p in locked}:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)
    monkeypatch.setattr(os, "scandir", scandir)


def test_unreadable_directories_are_failures_not_skipped(tmp_path, monkeypatch, capsys):
    """os.walk skipped a directory it could not list without a word: "0 kernels in 0 files" and exit 0
    under --fail-on unparsed, a CI gate passing on a tree the audit never read."""
    _kernel_file(tmp_path / "a_kernel.py")
    _kernel_file(tmp_path / "locked" / "b_kernel.py")
    _unlistable(monkeypatch, tmp_path / "locked")
    report = audit_paths([tmp_path])
    assert [k.name for k in report.kernels] == ["a_kernel"]
    assert [(f.file, f.error) for f in report.files_failed] == [
        (str(tmp_path / "locked"), "cannot list directory: Permission denied")]
    assert main(["audit", str(tmp_path), "--fail-on", "unparsed"]) == 1
    assert f"{tmp_path / 'locked'}: cannot list directory" in capsys.readouterr().out
    # the directory named on the command line itself
    assert main(["audit", str(tmp_path / "locked"), "--fail-on", "unparsed"]) == 1
    assert main(["audit", str(tmp_path / "locked")]) == 0   # --fail-on never: reported, not failed


# ------------------------------------------------------------------------------------------- CLI


def test_cli_json_schema(capsys):
    assert main(["audit", *map(str, ROOT_FILES), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"kernels", "summary"}
    assert len(data["kernels"]) == len(EXPECTED)
    required = {"file": str, "line": int, "name": str, "params": list, "key": list, "hazards": list,
                "wrapper": str, "num_warps": list, "num_stages": list, "constexprs": dict}
    for kernel in data["kernels"]:
        for field, kind in required.items():
            assert isinstance(kernel[field], kind), (kernel["name"], field)
        assert kernel["n_configs"] is None or isinstance(kernel["n_configs"], int)
        for hazard in kernel["hazards"]:
            assert set(hazard) == {"code", "severity", "message"} and hazard["severity"] in ("hazard", "info")
    summary = data["summary"]
    assert summary["files_scanned"] == 5 and summary["kernels"] == len(EXPECTED)
    assert [set(f) for f in summary["files_failed"]] == [{"file", "error"}]
    assert summary["by_hazard"][TUNES] == 28 and summary["hazards_by_code"][TUNES] == 28
    assert summary["files_parsed"] == 4   # the fifth, broken_syntax.py, is in files_failed
    new = {"wrapper_name": str, "keys": list, "call_sites": list, "in_place": list, "configs_env": list}
    for kernel in data["kernels"]:
        for field, kind in new.items():
            assert isinstance(kernel[field], kind), (kernel["name"], field)
        assert "wrapper_defined_at" in kernel and "triton_via" in kernel
        for binding in kernel["keys"]:
            assert set(binding) == {"name", "binding", "evidence"} and binding["binding"] in ("batch", "model",
                                                                                               "unknown")
    nested = next(k for k in data["kernels"] if k["name"] == "nested_comprehension")
    assert (nested["n_configs"], nested["key"], nested["constexprs"]["BLOCK_M"]) == (30, ["m", "n"], [32, 64, 128])
    env = next(k for k in data["kernels"] if k["name"] == "env_dynamic")
    assert (env["n_configs"], env["configs"], env["configs_env"]) == (1, "static", ["BLOCKS"])
    dynamic = next(k for k in data["kernels"] if k["name"] == "loop_dynamic")
    assert (dynamic["n_configs"], dynamic["configs"]) == (None, "dynamic")


@pytest.mark.parametrize("files,fail_on,code", [
    (["hazards.py"], ["--fail-on", "hazard"], 1),
    (["hazards.py"], [], 0),
    (["hazards.py"], ["--fail-on", "unparsed"], 0),
    (["spellings.py"], ["--fail-on", "hazard"], 1),
    (["conftest.py"], ["--fail-on", "hazard"], 0),
    # a file that could not be parsed may hide hazards: --fail-on hazard fails on it, so does unparsed
    (["conftest.py", "broken_syntax.py"], ["--fail-on", "hazard"], 1),
    (["broken_syntax.py"], ["--fail-on", "unparsed"], 1),
    (["broken_syntax.py"], ["--fail-on", "never"], 0),
], ids=["hazards-fail", "hazards-no-fail-on", "hazards-unparsed-only", "spellings-fail", "clean",
        "clean-and-broken", "broken-unparsed", "broken-never"])
def test_cli_fail_on_exit_codes(capsys, files, fail_on, code):
    assert main(["audit", *(str(CORPUS / f) for f in files), *fail_on]) == code


def test_cli_fail_on_ignores_informational_findings(tmp_path, capsys):
    (tmp_path / "safe.py").write_text((CORPUS / "hazards.py").read_text().split("@triton.autotune")[0]
                                      + "@graphtune.autotune(configs=CONFIGS, key=['n'])\n@triton.jit\n"
                                        "def k(x_ptr, n):\n    pass\n")
    assert main(["audit", str(tmp_path), "--fail-on", "hazard"]) == 0
    assert "capture-safe" in capsys.readouterr().out


def test_cli_text_output(capsys):
    assert main(["audit", str(CORPUS / "hazards.py"), str(CORPUS / "broken_syntax.py")]) == 0
    out = capsys.readouterr().out
    assert "misspelled_key" in out and "['seq_len']" in out
    assert "not parsed" in out and "broken_syntax.py" in out
    # (the files that hold kernels, then the files read: the count "13 kernels in 2 files" read as the first)
    assert "13 kernels in 1 files; 2 files scanned (1 parsed, 1 failed to parse); 15 hazards: " in out


def test_a_broken_file_is_counted_once(capsys):
    """One broken file was reported as "1 parsed, 1 failed to parse"."""
    report = audit_paths([CORPUS / "broken_syntax.py"])
    assert (report.files_scanned, report.files_parsed, len(report.files_failed)) == (1, 0, 1)
    assert main(["audit", str(CORPUS / "broken_syntax.py")]) == 0
    assert "0 kernels in 0 files; 1 files scanned (0 parsed, 1 failed to parse)" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--compile"], ["--target", "sm_120"]], ids=["compile-no-target", "target-only"])
def test_cli_compile_needs_both_flags(capsys, argv):
    assert main(["audit", str(CORPUS / "hazards.py"), *argv]) == 2
    assert "--target" in capsys.readouterr().err


def test_cli_missing_path(capsys, tmp_path):
    assert main(["audit", str(tmp_path / "absent")]) == 2


def test_cli_empty_path_is_one_line(capsys):
    assert main(["audit", ""]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["graphtune: error: audit: PATH is empty (''); name a file or directory"]


# ------------------------------------------------------------------------------------------- --compile

COMPILE_SOURCE = """
import triton
import triton.language as tl

CONFIGS = [triton.Config({"BLOCK": 64}, num_warps=4), triton.Config({"BLOCK": 256}, num_warps=64)]


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def signed(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


signed.graphtune_signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def unsigned(x_ptr, n, BLOCK: tl.constexpr):
    pass
"""


def _compile_tree(tmp_path: Path) -> Path:
    (tmp_path / "kernels.py").write_text(COMPILE_SOURCE)
    (tmp_path / "broken_import.py").write_text(
        "import triton\nimport no_such_module_for_audit\n"
        "@triton.autotune(configs=[], key=[])\n@triton.jit\ndef lost(x_ptr):\n    pass\n")
    return tmp_path


def test_compile_with_an_injected_inspector(tmp_path):
    """The per-file import guard, the signature rule and the does-not-fit message, with a stand-in inspector."""
    calls = []

    class Row:
        def __init__(self, config, fits, reason):
            self.config, self.fits, self.reason = config, fits, reason

    def inspector(kernel, *, target, signature=None, constexprs=None, configs=None):
        calls.append((target, signature))
        return [Row(c, c.num_warps <= 32, f"needs {c.num_warps * 32} threads") for c in kernel.configs]

    report = audit_paths([_compile_tree(tmp_path)], compile_target="sm_120", inspector=inspector)
    by_name = {k.name: k for k in report.kernels}
    assert calls == [("sm_120", {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"})]
    assert _message(by_name["signed"], "does-not-fit") == (
        "1 of 2 configs do not fit sm_120: BLOCK=256,num_warps=64,num_stages=3: needs 2048 threads")
    assert _message(by_name["unsigned"], "compile-skipped") == "needs a signature, skipped"
    assert _message(by_name["lost"], "compile-skipped").startswith("import failed: ModuleNotFoundError")
    assert [Path(f.file).name for f in report.compile_errors] == ["broken_import.py"]
    # (a stock kernel without a signature, engines' every kernel, was skipped with an info note alone: the summary
    # counts what the check inspected, session 31)
    assert report.compile_checked == 1 and report.to_dict()["summary"]["compile_checked"] == 1
    assert audit_paths([tmp_path]).compile_checked is None


def _resources_usable() -> str | None:
    try:
        from graphtune import resources
        resources.get_target("sm_120")
    except Exception as exc:  # noqa: BLE001 - any failure means the real path cannot be tested here
        return f"graphtune.resources is not usable: {type(exc).__name__}: {exc}"
    return None


@pytest.mark.skipif(_resources_usable() is not None, reason=str(_resources_usable()))
def test_compile_with_graphtune_resources(tmp_path, capsys):
    code = main(["audit", str(_compile_tree(tmp_path)), "--compile", "--target", "sm_120", "--json"])
    data = json.loads(capsys.readouterr().out)
    by_name = {k["name"]: k for k in data["kernels"]}
    misfit = next(h for h in by_name["signed"]["hazards"] if h["code"] == "does-not-fit")
    assert misfit["severity"] == "hazard"
    assert "num_warps=64" in misfit["message"] and "1024" in misfit["message"]
    assert "num_warps=4," not in misfit["message"]
    assert data["summary"]["compile_target"] == "sm_120" and data["summary"]["compile_checked"] == 1
    assert code == 0
    main(["audit", str(tmp_path), "--compile", "--target", "sm_120"])
    assert "--compile sm_120: 1 of 3 kernels checked" in capsys.readouterr().out


@pytest.mark.parametrize("fail_on,code", [("hazard", 1), ("unparsed", 1), ("never", 0)])
def test_compile_fail_on_counts_a_module_that_did_not_import(tmp_path, capsys, fail_on, code):
    """A module --compile could not import was never checked against the target (it may hold configs that do
    not fit): like a file that could not be parsed it fails --fail-on unparsed and hazard; it exited 0."""
    if _resources_usable() is not None:
        pytest.skip(str(_resources_usable()))
    (tmp_path / "raising.py").write_text("import triton\nraise RuntimeError('boom at import')\n"
                                         "@triton.autotune(configs=[], key=[])\n@triton.jit\ndef k(x_ptr):\n"
                                         "    pass\n")
    argv = ["audit", str(tmp_path / "raising.py"), "--compile", "--target", "sm_90", "--fail-on", fail_on]
    assert main(argv) == code
    assert "not imported" in capsys.readouterr().out


def test_compile_unknown_target_is_an_error(tmp_path, capsys):
    if _resources_usable() is not None:
        pytest.skip(str(_resources_usable()))
    assert main(["audit", str(_compile_tree(tmp_path)), "--compile", "--target", "sm_7"]) == 2


# ------------------------------------------------------------------------------------------- real-engine shapes
# tests/cpu/audit_corpus/engine reproduces, in small files, each way the audit went wrong on engine code:
# triton imported through a module of the engine, wrappers of triton's Autotuner, keys bound to the batch
# or to the model at the launch, config lists from environment variables, and in-place look-alikes.

ENGINE = CORPUS / "engine"
BATCH, MODEL, UNSURE = "batch", "model", "unknown"


@pytest.fixture(scope="module")
def engine() -> dict[str, KernelAudit]:
    report = audit_paths([ENGINE])
    assert report.files_failed == ()
    return {k.name: k for k in report.kernels}


def _severities(kernel: KernelAudit) -> tuple[tuple[str, str], ...]:
    return tuple((h.code, h.severity) for h in kernel.hazards)


# name -> (wrapper, wrapper_name, n_configs, configs, findings with severity)
ENGINE_EXPECTED = {
    "reexport_kernel": ("triton", "triton.autotune", 2, "static", ((TUNES, "hazard"),)),
    "model_keyed": ("triton", "triton.autotune", 2, "static", ((TUNES, "info"),)),
    "bucket_keyed": ("triton", "triton.autotune", 2, "static", ((TUNES, "hazard"),)),
    "never_launched": ("triton", "triton.autotune", 2, "static", ((TUNES, "hazard"),)),
    "cache_wrapped": ("triton", "engine.cache.engine_cache_autotune", 2, "static", ((TUNES, "info"),)),
    "plain_wrapped": ("triton", "engine.cache.tokens_tuner", 2, "static", ((TUNES, "hazard"),)),
    "unknown_wrapped": ("unknown", "vendor.tuning.my_autotune", None, "unknown", (("unknown-autotuner", "hazard"),)),
    "applied_cached": ("triton", "engine.cache.CachingAutotuner", 2, "static", ((TUNES, "hazard"),)),
    "make_kernel()": ("triton", "triton.autotune", 2, "static", ((TUNES, "hazard"),)),
    # a cached function returning triton.autotune(...)(plain.plain_body): the body is read in engine/plain.py
    "cached_kernel()": ("triton", "triton.autotune", 2, "static", ((TUNES, "hazard"), (INPLACE, "hazard"))),
    "alias_launched": ("triton", "triton.autotune", 2, "static", ((TUNES, "hazard"),)),
    "helper_launched": ("triton", "triton.autotune", 2, "static", ((TUNES, "hazard"),)),
    "env_single": ("triton", "triton.autotune", 1, "static", ((ONE, "info"),)),
    "env_list": ("triton", "triton.autotune", 2, "static", ((TUNES, "hazard"),)),
    "env_required": ("triton", "triton.autotune", None, "dynamic", ((TUNES, "hazard"), (DYN, "info"))),
    "pointer_reuse": ("triton", "triton.autotune", 2, "static", ((TUNES, "hazard"),)),
    "integer_offsets": ("triton", "triton.autotune", 2, "static", ((TUNES, "hazard"),)),
    "store_before_load": ("triton", "triton.autotune", 2, "static", ((TUNES, "hazard"),)),
    "branch_writes_or_reads": ("triton", "triton.autotune", 2, "static", ((TUNES, "hazard"),)),
    "in_place_prefix_sum": ("triton", "triton.autotune", 2, "static", ((TUNES, "hazard"), (INPLACE, "hazard"))),
    "in_place_accumulate": ("triton", "triton.autotune", 2, "static", ((TUNES, "hazard"), (INPLACE, "hazard"))),
    "disjoint_rows": ("triton", "triton.autotune", 2, "static", ((TUNES, "hazard"),)),
    "overlapping_rows": ("triton", "triton.autotune", 2, "static", ((TUNES, "hazard"), (INPLACE, "hazard"))),
}


def test_engine_every_kernel_found(engine):
    """Re-exported triton, an Autotuner subclass, factories (one not named autotune), a function returning a
    kernel and an unknown *autotune* decorator: all found, nothing else."""
    assert sorted(engine) == sorted(ENGINE_EXPECTED)


@pytest.mark.parametrize("name", sorted(ENGINE_EXPECTED))
def test_engine_kernel_classification(engine, name):
    wrapper, wrapper_name, n_configs, configs, findings = ENGINE_EXPECTED[name]
    kernel = engine[name]
    assert (kernel.wrapper, kernel.wrapper_name, kernel.n_configs, kernel.configs) == (
        wrapper, wrapper_name, n_configs, configs)
    assert _severities(kernel) == findings


def test_engine_kernel_body_in_another_module(engine):
    kernel = engine["cached_kernel()"]
    assert (kernel.function, kernel.params) == ("plain.plain_body", ("x_ptr", "rows", "BLOCK"))
    lines = (ENGINE / "plain.py").read_text().splitlines()
    (store,) = [i + 1 for i, s in enumerate(lines) if "tl.store(" in s]
    assert [(f.param, f.loads, f.stores) for f in kernel.in_place] == [("x_ptr", (store,), (store,))]


def test_engine_triton_through_a_reexport_module(engine):
    assert engine["reexport_kernel"].triton_via == "engine.triton_utils"
    # tl.load / tl.store reached through the re-export too: the in-place analysis sees them
    assert [f.param for f in engine["in_place_prefix_sum"].in_place] == ["h"]


def test_engine_wrappers_are_named_with_their_definition(engine):
    def where(kernel: KernelAudit) -> tuple[str, int]:
        file, line = kernel.wrapper_defined_at.rsplit(":", 1)
        return Path(file).name, int(line)
    source = (ENGINE / "cache.py").read_text().splitlines()
    for name, definition in [("cache_wrapped", "def engine_cache_autotune("), ("plain_wrapped", "def tokens_tuner("),
                             ("applied_cached", "class CachingAutotuner(")]:
        file, line = where(engine[name])
        assert file == "cache.py" and source[line - 1].startswith(definition)
    assert engine["reexport_kernel"].wrapper_defined_at is None
    assert engine["unknown_wrapped"].wrapper_defined_at is None
    assert "vendor.tuning.my_autotune" in _message(engine["unknown_wrapped"], "unknown-autotuner")


def _launch_line(text: str) -> int:
    lines = (ENGINE / "kernels.py").read_text().splitlines()
    (line,) = [i + 1 for i, s in enumerate(lines) if s.strip().startswith(text)]
    return line


@pytest.mark.parametrize("kernel,key,binding,launch,decided_by", [
    ("reexport_kernel", "n_tokens", BATCH, "reexport_kernel[grid]", "n_tokens (named for a batch dimension)"),
    ("reexport_kernel", "HEAD_DIM", MODEL, "reexport_kernel[grid]", "x.shape[-1] (an inner dimension)"),
    ("model_keyed", "num_heads", MODEL, "model_keyed[grid]", "self.config.num_heads (an attribute: configuration)"),
    ("model_keyed", "HAS_BIAS", MODEL, "model_keyed[grid]", None),  # bias is not None: a presence flag
    ("bucket_keyed", "SIZE_CLASS", BATCH, "bucket_keyed[grid]", "x.shape[0] (dimension 0: the batch / token "
                                                                 "dimension)"),
    ("bucket_keyed", "D", MODEL, "bucket_keyed[grid]", "x.shape[1] (an inner dimension)"),
    ("cache_wrapped", "D", MODEL, "cache_wrapped[grid]", "x.shape[1] (an inner dimension)"),
    ("alias_launched", "rows", BATCH, "kernel[grid](x, rows", "len(x) (a length)"),  # kernel = alias_launched if ...
])
def test_engine_key_bindings_with_evidence(engine, kernel, key, binding, launch, decided_by):
    (bound,) = [b for b in engine[kernel].keys if b.name == key]
    assert bound.binding == binding
    at = f"{ENGINE / 'kernels.py'}:{_launch_line(launch)}"
    assert any(e.startswith(at + ": ") for e in bound.evidence), bound.evidence
    if decided_by is not None:
        assert any(e.endswith(": " + decided_by) for e in bound.evidence), bound.evidence


def test_engine_launch_through_a_helper(engine):
    """launch_autotuned(kernel, grid, rows=...) launches the kernel it is given: a call site, keywords bound."""
    kernel = engine["helper_launched"]
    assert kernel.call_sites == (f"{ENGINE / 'kernels.py'}:{_launch_line('kernel[grid](x, rows')}",
                                 f"{ENGINE / 'kernels.py'}:{_launch_line('launch_autotuned(helper_launched')}")
    assert [(b.name, b.binding) for b in kernel.keys] == [("rows", BATCH)]


def test_engine_unlaunched_keys(engine):
    # no launch in the tree: unknown (a hazard), unless the name itself says batch
    assert [(b.name, b.binding) for b in engine["never_launched"].keys] == [("D", UNSURE)]
    assert [(b.name, b.binding) for b in engine["plain_wrapped"].keys] == [("n_tokens", BATCH)]
    assert [(b.name, b.binding) for b in engine["applied_cached"].keys] == [("M", BATCH)]
    assert "no launch found" in engine["never_launched"].keys[0].evidence[0]


def test_engine_model_only_keys_are_informational(engine):
    message = _message(engine["model_keyed"], TUNES)
    assert "model dimensions only" in message and "tuned once per model shape; any warm-up covers it" in message
    assert "follows the batch: ['n_tokens']" in _message(engine["reexport_kernel"], TUNES)
    assert engine["reexport_kernel"].call_sites == (f"{ENGINE / 'kernels.py'}:{_launch_line('reexport_kernel[grid]')}",)


def test_engine_env_configs(engine):
    assert engine["env_single"].configs_env == ("ENGINE_BLOCK", "ENGINE_WARPS")
    assert "with the defaults of ENGINE_BLOCK, ENGINE_WARPS" in _message(engine["env_single"], ONE)
    assert (engine["env_list"].configs_env, dict(engine["env_list"].constexprs)) == (("ENGINE_BLOCKS",),
                                                                                     {"BLOCK": (64, 128)})
    # os.environ[...] has no default: that one truly cannot be counted
    assert engine["env_required"].configs_reason == "os.environ['ENGINE_BLOCK']"


@pytest.mark.parametrize("name,expected", [
    ("pointer_reuse", []),  # p_v for v, then for v_new: two pointers
    ("integer_offsets", []),  # start and row_stride are offsets, not pointers
    ("store_before_load", []),  # o is written before it is read back in the same launch
    ("branch_writes_or_reads", []),  # a is written on one branch, read on the other
    ("in_place_prefix_sum", [("h", "b_h += tl.load(p_h)", "tl.store(p_h, b_h)")]),
    ("in_place_accumulate", [("c", "acc += tl.load(c + offs)", "tl.store(c + offs, acc)")]),
    # rows below T - C read (mask o_t < T - C), rows from T - C on written (T - C + arange + pid * BLOCK_C)
    ("disjoint_rows", []),
    # the same with o_t <= T - C: row T - C is read and written
    ("overlapping_rows", [("u", "b_u = tl.load(u + o_t[:, None] * D + o_d[None, :], mask=m_t[:, None], other=0.0)",
                           "tl.store(u + o_r[:, None] * D + o_d[None, :], acc.to(u.dtype.element_ty), "
                           "mask=o_r[:, None] < T)")]),
])
def test_engine_in_place_findings(engine, name, expected):
    lines = (ENGINE / "inplace.py").read_text().splitlines()

    def line_of(text: str) -> int:
        (line,) = [i + 1 for i, s in enumerate(lines) if s.strip() == text]
        return line
    found = [(f.param, f.loads, f.stores) for f in engine[name].in_place]
    assert found == [(param, (line_of(load),), (line_of(store),)) for param, load, store in expected]
    if expected:
        message = _message(engine[name], INPLACE)
        assert f"loaded at line(s) {line_of(expected[0][1])}, stored at {line_of(expected[0][2])}" in message


_REGIONS = """
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"B": 64}), triton.Config({"B": 128})], key=["T"])
@triton.jit
def k(u, T, C, D, B: tl.constexpr):
    rows = tl.arange(0, B) + tl.program_id(0) * B
    o_d = tl.arange(0, B)
    x = tl.load(LOAD)
    tl.store(STORE)
"""
_BELOW = "u + rows[:, None] * D + o_d[None, :], mask=rows[:, None] < C"
_FROM_C = "u + (C + rows)[:, None] * D + o_d[None, :]"


@pytest.mark.parametrize("load,store,in_place", [
    (_BELOW, _FROM_C + ", x", False),
    # the bounded side may be the store, the comparison written either way round
    (_FROM_C, "u + rows[:, None] * D + o_d[None, :], x, mask=(C > rows)[:, None]", False),
    (_BELOW.replace("< C", "< C + 1"), _FROM_C + ", x", True),  # row C read and written
    (_BELOW, "u + (C + rows)[:, None] * T + o_d[None, :], x", True),  # another stride: not one dimension
    ("u + rows, mask=rows < C", "u + C + rows, x", True),  # no stride: other terms may cross rows
    (_BELOW.split(", mask")[0], _FROM_C + ", x", True),  # no mask: every row may be read
], ids=["mask-below", "store-side-mirrored", "off-by-one", "other-stride", "unit-stride", "no-mask"])
def test_in_place_regions_that_cannot_overlap(load, store, in_place):
    """A load and a store through u are an in-place pair unless their regions provably do not overlap: the same
    terms but one index times the same stride, and ranges (from the mask and the index itself) that cannot meet."""
    (kernel,) = audit_source(_REGIONS.replace("LOAD", load).replace("STORE", store), "inline.py")
    assert [f.param for f in kernel.in_place] == (["u"] if in_place else [])


def test_engine_single_file_still_sees_its_package(engine):
    """Named alone, kernels.py still resolves engine.triton_utils and the wrappers in engine/cache.py."""
    report = audit_paths([ENGINE / "kernels.py"])
    alone = {k.name: (k.wrapper, k.wrapper_name, k.codes) for k in report.kernels}
    together = {k: (v.wrapper, v.wrapper_name, v.codes) for k, v in engine.items()
                if Path(v.file).name == "kernels.py"}
    assert alone == together
    assert [Path(f).name for f in [k.file for k in report.kernels]] == ["kernels.py"] * len(alone)


def test_engine_json_carries_the_evidence(capsys):
    assert main(["audit", str(ENGINE), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    kernel = next(k for k in data["kernels"] if k["name"] == "bucket_keyed")
    assert [(b["name"], b["binding"]) for b in kernel["keys"]] == [("SIZE_CLASS", BATCH), ("D", MODEL)]
    assert kernel["triton_via"] == "engine.triton_utils" and kernel["wrapper_name"] == "triton.autotune"
    prefix = next(k for k in data["kernels"] if k["name"] == "in_place_prefix_sum")
    assert [set(f) for f in prefix["in_place"]] == [{"param", "loads", "stores", "atomic"}]
    assert data["summary"]["hazards_by_code"]["unknown-autotuner"] == 1


def test_audit_source_counts_env_defaults():
    source = CONFIG_HEAD + "import os\n" + textwrap.dedent("""
        @triton.autotune(configs=[C({'B': int(os.getenv('B', '32'))}, num_warps=int(os.environ.get('W', '4')))],
                         key=['n'])
        @triton.jit
        def k(x_ptr, n, B: tl.constexpr):
            pass
        """)
    (kernel,) = audit_source(source, "inline.py")
    assert (kernel.n_configs, kernel.configs_env, kernel.codes) == (1, ("B", "W"), (ONE,))
    assert dict(kernel.constexprs) == {"B": (32,)} and kernel.num_warps == (4,)


# ------------------------------------------------------------------------------------------- the table


def _table_lines(capsys, monkeypatch, columns: int | None) -> list[str]:
    if columns is not None:  # a terminal of that width
        monkeypatch.setenv("FORCE_COLOR", "1")
        monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["audit", str(ENGINE)]) == 0
    return re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out).splitlines()


@pytest.mark.parametrize("columns", [None, 60, 400], ids=["piped", "narrow-terminal", "wide-terminal"])
def test_table_never_breaks_a_path(capsys, monkeypatch, columns):
    lines = _table_lines(capsys, monkeypatch, columns)
    report = audit_paths([ENGINE])
    for kernel in report.kernels:
        at = f"{kernel.file}:{kernel.line}"
        rows = [line for line in lines if line.startswith(at + " ") or line.startswith("│ " + at + " ")]
        assert len(rows) == 1, (at, columns)  # whole, on one line, once
        assert kernel.name in rows[0]
    if columns == 60:  # too narrow for the table: one line per kernel, nothing folded
        assert not any("┃" in line for line in lines)
        assert any(line.startswith(f"{ENGINE / 'kernels.py'}:") and "key=n_tokens[batch],HEAD_DIM" in line
                   for line in lines)
    else:
        assert any("file:line" in line and "┃" in line for line in lines)


def test_an_analysis_bug_costs_one_file(tmp_path, monkeypatch):
    from graphtune.audit import in_place as audit_module
    for name in ("a_kernel", "b_kernel"):
        _kernel_file(tmp_path / f"{name}.py")

    def broken(self):
        if self.function.name == "a_kernel":
            raise KeyError("boom")
        return []
    monkeypatch.setattr(audit_module._InPlaceAnalysis, "findings", broken)
    report = audit_paths([tmp_path])
    assert [k.name for k in report.kernels] == ["b_kernel"]
    assert [(Path(f.file).name, f.error) for f in report.files_failed] == [("a_kernel.py",
                                                                            "audit failed: KeyError: 'boom'")]


def test_reexport_outside_the_tree_is_recognised_by_name(tmp_path):
    (tmp_path / "kernels.py").write_text(textwrap.dedent("""
        from otherlib.compat import tl, triton

        class Holder:
            tl = None

        @triton.autotune(configs=[triton.Config({}), triton.Config({})], key=["D"])
        @triton.jit
        def k(x, D, BLOCK: tl.constexpr):
            tl.store(x + tl.arange(0, BLOCK), tl.load(x + tl.arange(0, BLOCK)) + 1)

        def launch(x, holder):
            holder.tl.load(x)  # an attribute named tl is not triton.language
            k[(1,)](x, D=x.shape[-1])
        """))
    (kernel,) = audit_paths([tmp_path]).kernels
    assert (kernel.triton_via, kernel.n_configs) == ("otherlib.compat", 2)
    assert [f.param for f in kernel.in_place] == ["x"]
    assert [(b.name, b.binding) for b in kernel.keys] == [("D", MODEL)]


def test_launch_arguments_after_a_spread_of_known_length():
    source = CONFIG_HEAD + textwrap.dedent("""
        @triton.autotune(configs=[C({}), C({})], key=["D", "n_rows"])
        @triton.jit
        def k(a_ptr, b_ptr, s0, s1, D, n_rows):
            pass

        def launch(a, b, strides_given):
            pair = (a, b)
            k[(1,)](*pair, *((a.stride(0), 0) if strides_given else (0, 0)), a.shape[-1], a.shape[0])

        def launch_unknown(a, rest):
            k[(1,)](a, *rest, a.shape[-1], a.shape[0])
        """)
    (kernel,) = audit_source(source, "inline.py")
    first, second = kernel.call_sites
    bound = {b.name: (b.binding, b.evidence) for b in kernel.keys}
    assert bound["D"][0] == UNSURE and bound["n_rows"][0] == BATCH  # the second launch hides D behind *rest
    assert any(e.startswith(first + ": D=a.shape[-1]") for e in audit_source(
        source.split("def launch_unknown")[0], "inline.py")[0].keys[0].evidence)
    assert any(e == f"{second}: D passed through *rest" for e in bound["D"][1])


def test_launch_keywords_from_a_local_dict_and_dtype_flags():
    source = CONFIG_HEAD + textwrap.dedent("""
        @triton.autotune(configs=[C({}), C({})], key=["D", "BIG", "NT", "HALF"])
        @triton.jit
        def k(x_ptr, D, BIG, NT, HALF):
            pass

        def launch(x, q):
            half = all(t.element_size() == 2 for t in (x, q) if t is not None)
            kwargs = dict(x_ptr=x, D=x.shape[-1], HALF=half)
            kwargs["BIG"] = x.shape[1] > 64
            for nt in range(4):
                kwargs["NT"] = x.shape[0]
                k[(1,)](**kwargs)
        """)
    (kernel,) = audit_source(source, "inline.py")
    assert [(b.name, b.binding) for b in kernel.keys] == [("D", MODEL), ("BIG", MODEL), ("NT", BATCH),
                                                          ("HALF", MODEL)]


def test_arguments_splatted_into_the_autotuner_are_named():
    """``triton.autotune(configs=..., key=..., **cache_kwargs)`` (SGLang's form): the audit reads the keywords it
    sees and says, as an info finding naming the mapping, that what the splat carries (a key, restore_value, ...) is
    not read; before session 31 the splat was dropped without a word."""
    source = textwrap.dedent('''
        import triton
        import triton.language as tl

        cache_kwargs = {"cache_results": True}


        @triton.autotune(configs=[triton.Config({"B": 16}), triton.Config({"B": 32})], key=["n"], **cache_kwargs)
        @triton.jit
        def splatted(x_ptr, n, B: tl.constexpr):
            pass


        @triton.autotune(configs=[triton.Config({"B": 16}), triton.Config({"B": 32})], key=["n"])
        @triton.jit
        def plain(x_ptr, n, B: tl.constexpr):
            pass
        ''')
    by_name = {k.name: k for k in audit_source(source, "splat.py")}
    assert _message(by_name["splatted"], "splatted-arguments").startswith("**cache_kwargs: arguments passed through")
    assert by_name["splatted"].key == ("n", ) and by_name["splatted"].n_configs == 2
    assert not any(h.code == "splatted-arguments" for h in by_name["plain"].hazards)


def test_a_helper_that_picks_configs_by_platform_keeps_its_static_key():
    """vLLM's triton_flash_attention form: ``autotune_configs, autotune_keys = get_autotune_configs()``, the helper
    returning other configs on another platform and the same literal key on both. The key is read (every branch
    agrees on it) and classified at the launch (model constants here: an info finding), the configs stay dynamic;
    until session 31 the unpacked names were unknown and the kernel got a tunes-at-runtime hazard."""
    source = textwrap.dedent('''
        import triton
        import triton.language as tl


        def is_hip():
            return False


        def get_autotune_configs():
            if is_hip():
                return [triton.Config({"BLOCK_M": 128}), triton.Config({"BLOCK_M": 64})], ["IS_CAUSAL", "D"]
            else:
                return [triton.Config({"BLOCK_M": 64})] * 3, ["IS_CAUSAL", "D"]


        autotune_configs, autotune_keys = get_autotune_configs()


        @triton.autotune(configs=autotune_configs, key=autotune_keys)
        @triton.jit
        def attn_fwd(q_ptr, o_ptr, n_ctx, IS_CAUSAL: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr):
            pass


        def attention(q, o, causal):
            attn_fwd[(1, )](q, o, q.shape[0], IS_CAUSAL=causal, D=128)
        ''')
    (kernel, ) = audit_source(source, "flash.py")
    assert kernel.key == ("IS_CAUSAL", "D") and kernel.configs == "dynamic"
    assert "its branches return different values" in (kernel.configs_reason or "")
    runtime = next(h for h in kernel.hazards if h.code == "tunes-at-runtime")
    assert runtime.severity == "info", runtime
