"""benchmarks/bench_mla_decode.py --vs-ragged on the CPU: the ragged inputs, and the section's rows and table from
timings handed in (the GPU times them; here the harness's arithmetic and its Python, so that no device time is lost
to a typo)."""
from __future__ import annotations

import functools
import json
import math

import torch

from _bench_module import load_bench_mla_decode


def _bench():
    return load_bench_mla_decode("_bench_mla_decode_ragged_under_test")


def test_ragged_inputs_draw_lengths_over_the_whole_range_with_the_cache_to_hold_them():
    mod = _bench()
    x = mod.ragged_inputs(64, 16, 256, "fp8", seed=5, device="cpu")
    lens = x["seq_lens"]
    assert lens.dtype == torch.int32 and lens.shape == (64,)
    assert int(lens.min()) >= 1 and int(lens.max()) <= 511
    assert len(set(lens.tolist())) > 32                         # spread, not one length
    assert x["page_table"].shape == (64, 512 // 64)             # room for 2 * tokens a request
    assert torch.isnan(x["out"].float()).all()                  # poisoned
    again = mod.ragged_inputs(64, 16, 256, "fp8", seed=5, device="cpu")["seq_lens"]
    other = mod.ragged_inputs(64, 16, 256, "fp8", seed=6, device="cpu")["seq_lens"]
    assert torch.equal(lens, again) and not torch.equal(lens, other)


def test_vs_ragged_rows_and_table_from_the_times(tmp_path, monkeypatch, capsys):
    mod = _bench()
    times = {"flashmla": 0.010, "graphtune": 0.008}
    launched = []

    def fake_time(calls):                    # the calls say whose they are
        launched.append(calls[0]())
        return times[calls[0]()]

    monkeypatch.setattr(mod, "graph_time_ms", fake_time)
    monkeypatch.setattr(mod, "ragged_inputs", functools.partial(mod.ragged_inputs, device="cpu"))
    monkeypatch.setattr(mod, "flashmla_call", lambda fm, x, kv_format, sm: (lambda: "flashmla", None))
    monkeypatch.setattr(mod.bench, "run_inputs", lambda x, kv_format, config: (lambda: "graphtune"))
    args = mod.build_parser().parse_args(["--vs-flashmla", "--vs-ragged", "--ragged-seed", "7", "--tokens", "128"])
    result: dict = {}
    out = tmp_path / "r.json"
    rows = mod.vs_ragged(args, object(), [(16, [2, 4])], ["fp8"], result, out)
    assert launched == ["flashmla", "graphtune"] * 2
    assert result["ragged_seed"] == 7 and json.loads(out.read_text())["ragged_rows"] == rows
    for r in rows:
        # the bytes are the tokens drawn, not batch x tokens
        xs = [mod.ragged_inputs(r["batch"], 16, 128, "fp8", 7 + 97 * r["batch"] + 16 + i) for i in range(r["sets"])]
        tokens = sum(int(x["seq_lens"].sum()) for x in xs) / r["sets"]
        assert math.isclose(r["tbs"], tokens * (mod.reference.ROW_BYTES["fp8"] + 4) / (times[r["impl"]] * 1e-3) / 1e12)
        assert 1 <= r["len_min"] <= r["len_mean"] <= r["len_max"] <= 255
    mod.print_ragged(rows, ["fp8"], [(16, [2, 4])], 128)
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| H=16")]
    assert len(table) == 2 and all(line.rstrip(" |").endswith("0.80") for line in table), table
