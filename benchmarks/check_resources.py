"""Ground truth for the static resource inspector: its numbers against the loaded kernel on this GPU (GPU needed).

For every config of a kernel, the inspector cross-compiles for the live GPU (``target="device"``) while the
kernel is also compiled through Triton's own JIT path (``JITFunction.warmup`` with mock tensors: same
specialisation as aligned tensors and sizes divisible by 16) and loaded on the GPU. Compared per config:

- registers: cuobjdump REG vs ``CompiledKernel.n_regs``
- spills: cuobjdump STACK + LOCAL vs ``n_spills * 4`` (the driver's local bytes per thread)
- shared memory: ``metadata.shared`` of both compiles
- blocks per SM: :func:`graphtune.resources.occupancy` vs ``cuOccupancyMaxActiveBlocksPerMultiprocessor``
- fits: the inspector's verdict vs whether Triton could compile and load it

    PYTHONPATH=src python benchmarks/check_resources.py [--kernel MODULE:KERNEL] [--signature NAME=TYPE ...]
                                                        [--constexpr NAME=VALUE ...] [--out DIR]

Without ``--kernel``, the bf16 dot kernel below with 8 configs (one that spills, one too big for any GPU), then
its 2 ``SHARED_RESERVE_CONFIGS`` (the configs that decide how the 1 KB of static shared memory on sm_90+ counts).
A kernel given by ``--kernel`` needs its signature (``graphtune_signature`` attribute or ``--signature``);
its configs come from ``.configs`` (an autotuned kernel) or one default config.
"""
from __future__ import annotations

import argparse
import ctypes
import functools
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from _common import write_result  # noqa: E402
from graphtune import resources  # noqa: E402
from graphtune.configs import config_from_dict, config_label, parse_params  # noqa: E402
from graphtune.errors import InspectError  # noqa: E402

# M, N, K: sizes of C[M, N] = A[M, K] @ B[K, N]; A, B and C are row-major (inner stride 1).


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b = b_ptr + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        # no masks: the caller passes sizes that are multiples of the blocks
        acc += tl.dot(tl.load(a), tl.load(b))
        a += BLOCK_K
        b += BLOCK_K * stride_bk
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(tl.bfloat16))


DOT_SIGNATURE = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32",
                 "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"}


def _tile(m: int, n: int, k: int, warps: int, stages: int, maxnreg: int | None = None) -> triton.Config:
    return triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k}, num_warps=warps, num_stages=stages,
                         maxnreg=maxnreg)


DOT_CONFIGS = [
    _tile(64, 64, 32, 4, 2),
    _tile(64, 128, 64, 4, 3),
    _tile(128, 64, 64, 4, 3),
    _tile(128, 128, 64, 8, 3),
    _tile(128, 128, 64, 8, 4),     # 131072 B of shared memory on sm_90
    _tile(128, 256, 64, 8, 3),     # large accumulator: register pressure
    _tile(128, 128, 64, 4, 2, 128),  # 128 fp32 accumulators per thread under a 128-register cap: spills
    _tile(256, 256, 64, 8, 4),     # 262144 B: more shared memory than any GPU has per block
]

# On sm_90 and later cuobjdump reports 1,024 B of static shared memory (.nv.shared.reserved.0) for every kernel
# that uses shared memory. It is the driver's per-block reserve (an H200, session 33: the driver's static size 0,
# 9 and 4 resident blocks for these two configs), which resources.py now counts once. None of DOT_CONFIGS tells a
# single count from a double one; these do, shared memory being the limiter at few registers.
# sm_90 (233,472 B per SM, 128 B granularity), Triton 3.6, divisibility specialised:
SHARED_RESERVE_CONFIGS = [
    # 32x32 tiles take mma v2 (num_stages - 1 = 3 buffers of 8 KB): 24,576 B dynamic, 46 registers (10 blocks by
    # registers). The reserve counted once: 233472 // 25600 = 9 blocks; twice: // 26624 = 8.
    _tile(32, 32, 64, 4, 4),
    # 64x64 takes wgmma (num_stages = 7 buffers of 8 KB): 57,344 B dynamic, 58 registers (8 blocks by registers).
    # Counted once: 233472 // 58368 = 4 blocks; twice: 233472 // 59392 = 3.
    _tile(64, 64, 32, 4, 7),
]
# What each of SHARED_RESERVE_CONFIGS compiles to on sm_90: (dynamic shared bytes, resident blocks per SM with the
# 1 KB counted twice, as resources.py did before session 33, resident blocks with it counted once: the driver's).
SHARED_RESERVE_SM90 = [(24576, 8, 9), (57344, 3, 4)]

