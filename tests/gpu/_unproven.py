"""The gate of the Hopper MLA knobs written without a GPU (session 9): their GPU tests run only with
``GRAPHTUNE_GPU_NEW=1`` until they have passed on a GPU once, under a timeout (a hand-off that never arrives would
hang the README command rather than fail a test). A knob leaves ``UNPROVEN`` once its first run has passed."""
from __future__ import annotations

import os

import pytest

# (PP, PV8 and DS ran on the H200 in session 10 and left; CHAIN and PP_FP8, the ping-pong kernel on an fp8 cache,
# in session 11; ZERO_LEN, requests of no tokens beside others, in session 12; RING, the bf16 tokens-on-M ring
# kernel with one program an SM, in session 13; RING_TWO_PER_SM and RING_EARLY_S in session 14, run 1; WLOOP, the fp8
# ping-pong kernel's widening as a loop, in session 20, run 1, then removed: slower; MERGE, the second fp8
# tokens-on-M kernel merging its partials itself, passed in session 20, run 3, and was removed: slower; QSPLIT, the fp8
# ping-pong kernel's query conversion split over its warpgroups, passed in session 20, run 5, removed: slower;
# INDEP, the ping-pong kernels' independent WG1 softmax, in session 20, run 9; OUT32, the ping-pong kernels'
# whole-sector output stores, in session 21, run 2; T8, the fp8 ping-pong kernel with fp8 scores, in session 23, run 1;
# Q_E4M3, query_precision="e4m3" and the query given in e4m3, in session 28, run 1: 9 passed, on an H200; SPLIT_MAX,
# the heads-on-M grid's programs a request capped (16 and 32), in session 32, call A, on an H100; FILL1, the second
# fp8 tokens-on-M kernel's first tile copied alone, passed in session 35, call B, on an H100, and was removed: not
# faster where the tuner picks; PLAN, mla_decode's plan=, passed in session 35, calls D-F, on an H100; PLAN_PP, the
# bf16 kernels reading a plan, in session 36, call B: 21 passed, on an H100; PLAN_BF16_PRICE, a bf16 plan's split
# with a request's start priced, and PLAN_GATHER, the row gather reading a plan, in session 37, call A: 69 passed, on
# an H200; EARLY_R, the bf16 ping-pong kernel's WG1 requesting a tile's right half before its softmax, and WE, T8's WG0
# widening WG1's tile's half before WG1's P, passed in session 38, call A, on an H100, and were removed: not faster;
# SM_SPLIT, the second fp8 tokens-on-M kernel's range by SM id, passed in session 41, call A, on an H100, but for a
# case of its test that the Hopper path does not take (H = 8), and was removed: not faster; QWAIT, the bf16 ping-pong
# kernel's first tiles' copies issued once the query landed, passed in session 41, call C, on an H100, and was
# removed: not faster with a plan; LAZY, the bf16 ping-pong kernel's reference max moved only by more than 2^8 and O's
# rescales skipped where none moved, passed in session 41, call D, on an H100, and was removed: not faster; BOX, the
# bf16 ping-pong kernel's latent tiles as 64-column boxes with one mbarrier each, passed in session 41, call F, on an
# H100, and was removed: slower; SB, the bf16 ping-pong kernel's segments from buffer 0 with each mbarrier an
# allocation of its own, passed in session 42, call A, on an H100, and was removed: not faster; NB, its P hand-offs
# on named barriers, passed in session 42, call C, on an H100, and was removed: not faster; SM1 and RA, its softmax
# off the path to the hand-off and its rope copies after it, passed in session 42, call D, on an H100: in its space;
# SM1 in T8 passed in session 42, call E, on an H100, and was removed: not faster; BOX on SM1 + RA passed in session
# 42, call F, on an H100, and was removed: 2-7% slower with a plan; BOX with a segment's first two tiles as halves
# (BOXP) passed in session 43, call A, on an H100, and both were removed: 1-8% slower with a plan; NX, its next
# segment's first copies issued at the exchange, passed in session 43, call B, on an H100, and was removed: within
# -2.6..+1.3% with a plan over two runs; P8, T8 with an e4m3 P, passed in session 43, call M, on an H100, once its
# hand-off's stale stores were fixed, and was 9-17% slower than T8 with the e4m3 query: not landed,
# docs/gpu_calls/session43/p8.patch; rewritten with its byte work in int32, it passed again in session 44, call A, on
# an H100, and landed pinned; its schedules EI, TE and NF passed in session 45, call A, on an H100: 5 passed, and
# went into P8's tuned space, p_precision="e4m3"; NB3, P8 with three tile buffers, EL, WG1's read of WG0's tile under
# the previous pair's P.V, and TR, V transposed by transposing loads, passed in session 46, call A, on an H100: 19
# passed; TR replaced the int32 transposition (5-8% faster at batch 32-64), NB3 and EL were removed: not faster; VS,
# P8's V^T rows ordered for conflict-free transposition stores, passed in session 47, call B, on an H100 (2-5.5%
# faster: in P8's space), and PL, P as an e4m3 pair, in call C once its pair no longer read a 16-bit register back
# (call B's build: NaN): 15 passed; pinned; MIN_TILES, T8's and P8's split with at least a pair of tiles a program,
# passed in session 48, call B, on an H200: 32 passed; pinned, not faster; POOL and POOL_BF16, tile pools (a
# request's tiles claimed by its programs from a counter in the plan) in the second fp8 and the bf16 tokens-on-M
# kernels, failed in session 51, call A, on an H200 at H = 32 (the counters shared by two head groups) and were slower
# in every cell at H = 16: removed; SEG_PLAN, the reduction reading a plan's slots before its wait and a request's
# slots in one step, passed in session 53, call A, on an H100: 5 passed; the first on (reduction.SEG_FROM_PLAN), the
# second removed: not faster; STREAM, the reduction streamed behind the split kernel on the plan's counters, passed in
# session 53, calls D-J, on an H100: 4 passed each time; STREAM_DS and STREAM_PP passed in session 55, call A, on an
# H100; PDL, the pinned split kernel launched as the programmatic dependent of the kernel ahead, passed in session 56,
# call A, on an H100: 3 passed; PDL_TUNED and PDL_BF16, the tuned split and the bf16 split kernels launched behind the
# kernel ahead, passed in session 57, call A, on an H100: 7 passed; SMW, the SM-weighted split, failed there on small
# batches and was slower in every cell: removed; PT_PRE, a segment's first refill from page ids loaded ahead (the fp8
# and bf16 tokens-on-M kernels), passed in session 58, call A, on an H100: 29 passed, and was removed: not faster;
# COPY_FIRST, a segment's first copies before its query's loads, passed in session 58, call E, on an H100: 27 passed;
# WG2, the fp8 tokens-on-M kernel as two consumer warpgroups and a producer warp, passed in session 59, call A, on an
# H100: 22 passed)
UNPROVEN: dict[str, str] = {}


def skip_unproven(config: dict) -> None:
    """Skip unless ``GRAPHTUNE_GPU_NEW`` is set when ``config`` turns on a knob that has not run on a GPU yet."""
    if os.environ.get("GRAPHTUNE_GPU_NEW"):
        return
    for knob, what in UNPROVEN.items():
        if config.get(knob):
            pytest.skip(f"{what} has not run on a GPU yet: GRAPHTUNE_GPU_NEW=1 under a timeout")
