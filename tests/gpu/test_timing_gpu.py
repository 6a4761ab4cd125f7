"""The graph-replay timer agrees with a long event-timed run on a kernel long enough for events to be exact."""
from __future__ import annotations

import statistics

import torch
import triton
import triton.language as tl

from graphtune.timing import GraphReplaySampler, graph_replay_samples


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def test_graph_replay_matches_event_timed_long_run():
    n = 64 * 2**20   # 256 MB read + 256 MB written: far above L2, ~0.12 ms per launch
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)

    def call():
        _copy_kernel[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096)

    graph = statistics.median(graph_replay_samples([call], samples=30))
    events = triton.testing.do_bench(call, warmup=50, rep=500, return_mode="median")
    print(f"graph replay {graph * 1e3:.1f} us, event-timed {events * 1e3:.1f} us")
    assert abs(graph - events) / events < 0.05


def test_sampler_ranks_a_clearly_slower_config_last():
    n = 16 * 2**20
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)

    def make(block, warps):
        return [lambda: _copy_kernel[(triton.cdiv(n, block),)](x, y, n, BLOCK=block, num_warps=warps)]
    sampler = GraphReplaySampler([make(4096, 8), make(32, 1)])
    fast = statistics.median(sampler(0, 10))
    slow = statistics.median(sampler(1, 10))
    sampler.close()
    assert slow > 1.5 * fast