_TORCH_DTYPE = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "fp64": torch.float64,
                "i8": torch.int8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8,
                "u1": torch.bool, "fp8e4nv": torch.float8_e4m3fn, "fp8e5": torch.float8_e5m2}


def _mock_argument(ty: str) -> Any:
    """A value a launch would specialise like the inspector's default: aligned pointers, sizes % 16 == 0."""
    from triton.runtime.jit import MockTensor

    if ty.startswith("*"):
        name = ty[2:] if ty.startswith("*k") else ty[1:]
        if name not in _TORCH_DTYPE:
            raise ValueError(f"no torch dtype for signature type {ty!r}; known: {sorted(_TORCH_DTYPE)}")
        return MockTensor(_TORCH_DTYPE[name])   # data_ptr() is 0: aligned
    if ty in ("i32", "u32", "i16", "i8", "u8", "u16"):
        return 64
    if ty in ("i64", "u64"):
        return 2**32 + 64
    if ty in ("fp32", "fp16", "bf16", "fp64"):
        return 1.5
    if ty == "u1":
        return True
    raise ValueError(f"cannot make a mock argument of type {ty!r}")


@functools.lru_cache(maxsize=None)
def _libcuda() -> Any:
    """The CUDA driver library (None where it does not load): both driver queries below go through it."""
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def _driver_blocks_per_sm(function: int, threads: int, dynamic_shared: int) -> int | None:
    libcuda = _libcuda()
    if libcuda is None:
        return None
    blocks = ctypes.c_int(0)
    rc = libcuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(blocks), ctypes.c_void_p(function),
                                                              ctypes.c_int(threads), ctypes.c_size_t(dynamic_shared))
    return blocks.value if rc == 0 else None


def _driver_static_shared(function: int) -> int | None:
    """``cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)``: the static shared memory the driver sees."""
    libcuda = _libcuda()
    if libcuda is None:
        return None
    value = ctypes.c_int(0)
    rc = libcuda.cuFuncGetAttribute(ctypes.byref(value), ctypes.c_int(1), ctypes.c_void_p(function))
    return value.value if rc == 0 else None


def gpu_truth(fn: Any, signature: dict[str, str], constexprs: dict[str, Any], config: triton.Config) -> dict:
    """Compile through Triton's JIT (no launch), load on the GPU, read what the driver reports."""
    values = {name: _mock_argument(ty) for name, ty in signature.items()}
    try:
        compiled = fn.warmup(grid=(1,), **values, **constexprs, **config.all_kwargs())
        compiled._init_handles()   # loads the module: n_regs / n_spills exist only from here
    except Exception as exc:  # noqa: BLE001 - the failure is the measurement
        return {"ok": False, "error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"}
    threads = config.num_warps * 32
    return {"ok": True, "n_regs": compiled.n_regs, "n_spills": compiled.n_spills,
            "local_bytes": compiled.n_spills * 4, "shared": compiled.metadata.shared,
            "driver_static_shared": _driver_static_shared(compiled.function),
            "driver_blocks_per_sm": _driver_blocks_per_sm(compiled.function, threads, compiled.metadata.shared)}


