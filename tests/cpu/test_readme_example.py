"""The README's example runs as written (CPU: through the Triton interpreter)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_example_is_the_example_file_and_runs(tmp_path):
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    example = (ROOT / "examples" / "readme_example.py").read_text()
    assert block == example
    env = {**os.environ, "TRITON_INTERPRET": "1", "GRAPHTUNE_DB": str(tmp_path / "db.sqlite")}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "readme_example.py")], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "graphtune coverage" in proc.stdout and proc.stdout.count("tuned") >= 8
