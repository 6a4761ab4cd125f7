"""Probe: how fast can one Gluon program loop stream an MLA fp8 cache into shared memory on Hopper, with no math?

The ceiling under the MLA decode kernels' own load scheme (issue 14): tiles of 64 tokens x 576 fp8 bytes, NUM_BUF
buffers in flight, each consumed (waited for) and refilled by the same warps, as the non-warp-specialised Hopper
kernels do. Two loaders:

- ``tma``: pages of 64 contiguous rows (page size 64), one TMA message per tile's 512 latent bytes plus plain
  loads of the 64 rope bytes (as the fp8 kernels load them);
- ``gather``: page size 1, every row its own page: cp.async 16-byte copies addressed through the page table into
  the same swizzled tile, completion signalled on the tile's mbarrier by each thread (``mbarrier_arrive``).

Bytes counted as the kernels': B x 4096 x (576 + 4). Prints the device, a table, and writes JSON to --out.

    PYTHONPATH=src python benchmarks/probes/kv_stream_ceiling.py --out benchmarks/results/kv_stream_ceiling.json
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
# cp.async's Gluon name: async_load in triton 3.9 (the 3.6 name raises there)
_cp_async = getattr(async_copy, "async_load", None) or async_copy.async_copy_global_to_shared
TOKENS = 4096
ROW = 576


@gluon.jit
def _consume(buf, acc, num_warps: gl.constexpr):
    """Touch one 16-byte chunk per thread of the tile (keeps the wait meaningful, costs ~nothing)."""
    layout: gl.constexpr = gl.BlockedLayout([1, 16], [4, 8], [num_warps, 1], [1, 0])
    x = buf.slice(0, 128, dim=1).load(layout)
    return acc + gl.sum(gl.sum(x.to(gl.int8, bitcast=True).to(gl.float32), axis=1), axis=0)


@gluon.jit
def _issue_gather(kv_ptr, page_table_ptr, t, tiles_per_req, stride_pt_b, buf, bar,
                  BLOCK_N: gl.constexpr, num_warps: gl.constexpr):
    """cp.async of tile t (page size 1: one page id per row) into ``buf``; this thread's copies arrive on ``bar``."""
    layout: gl.constexpr = gl.BlockedLayout([1, 16], [4, 8], [num_warps, 1], [1, 0])
    b = t // tiles_per_req
    j = t % tiles_per_req
    rows = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, 128, layout=gl.SliceLayout(0, layout))
    pages = gl.load(page_table_ptr + b.to(gl.int64) * stride_pt_b + j * BLOCK_N + rows)
    base = kv_ptr + pages.to(gl.int64)[:, None] * 576 + cols[None, :]
    for c in gl.static_range(4):
        _cp_async(buf.slice(c * 128, 128, dim=1), base + c * 128)
    async_copy.mbarrier_arrive(bar, increment_count=False)


