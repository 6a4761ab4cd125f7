"""Whether the streamed reduction pays for split configs that leave room beside them on an SM, once its programs
cannot fit there: a probe of the second fp8 tokens-on-M kernel pinned to one config at a time, on the Hopper path
with a step's plan.

Session 53 (H100, calls D-H) found that the reduction streamed behind the split (``reduction.STREAM``) paid only for
two-buffer configs: two split programs fill an SM (216 KB of shared memory, the register file), so a reduction
program waiting on its request's count only gets an SM once a split program has exited; beside a three-buffer
config (one program an SM, 148 KB) the waiting programs were scheduled next to the running split program and their
count reads slowed it (4.7-7.3% slower), so those configs do not count (``kernel_hopper.STREAM_MAX_BUF`` = 2). This
probe lets every config count (``--max-buf``, default 3) and gives the reduction's launch ``--pad`` KB of dynamic
shared memory (set on its compiled kernel: ``packed_metadata``'s shared size and the function's dynamic shared
memory attribute through the CUDA driver), more than an SM has left beside one split program, so that the reduction
again lands only where a split program has exited. Ways per config: ``plain`` (not streamed), ``stream``, and
``stream+pad``; each checked against ``mla_decode_reference`` (output NaN-poisoned, relative error <= 2e-3) and timed
under CUDA graph replay over ``--sets`` input sets (a plan made before the graph), ``--rounds`` rounds in
alternating order, the median kept.

    PYTHONPATH=src python benchmarks/probes/stream_pad.py --out benchmarks/results/stream_pad.json

Prints a line per cell and a table last; JSON with the GPU, versions and commit. Without a Hopper GPU it says so and
exits 2. A probe, not the product: the padding is set on a compiled kernel from outside Triton's launcher.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_mla_decode import git_commit, graph_time_ms  # noqa: E402
from reduce_tail import (add_medians, cell_text, change_text, checked, decode_call, for_each_cell,  # noqa: E402
                         ms_text, parse_cells, passing_ways, timed_ways)

import triton  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402

from graphtune.kernels.mla_decode import kernel, kernel_hopper, kernel_hopper_tok, reduction  # noqa: E402

CONFIGS = ('[{"V2": 1, "NUM_BUF": 3, "PREFETCH": 1, "FAST_MAX": 1}, '
           '{"V2": 1, "NUM_BUF": 2, "PREFETCH": 1, "FAST_MAX": 1}]')
_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


def set_reduce_pad(pad_bytes: int) -> int:
    """Every compiled variant of the reduction kernel launched from now on with ``pad_bytes`` of dynamic shared memory
    (at least its own); 0 puts back what Triton compiled. Returns how many variants were set."""
    cuda = ctypes.CDLL("libcuda.so.1")
    n = 0
    for caches in kernel._mla_decode_reduce_kernel.device_caches.values():
        for compiled in caches[0].values():
            if compiled.function is None:
                compiled._init_handles()
            own = compiled.metadata.shared
            shared = max(own, pad_bytes)
            rc = cuda.cuFuncSetAttribute(ctypes.c_void_p(compiled.function),
                                         _CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, ctypes.c_int(shared))
            if rc != 0:
                raise RuntimeError(f"cuFuncSetAttribute({shared} B) returned {rc}")
            compiled.packed_metadata = (compiled.metadata.num_warps, compiled.metadata.num_ctas, shared)
            n += 1
    return n


def parse_configs(text: str) -> list[dict]:
    """``--configs``: a JSON list of config objects of integer knobs."""
    try:
        configs = json.loads(text)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(f"--configs {text!r}: not JSON") from None
    if not isinstance(configs, list) or not all(
            isinstance(c, dict) and all(isinstance(v, int) for v in c.values()) for c in configs):
        raise argparse.ArgumentTypeError(f"--configs {text!r}: expected a JSON list of objects of integer knobs")
    return configs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=parse_cells, default=parse_cells("fp8:16:64:32,64,128"),
                    help="FORMAT:HEADS:PAGE:B1,B2 ... (fp8 and fp8_ds_mla: the kernel that counts)")
    ap.add_argument("--configs", type=parse_configs, default=parse_configs(CONFIGS),
                    help="the split configs (a JSON list)")
    ap.add_argument("--max-buf", type=int, default=3, help="the most buffers a config may have and count")
    ap.add_argument("--pad", type=int, default=96, help="the reduction's dynamic shared memory in KB, padded")
    ap.add_argument("--ragged", action="store_true", help="ragged lengths (1..8191) too")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sets", type=int, default=6)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/stream_pad.json"))
    args = ap.parse_args(argv)
    for name in ("rounds", "sets", "max_buf"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be at least 1")
    if args.pad < 0:
        ap.error(f"--pad {args.pad}: must be at least 0 (KB)")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("stream_pad: needs a Hopper (sm_90) GPU", file=sys.stderr)
        return 2
    # (before any split kernel compiles: the kernel reads it as a constexpr, the plan and the follow-up as an int)
    kernel_hopper.STREAM_MAX_BUF = gl.constexpr(args.max_buf)
    kernel_hopper_tok.STREAM_MAX_BUF = gl.constexpr(args.max_buf)
    gpu = torch.cuda.get_device_name()
    print(f"{gpu}; torch {torch.__version__}; triton {triton.__version__}; pad {args.pad} KB; "
          f"max buffers counted {args.max_buf}", flush=True)
    ways = {"plain": (False, 0), "stream": (True, 0), "stream+pad": (True, args.pad * 1024)}
    rows = []

    def cell(lengths: str, fmt: str, heads: int, page: int, batch: int, xs: list, ref, tol: float) -> None:
        for config in args.configs:
            row = {"lengths": lengths, "format": fmt, "heads": heads, "page_size": page, "batch": batch,
                   "config": config}

            def check(way: str) -> float:
                reduction.STREAM, pad = ways[way]
                # (the first call compiles the way's reduction, whose launches are then padded)
                return checked(xs[0], fmt, config, ref, lambda: set_reduce_pad(pad))

            def time_way(way: str) -> float:
                reduction.STREAM, pad = ways[way]
                set_reduce_pad(pad)
                return graph_time_ms([decode_call(xi, fmt, config) for xi in xs])
            ok = passing_ways(ways, check, tol, row, f"{lengths} {fmt} B={batch} {config}")
            add_medians(row, timed_ways(ok, time_way, args.rounds))
            set_reduce_pad(0)
            reduction.STREAM = True
            rows.append(row)
            print(json.dumps(row), flush=True)
    for_each_cell(args, cell)
    result = dict(gpu=gpu, torch=torch.__version__, triton=triton.__version__, commit=git_commit(),
                  pad_kb=args.pad, max_buf=args.max_buf, rounds=args.rounds, sets=args.sets, rows=rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(f"\n{gpu}; ms under graph replay (pinned, a plan made before the graph; median of {args.rounds} rounds); "
          "changes against plain")
    print("| lengths | cell | config | plain | stream | change | stream+pad | change |")
    print("|" + " --- |" * 8)
    for r in rows:
        cfg = ",".join(f"{k}={v}" for k, v in r["config"].items() if k != "V2")
        print(f"| {r['lengths']} | {cell_text(r)} | {cfg} | {ms_text(r, 'plain')} | {ms_text(r, 'stream')} | "
              f"{change_text(r, 'stream', 'plain')} | {ms_text(r, 'stream+pad')} | "
              f"{change_text(r, 'stream+pad', 'plain')} |")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
