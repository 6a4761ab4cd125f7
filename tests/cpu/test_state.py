"""Process state lives in graphtune.state: one reset() and scope(); settings are read when used."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import graphtune
from graphtune import capture, settings, state


@triton.jit
def _twice_kernel(x_ptr, out_ptr, n, B, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in (16, 32) for w in (1, 2)]


def _launch(k, b):
    x = torch.randn(40)
    out = torch.full_like(x, float("nan"))
    k[lambda m: (triton.cdiv(40, m["BLOCK"]),)](x, out, 40, b)
    torch.testing.assert_close(out, 2 * x)


def test_reset_forgets_every_process_wide_field_but_keeps_definitions():
    k = graphtune.autotune(CONFIGS, key=["B"], name="st_reset", do_bench=lambda fn: 1.0)(_twice_kernel)
    _launch(k, 3)
    graphtune.force("st_reset", num_warps=2)
    capture.freeze()
    capture.set_policy("raise")
    capture.simulate_capture(True)
    settings.override(GRAPHTUNE_TIMER="plain")
    state.reset()
    s = state.STATE
    assert (s.forces, s.frozen, s.policy, s.capture_override, s.overrides, s.db) == ({}, False, None, None, {}, None)
    assert "st_reset" in graphtune.tuner.kernels() and k.coverage().tuned == {}


def test_scope_restores_a_clean_state_on_exit():
    with state.scope():
        capture.freeze()
        assert capture.is_frozen()
    assert not capture.is_frozen()


def test_override_wins_over_the_environment_and_is_undone(monkeypatch):
    monkeypatch.setenv("GRAPHTUNE_TIMER", "graph")
    with settings.override(GRAPHTUNE_TIMER="plain"):
        assert settings.timer() == "plain"
    assert settings.timer() == "graph"
    with pytest.raises(ValueError, match="not GRAPHTUNE_"):
        settings.override(PATH="/x")


def test_force_set_in_the_environment_after_tuning_applies_on_the_next_launch(monkeypatch):
    bench_calls = []
    k = graphtune.autotune(CONFIGS, key=["B"], name="st_force",
                           do_bench=lambda fn: bench_calls.append(1) or 1.0)(_twice_kernel)
    _launch(k, 3)
    assert k.best_config.kwargs == {"BLOCK": 16} and k.best_config.num_warps == 1
    monkeypatch.setenv("GRAPHTUNE_FORCE", "st_force:BLOCK=32,num_warps=2")   # no refresh call needed
    _launch(k, 3)
    assert k.best_config.kwargs == {"BLOCK": 32} and k.best_config.num_warps == 2
    monkeypatch.delenv("GRAPHTUNE_FORCE")
    _launch(k, 3)
    assert k.best_config.kwargs == {"BLOCK": 16}
    with settings.override(GRAPHTUNE_FORCE="st_force:BLOCK=32"):
        _launch(k, 3)
        assert k.best_config.kwargs == {"BLOCK": 32}
    _launch(k, 3)
    assert k.best_config.kwargs == {"BLOCK": 16}
