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


def test_readme_custom_op_snippet_runs_on_the_example_kernel(tmp_path):
    """The README's ``graphtune.custom_op`` snippet (and docs/torch_compile.md's, the same code), run after the
    example whose kernel it launches: the op writes 2 x into out, eagerly and through torch.ops."""
    readme = (ROOT / "README.md").read_text()
    snippet = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "graphtune.custom_op(" in b)
    def code(text: str) -> str:
        return re.sub(r" +#[^\n]*", "", text)
    assert code(snippet) in code((ROOT / "docs" / "torch_compile.md").read_text())
    check = ("x = torch.randn(3000)\nout = torch.full_like(x, float('nan'))\nscale_(x, out)\n"
             "assert torch.equal(out, 2 * x)\nout.fill_(float('nan'))\ntorch.ops.mylib.scale_(x, out)\n"
             "assert torch.equal(out, 2 * x)\nprint('snippet ok')\n")
    script = tmp_path / "snippet.py"
    script.write_text((ROOT / "examples" / "readme_example.py").read_text() + snippet + check)
    env = {**os.environ, "TRITON_INTERPRET": "1", "GRAPHTUNE_DB": str(tmp_path / "db.sqlite")}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "snippet ok" in proc.stdout