@gluon.jit
def _stream_kernel(kv_desc, kv_ptr, page_table_ptr, out_ptr, total_tiles, tiles_per_req, stride_pt_b,
                   PAGE_SIZE: gl.constexpr, GATHER: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUF: gl.constexpr,
                   num_warps: gl.constexpr):
    pid = gl.program_id(0)
    num_progs = gl.num_programs(0)
    per = (total_tiles + num_progs - 1) // num_progs
    t0 = pid * per
    t1 = gl.minimum(t0 + per, total_tiles)
    layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, 512], gl.float8e4nv)
    bufs = gl.allocate_shared_memory(gl.float8e4nv, [NUM_BUF, BLOCK_N, 512], layout)
    bars = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    for k in gl.static_range(NUM_BUF):
        mbarrier.init(bars.index(k), count=(num_warps * 32) if GATHER else 1)
    rope_layout: gl.constexpr = gl.BlockedLayout([1, 16], [8, 4], [num_warps, 1], [1, 0])
    rope_rows = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, rope_layout))
    rope_cols = gl.arange(0, 64, layout=gl.SliceLayout(0, rope_layout))
    acc = 0.0
    for k in gl.static_range(NUM_BUF - 1):
        if t0 + k < t1:
            if GATHER:
                _issue_gather(kv_ptr, page_table_ptr, t0 + k, tiles_per_req, stride_pt_b, bufs.index(k),
                              bars.index(k), BLOCK_N, num_warps)
            else:
                b = (t0 + k) // tiles_per_req
                j = (t0 + k) % tiles_per_req
                page = gl.load(page_table_ptr + b * stride_pt_b + (j * BLOCK_N) // PAGE_SIZE)
                mbarrier.expect(bars.index(k), kv_desc.block_type.nbytes)
                _tma_load(kv_desc, [page * PAGE_SIZE + (j * BLOCK_N) % PAGE_SIZE, 0], bars.index(k), bufs.index(k))
    it = 0
    for t in range(t0, t1):
        stage = it % NUM_BUF
        nxt = t + NUM_BUF - 1
        if nxt < t1:
            ns = (it + NUM_BUF - 1) % NUM_BUF
            if GATHER:
                _issue_gather(kv_ptr, page_table_ptr, nxt, tiles_per_req, stride_pt_b, bufs.index(ns),
                              bars.index(ns), BLOCK_N, num_warps)
            else:
                b = nxt // tiles_per_req
                j = nxt % tiles_per_req
                page = gl.load(page_table_ptr + b * stride_pt_b + (j * BLOCK_N) // PAGE_SIZE)
                mbarrier.expect(bars.index(ns), kv_desc.block_type.nbytes)
                _tma_load(kv_desc, [page * PAGE_SIZE + (j * BLOCK_N) % PAGE_SIZE, 0], bars.index(ns),
                          bufs.index(ns))
        # the rope bytes by plain loads, as the fp8 kernels read them (one page id per row)
        b = t // tiles_per_req
        j = t % tiles_per_req
        rpages = gl.load(page_table_ptr + b * stride_pt_b + (j * BLOCK_N + rope_rows) // PAGE_SIZE)
        rrows = rpages.to(gl.int64) * PAGE_SIZE + (j * BLOCK_N + rope_rows) % PAGE_SIZE
        rope = gl.load(kv_ptr + rrows[:, None] * 576 + 512 + rope_cols[None, :])
        acc += gl.sum(gl.sum(rope.to(gl.int8, bitcast=True).to(gl.float32), axis=1), axis=0)
        mbarrier.wait(bars.index(stage), (it // NUM_BUF) & 1)
        acc = _consume(bufs.index(stage), acc, num_warps)
        gl.thread_barrier() if hasattr(gl, "thread_barrier") else gl.barrier()
        it += 1
    gl.store(out_ptr + pid, acc)


def _device_name() -> str:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


def run(batches: list[int], variants: list[tuple[str, int, int]]) -> list[dict]:
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor


    rows = []
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for batch in batches:
        for loader, num_buf, per_sm in variants:
            page_size = 1 if loader == "gather" else 64
            pages = batch * TOKENS // page_size
            sets = []
            for s in range(max(2, 3 * 60 * 2 ** 20 // (batch * TOKENS * ROW) + 1)):
                kv = torch.randint(-100, 100, (pages * page_size, ROW), dtype=torch.int8, device="cuda").view(
                    torch.float8_e4m3fn)
                pt = torch.randperm(pages, device="cuda", dtype=torch.int32).view(batch, -1).contiguous()
                layout = gl.NVMMASharedLayout.get_default_for([64, 512], gl.float8e4nv)
                desc = TensorDescriptor(kv, list(kv.shape), list(kv.stride()), [64, 512], layout)
                out = torch.empty(sms * per_sm, device="cuda")
                sets.append((desc, kv, pt, out))
            total = batch * TOKENS // 64

            def launch(x):
                desc, kv, pt, out = x
                _stream_kernel[(sms * per_sm,)](desc, kv, pt, out, total, TOKENS // 64, pt.stride(0),
                                                PAGE_SIZE=page_size, GATHER=loader == "gather", BLOCK_N=64,
                                                NUM_BUF=num_buf, num_warps=4)
            for x in sets:
                launch(x)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(5):
                    for x in sets:
                        launch(x)
            times = []
            for _ in range(7):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                graph.replay()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / (5 * len(sets)))
            ms = sorted(times)[len(times) // 2]
            nbytes = batch * TOKENS * (ROW + 4)
            rows.append(dict(batch=batch, loader=loader, page_size=page_size, num_buf=num_buf, programs_per_sm=per_sm,
                             ms=ms, tbs=nbytes / (ms * 1e-3) / 1e12))
            del sets, graph
            torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", default="32,64,128")
    ap.add_argument("--out", default="benchmarks/results/kv_stream_ceiling.json")
    args = ap.parse_args(argv)
    print(f"device: {_device_name()}; torch {torch.__version__}, triton {triton.__version__}", flush=True)
    variants = [(loader, nb, ps) for loader in ("tma", "gather") for nb, ps in ((2, 2), (4, 1), (6, 1))]
    rows = run([int(b) for b in args.batches.split(",")], variants)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip() or None
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(dict(gpu=_device_name(), torch=torch.__version__, triton=triton.__version__,
                                              commit=commit, tokens=TOKENS, rows=rows), indent=1))
    print(f"\nKV stream ceiling, fp8 rows of 576 B, {TOKENS} tokens per request, {_device_name()}; ms (TB/s)")
    print("| loader, buffers x programs/SM | " + " | ".join(f"B={b}" for b in args.batches.split(",")) + " |")
    print("| --- |" + " --- |" * len(args.batches.split(",")))
    for loader, nb, ps in variants:
        cells = [f"{r['ms']:.4f} ({r['tbs']:.2f})" for r in rows
                 if (r["loader"], r["num_buf"], r["programs_per_sm"]) == (loader, nb, ps)]
        print(f"| {loader} {nb} x {ps} | " + " | ".join(cells) + " |")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
