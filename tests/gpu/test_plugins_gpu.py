"""The vLLM plugin around a real CUDA graph capture: a fake ``GPUModelRunner.capture_model`` (vllm 0.34.0's
module and signature) records a graph of a stock ``triton.autotune`` kernel at a warmed-up size and at a size
that was not; the replay is right and the report at capture end names the hit and the miss."""
from __future__ import annotations

import json
import os
import sys
import textwrap
import types

import pytest
import torch
import triton
import triton.language as tl

import graphtune
from graphtune.plugins import _hooks
from graphtune.plugins import vllm as vllm_plugin

CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in (128, 512) for w in (2, 4)]
WARM_N, COLD_N = 4096, 12289


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def _plugin_gpu_stock_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)


def launch(x: torch.Tensor, out: torch.Tensor) -> None:
    n = x.numel()
    _plugin_gpu_stock_kernel[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, out, n)


RUNNER = """
class GPUModelRunner:
    def capture_model(self, *, profile_only: bool = False) -> int:
        self.graphs = []
        for x, out in BUFFERS:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                launch(x, out)
            self.graphs.append(graph)
        return len(self.graphs)
"""


def test_vllm_plugin_reports_a_real_capture(monkeypatch, tmp_path):
    out_dir = tmp_path / "coverage"
    monkeypatch.setenv("GRAPHTUNE_PLUGIN", "1")
    monkeypatch.setenv("GRAPHTUNE_COVERAGE_OUT", str(out_dir))
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setattr(vllm_plugin, "_registered", False)
    monkeypatch.setattr(vllm_plugin, "_reporter", None)
    buffers = [(torch.randn(n, device="cuda"), torch.full((n,), float("nan"), device="cuda"))
               for n in (WARM_N, COLD_N)]
    for name in ("vllm", "vllm.v1", "vllm.v1.worker", "vllm.v1.worker.gpu"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    module = types.ModuleType("vllm.v1.worker.gpu.model_runner")
    module.__dict__.update(torch=torch, launch=launch, BUFFERS=buffers)
    exec(compile(textwrap.dedent(RUNNER), "<fake vllm model_runner>", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    try:
        vllm_plugin.register()
        launch(*buffers[0])                     # the engine's warm-up: tunes WARM_N
        torch.cuda.synchronize()
        gk = graphtune.patch.graphtune_kernel_of(_plugin_gpu_stock_kernel)
        benchmarks = gk.bench_calls
        runner = module.GPUModelRunner()
        with pytest.warns(RuntimeWarning, match="_plugin_gpu_stock_kernel"):
            assert runner.capture_model() == 2
        assert gk.bench_calls == benchmarks     # nothing timed inside capture
        for x, out in buffers:
            out.fill_(float("nan"))
            x.copy_(torch.randn_like(x))
        for graph in runner.graphs:
            graph.replay()
        torch.cuda.synchronize()
        for x, out in buffers:
            torch.testing.assert_close(out, x * 3.0, rtol=0, atol=0)
        (path,) = out_dir.glob("*.json")
        doc = json.loads(path.read_text())
        print(json.dumps(doc["summary"]), doc["event"])
        assert path.name == f"graphtune-coverage-vllm-pid{os.getpid()}.json"
        (kernel,) = [k for k in doc["coverage"]["kernels"] if k["name"] == "_plugin_gpu_stock_kernel"]
        assert [(t["key"][0], t["source"]) for t in kernel["tuned"]] == [(WARM_N, "tuned")]
        assert kernel["tuned"][0]["hits"] >= 1
        assert [(m["key"][0], m["where"], m["action"]) for m in kernel["misses"]] == [(COLD_N, "capture", "fallback")]
    finally:
        graphtune.unpatch_triton()
        _hooks.clear_pending()