def compare(kernel: Any, signature: dict[str, str], constexprs: dict[str, Any] | None = None,
            configs: list[triton.Config] | None = None) -> list[dict]:
    """One record per config: the inspector's row, the GPU's numbers, and whether each pair agrees."""
    constexprs = dict(constexprs or {})
    fn = resources._resolve(kernel).fn
    rows = resources.inspect(kernel, target="device", signature=signature, constexprs=constexprs, configs=configs)
    if configs is None:
        configs = [config_from_dict(row.config) for row in rows]
    records = []
    for config, row in zip(configs, rows):
        truth = gpu_truth(fn, signature, constexprs, config)
        record = {"config": row.config, "label": config_label(config), "static": row.to_dict(), "gpu": truth}
        if truth["ok"] and row.registers is not None:
            record["match"] = {
                "registers": row.registers == truth["n_regs"],
                "spill_bytes": row.spill_bytes == truth["local_bytes"],
                "shared": row.shared_dynamic == truth["shared"],
                "blocks_per_sm": truth["driver_blocks_per_sm"] is None
                or row.resident_blocks == truth["driver_blocks_per_sm"],
                "fits": row.fits,
            }
        else:
            # Either side failed: they agree when the inspector also says the config cannot run.
            record["match"] = {"fits": (not row.fits) and not truth["ok"]}
        records.append(record)
    return records


def table_vs_device() -> dict[str, Any]:
    """The built-in table's limits for this GPU's capability next to what the device reports."""
    live = resources.device_target()
    try:
        table = resources.get_target(live.name)
    except InspectError:
        return {"device": live.to_dict(), "table": None}
    fields = ("shared_per_block_optin", "shared_per_sm", "registers_per_sm", "max_warps_per_sm", "warp_size")
    return {"device": live.to_dict(), "table": table.to_dict(),
            "differences": {f: [getattr(table, f), getattr(live, f)] for f in fields
                            if getattr(table, f) != getattr(live, f)}}


def _print(records: list[dict]) -> None:
    head = f"{'config':<72} {'regs s/g':>9} {'spill s/g':>11} {'smem s/g':>15} {'blk/SM s/g':>10} {'fits':>5}  ok"
    print(head)
    print("-" * len(head))
    for r in records:
        s, g = r["static"], r["gpu"]
        if g["ok"] and s["registers"] is not None:
            line = (f"{r['label']:<72} {s['registers']:>4}/{g['n_regs']:<4} "
                    f"{s['spill_bytes']:>5}/{g['local_bytes']:<5} "
                    f"{s['shared_dynamic']:>7}/{g['shared']:<7} {s['resident_blocks']:>4}/"
                    f"{str(g['driver_blocks_per_sm']):<5} {str(s['fits']):>5}")
        else:
            line = f"{r['label']:<72} static: {s['reason'] or 'fits'} | gpu: {g.get('error', 'ok')}"
        print(f"{line}  {'yes' if all(r['match'].values()) else 'NO ' + str(r['match'])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", metavar="MODULE:KERNEL", help="default: this script's bf16 dot kernel")
    parser.add_argument("--signature", action="append", default=[], metavar="NAME=TYPE")
    parser.add_argument("--constexpr", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--out", help="directory for the JSON (default benchmarks/results)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("check_resources: needs a CUDA GPU", file=sys.stderr)
        return 2

    if args.kernel:
        from graphtune._loading import load_object
        kernel = load_object(args.kernel)
        signature = dict(resources._resolve(kernel).signature or {})
        constexprs = dict(resources._resolve(kernel).constexprs or {})
        configs = None
        name = args.kernel
    else:
        kernel, signature, constexprs, name = dot_kernel, dict(DOT_SIGNATURE), {}, "dot_kernel"
        configs = DOT_CONFIGS + SHARED_RESERVE_CONFIGS
    for item in args.signature:
        key, _, ty = item.partition("=")
        signature[key.strip()] = ty.strip()
    for item in args.constexpr:
        constexprs.update(parse_params(item, where="--constexpr"))

    records = compare(kernel, signature, constexprs, configs)
    _print(records)
    agree = sum(all(r["match"].values()) for r in records)
    print(f"\n{agree}/{len(records)} configs agree")
    path = write_result("check_resources", {
        "kernel": name, "signature": signature, "constexprs": {k: repr(v) for k, v in constexprs.items()},
        "target": table_vs_device(), "agree": agree, "configs": len(records), "records": records,
    }, args.out)
    print(f"wrote {path}")
    return 0 if agree == len(records) else 1


if __name__ == "__main__":
    sys.exit(main())
