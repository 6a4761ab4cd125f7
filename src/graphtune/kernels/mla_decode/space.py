"""The config space of the MLA decode split kernel, its default, and the batch buckets it is tuned for.

A config sets four meta-parameters (the split kernel's last four parameters, in this order) plus the
launch options:

    BLOCK_N          tokens per tile (the M side of every dot)
    BLOCK_H          heads per program; more heads than H are masked, H > BLOCK_H takes more head blocks
    CONVERT          fp8 -> fp16 widening: 0 hardware ``cvt`` (2 values per instruction), 1 byte shuffle and
                     logic ops on the integer pipes (see kernel.py), 2 the same marked pure (Triton then
                     widens in the MMA operand layout: less shared memory, more registers); ignored for bf16
    QK8              fp8 caches: 1 scores straight from the fp8 bytes against an fp8 hi/lo pair of the query
                     (two fp8 MMAs give the bf16 score; only P.V widens the cache), 0 widen first
    PROGRAMS_PER_SM  split-grid programs per SM (times the SM count, divided by the head blocks)
    num_warps, num_stages

Configs that cannot run on sm_90 or lost clearly are left out, each with its reason (``EXCLUDED``); the
sizes come from compiling the split kernel for sm_90 on a CPU (``triton.compile`` with
``GPUTarget("cuda", 90, 32)``), shared memory from the metadata and registers/spills from
``cuobjdump --dump-resource-usage`` (docs/mla_decode.md has the tables and timings).
"""
from __future__ import annotations

from typing import Any

import triton

from ...configs import config_label
from ...keys import ENGINE_CAPTURE_SIZES

# Batch sizes a server typically captures (graphs padded up to the next one): 1, 2, 4, 8, 12, 16, then
# multiples of 8 up to 256, as one open-source engine captures by default (read in its source). A bucket per captured size
# costs one tuning pass each (about 0.03-0.1 s on the H200, benchmarks/bench_tuning.py).
CAPTURE_SIZES: tuple[int, ...] = ENGINE_CAPTURE_SIZES

META_NAMES = ("BLOCK_N", "BLOCK_H", "CONVERT", "QK8", "PROGRAMS_PER_SM")


def make_config(block_n: int, block_h: int, convert: int, qk8: int, programs_per_sm: int, num_warps: int,
                num_stages: int) -> triton.Config:
    return triton.Config({"BLOCK_N": block_n, "BLOCK_H": block_h, "CONVERT": convert, "QK8": qk8,
                          "PROGRAMS_PER_SM": programs_per_sm}, num_warps=num_warps, num_stages=num_stages)


# The space: (BLOCK_N, CONVERT, QK8, PROGRAMS_PER_SM, num_warps, num_stages), BLOCK_H = 16. Chosen from
# two sweeps on an H200 and sm_90 compiles (docs/mla_decode.md). Triton gives the cache loads a pipeline
# latency of (num_stages - 1) // 2 because of the page-table indirection, so num_stages 3 issues them one
# stage early in one buffer, 5 double-buffers and 7 triple-buffers them, at the cost of shared memory.
# Final sweep (fp8, H = 16, 4096 tokens): 64/w4/2 per SM/3 stages wins batch 1 and every fp8_ds_mla size;
# 128/w8/5 stages wins fp8 at batch >= 8 (32) .. 128.
_SPACE = (
    (64, 1, 1, 2, 4, 3),    # 78 KB shared, 2 programs/SM, loads one stage ahead (the default)
    (64, 1, 1, 2, 4, 2),    # the same with no early issue
    (64, 1, 1, 1, 4, 5),    # double-buffered, 116 KB: 1 program/SM
    (64, 1, 1, 1, 4, 7),    # triple-buffered, 153 KB
    (32, 1, 1, 2, 4, 5),    # double-buffered, 83 KB, 2 programs/SM
    (128, 1, 1, 1, 8, 2),   # two warpgroups, each a full 64-row MMA
    (128, 1, 1, 1, 8, 5),   # 213 KB, double-buffered
    (32, 1, 0, 2, 4, 2),    # widen first
)

