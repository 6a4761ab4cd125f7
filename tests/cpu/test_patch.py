"""patch_triton(): stock triton.autotune kernels (decorated before and after the patch) get graphtune's rules."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import graphtune
from graphtune import capture
from graphtune.errors import UntunedError

STOCK_CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in (16, 32) for w in (1, 2)]


@triton.autotune(configs=STOCK_CONFIGS, key=["n"])
@triton.jit
def _stock_before(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)


def _grid(n):
    return lambda m: (triton.cdiv(n, m["BLOCK"]),)


def _run(kernel, n):
    x = torch.randn(n)
    out = torch.full((n,), float("nan"))
    kernel[_grid(n)](x, out, n)
    return x, out


def test_unpatched_stock_cannot_tune_on_cpu():
    # the stock benchmarker needs a GPU driver: this is the behaviour the patch replaces
    with pytest.raises(RuntimeError):
        _run(_stock_before, 37)


def test_patch_covers_kernels_decorated_before_and_after():
    with graphtune.patch_triton():
        @triton.autotune(configs=STOCK_CONFIGS, key=["n"])
        @triton.jit
        def _stock_after(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)

        for k in (_stock_before, _stock_after):
            x, out = _run(k, 37)
            torch.testing.assert_close(out, x * 3.0)
            assert k.best_config in STOCK_CONFIGS
        cov = graphtune.coverage(["_stock_before", "_stock_after"]).to_dict()
        assert {k["name"] for k in cov["kernels"]} == {"_stock_before", "_stock_after"}
        assert all(len(k["tuned"]) == 1 for k in cov["kernels"])

        # inside capture: an untuned key follows the policy, nothing is timed
        gk = graphtune.patch.graphtune_kernel_of(_stock_before)
        calls = gk.bench_calls
        capture.simulate_capture(True)
        with pytest.warns(RuntimeWarning, match="_stock_before"):
            x, out = _run(_stock_before, 99)
        torch.testing.assert_close(out, x * 3.0)
        assert gk.bench_calls == calls
        graphtune.set_policy("raise")
        with pytest.raises(UntunedError, match="_stock_before"):
            _run(_stock_before, 101)
    assert not graphtune.patch.is_patched()


def test_a_stock_kernel_keyed_on_a_config_parameter_runs_as_stock_runs_it(caplog):
    """Stock triton keys on the launch's arguments only and skips a key name its configs set (BLOCK here); the
    patch does the same with one warning, instead of refusing the kernel at its first launch (a third-party kernel
    that runs under stock triton must run under the patch)."""
    import logging
    with graphtune.patch_triton():
        @triton.autotune(configs=STOCK_CONFIGS, key=["n", "BLOCK"])
        @triton.jit
        def _stock_keyed_on_block(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)

        with caplog.at_level(logging.WARNING, logger="graphtune"):
            x, out = _run(_stock_keyed_on_block, 37)
        torch.testing.assert_close(out, x * 3.0)
        assert graphtune.patch.graphtune_kernel_of(_stock_keyed_on_block).keys == ["n"]
        assert any("['BLOCK']" in r.getMessage() and "set by its configs" in r.getMessage() for r in caplog.records)


def test_force_env_pins_a_stock_kernel(monkeypatch):
    monkeypatch.setenv("GRAPHTUNE_FORCE", "_stock_before:BLOCK=32,num_warps=2")
    with graphtune.patch_triton():
        graphtune.patch.graphtune_kernel_of(_stock_before).reset()
        x, out = _run(_stock_before, 50)
        torch.testing.assert_close(out, x * 3.0)
        assert _stock_before.best_config.kwargs == {"BLOCK": 32} and _stock_before.best_config.num_warps == 2
        assert graphtune.patch.graphtune_kernel_of(_stock_before).bench_calls == 0
