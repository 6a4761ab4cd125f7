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
    """True when this process collects tests/gpu on a CUDA machine: tests/cpu then runs in a child."""
    if os.environ.get(CHILD_VAR) or not _cuda():
        return False
    gpu = TESTS / "gpu"
    for arg in config.args:
        path = Path(str(arg).split("::")[0]).resolve()
        if path == gpu or path in gpu.parents or gpu in path.parents:
            return True
    return False


_child: dict = {}   # the running child pytest and its log, started at session start


def start_cpu_child(config: pytest.Config) -> None:
    """Start tests/cpu in a child pytest now, so it runs while this process runs tests/gpu. The child sees no
    GPU (CUDA_VISIBLE_DEVICES is empty): tests/cpu is the suite CI runs on a machine without one."""
    import subprocess
    import sys
    import tempfile
    # its own, empty Triton cache: the child's compiles for sm_90/sm_120 never race the parent's GPU compiles, and
    # every compile runs code generation (a fresh cache is how the H200 run of session 8 found compiles failing
    # after an interpreted kernel had left triton.language patched: resources._unpatched_language)
    cache = tempfile.mkdtemp(prefix="graphtune-tests-cpu-triton-cache-")
    env = {**os.environ, CHILD_VAR: "1", "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "TRITON_CACHE_DIR": cache}
    argv = [sys.executable, "-m", "pytest", str(TESTS / "cpu"), "-q", "-p", "no:cacheprovider"]
    if getattr(config.option, "maxfail", 0) == 1:   # -x
        argv.append("-x")
    log = tempfile.NamedTemporaryFile("w+", prefix="graphtune-tests-cpu-", suffix=".log", delete=False)
    _child.update(proc=subprocess.Popen(argv, env=env, cwd=TESTS.parent, stdout=log, stderr=subprocess.STDOUT),
                  log=log, cache=cache)


def wait_cpu_child() -> tuple[int, str, str]:
    """Wait for the child: (exit status, the last 40 lines of its output, the log's path)."""
    proc, log = _child["proc"], _child["log"]
    rc = proc.wait()
    _remove_cache()
    log.seek(0)
    tail = "\n".join(log.read().strip().splitlines()[-40:])
    return rc, tail, log.name


def stop_cpu_child() -> None:
    proc = _child.get("proc")
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
    _remove_cache()


def _remove_cache() -> None:
    import shutil
    if _child.get("cache"):
        shutil.rmtree(_child.pop("cache"), ignore_errors=True)
