"""The import graph is the data flow of docs/design.md: no cycle anywhere (lazy imports inside functions count),
and the mechanisms below the tuner never import the tuner or anything built on it."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import graphtune

ROOT = Path(graphtune.__file__).resolve().parent

# what the tuner is built from: none of these may import a module of UPPER (directly or lazily)
LOWER = {"_log", "_version", "errors", "state", "settings", "configs", "descriptors", "keys", "identity", "launch",
         "capture", "coverage", "timing", "resources", "db", "store", "agreement", "search", "validate", "isolate",
         "compiled", "sass"}
UPPER_PREFIXES = ("tuner", "sharded", "patch", "cli", "kernels", "demo", "ab", "audit", "torch_ops",
                  "plugins")


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path   # "" is the package itself
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join(base + ([node.module] if node.module else []))
            elif (node.module or "").startswith("graphtune"):
                target = node.module[len("graphtune."):] if node.module != "graphtune" else ""
            else:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}" if target else alias.name
                found.add(sub if sub in modules else target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "graphtune" or alias.name.startswith("graphtune."):
                    found.add(alias.name[len("graphtune."):] if alias.name != "graphtune" else "")
    return {m for m in found if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_every_module_imports():
    for name in _modules():
        if name == "__main__":   # runs the command line
            continue
        importlib.import_module(f"graphtune.{name}" if name else "graphtune")


def test_no_import_cycle():
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(m or "graphtune" for m in cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_lower_mechanisms_never_import_the_tuner_or_above():
    graph = _graph()
    bad = [f"{m} imports {t or 'graphtune'}" for m in sorted(LOWER) for t in sorted(graph.get(m, ()))
           if t == "" or t.split(".")[0] in UPPER_PREFIXES]
    assert not bad, bad
    assert LOWER <= set(graph), sorted(LOWER - set(graph))


@pytest.mark.parametrize("argv", [["audit", "tests/cpu/audit_corpus/hazards.py"], ["db", "path"],
                                  ["db", "export", "-o", "{tmp}/export.json"], ["db", "import", "{tmp}/none.json"]],
                         ids=["audit", "db-path", "db-export", "db-import"])
def test_commands_that_need_no_gpu_stack_never_import_torch_or_triton(argv, tmp_path):
    """``import graphtune`` is lazy and the CLI imports only the invoked command: the audit and the database
    commands that judge no entry against this process's environment start in a fraction of a second (torch and
    triton cost about 2 s to import; ``db ls`` / ``show`` / ``prune --stale`` import both to judge staleness). Until
    session 31 every command imported triton: the settings check parsed an unset GRAPHTUNE_FORCE, and the audit's
    module loader imported the config parser for ``--sizes``."""
    import os
    import subprocess
    import sys
    argv = [a.format(tmp=tmp_path) for a in argv]
    code = ("import sys, graphtune.cli\n"
            f"rc = graphtune.cli.main({argv!r})\n"
            "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', "
            "'TRITON' if 'triton' in sys.modules else 'NO-TRITON', rc)")
    root = ROOT.parent.parent
    env = {k: v for k, v in os.environ.items() if k != "GRAPHTUNE_FORCE"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                          env={**env, "PYTHONPATH": str(ROOT.parent), "GRAPHTUNE_DB": str(tmp_path / "db.sqlite")})
    assert proc.stdout.strip().splitlines()[-1].startswith("NO-TORCH NO-TRITON"), proc.stdout + proc.stderr
