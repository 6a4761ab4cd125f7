"""benchmarks/probes/seg_cost.py: it sets a start's price in every module whose kernels read it (a Gluon kernel
resolves its globals in its own module, so a module left out would keep the shipped price without a word), refuses a
price out of range, and hands the rest of its arguments to the benchmark."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from triton.experimental.gluon import language as gl

from graphtune.kernels.mla_decode import kernel_hopper

_ROOT = Path(__file__).resolve().parents[2]


def _probe():
    spec = importlib.util.spec_from_file_location("_seg_cost_under_test", _ROOT / "benchmarks/probes/seg_cost.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["BF16_SEG_COST", "FP8_SEG_COST"])
def test_every_module_that_reads_a_price_is_set(name):
    package = Path(kernel_hopper.__file__).parent
    # (a module that reads the price as kernel_hopper's attribute when it runs, plan.py, follows the probe's setting)
    readers = {p.stem for p in package.glob("*.py") if re.search(rf"(?<!kernel_hopper\.)\b{name}\b", p.read_text())}
    assert {m.__name__.rsplit(".", 1)[1] for m in _probe()._READERS[name]} == readers


def test_the_probe_sets_the_prices_and_passes_the_rest_on(monkeypatch, capsys):
    probe = _probe()
    seen = []
    monkeypatch.setattr(probe.bench_mla_decode, "main", lambda argv: seen.append(argv) or 0)
    for name, modules in probe._READERS.items():
        for module in modules:
            monkeypatch.setattr(module, name, getattr(module, name))     # (restored after the test)
    assert probe.main(["--bf16", "3", "--configs", "none", "--vs-ragged"]) == 0
    assert seen == [["--vs-flashmla", "--configs", "none", "--vs-ragged"]]
    assert all(int(m.BF16_SEG_COST) == 3 and isinstance(m.BF16_SEG_COST, gl.constexpr)
               for m in probe._READERS["BF16_SEG_COST"])
    assert "split: BF16_SEG_COST 3" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        probe.main(["--fp8", "-1"])
    assert "0..64, got -1" in capsys.readouterr().err
