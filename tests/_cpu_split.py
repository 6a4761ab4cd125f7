"""When tests/cpu runs in a child pytest (see tests/conftest.py)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
CHILD_VAR = "GRAPHTUNE_TESTS_CPU_CHILD"   # set in the child pytest that runs tests/cpu


def _cuda() -> bool:
    import torch
    return torch.cuda.is_available()


def cpu_suite_in_child(config: pytest.Config) -> bool:
    """True when this process collects both tests/gpu and tests/cpu on a CUDA machine: tests/cpu then runs in
    children. (A run of GPU tests only, e.g. ``pytest tests/gpu/test_x.py``, starts none.)"""
    if os.environ.get(CHILD_VAR) or not _cuda():
        return False
    return all(_covers(config, TESTS / part) for part in ("gpu", "cpu"))


def _covers(config: pytest.Config, folder: Path) -> bool:
    """Whether one of the run's arguments is ``folder``, a folder above it or a path inside it."""
    for arg in config.args:
        path = Path(str(arg).split("::")[0]).resolve()
        if path == folder or path in folder.parents or folder in path.parents:
            return True
    return False


_children: list[dict] = []   # the running child pytests (one per shard of tests/cpu), started at session start


def _shards(files: list[Path], n: int) -> list[list[Path]]:
    """tests/cpu's files in ``n`` groups of about equal size (bytes of test code: the interpreter's time goes
    with it), largest first into the lightest group."""
    groups: list[list[Path]] = [[] for _ in range(n)]
    sizes = [0] * n
    for f in sorted(files, key=lambda f: f.stat().st_size, reverse=True):
        k = sizes.index(min(sizes))
        groups[k].append(f)
        sizes[k] += f.stat().st_size
    return [g for g in groups if g]


def start_cpu_child(config: pytest.Config) -> None:
    """Start tests/cpu in child pytests now, so they run while this process runs tests/gpu: one per four cores
    (at most four), each on a share of the files, since the interpreter runs a test on one core and a GPU
    machine's cores are otherwise idle. The children see no GPU (CUDA_VISIBLE_DEVICES is empty): tests/cpu is
    the suite CI runs on a machine without one."""
    import subprocess
    import sys
    import tempfile
    files = sorted((TESTS / "cpu").rglob("test_*.py"))
    n = max(1, min(4, (os.cpu_count() or 1) // 4, len(files)))
    # each child's torch / BLAS threads: its share of half the cores (the other half for this process's GPU tests,
    # whose compiles run ptxas)
    threads = str(max(1, (os.cpu_count() or 1) // (2 * n)))
    for k, shard in enumerate(_shards(files, n)):
        # its own, empty Triton cache: a child's compiles for sm_90/sm_120 never race the parent's GPU compiles or
        # another child's, and every compile runs code generation (a fresh cache is how the H200 run of session 8
        # found compiles failing after an interpreted kernel had left triton.language patched:
        # resources._unpatched_language)
        cache = tempfile.mkdtemp(prefix="graphtune-tests-cpu-triton-cache-")
        env = {**os.environ, CHILD_VAR: "1", "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "",
               "TRITON_CACHE_DIR": cache, "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads,
               "MKL_NUM_THREADS": threads}
        argv = [sys.executable, "-m", "pytest", *map(str, shard), "-q", "-p", "no:cacheprovider"]
        argv += _selection_options(config)
        log = tempfile.NamedTemporaryFile("w+", prefix=f"graphtune-tests-cpu-{k}-", suffix=".log", delete=False)
        proc = subprocess.Popen(argv, env=env, cwd=TESTS.parent, stdout=log, stderr=subprocess.STDOUT)
        _children.append(dict(proc=proc, log=log, cache=cache))


def _selection_options(config: pytest.Config) -> list[str]:
    """The run's own selection, passed on to the children: ``-x``, ``-k EXPR``, ``-m EXPR`` (``pytest tests -k mla``
    runs the matching tests of tests/cpu too, not all of them)."""
    option = config.option
    argv = ["-x"] if getattr(option, "maxfail", 0) == 1 else []
    if getattr(option, "keyword", ""):
        argv += ["-k", option.keyword]
    if getattr(option, "markexpr", ""):
        argv += ["-m", option.markexpr]
    return argv


def wait_cpu_child() -> tuple[int, str, str]:
    """Wait for the children: (the first non-zero exit status or 0, the last 40 lines of each failing child's
    output or of the last child's, the logs' paths)."""
    results = []
    for child in _children:
        rc = child["proc"].wait()
        if rc == pytest.ExitCode.NO_TESTS_COLLECTED:   # a -k / -m that selects nothing in this child's files
            rc = 0
        _remove_cache(child)
        child["log"].seek(0)
        results.append((rc, "\n".join(child["log"].read().strip().splitlines()[-40:]), child["log"].name))
        child["log"].close()
    _children.clear()
    failed = [r for r in results if r[0] != 0]
    shown = failed or results[-1:]
    return (failed[0][0] if failed else 0, "\n".join(r[1] for r in shown), ", ".join(r[2] for r in results))


def cpu_child_pending() -> bool:
    """Children were started and nobody has waited for them (``test_cpu_suite.py`` not collected, e.g.
    ``pytest tests/gpu tests/cpu``, or the run stopped before it)."""
    return bool(_children)


def stop_cpu_child() -> None:
    for child in _children:
        if child["proc"].poll() is None:
            child["proc"].kill()
            child["proc"].wait()
        _remove_cache(child)


def _remove_cache(child: dict) -> None:
    import shutil
    if child.get("cache"):
        shutil.rmtree(child.pop("cache"), ignore_errors=True)
