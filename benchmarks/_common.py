"""Shared helpers for benchmark scripts: environment record and JSON output under benchmarks/results/."""
from __future__ import annotations

import json
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def environment() -> dict[str, Any]:
    import torch
    import triton
    env: dict[str, Any] = {
        "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
        "host": platform.node(), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env.update(gpu=p.name, compute_capability=f"{p.major}.{p.minor}", sms=p.multi_processor_count,
                   cuda=torch.version.cuda)
    else:
        env["gpu"] = None
    env["git_commit"] = git_commit()
    return env


def git_commit() -> str | None:
    """The commit of the tree being measured. The GPU machine gets a copy without .git, so the caller may
    pass it as GIT_COMMIT."""
    import os
    import re
    given = os.environ.get("GIT_COMMIT", "")
    if re.fullmatch(r"[0-9a-f]{40}", given):
        return given
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).parent, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out if re.fullmatch(r"[0-9a-f]{40}", out) else None


def write_result(name: str, payload: dict[str, Any], out_dir: str | Path | None = None) -> Path:
    out = Path(out_dir) if out_dir else RESULTS
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps({"environment": environment(), **payload}, indent=2, default=str))
    return path