# Left out, with the reason (sm_90, triton 3.6, H = 16, measured on the H200 unless said otherwise):
EXCLUDED: dict[str, str] = {
    "num_warps=8 with BLOCK_N <= 64": "one 64-row MMA spread over two warpgroups; 1.5-2.5x slower than 4 warps "
                                      "(first sweep) and 188-255 registers, so one program per SM",
    "PROGRAMS_PER_SM=3 at 4 warps": "255 registers per thread fit only 2 programs per SM: a third is a second "
                                    "wave (first sweep: 1.4-1.7x slower)",
    "BLOCK_N=16": "2-3x slower than BLOCK_N=32/64 at batch >= 8 (first sweep)",
    "BLOCK_N=64, num_warps=4, CONVERT=0": "the hardware cvt lowering needs 1 KB of stack per thread (compile)",
    "BLOCK_N=128, num_stages=7": "needs more than the 227 KB of shared memory a program may have (compile)",
    "BLOCK_H=32": "only for H > 16; not measured (H = 16 is the benchmark)",
    "CONVERT=2 (pure widening)": "an illegal memory access on the H200 with fp8_ds_mla (second device run, "
                                 "not root-caused); the interpreter runs it correctly",
    "BLOCK_N=64, num_stages 5/7 and BLOCK_N=128 with a bf16 cache": "more than the 232,448 B of shared memory "
                                 "of an sm_90 block (compile: 242,688-466,944 B); the tuner's device check "
                                 "drops them for bf16",
}

CONFIGS: list[triton.Config] = [make_config(n, 16, cv, qk8, pps, w, st) for n, cv, qk8, pps, w, st in _SPACE]

# The portable kernel is the path on sm_80/86/89/100/120. On sm_120 (RTX PRO 6000 Blackwell, RTX 50xx) a
# block gets 101,376 B of shared memory: these configs of the space need more with every cache format
# (compiled for sm_120 on a CPU with graphtune.inspect; sizes fp8 / bf16 / fp8_ds_mla at page size 64) and
# the tuner's device check drops them there. tests/cpu/test_mla_decode.py recompiles the whole space for
# sm_120 and checks that exactly these do not fit.
SM120_EXCLUDED: dict[str, str] = {
    config_label(CONFIGS[2]): "double-buffered 64-token tiles: 110,592 / 103,936 / 107,008 B of shared memory",
    config_label(CONFIGS[3]): "triple-buffered 64-token tiles: 147,968 / 112,384 / 142,592 B of shared memory",
    config_label(CONFIGS[5]): "128-token tiles: 125,952 / 171,008 / 121,856 B of shared memory",
    config_label(CONFIGS[6]): "double-buffered 128-token tiles: 201,728 / 188,416 / 194,560 B of shared memory",
}

DEFAULT: triton.Config = CONFIGS[0]

# bf16's untuned config: the space's best single config for bf16 at H = 16, page size 64 (32 tokens,
# double-buffered: 0.0201-0.2131 ms at batch 1-128, first device run of issue 14), 62,720 B of shared memory
# on sm_120 and 93,696 B on sm_90. (bf16 is tuned over the whole space like the other formats since the
# cache is read through a bf16 pointer: see kernel._load_cols and docs/mla_decode.md for the fault that
# the old byte-pointer loads caused at BLOCK_N = 64.)
BF16_CONFIG: triton.Config = CONFIGS[4]


def default_for(kv_format: str) -> triton.Config:
    """The config a format runs when a test or benchmark wants a fixed one: BF16_CONFIG for bf16, else DEFAULT."""
    return BF16_CONFIG if kv_format == "bf16" else DEFAULT


# One small config for the Triton interpreter (it is slow; tests vary the grid through interface._launch).
INTERPRET_CONFIG: triton.Config = make_config(16, 16, 1, 1, 1, 4, 1)


def prune(configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any) -> list[triton.Config]:
    """Drop head blocks wider than needed: BLOCK_H = 32 only pays when H > 16."""
    heads = int(named_args["H"])
    kept = [c for c in configs if c.kwargs["BLOCK_H"] <= max(16, heads)]
    return kept or list(configs)
