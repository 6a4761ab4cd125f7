"""The config space of the MLA decode split kernel, its default, and the batch buckets it is tuned for.

A config sets four meta-parameters (the split kernel's last four parameters, in this order) plus the
launch options:

    BLOCK_N          tokens per tile (the M side of every dot)
    BLOCK_H          heads per program; more heads than H are masked, H > BLOCK_H takes more head blocks
    CONVERT          fp8 -> fp16 widening: 0 hardware ``cvt`` (2 values per instruction), 1 byte shuffle and
                     logic ops on the integer pipes (see kernel.py); ignored for a bf16 cache
    QK8              fp8 caches: 1 scores straight from the fp8 bytes against an fp8 hi/lo pair of the query
                     (two fp8 MMAs give the bf16 score; only P.V widens the cache), 0 widen first
    PROGRAMS_PER_SM  split-grid programs per SM (times the SM count, divided by the head blocks)
    num_warps, num_stages

Configs that cannot run on sm_90 are left out, each with its reason (``EXCLUDED``); the sizes come from
compiling the split kernel for sm_90 on a CPU (``triton.compile`` with ``GPUTarget("cuda", 90, 32)``) and
reading shared memory from the metadata and registers/spills from ``cuobjdump --dump-resource-usage``
(docs/mla_decode.md has the table).
"""
from __future__ import annotations

import itertools
from typing import Any

import triton

# Batch sizes a server typically captures (graphs padded up to the next one).
CAPTURE_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256)

META_NAMES = ("BLOCK_N", "BLOCK_H", "CONVERT", "QK8", "PROGRAMS_PER_SM")


def make_config(block_n: int, block_h: int, convert: int, qk8: int, programs_per_sm: int, num_warps: int,
                num_stages: int) -> triton.Config:
    return triton.Config({"BLOCK_N": block_n, "BLOCK_H": block_h, "CONVERT": convert, "QK8": qk8,
                          "PROGRAMS_PER_SM": programs_per_sm}, num_warps=num_warps, num_stages=num_stages)


def _candidates() -> list[triton.Config]:
    out = []
    for block_n, block_h, convert, qk8, pps, warps, stages in itertools.product(
            (32, 64), (16, 32), (0, 1), (0, 1), (1, 2), (4, 8), (2, 3, 4)):
        out.append(make_config(block_n, block_h, convert, qk8, pps, warps, stages))
    return out


# (config label pattern, reason) for candidates that cannot run or cannot win; filled from sm_90 compiles.
EXCLUDED: dict[tuple[int, int, int, int], str] = {}


def _excluded_reason(config: triton.Config) -> str | None:
    kw = config.kwargs
    return EXCLUDED.get((kw["BLOCK_N"], kw["BLOCK_H"], config.num_warps, config.num_stages))


CONFIGS: list[triton.Config] = [c for c in _candidates() if _excluded_reason(c) is None]

DEFAULT: triton.Config = make_config(32, 16, 1, 1, 2, 4, 2)

# One small config for the Triton interpreter (it is slow; tests vary the grid through interface._launch).
INTERPRET_CONFIG: triton.Config = make_config(16, 16, 1, 1, 1, 4, 1)


def prune(configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any) -> list[triton.Config]:
    """Drop head blocks wider than needed: BLOCK_H = 32 only pays when H > 16."""
    heads = int(named_args["H"])
    kept = [c for c in configs if c.kwargs["BLOCK_H"] <= max(16, heads)]
    return kept or list(configs)
