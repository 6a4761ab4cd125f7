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
    """Every variant the uniform table times (here the tuned call, the e4m3 columns, P8's among them, with and without a
    step's plan, and the call given a step's plan) on the ragged inputs, FlashMLA beside, one row each; the table's ratios and TB/s from the injected times."""
    mod = _bench()
    times = {"flashmla": 0.010, "tuned": 0.008, "e4m3": 0.006, "fp8q": 0.005, "p8": 0.004, "e4m3plan": 0.0055,
             "p8plan": 0.0035, "fp8qplan": 0.003, "plan": 0.009}
    launched = []

    def fake_time(calls):                    # the calls say whose they are
        launched.append(calls[0]())
        return times[calls[0]()]

    def fake_run(x, kv_format, config=None, path="auto", query_precision="bf16", fp8_query=False, plan=False,
                 p_precision="bf16"):
        assert config is None and path == "auto"
        name = ("fp8q" if fp8_query else "p8" if p_precision == "e4m3" else "e4m3" if query_precision == "e4m3"
                else "tuned")
        name = (name if name != "tuned" else "") + "plan" if plan else name
        return lambda: name

    monkeypatch.setattr(mod, "graph_time_ms", fake_time)
    monkeypatch.setattr(mod, "ragged_inputs", functools.partial(mod.ragged_inputs, device="cpu"))
    monkeypatch.setattr(mod, "flashmla_call", lambda fm, x, kv_format, sm: (lambda: "flashmla", None))
    monkeypatch.setattr(mod, "_vs_candidates", lambda *a: [])      # (pinned Hopper variants: a GPU's)
    monkeypatch.setattr(mod.bench, "run_inputs", fake_run)
    args = mod.build_parser().parse_args(["--vs-flashmla", "--vs-ragged", "--vs-e4m3", "--vs-plan", "--ragged-seed",
                                          "7", "--tokens", "128"])
    result: dict = {}
    out = tmp_path / "r.json"
    rows = mod.vs_ragged(args, object(), [(16, [2, 4])], ["fp8"], [], result, out)
    assert launched == ["flashmla", "tuned", "e4m3", "fp8q", "p8", "e4m3plan", "p8plan", "fp8qplan", "plan"] * 2
    assert result["ragged_seed"] == 7 and json.loads(out.read_text())["ragged_rows"] == rows
    assert [r["config"] for r in rows[:9]] == ["", mod.TUNED.label, *mod._E4M3_LABELS, mod.TUNED_PLAN.label]
    for r in rows:
        # the bytes are the tokens drawn, not batch x tokens
        xs = [mod.ragged_inputs(r["batch"], 16, 128, "fp8", 7 + 97 * r["batch"] + 16 + i) for i in range(r["sets"])]
        tokens = sum(int(x["seq_lens"].sum()) for x in xs) / r["sets"]
        name = {"": "flashmla", mod.TUNED.label: "tuned", mod.TUNED_PLAN.label: "plan",
                **dict(zip(mod._E4M3_LABELS, ["e4m3", "fp8q", "p8", "e4m3plan", "p8plan", "fp8qplan"]))}
        ms = times[name[r["config"]]]
        assert math.isclose(r["tbs"], tokens * (mod.reference.ROW_BYTES["fp8"] + 4) / (ms * 1e-3) / 1e12)
        assert 1 <= r["len_min"] <= r["len_mean"] <= r["len_max"] <= 255
    best = mod.print_table(rows, ["fp8"], ["fp8"], [(16, [2, 4])], lengths=True, plan=True,
                           e4m3_labels=mod._E4M3_LABELS)
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| H=16")]
    assert len(table) == 2 and best == {"H16/B2/fp8": mod.TUNED.label, "H16/B4/fp8": mod.TUNED.label}
    # the ratios to FlashMLA: tuned, best variant, the e4m3 columns (e4m3 query, query given in e4m3, e4m3 query and
    # P, both with a step's plan, the query given in e4m3 with e4m3 P and a plan), with a step's plan
    ratios = [[c for c in line.strip("| ").split(" | ") if c.replace(".", "").isdigit()] for line in table]
    assert all(r == ["0.80", "0.80", "0.60", "0.50", "0.40", "0.55", "0.35", "0.30", "0.90"] for r in ratios), ratios
