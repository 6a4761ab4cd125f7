"""Launch of the Hopper (sm_90a) Gluon MLA decode kernels (kernel_hopper.py; the fp8 heads-on-M kernel with
16-bit scores in kernel_hopper_heads.py; the second fp8 tokens-on-M kernel in kernel_hopper_tok.py): which inputs
they take, their TMA descriptors, grid and scratch buffers. ``interface._launch`` decides when to call them; for
fp8 with H < 64 and bf16 with H % 64 == 0, :func:`launch` picks between two kernels by batch
(:func:`second_applies`), each tuned per bucket over its own space.

Each kernel is tuned per batch bucket by ``graphtune.autotune`` (the engines' capture sizes, as the portable
kernel; key ``B``, ``H``, ``PAGE_SIZE``, ``RETURN_LSE`` and the cache's element type) over a small space
whose first config is the benchmark-chosen fixed config (bf16: ``HOPPER_CONFIG`` for H % 64 == 0,
``HOPPER_TOK_CONFIG`` otherwise; fp8: ``HOPPER_FP8_CONFIG`` / ``HOPPER_TOK_FP8_CONFIG``), also the
default (what a capture-time miss falls back to). Each candidate is timed with the reduction after it
(``followed_by=reduction.after_hopper_split``, launched as the decode launches it): configs with more programs an SM
leave more partials to merge, and the reduction's programmatic launch costs the two-buffer configs at batch 8 what
it saves the three-buffer ones (session 20: timed without it, the fp8 tokens-on-M tuning picked two buffers and two
programs an SM at batch 8, 15% slower as a decode than three buffers and one). ``SECOND`` gives a shape class a
second kernel that the tuned path runs from a measured batch up, tuned per bucket over its own space under its own
name: fp8 with H < 64 the second tokens-on-M kernel, bf16 and fp8 with H % 64 == 0 the ping-pong kernel, fp8_ds_mla
(H < 64) the DS kernel from batch 1 (its only Hopper kernel). Kernel names for ``graphtune.force`` /
``GRAPHTUNE_FORCE``: ``KERNEL_NAMES`` and ``SECOND``'s. Where a config changes the KV tile (``BLOCK_N``), its
pre-hook (``_kv_tiles``) rebuilds the KV descriptors for it before every launch (host work only: capture-safe).

Pinned instead of tuned: ``launch(..., config=...)``, or a module-level fixed config changed from its shipped
value (``benchmarks/bench_mla_decode.py --hopper-variants`` times variants that way): that config runs on the
plain kernel, as before tuning existed. In a pinned fp8 tokens-on-M config ``V2=1`` selects the second kernel
(its keys: ``TOK_FP8_V2_PARAMS``; programs per SM follow its buffers), ``V2=0`` the first. fp8_ds_mla with H < 64
runs the second kernel with ``DS=1`` (``HOPPER_TOK_DS_CONFIG``; tuned per bucket over ``HOPPER_TOK_DS_SPACE``, its
``SECOND`` entry), on ``path="auto"`` where ``DS_AUTO`` says so.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch
import triton

from . import (kernel_hopper, kernel_hopper_heads, kernel_hopper_pp, kernel_hopper_pp8, kernel_hopper_ring,
               kernel_hopper_tok, plan as plan_mod, query8, reduction)
from .reference import D_NOPE, D_QK

D_ROPE = D_QK - D_NOPE

BLOCK_N = 64        # the largest tile; pages must hold a multiple of it (a tile never spans two pages)
BLOCK_H = 64
NUM_WARPS = 8
# H % 64 == 0: 2 x 72 KB KV buffers (bf16) + the 72 KB query tile = 226,328 B of the 232,448 an sm_90 block
# may have. 64-token tiles two deep (BLOCK_N 32 with 3-4 buffers: 5-32% slower; PIPE = 1: 1-26% slower), the
# softmax's exchange between the warpgroups with one barrier (XCH) and the next TMA issued before the score
# MMAs (EARLY): 3-8% faster than without the two at H = 128, batch 1-64 on the H200, fastest or tied of five
# variants in every cell (docs/mla_decode.md, session 8 run 2).
HOPPER_CONFIG: dict[str, int] = {"BLOCK_N": 64, "NUM_BUF": 2, "PIPE": 0, "XCH": 1, "EARLY": 1}
# SPLIT_MAX (session 27, a grid knob, any heads-on-M kernel): at most SPLIT_MAX programs a request. At H = 128 a
# segment's partial output is 64 heads x 512 fp32 = 128 KB a head block, 3.6x the 36 KB fp8 tile it may cover: at
# batch 1 the even split gives each of 66 programs a head block ~1 of a 4096-token request's 64 tiles, 16.8 MB of
# partials written and read back by the reduction for 2.4 MB of fp8 cache. SPLIT_MAX 32 halves that (two tiles a
# program: for the ping-pong kernels a pair, so both warpgroups score); it changes nothing from 3 requests up (132
# SMs). FlashMLA's scheduler bounds its splits alike (a fixed cost of 5 blocks a split). Not timed yet: in the first
# heads-on-M kernels' spaces (which the tuned path runs at batch 1-7), and pinned on the ping-pong kernels
# (SPLIT_MAX_PINNED) for the A/B, `graphtune ab mla_decode_hopper_h128[_bf16]`, to say whether a pair a program beats
# the first kernel at batch 1; not in their tuned spaces, which the tuned path runs from batch 8, where the cap never
# bites (8 x 32 programs against 66 a head block): each bucket would compile and time a copy of their first config.
# Session 28 (H200): the tuner picked SPLIT_MAX 32 for the first fp8 kernel at batch 1 (0.0209 ms, against 0.0217
# without it in session 26), still 1.31x FlashMLA, whose scheduler splits that request as 32 does (two tiles a
# split). SPLIT_MAX_FEWER (session 31, not timed): 16 programs a request of four tiles each, half the partials again,
# in the first kernels' spaces beside 32 for the tuner to judge at batch 1-4 (where it changes the grid).
SPLIT_MAX_SMALL = 32
SPLIT_MAX_FEWER = 16
# MIN_TILES (session 48, T8 and P8, pinned: a constexpr of the kernel and of the plan's split,
# ``kernel_hopper._split_start``): each program's range at least that many tiles, the programs past the batch's tiles
# left none. SPLIT_MAX's effect decided on the device from the lengths rather than by the grid: a ping-pong program of
# one tile leaves its second warpgroup idle and costs a partial as a pair does, so MIN_TILES_PAIR halves a short
# batch's working programs and partials (a 4096-token request at batch 1: 32 programs of a pair a head block, as
# SPLIT_MAX 32) and leaves longer batches' splits as they were. What prompted it: session 48 call A (H100, H = 128,
# the e4m3 query, a step's plan; benchmarks/results/p8_split32_h100_session48_callA.json) P8 with SPLIT_MAX 32 0.0156
# ms at batch 1 against 0.0164 without (P8 + EI 0.0157 against 0.0167). Not in the tuned spaces: on an H200 (calls B
# and D, with a plan, each config pinned without and with it; plan_min_tiles_*_h200_session48_call{B,D}.json,
# plan_split_max_*_h200_session48_callD.json) neither it nor SPLIT_MAX 32 was faster at batch 1-2: P8 + EI + VS
# +1.9% / +1.9% at batch 1 (calls B, D; SPLIT_MAX 32 -1.9%, ragged +4.3%), T8 with the e4m3 query +3.8%, T8 +8.4% /
# +7.2% (SPLIT_MAX 32 +4.8%, ragged +9.3%), batch 2 within -3..+1%: likely a pair a program takes longer than one tile
# (each warpgroup multiplies both tiles), which the reduction's saved partials do not repay on that card.
MIN_TILES_PAIR = 2
MIN_TILES_MAX = 16
SPLIT_MAX_PINNED: dict[str, list[dict[str, int]]] = {
    "bf16": [dict(BLOCK_N=64, PP=1, RELOAD=1, SPLIT_MAX=SPLIT_MAX_SMALL)],
    "fp8": [dict(BLOCK_N=64, T8=1, SPLIT_MAX=SPLIT_MAX_SMALL)]}
# ``PP = 1`` in a bf16 heads-on-M config runs the ping-pong kernel instead (kernel_hopper_pp.py: two warpgroups
# taking alternate 64-token tiles, each owning half of the output columns): warp-specialised, 4 + 4 warps; its
# latent tiles come as two 256-column TMA halves, each on its own mbarrier. The tuned path runs it from
# PP_MIN_BATCH requests up: on the H200 (session 10 run 3, H = 128, 4096 tokens, page size 64, against the fixed
# config above in the same run) 0.0203 / 0.0358 / 0.0921 / 0.1771 ms at batch 1 / 8 / 32 / 64 against 0.0192 /
# 0.0361 / 0.1055 / 0.2028: 6% slower at batch 1, tied at 8, 13% faster at 32 and 64. Its space: RELOAD 1 (each
# KV part reloaded by its last reader; RELOAD 0: 4-5% slower at 32-64) with and without WG1_FIRST (tied). Session
# 42 (call D, H100, `benchmarks/probes/plan_probe.py --format bf16 --heads 128 --batches 1,8,32,64 --b2
# BLOCK_N=64,PP=1,RELOAD=1,WG1_FIRST=1 --b3 SM1=1,RA=1`, with a plan): SM1 (the softmax off the path to the
# hand-off: ``kernel_hopper_pp._softmax_p``) and RA (the rope copies after the hand-off) 0.0172 / 0.0312 / 0.0766 /
# 0.1332 ms at batch 1 / 8 / 32 / 64 against 0.0179 / 0.0317 / 0.0781 / 0.1369 (ragged 1.0-2.3% faster); SM1 alone
# -0.3..-3.8%, RA alone -0.3..-2.1%: both in every config of the space.
PP_NUM_WARPS = 4
PP_CHUNK = 256
PP_MIN_BATCH = 8
HOPPER_PP_SPACE: list[dict[str, int]] = [dict(BLOCK_N=64, PP=1, RELOAD=1, SM1=1, RA=1),
                                         dict(BLOCK_N=64, PP=1, RELOAD=1, WG1_FIRST=1, SM1=1, RA=1)]
PP_NAME = "mla_decode_hopper_pp"
# The same kernel on a per-tensor fp8 cache (each tile TMA'd as fp8 into its fp16 buffer and widened in place by
# its owner) is the fp8 heads-on-M class's second kernel from PP_FP8_MIN_BATCH requests up. On H200s (H = 128,
# 4096 tokens, page size 64; RELOAD 1, WG1_FIRST 1 against the widened-score kernel's best config in the same run)
# at batch 64: 0.2760 / 0.2766 / 0.2782 ms against 0.2818 / 0.2837 / 0.2847 (session 12 run 3, session 13 run 5,
# session 14 run 1: 2.1-2.5% faster; session 11 run 1, before the kernel's last change: 0.2768 against 0.2731);
# at batch 32 slower in the same three runs (0.1479 / 0.1485 / 0.1472 against 0.1461 / 0.1463 / 0.1464). Since its
# query chunks stopped spilling (session 18, ``kernel_hopper_pp._scores``) it wins from batch 8: 0.0437 / 0.1109 /
# 0.2009 ms against 0.0468 / 0.1349 / 0.2024 at batch 8 / 32 / 64, and loses at 1 (0.0237 against 0.0222; H200,
# session 18 run 5).
PP_FP8_MIN_BATCH = 8
# INDEP = 1 (session 20): WG1's softmax from its own running max, the pair's two softmaxes at once
# (kernel_hopper_pp._pp_wg1); on the H200 (run 9) 0.1088 / 0.1961 ms against 0.1105 / 0.2013 at batch 32 / 64 and
# 0.0413 against 0.0401 at 8 (bf16: within 1% at 1-32, 2% slower at 64; not in its space): per bucket the tuner picks.
HOPPER_PP_FP8_SPACE: list[dict[str, int]] = [dict(BLOCK_N=64, PP=1, RELOAD=1, WG1_FIRST=1),
                                             dict(BLOCK_N=64, PP=1, RELOAD=1, WG1_FIRST=0),
                                             dict(BLOCK_N=64, PP=1, RELOAD=1, WG1_FIRST=1, INDEP=1)]
PP_FP8_NAME = "mla_decode_hopper_pp_fp8"
# ``T8 = 1`` (kernel_hopper_pp8.py, session 23): the ping-pong schedule with fp8 scores on the landed tile (the query as
# an fp8 hi/lo pair) and each warpgroup widening only its own half of V after the scores: the fp8 heads-on-M class's
# third kernel, which the tuned path runs from T8_MIN_BATCH requests up. On the H200 (session 23 run 3, H = 128,
# 4096 tokens, page size 64, against the second kernel's RELOAD 1 / WG1_FIRST 1 in the same run) 0.0992 / 0.1655 ms
# against 0.1098 / 0.1990 at batch 32 / 64 (10% / 17% faster), 0.0410 / 0.0223 against 0.0398 / 0.0216 at 8 / 1
# (3% slower); relative error 1.6e-4 for both. The public call tuned per bucket (session 23 run 4, same GPU kind):
# 0.0990 / 0.1640 ms at batch 32 / 64 against FlashMLA's 0.0700 / 0.1157 (1.41 / 1.42; 1.57 / 1.69 with the second
# kernel in session 21 run 5). Its space: WG0 widening its half of both tiles of a pair (WL1 0, the tuner's pick at 32
# and 64 in run 4), and WG1 widening its own tile's left half after its hand-off (WL1 1: 0.1000 / 0.1753 ms in the
# tuner's timings of run 4). (WG1 widening WG0's tile's left half under WG0's softmax lost there too, 0.1018 / 0.1790,
# and was removed.) Session 24 (run 2, H200): its rope rows by TMA with the tile, each copy's page-table load past the
# fences, 0.0954 / 0.1573 ms at 32 / 64 (0.0986 / 0.1650 before), 0.0396 at 8 and 0.0222 at 1 (the second kernel
# 0.0412 / 0.0216 in run 1); with both kernels' widening free of bank conflicts (run 8) T8 0.0384 / 0.0892 / 0.1452 at
# 8 / 32 / 64 against the second kernel's 0.0381 / 0.1016 / 0.1786 (WG1_FIRST 0): the threshold stayed at 32.
# Session 29 (run 3, H200, `graphtune ab mla_decode_hopper_h128 --sizes 8,16`): with its query pair made by the
# pre-pass (``_query_pair``) T8 takes 0.0393 / 0.0579 ms at batch 8 / 16 against the second kernel's best 0.0396 /
# 0.0604 (WG1_FIRST 1 / 0): a tie at 8, 4% faster at 16. The threshold moves to 16. Session 36 (call E, H100, the
# public call tuned per bucket, `benchmarks/probes/plan_probe.py --heads 128 --batches 8 [--third-min-batch 8]`): at
# batch 8 T8 0.0360 ms against the ping-pong kernel's 0.0380 (ragged 0.0387 / 0.0425), and with a step's plan, which T8
# reads and the ping-pong kernel does not, 0.0326 against 0.0380 (ragged 0.0348 / 0.0425). The threshold moves to 8,
# the ping-pong kernel's own: the fp8 ping-pong kernel serves no tuned bucket now (its pinned configs stay). Session 37
# (call A, H200, `plan_probe.py --heads 128 --batches 1,4 [--third-min-batch 1]`): at batch 1 / 4 T8 0.0184 / 0.0254
# ms against the first heads-on-M kernel's 0.0191 / 0.0282 (ragged 0.0207 / 0.0282 against 0.0215 / 0.0322), and with
# a step's plan 0.0168 / 0.0228 against 0.0194 / 0.0271 (the first kernel reading a plan, branch first-plan: +1.2% /
# -4.1%); FlashMLA 0.0155 / 0.0221. The threshold moves to 1: T8 serves every fp8 heads-on-M batch, the first fp8
# heads-on-M kernel none (its pinned configs stay; measured at H = 128, H = 64 follows the class).
T8_MIN_BATCH = 1
# A bf16 cache's partials in fp16, stored scaled per half-row (reduction.partial_layout), from the ping-pong kernel
# (bf16, H a multiple of 64) up to this many requests; fp32 elsewhere. Session 37 call E (H100,
# `benchmarks/probes/partials_probe.py`, the public call tuned per bucket with a plan, fp32 / fp16 unscaled / fp16
# scaled, ms): H = 128 uniform 0.0339 / 0.0302 / 0.0320 at batch 8, 0.0829 / 0.0769 / 0.0787 at 32, 0.1357 / 0.1377
# / 0.1414 at 64; ragged 0.0380 / 0.0355 / 0.0348, 0.0872 / 0.0796 / 0.0817, 0.1531 / 0.1446 / 0.1477: scaled 5-8.5%
# faster to 32, 4.2% slower at 64 uniform (fp16 unscaled there +1.5%; H200, call B: +1.3%). H = 16 (the tokens-on-M
# kernel) uniform 0.0204 / 0.0200 / 0.0209 at 8, 0.0585 / 0.0575 / 0.0583 at 32, 0.2011 / 0.2007 / 0.2014 at 128, ragged
# +4.8% / -0.6% / -1.5% scaled: not taken there, nor by the first heads-on-M kernel (batch 1-7, not timed; 255
# registers, its scaled build spills 104 bytes against 48). Unscaled fp16 is not safe for a bf16 cache; the scaling's
# per-segment pass over the output (its maximum) is what it costs against it.
PP_PART16_MAX_BATCH = 32
HOPPER_T8_SPACE: list[dict[str, int]] = [dict(BLOCK_N=64, T8=1), dict(BLOCK_N=64, T8=1, WL1=1)]
T8_NAME = "mla_decode_hopper_t8"
# ``query_precision="e4m3"`` (``Q_LO = 0``): T8 scores against the query's e4m3 hi half alone (per 64-token tile 18
# fp8 score wgmmas instead of 36, the lo half neither converted nor stored), tuned per bucket under its own name, and
# the class's third kernel from T8_E4M3_MIN_BATCH requests: the only fp8 heads-on-M kernel that scores against the
# pair (the others score a widened tile against an fp16 query), and already ahead of the second kernel at batch 8
# with the pair (session 26 run 3, H200, `graphtune ab mla_decode_hopper_h128`: T8 WL1 1 0.0380 ms against 0.0387,
# 1.8% beyond noise), so without the lo half it is the better kernel there too. Timed since (sessions 28-29, H200:
# 1.12-1.19x FlashMLA at batch 8-64 from a bf16 query; session 36 call E, H100, with a step's plan: 0.98 / 1.02 / 1.02
# / 1.11x at batch 8 / 16 / 32 / 64); the pair's T8 now starts at the same batch (T8_MIN_BATCH). Session 37 (call B,
# H200): the query given in e4m3, which runs T8 at every batch, took 0.0177 ms at batch 1 against the first kernel's
# 0.0199 with query_precision="e4m3" (FlashMLA 0.0171): 1, with the pair's.
T8_E4M3_MIN_BATCH = 1
T8_E4M3_NAME = "mla_decode_hopper_t8_e4m3"
# PL (session 47, pinned; not in a tuned space): P8's schedule with P as an e4m3 pair (hi = e4m3(2^8 P), lo = e4m3(2^8
# P - hi): 8 significant bits, bf16's) each multiplied by the transposed fp8 V. Session 47 call C (H100, H = 128,
# 4096-token requests, the e4m3 query, a step's plan; benchmarks/results/plan_pl_vs_h100_session47_callC.json): P8 + PL
# + EI + VS 0.0168 / 0.0281 / 0.0668 / 0.1172 ms at batch 1 / 8 / 32 / 64 against T8's tuned 0.0164 / 0.0288 / 0.0721
# / 0.1257. But its error grows with a segment's length (1.9e-3 against the e4m3 query's reference with 132 programs,
# 3.3e-3 with one program a request, where the pair's own rounding measured 5e-4 on the CPU, session 25's
# p_rounding.py): the fp8 MMAs' accumulation into a segment's O (benchmarks/probes/pl_numerics.py: PL's arithmetic
# emulated, 5.6e-4 at any segment length with exact accumulation, 9.6e-4 / 2.43e-3 at 8 / 64 tiles a segment with a
# 14-bit one, the model of Hopper's fp8 accumulation in DeepSeek-V3's technical report, measured on H800). Not bf16
# P's class at long segments, so it stays pinned (and in ``graphtune ab mla_decode_hopper_h128_p8``).
T8_PL_CONFIG: dict[str, int] = dict(BLOCK_N=64, T8=1, P8=1, PL=1, EI=1, VS=1)
# ``p_precision="e4m3"`` (with the e4m3 query): T8 with P rounded to e4m3 and P.V as fp8 wgmmas on a transposed V (P8,
# FlashMLA's fp8 accuracy class whole: 2.1e-2 on 4096-token requests, H100, session 44), tuned per bucket under its own
# name over its schedules: P8 alone; EI, the next tiles' copies issued once a buffer's bytes are read; EI with TE, WG0's
# transposition under its score MMAs, and NF, the transpositions fenced by the hand-offs. Session 46 call B (H100, H =
# 128, 4096-token requests, with a step's plan, V transposed by transposing loads;
# benchmarks/results/plan_tr_p8_ei_h100_session46_callB.json, plan_tr_NB3_1_h100_session46_callB.json), ms at batch 1 /
# 8 / 32 / 64: P8 0.0167 / 0.0278 / 0.0672 / 0.1161, EI 0.0165 / 0.0271 / 0.0650 / 0.1102, EI + TE + NF 0.0169 /
# 0.0274 / 0.0648 / 0.1107, FlashMLA 0.0160 / 0.0293 / 0.0718 / 0.1129: within a few percent of each other below batch
# 32, the tuner's call. Each with VS (session 47: V^T's rows ordered so the transposition's stores meet no bank
# conflict; call B, H100, with a plan, P8 + EI against it with VS: 0.0166 / 0.0274 / 0.0648 / 0.1106 ms against 0.0163 /
# 0.0262 / 0.0620 / 0.1045 at batch 1 / 8 / 32 / 64, ragged -2.8..-4.5%; benchmarks/results/
# plan_vs_ei_h100_session47_callB.json).
HOPPER_T8_P8_SPACE: list[dict[str, int]] = [dict(BLOCK_N=64, T8=1, P8=1, VS=1), dict(BLOCK_N=64, T8=1, P8=1, EI=1, VS=1),
                                            dict(BLOCK_N=64, T8=1, P8=1, EI=1, TE=1, NF=1, VS=1)]
T8_P8_NAME = "mla_decode_hopper_t8_p8"
# H < 64 (16, 32, 48): the tokens-on-M kernel, 16 heads and one warpgroup per program; 168,728 B of shared
# memory (a third 72 KB buffer would not fit; BLOCK_N = 32 is not possible: a wgmma's M is a multiple of 64).
# PIPE 2 (next load issued before tile i's wait, softmax with one block barrier) was the fastest of PIPE 0/1/2 at
# every batch timed on the H200 (H = 16, batch 1-128: 0.1601 ms at 128 against 0.1654 for PIPE 0; branch
# mla-h16, run 2, docs/mla_decode.md).
TOK_BLOCK_H = 16
TOK_NUM_WARPS = 4
HOPPER_TOK_CONFIG: dict[str, int] = {"BLOCK_N": 64, "NUM_BUF": 2, "PIPE": 2}
# ``RING = 1`` in a pinned bf16 tokens-on-M config runs the ring kernel instead (kernel_hopper_ring.py: the tiles
# as [64, 64] chunks in a ring of NUM_SLOTS <= 25 slots, so more than one tile is in flight while one computes).
# Pinned only until it is timed against this kernel.
RING_CHUNK = 64
RING_SLOTS = 25
RING_SLOTS_TWO_PER_SM = 11     # (PROGRAMS_PER_SM = 2: 111,384 B a program, compiled for sm_90)


# fp8 (per-tensor) cache, H < 64: the tokens-on-M fp8 kernel. Two 32 KB buffers, V^T widened in registers
# (WIDEN 0), two programs per SM (96,528 B each): the fastest of five variants at batch 32-128 on the H200
# (0.1457 ms at H = 16, batch 128, against 0.1820 for four buffers and one program per SM), within 1% of the
# best at batch 1-8 (docs/mla_decode.md, branch issue-mla2, run 2).
# CHAIN 1 (its hi scores as one fp8 MMA chain per 128 dims and the rope's, folded in fp32; the lo half, weight
# 1/16, stays one chain): on the H200 (session 11, H = 16, logits of standard deviation ~1) the LSE error 3.8e-4
# against 1.9e-3 - 3.6e-3 without it (two runs), times unchanged (0.0148 / 0.0216 ms at batch 1 / 8 against
# 0.0149 / 0.0226; docs/mla_decode.md "Session 11").
HOPPER_TOK_FP8_CONFIG: dict[str, int] = {"BLOCK_N": 64, "NUM_BUF": 2, "PIPE": 0, "WIDEN": 0, "PROGRAMS_PER_SM": 2,
                                         "CHAIN": 1}
# fp8 (per-tensor) cache, H % 64 == 0: heads on M, the tile widened once to fp16 and scored with an fp16 copy
# of the query (kernel_hopper_heads.py; 2 x 32 KB fp8 buffers + the fp16 tile + the fp16 query + P = 222,480 B):
# 11-19% faster than a kernel scoring with fp8 MMAs against the query's hi/lo pair at H = 128, batch 1-64, on the
# H200, same accuracy (docs/mla_decode.md, sessions 8 and 9; that kernel was removed in session 9).
HOPPER_FP8_CONFIG: dict[str, int] = {"BLOCK_N": 64, "NUM_BUF": 2, "WOVL": 1, "PSMEM": 1, "XCH": 1}
# Whether ``path="auto"`` runs the fp8 Hopper kernels (per kernel). Both beat the portable kernel at every
# batch timed on the H200 (H = 16: 1.3-1.4x at batch 1-128; H = 128: 1.1x at batch 1, 1.7-2.0x at 8-64);
# a kernel that stops winning goes back behind ``path="hopper"`` by setting its entry to False.
FP8_AUTO: dict[str, bool] = {"tokens-on-M": True, "heads-on-M": True}
_B_CHUNK = 128

# The per-bucket spaces (kernel parameters only), each led by its kernel's fixed config. Every config here
# passed the correctness check of ``bench_mla_decode.py --hopper-variants`` on the H200 and was timed there
# (docs/mla_decode.md). Where the fixed config won or tied every timed cell (bf16 and fp8 heads on M: H = 128,
# batch 1-64) the others stay for what was not timed (batch above 64, H = 64 or 256); elsewhere another config
# won cells (fp8 tokens on M: 4 buffers at batch 8).
# bf16, heads on M: the previous fixed config (no XCH / EARLY), P through shared memory on top of the fixed
# config (PSMEM: within 1-2%), and 32-token tiles 4 deep with the FA3-style overlap; the only kernel whose tile
# (BLOCK_N) varies, so its configs carry the pre-hook that rebuilds the KV descriptors. (64/2/PIPE 1 and
# 32/3/PIPE 0, slower in every cell of issue 14's run 4, left the space in session 8.) Every config names every
# key of the fixed config: ``graphtune.force(name, **config)`` keeps the default config's values for keys it
# leaves out, and PIPE 1 does not compile with the fixed config's EARLY 1.
HOPPER_SPACE: list[dict[str, int]] = [dict(HOPPER_CONFIG), dict(BLOCK_N=64, NUM_BUF=2, PIPE=0, XCH=0, EARLY=0),
                                      {**HOPPER_CONFIG, "PSMEM": 1},
                                      {**HOPPER_CONFIG, "SPLIT_MAX": SPLIT_MAX_SMALL},
                                      {**HOPPER_CONFIG, "SPLIT_MAX": SPLIT_MAX_FEWER},
                                      dict(BLOCK_N=32, NUM_BUF=4, PIPE=1, XCH=0, EARLY=0)]
# bf16, tokens on M: one config (BLOCK_N is the wgmma's M, a third buffer does not fit; PIPE 2 won every batch
# timed): still forceable and in coverage.
HOPPER_TOK_SPACE: list[dict[str, int]] = [dict(HOPPER_TOK_CONFIG)]
# fp8, heads on M (the widened-score kernel): P as a register operand (PSMEM 0: tied in run 2), and the whole
# tile widened before the score MMAs (WOVL 0: 1-4% slower in run 1).
HOPPER_FP8_SPACE: list[dict[str, int]] = [dict(HOPPER_FP8_CONFIG), {**HOPPER_FP8_CONFIG, "PSMEM": 0},
                                          {**HOPPER_FP8_CONFIG, "WOVL": 0},
                                          {**HOPPER_FP8_CONFIG, "SPLIT_MAX": SPLIT_MAX_SMALL},
                                          {**HOPPER_FP8_CONFIG, "SPLIT_MAX": SPLIT_MAX_FEWER}]
# fp8, tokens on M: 2 buffers / WIDEN 0 (the fixed config), 4 buffers (won batch 8 in run 2), WIDEN 2 (V^T
# widened in shared memory). Programs per SM are not a kernel parameter: the grid gives each config as many
# as fit an SM (``_tok_fp8_programs_per_sm``), as the variants were timed.
_TOK_FP8_BASE = {k: v for k, v in HOPPER_TOK_FP8_CONFIG.items() if k != "PROGRAMS_PER_SM"}
HOPPER_TOK_FP8_SPACE: list[dict[str, int]] = [_TOK_FP8_BASE, {**_TOK_FP8_BASE, "NUM_BUF": 4},
                                              {**_TOK_FP8_BASE, "WIDEN": 2}]
# fp8, tokens on M, the second kernel (kernel_hopper_tok.py), which ``launch`` runs from TOK_FP8_V2_MIN_BATCH
# requests up: every batch since session 18. On the H200 it lost to the first kernel at batch 1 in session 8 (0.0165
# against 0.0156 ms) and won at 8-128 (0.0205 / 0.0370 / 0.0584 / 0.0979 against 0.0226 / 0.0494 / 0.0816 /
# 0.1454); with its full-sector stores (session 17) it wins from batch 1: 0.0112 / 0.0130 / 0.0149 ms against the
# first kernel's 0.0127 / 0.0137 / 0.0170 at batch 1 / 2 / 4 (H200, session 18 run 1, H = 16, page size 64).
# Per-bucket space: two 40 KB buffers and two programs per SM (fastest at batch 64-128; the fixed config), three
# buffers and one program (fastest at 8-32). Five buffers won no batch. PREFETCH 1 / FAST_MAX 1 won every batch.
# CHAIN 1 (the scores as one fp8 MMA chain per 128 dims and the rope's, folded in fp32; Triton lets an fp8 dot on
# sm_90 accumulate all 576 dims in the tensor core's reduced-precision accumulation otherwise): on the H200 (session
# 11, H = 16, std-1 logits) the LSE error of a one-token request 3.8e-4 against 9.5e-4 without it, output error
# unchanged; times within 1% at batch 32-128 (0.0386 / 0.0590 / 0.0994 ms against 0.0392 / 0.0592 / 0.0987 with
# two buffers; docs/mla_decode.md "Session 11").
TOK_FP8_V2_MIN_BATCH = 1
HOPPER_TOK_FP8_V2_CONFIG: dict[str, int] = {"BLOCK_N": 64, "NUM_BUF": 2, "PREFETCH": 1, "FAST_MAX": 1, "CHAIN": 1}
# Since session 13 the space also has both with RK64 1 (the rope's score MMAs over its 64 columns, not the zero
# padding) and PT_EARLY 1 (the next tile's page ids loaded a tile ahead): the same results (every GPU test of the
# schedules, page size 1 included), 1-2% faster in two H200 runs (session 12 run 3, two buffers: 0.0582 / 0.0984 ms
# at batch 64 / 128 against 0.0592 / 0.0992; session 13 run 5: 0.0587 / 0.0986 against the tuned path's 0.0611 /
# 0.0994), within 1% either way in session 9's; per bucket the tuner picks. Since session 51 it also has both with
# RK64 alone: given a step's plan (whose rows carry a program's first three page ids), on an H200 (session 51 call A,
# H = 16, page size 64, one run) two buffers with RK64 alone ran 0.0314 / 0.0501 / 0.0860 ms at batch 32 / 64 / 128
# and three 0.0320 / 0.0541 / 0.0950, where the tuned path's picks, all with PT_EARLY, ran 0.0330 / 0.0508 / 0.0866
# (right: the benchmark's checks against the reference). The tuned path with the six against the four (session 53
# call B, one H100, docs/gpu_calls/session51/s51b.sh, two runs each, H = 16, batch 32 / 64 / 128, tuned with a step's
# plan): at batch 32 the tuner took a new row (three buffers, RK64 alone) and ran 0.0384 / 0.0380 ms against the four's
# 0.0387 / 0.0382, faster in both runs; at 64 and 128 it took the same config as from the four (three buffers,
# PT_EARLY): 0.0645 / 0.0648 and 0.1124 / 0.1128 against 0.0645 / 0.0645 and 0.1119 / 0.1115, the same kernel
# timed in two processes; without a plan even (0.0384 / 0.0388 against 0.0384 / 0.0385 at batch 32). Kept: on that
# H100 the pick moved only where it paid, and the H200's lead was two buffers with RK64 alone at batch 32.
# Since session 58 its two-buffer rows issue a segment's first copies before the query's loads (COPY_FIRST): pinned
# with a plan on an H100 (session 58 call C, `split_pdl.py --ways plan-first --ragged`, H = 16, page size 64), two
# buffers with RK64 0.0375 / 0.0628 / 0.1120 ms -> 0.0374 / 0.0624 / 0.1116 at batch 32 / 64 / 128 (ragged 0.0379 /
# 0.0634 / 0.1166 -> 0.0376 / 0.0628 / 0.1163), faster in every cell; three buffers 0.0370 / 0.0622 / 0.1109 -> 0.0373 /
# 0.0628 / 0.1114 (ragged 0.0397 / 0.0646 / 0.1181 -> 0.0397 / 0.0652 / 0.1187): not with three buffers.
# (Every row names COPY_FIRST: graphtune.force keeps the first row's value of a key a forced row leaves out.)
_V2_SCHEDULE = {"RK64": 1, "PT_EARLY": 1}
_V2_TWO = {**HOPPER_TOK_FP8_V2_CONFIG, "COPY_FIRST": 1}
_V2_THREE = {**HOPPER_TOK_FP8_V2_CONFIG, "NUM_BUF": 3, "COPY_FIRST": 0}
HOPPER_TOK_FP8_V2_SPACE: list[dict[str, int]] = [dict(_V2_TWO), dict(_V2_THREE), {**_V2_TWO, **_V2_SCHEDULE},
                                                 {**_V2_THREE, **_V2_SCHEDULE}, {**_V2_TWO, "RK64": 1},
                                                 {**_V2_THREE, "RK64": 1}]
TOK_FP8_V2_NAME = "mla_decode_hopper_tok_fp8_v2"
# fp8_ds_mla (DeepSeek's 656-byte rows), H < 64: the second tokens-on-M kernel with ``DS=1`` (four score chains, one
# per 128-dim group, each scaled per token; the bf16 rope scored by a bf16 wgmma; P.V chunk c's P tile carries
# group c's scale). Written in session 9 (docs/mla_decode.md "fp8_ds_mla on Hopper"), run on the H200 in session 10:
# its error beyond the bf16 output rounding within 2e-3 per 128-dim chunk, LSE within 8.8e-4
# (benchmarks/probes/ds_error_probe.py), and 1.4x / 2.0x / 2.6x / 3.0x / 3.4x faster than the portable kernel's
# default at batch 1 / 8 / 32 / 64 / 128 (H = 16, page size 64, 4096 tokens: 0.0175 / 0.0231 / 0.0434 / 0.0672 /
# 0.1121 ms against 0.0241 / 0.0462 / 0.1133 / 0.2038 / 0.3822), 3.09 TB/s at batch 128 against the fp8 kernel's
# 3.11. A pinned config is overlaid on this fixed config.
HOPPER_TOK_DS_CONFIG: dict[str, int] = {"V2": 1, "DS": 1, "BLOCK_N": 64, "NUM_BUF": 2, "PREFETCH": 0, "FAST_MAX": 1}
DS_FORMAT = "fp8_ds_mla"
# Its per-bucket space (the second tokens-on-M kernel's parameters, DS = 1): the fixed config, and three buffers
# at one program per SM. On the H200 (session 10 run 3, H = 16, page size 64, 4096 tokens) three buffers were
# faster at batch 32 (0.0427 against 0.0444 ms) and slower at 64 / 128 (0.0703 / 0.1327 against 0.0679 / 0.1137).
HOPPER_TOK_DS_SPACE: list[dict[str, int]] = [
    {k: v for k, v in HOPPER_TOK_DS_CONFIG.items() if k != "V2"},
    {**{k: v for k, v in HOPPER_TOK_DS_CONFIG.items() if k != "V2"}, "NUM_BUF": 3}]
TOK_DS_NAME = "mla_decode_hopper_tok_ds"
# Whether ``path="auto"`` runs fp8_ds_mla (H < 64, page sizes that are multiples of 64) on the Hopper kernel,
# tuned per bucket over HOPPER_TOK_DS_SPACE (on: faster at every batch timed, above); off, the portable kernel
# serves the format unless path="hopper". (Other page sizes stay portable: the DS row gather is correct on the
# GPU but not timed.)
DS_AUTO = True
KERNEL_NAMES: dict[tuple[bool, bool], str] = {   # (heads on M, fp8) -> the graphtune kernel name
    (True, False): "mla_decode_hopper", (False, False): "mla_decode_hopper_tok",
    (True, True): "mla_decode_hopper_fp8", (False, True): "mla_decode_hopper_tok_fp8"}
# The fixed configs as shipped: one changed since (a benchmark's variant) is pinned, not tuned
_SHIPPED: dict[tuple[bool, bool], dict[str, int]] = {
    (True, False): dict(HOPPER_CONFIG), (False, False): dict(HOPPER_TOK_CONFIG),
    (True, True): dict(HOPPER_FP8_CONFIG), (False, True): dict(HOPPER_TOK_FP8_CONFIG)}
_SHIPPED_DS = dict(HOPPER_TOK_DS_CONFIG)


def _tok_fp8_v2_programs_per_sm(config: dict[str, Any]) -> int:
    """Programs per SM of the second fp8 tokens-on-M kernel's grid: two 40 KB buffers fit two programs (107,280 B
    each), three or more one; a config's ``PROGRAMS_PER_SM`` (1-8) overrides it (more than fit an SM: a grid of
    several waves, which the SMs take as they free; a probe of the end's spread, session 37, not in a space)."""
    return int(config.get("PROGRAMS_PER_SM") or (2 if config["NUM_BUF"] == 2 else 1))


def _tok_fp8_programs_per_sm(config: dict[str, Any]) -> int:
    """Programs per SM of the fp8 tokens-on-M kernel: two when two blocks fit an SM's 228 KB (two buffers and
    V^T widened in registers or one shared chunk: 96,528 / 112,912 B), else one."""
    return 2 if config["NUM_BUF"] == 2 and config["WIDEN"] != 1 else 1


def _heads_on_m(heads: int) -> bool:
    return heads % BLOCK_H == 0


def _base_config(on_m: bool, fp8: bool) -> dict[str, int]:
    """The fixed config of the kernel that serves this shape class (a copy: callers overlay theirs)."""
    if fp8:
        return dict(HOPPER_FP8_CONFIG if on_m else HOPPER_TOK_FP8_CONFIG)
    return dict(HOPPER_CONFIG if on_m else HOPPER_TOK_CONFIG)


def supported(q: torch.Tensor, kv_cache: torch.Tensor, fmt: str, explicit: bool = False) -> str | None:
    """None when a Hopper kernel takes these inputs, else why not (the portable kernel runs them).
    ``explicit``: the caller asked for the Hopper path (``path="hopper"``), which also admits an fp8 kernel
    whose ``FP8_AUTO`` entry is off."""
    if q.device.type != "cuda":
        return "not a CUDA tensor"
    capability = reduction.device_capability(q.device)
    if capability != (9, 0):
        return f"compute capability {capability}, needs (9, 0)"
    return shape_supported(q, kv_cache, fmt, explicit)


def shape_supported(q: torch.Tensor, kv_cache: torch.Tensor, fmt: str, explicit: bool = False) -> str | None:
    """The shape / layout half of :func:`supported` (no device query: also for CPU compile tests)."""
    heads = q.shape[1]
    if fmt == DS_FORMAT:
        if not explicit and not DS_AUTO:
            return f"kv_format {fmt!r}: its Hopper kernel (DS=1) is not the measured faster path (path='hopper' " \
                   "runs it)"
        if _heads_on_m(heads):
            return f"kv_format {fmt!r} with H = {heads}: the Hopper kernel for it takes H < {BLOCK_H}"
    elif fmt == "fp8":
        kind = "heads-on-M" if _heads_on_m(heads) else "tokens-on-M"
        if not explicit and not FP8_AUTO[kind]:
            return f"kv_format 'fp8' with H = {heads}: the {kind} fp8 kernel is not the measured faster path " \
                   "(path='hopper' runs it)"
    elif fmt != "bf16":
        return f"kv_format {fmt!r}: the Hopper kernels take bf16 and fp8 caches"
    if heads % BLOCK_H and heads % TOK_BLOCK_H:
        return f"H = {heads} is not a multiple of {TOK_BLOCK_H}"
    if kv_cache.shape[1] % BLOCK_N:
        # fp8 and fp8_ds_mla with H < 64 take any page size through the row-gather loader (GATHER): asked for
        # explicitly, or where GATHER_AUTO is on
        if fmt not in GATHER or _heads_on_m(heads):
            return f"page size {kv_cache.shape[1]} is not a multiple of {BLOCK_N}"
        if not explicit and not GATHER_AUTO[fmt]:
            return f"page size {kv_cache.shape[1]} with kv_format {fmt!r}: the row-gather kernel is not the " \
                   "measured faster path (path='hopper' runs it)"
    if not kv_cache.is_contiguous():
        return "kv_cache is not contiguous (TMA reads it as one [pages * page_size, 576] matrix)"
    if not q.is_contiguous():
        return "q is not contiguous"
    return None


def _gl_dtype(dtype: torch.dtype):
    from triton.experimental.gluon import language as gl
    return {torch.bfloat16: gl.bfloat16, torch.float8_e4m3fn: gl.float8e4nv, torch.float32: gl.float32}[dtype]


@functools.lru_cache(maxsize=None)
def _layout(block: tuple[int, ...], dtype: torch.dtype):
    # cached: the pre-hook below runs before every launch, and the layout depends only on these two
    from triton.experimental.gluon import language as gl
    return gl.NVMMASharedLayout.get_default_for(list(block), _gl_dtype(dtype))


def _descriptor(t: torch.Tensor, block: list[int]):
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    return TensorDescriptor(t, list(t.shape), list(t.stride()), list(block), _layout(tuple(block), t.dtype))


def _q_descriptors(q: torch.Tensor, block_h: int, cols: int = D_NOPE) -> tuple[Any, Any]:
    """The query's TMA descriptors, [block_h, cols] latent (512, or 256 for a kernel that copies each half on its
    own) and [block_h, 64] rope boxes over its [B * H, 576] rows."""
    q2 = q.view(q.shape[0] * q.shape[1], D_QK)
    return _descriptor(q2, [block_h, cols]), _descriptor(q2[:, D_NOPE:], [block_h, D_ROPE])


def dequantize_query(q: torch.Tensor, q_scale: float | torch.Tensor) -> torch.Tensor:
    """An e4m3 query (``mla_decode``'s fp8 ``q``, its value ``q * q_scale``) as the bf16 query of the kernels that do
    not read it in fp8: exact for a power-of-two scale (e4m3's 4 significant bits fit bf16's 8), else rounded once to
    bf16. A torch op: capture-safe (inside a capture its output comes from the graph's pool). A tensor scale of any
    one-element shape multiplies as a scalar (as [1, 1, 1] it would broadcast the query to four dims)."""
    if isinstance(q_scale, torch.Tensor):
        q_scale = q_scale.reshape(())
    return (q.float() * q_scale).to(torch.bfloat16)


def _fp8_query(args: tuple, consts: dict[str, Any], q: torch.Tensor, q_scale: float | torch.Tensor,
               kernel: str) -> tuple[tuple, dict[str, Any]]:
    """The arguments of a kernel that reads an e4m3 query as it is (``Q_FP8 = 1``; its scale as a float or a
    one-element fp32 tensor read in the kernel). ``kernel`` "T8": its two query descriptors replaced by one [64, 128]
    box over the query's [B H, 576] rows (the latent chunks at columns 0..511, the rope at 512, the box's columns
    576.. filled with zeros); "V2" (the second fp8 tokens-on-M kernel): its query pointer, the e4m3 query itself."""
    if kernel == "T8":
        desc = _descriptor(q.view(q.shape[0] * q.shape[1], D_QK), [consts["BLOCK_H"], 128])
        args = (desc, desc, *args[2:])
        consts = {**consts, "Q8PRE": 0}     # (read as it is: no pair to make)
    else:
        args = (q, *args[1:])
    scale = ({"q_descale_ptr": q_scale, "Q_DESCALE_FROM_PTR": 1} if isinstance(q_scale, torch.Tensor)
             else {"q_descale": float(q_scale), "Q_DESCALE_FROM_PTR": 0})
    return args, {**consts, "Q_FP8": 1, **scale}


def _kv_tiles(nargs: dict[str, Any]) -> None:
    """Config pre-hook of the bf16 kernels: the KV descriptors' tiles follow the config's ``BLOCK_N``
    ([BLOCK_N, 512] latent, [BLOCK_N, 64] rope). It runs before every compile and launch of the config, inside
    CUDA graph capture too: it only rewrites two host objects (no allocation, no synchronisation)."""
    block_n = nargs["BLOCK_N"]
    for name, cols in (("kv_nope_desc", D_NOPE), ("kv_rope_desc", D_ROPE)):
        desc = nargs[name]
        if desc.block_shape[0] != block_n:
            desc.block_shape = [block_n, cols]
            desc.layout = _layout((block_n, cols), desc.base.dtype)


def _arguments(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor, seq_lens: torch.Tensor,
               sm_scale: float, kv_scale: float | torch.Tensor, fmt: str, out: torch.Tensor, return_lse: bool, *,
               sms: int, block_n: int, programs_per_sm: int, lse: torch.Tensor | None, v2: bool = False,
               pp: bool = False, ring: bool = False, t8: bool = False, query_replaced: bool = False):
    """Positional arguments (KV descriptors with ``block_n``-token tiles), head blocks, the constexprs no config
    sets, and ``(lse, part_o, part_lse, seg)`` with partial slots for ``programs_per_sm``. ``v2``: the second
    fp8 tokens-on-M kernel (kernel_hopper_tok.py), which takes a [block_n, 128] rope descriptor before the cache
    pointer (read row by row with GATHER). ``pp``: the ping-pong kernel (kernel_hopper_pp.py), whose bf16 latent
    tiles come as two 256-column TMA halves (its fp8 kernel takes the fp8 heads-on-M kernel's arguments with two
    query descriptors, [64, 512] and [64, 64] bf16 boxes, in place of the query pointer and its strides). ``ring``:
    the bf16 tokens-on-M ring kernel (kernel_hopper_ring.py), whose tiles come as nine [block_n, 64] boxes of all
    576 columns. ``query_replaced`` (T8 only): the caller puts the query's descriptors in the first two places
    (:func:`with_query_pair`'s pair, :func:`_fp8_query`'s e4m3 box), so the bf16 query's are not built (two
    descriptors, ~8.5 us of host time a launch, measured on the CPU machine)."""
    batch, heads, _ = q.shape
    device = q.device
    if lse is None:
        lse = torch.empty(batch, heads, dtype=torch.float32, device=device) if return_lse else out
    on_m = _heads_on_m(heads)
    block_h = BLOCK_H if on_m else TOK_BLOCK_H
    head_blocks = heads // block_h
    slots = _programs(sms, programs_per_sm, head_blocks) + batch
    part_dtype, scaled = reduction.partial_layout(fmt, kv_scale, pp and batch <= PP_PART16_MAX_BATCH)
    part_o = torch.empty(slots, heads, D_NOPE, dtype=part_dtype, device=device)
    part_lse = torch.empty(slots, reduction.lse_columns(heads, scaled), dtype=torch.float32, device=device)
    seg = torch.empty(batch, 2, dtype=torch.int32, device=device)
    scratch = (lse, part_o, part_lse, seg)
    if fmt in ("fp8", DS_FORMAT):
        if fmt == DS_FORMAT:
            # the 656-byte rows (41 x 16 bytes: a legal TMA row stride) under three views: fp8 latent boxes at
            # column 0, bf16 rope boxes at bf16 column 264 (byte 528), and in the scale pointer's place fp32 boxes
            # of the four group scales at fp32 column 128 (byte 512)
            rows = kv_cache.view(kv_cache.shape[0] * kv_cache.shape[1], kv_cache.shape[2])
            kv_args = (_descriptor(rows.view(torch.float8_e4m3fn), [block_n, D_NOPE]),
                       _descriptor(rows.view(torch.bfloat16), [block_n, D_ROPE]),
                       kv_cache.view(torch.float8_e4m3fn))   # (read row by row with GATHER)
            scale_ptr, scale_value, scale_from_ptr = _descriptor(rows.view(torch.float32), [block_n, 4]), 1.0, False
        else:
            kv2 = kv_cache.view(kv_cache.shape[0] * kv_cache.shape[1], D_QK)
            # (v2, t8: the rope rows as [block_n, 128] boxes at column 512, whose columns 576.. TMA fills with zeros;
            # t8 reads nothing else of the cache, v2 its rows through the pointer with GATHER)
            rope_box = (_descriptor(kv2, [block_n, 128]), ) if v2 or t8 else ()
            kv_args = (_descriptor(kv2, [block_n, D_NOPE]), *rope_box, *(() if t8 else (kv_cache, )))
            if isinstance(kv_scale, torch.Tensor):
                scale_ptr, scale_value, scale_from_ptr = kv_scale, 1.0, True
            else:
                scale_ptr, scale_value, scale_from_ptr = seq_lens, float(kv_scale), False   # pointer unused
        if t8 and query_replaced:
            q_args, q_strides = (None, None), ()      # (the caller's descriptors take these places)
        elif on_m and (pp or t8):
            # the fp8 ping-pong kernels copy the bf16 query by TMA into shared memory (T8: as two [64, 256] halves)
            q_args, q_strides = _q_descriptors(q, block_h, 256 if t8 else D_NOPE), ()
        else:
            q_args, q_strides = (q, ), (q.stride(0), q.stride(1))
        args = (*q_args, *kv_args,
                scale_ptr,
                page_table, seq_lens,
                out, lse, part_o, part_lse, seg,
                float(sm_scale), scale_value,
                batch, heads,
                *q_strides,
                page_table.stride(0),
                out.stride(0), out.stride(1),
                part_o.stride(0), part_o.stride(1),
                part_lse.stride(0))
        consts = dict(PAGE_SIZE=kv_cache.shape[1], KV_SCALE_FROM_PTR=scale_from_ptr, RETURN_LSE=return_lse,
                      B_CHUNK=_B_CHUNK, BLOCK_H=block_h)
        return args, head_blocks, consts, scratch
    kv2 = kv_cache.view(kv_cache.shape[0] * kv_cache.shape[1], D_QK)
    args = (*_q_descriptors(q, block_h),
            _descriptor(kv2, [block_n, RING_CHUNK if ring else PP_CHUNK if pp else D_NOPE]),
            _descriptor(kv2[:, D_NOPE:], [block_n, D_ROPE]),
            page_table, seq_lens,
            out, lse, part_o, part_lse, seg,
            float(sm_scale),
            batch, heads,
            page_table.stride(0),
            out.stride(0), out.stride(1),
            part_o.stride(0), part_o.stride(1),
            part_lse.stride(0))
    consts = dict(PAGE_SIZE=kv_cache.shape[1], RETURN_LSE=return_lse, B_CHUNK=_B_CHUNK, BLOCK_H=block_h)
    if scaled:      # (a bf16 cache's fp16 partials, stored times 2^-k per half-row: reduction.partial_layout)
        consts["PART_SCALED"] = True
    return args, head_blocks, consts, scratch


def with_query_pair(args: tuple, consts: dict[str, Any], pair: torch.Tensor, rope: torch.Tensor, scale: torch.Tensor,
                    launch_pdl: bool = False) -> tuple[tuple, dict[str, Any]]:
    """T8's arguments with ``Q8PRE = 1``: the query's two descriptors replaced by [64, 128] boxes over
    ``query8.query_pair``'s pair and rope pair, its scale as ``q8_scale_ptr``; ``launch_pdl``: the kernel launched as
    the pre-pass's programmatic dependent (its split and first KV copies run while the pair is made)."""
    block_h = consts["BLOCK_H"]
    q_args = (_descriptor(pair, [block_h, 128]), _descriptor(rope, [block_h, 128]))
    return (*q_args, *args[2:]), {**consts, "Q8PRE": 1, "q8_scale_ptr": scale,
                                  **({"launch_pdl": True} if launch_pdl else {})}


def _query_pair(args: tuple, consts: dict[str, Any], q: torch.Tensor) -> tuple[tuple, dict[str, Any]]:
    """T8 given a bf16 query: the pre-pass (``query8.query_pair``) makes the fp8 pair for the whole batch on the
    launch's stream, T8 copies it by TMA (``Q8PRE = 1``) as its programmatic dependent. Measured on an H200 (session
    28 run 2, fp8 H = 128, pinned T8, CUDA graph replay): 0.0227 / 0.0385 / 0.0902 / 0.1462 ms -> 0.0212 / 0.0361 /
    0.0887 / 0.1458 at batch 1 / 8 / 32 / 64 on 4096-token requests, 0.0225 / 0.0477 / 0.1083 / 0.1936 -> 0.0204 /
    0.0422 / 0.0998 / 0.1826 on ragged ones (lengths uniform in 1..8191): converting the query in every program cost
    more than the pass. Its scratch (B H rows of 1024 + 128 bytes and a scale) is made per call, as the partials';
    ``Q_LO = 0`` (``query_precision="e4m3"``): the pass makes the hi halves alone, T8 copies those."""
    return with_query_pair(args, consts, *query8.query_pair(q, pdl=True, lo=bool(consts.get("Q_LO", 1))),
                           launch_pdl=True)


def _programs(sms: int, programs_per_sm: int, head_blocks: int, batch: int = 0, split_max: int = 0) -> int:
    """Programs per head block of the split grid: fill the SMs ``programs_per_sm`` times over all head blocks, and
    with ``split_max`` (a config's ``SPLIT_MAX``) at most that many a request (``batch`` of them: a function of the
    shape alone, so one captured graph still serves any lengths)."""
    programs = max(1, sms * programs_per_sm // head_blocks)
    return min(programs, batch * split_max) if split_max and batch else programs


def hopper_call(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor, seq_lens: torch.Tensor,
                sm_scale: float, kv_scale: float | torch.Tensor, fmt: str, out: torch.Tensor, return_lse: bool, *,
                sms: int, config: dict[str, int] | None = None, programs_per_sm: int = 1,
                lse: torch.Tensor | None = None, query_replaced: bool = False):
    """A pinned launch: positional arguments, grid and constexprs (the fixed config overlaid with ``config``,
    ``num_warps`` included) of the Hopper kernel, plus ``(lse, part_o, part_lse, seg)``. ``query_replaced``: as
    :func:`_arguments`'s."""
    on_m = _heads_on_m(q.shape[1])
    if fmt == DS_FORMAT:
        cfg = {**HOPPER_TOK_DS_CONFIG, **(config or {})}
        if not cfg.get("V2") or not cfg.get("DS"):
            raise ValueError(f"mla_decode: config {config}: kv_format {fmt!r} runs on the second tokens-on-M kernel "
                             "with V2=1, DS=1")
    else:
        cfg = {**_base_config(on_m, fmt == "fp8"), **(config or {})}
        if cfg.get("DS"):
            raise ValueError(f"mla_decode: config {config}: DS=1 is the fp8_ds_mla loader, got kv_format {fmt!r}")
        # the pinned config's own keys (the fixed config it overlays may hold another kernel's: the benchmark sets
        # the module's fixed config to each variant it labels), or the fixed config when none is pinned
        _check_sibling_keys(on_m, fmt, config if config else cfg)
    v2 = bool(cfg.pop("V2", 0))
    pp = bool(cfg.get("PP", 0))
    if pp:
        _check_pp(on_m, fmt, cfg)
    t8 = bool(cfg.get("T8", 0))
    if t8:
        _check_t8(on_m, fmt, cfg)
    ring = bool(cfg.get("RING", 0))
    if ring:
        _check_ring(on_m, fmt, cfg)
    if v2:
        _check_v2(on_m, fmt)
        # (the programs per SM follow the buffers, as on the tuned path; the first kernel's keys are dropped; the
        # base is the format's own fixed config: fp8_ds_mla folds its groups itself, without CHAIN)
        base = HOPPER_TOK_DS_CONFIG if fmt == DS_FORMAT else HOPPER_TOK_FP8_V2_CONFIG
        # a pinned V2 config overlays the second kernel's fixed config only (not the first kernel's, whose keys
        # of the same name, e.g. CHAIN, have other defaults); unpinned, the module's fixed config names it
        own = config if config and config.get("V2") else cfg
        cfg = {**{k: v for k, v in base.items() if k != "V2"},
               **{k: v for k, v in own.items() if k in TOK_FP8_V2_PARAMS}}
        bad = {k: v for k, v in cfg.items() if k in _V2_FLAGS and v not in (0, 1)}
        if cfg.get("LOOK", 0) not in (0, 1, 2):
            bad["LOOK"] = cfg["LOOK"]
        if bad:
            raise ValueError(f"mla_decode: config {config or cfg}: {bad} out of range for the second tokens-on-M "
                             f"kernel ({', '.join(_V2_FLAGS)} take 0 or 1, LOOK 0, 1 or 2)")
        if fmt == DS_FORMAT and cfg.get("CHAIN"):
            raise ValueError(f"mla_decode: config {config or cfg}: CHAIN=1 is the per-tensor fp8 cache's fold; "
                             f"kv_format {fmt!r} folds its four groups itself (pin CHAIN=0 or leave it out)")
        if cfg.get("LOOK") and cfg.get("CHAIN"):
            raise ValueError(f"mla_decode: config {config or cfg}: LOOK={cfg['LOOK']} runs with one score chain "
                             "only: pin CHAIN=0 with it (the fixed config has CHAIN=1)")
        _check_wg2(config or cfg, cfg)
        per_sm = own.get("PROGRAMS_PER_SM")
        if per_sm is not None and (isinstance(per_sm, bool) or per_sm not in range(1, 9)):
            raise ValueError(f"mla_decode: config {config}: PROGRAMS_PER_SM={per_sm!r}, expected 1 to 8 for the "
                             "second tokens-on-M kernel")
        cfg["PROGRAMS_PER_SM"] = _tok_fp8_v2_programs_per_sm({**cfg, "PROGRAMS_PER_SM": per_sm})
        cfg["V2"] = 1   # (for _kernel_and_params, which drops it: no kernel takes it)
    # (the config as it runs: a pinned V2 config's keys come from it alone, not from the module's fixed config that
    # launch checked)
    _check_gather(kv_cache.shape[1], {**cfg, "V2": int(v2)})
    programs_per_sm = cfg.pop("PROGRAMS_PER_SM", programs_per_sm)
    args, head_blocks, consts, scratch = _arguments(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale, fmt, out,
                                                    return_lse, sms=sms, block_n=cfg["BLOCK_N"],
                                                    programs_per_sm=programs_per_sm, lse=lse, v2=v2, pp=pp, t8=t8,
                                                    ring=ring, query_replaced=query_replaced)
    consts = {**consts, **cfg, "num_warps": PP_NUM_WARPS if pp or t8 else NUM_WARPS if on_m else TOK_NUM_WARPS}
    programs = _programs(sms, programs_per_sm, head_blocks, q.shape[0], cfg.get("SPLIT_MAX", 0))
    return args, (head_blocks, programs), consts, scratch


# The second fp8 tokens-on-M kernel's parameters (kernel_hopper_tok.py); a pinned config with ``V2=1`` runs it.
# GATHER = 1: tiles read row by row through the page table (cp.async), for pages TMA boxes cannot cover (size 1).
# DS = 1: fp8_ds_mla rows (HOPPER_TOK_DS_CONFIG, HOPPER_TOK_DS_SPACE). CHAIN = 1 (in the fixed config since session
# 11): the fp8 scores as one MMA chain per 128 dims and the rope's, folded in fp32 (docs/mla_decode.md, "CHAIN").
# COPY_FIRST = 1 (session 58; in HOPPER_TOK_FP8_V2_SPACE's two-buffer rows): a segment's first copies issued before its
# query's loads (kernel_hopper_tok.py's docstring).
# WG2 = 1 (session 59): two consumer warpgroups and a producer warp on one pool of buffers, one program an SM
# (kernel_hopper_tok2.py; TMA tiles only, one score chain: CHAIN, PREFETCH and COPY_FIRST do not apply, GATHER, DS,
# LOOK and PT_EARLY are refused); WG1_REGS: its second warpgroup's registers a thread.
TOK_FP8_V2_PARAMS = ("BLOCK_N", "NUM_BUF", "PREFETCH", "FAST_MAX", "GATHER", "LOOK", "RK64", "PT_EARLY", "DS",
                     "CHAIN", "COPY_FIRST", "WG2", "WG1_REGS")
# (on or off; PREFETCH 2 meant something only under the removed PV8)
_V2_FLAGS = ("PREFETCH", "FAST_MAX", "GATHER", "RK64", "PT_EARLY", "DS", "CHAIN", "COPY_FIRST", "WG2")
# the two-warpgroup kernel's buffers: up to five 40 KB tiles fit beside its query and P tiles (231,792 B with five,
# compiled for sm_90); at least three, one in flight while a pair is computed (and so more than
# kernel_hopper.STREAM_MAX_BUF: it never counts segments for the streamed reduction, which it does not take)
WG2_MIN_BUF = 3
WG2_MAX_BUF = 5


# A shape class's sibling kernels, each selected in a pinned config by its flag: (flag, the kernel in messages)
_SIBLINGS: dict[tuple[bool, str], tuple[tuple[str, str], ...]] = {
    (True, "bf16"): (("PP", "the ping-pong kernel"), ),
    (True, "fp8"): (("PP", "the ping-pong kernel"), ("T8", "the fp8 ping-pong kernel with fp8 scores")),
    (False, "bf16"): (("RING", "the ring kernel"), ),
    (False, "fp8"): (("V2", "the second fp8 tokens-on-M kernel"), )}


@functools.lru_cache(maxsize=None)
def _knobs(on_m: bool, fmt: str, flag: str | None) -> frozenset[str]:
    """The knobs of the class's kernel that ``flag`` selects (None: the first kernel): its constexprs that no launch
    sets, less every flag of the class and PROGRAMS_PER_SM (which the launcher reads for the grid of every class)."""
    heads = BLOCK_H if on_m else TOK_BLOCK_H
    fn = kernel_for(heads, fmt, v2=flag == "V2", pp=flag == "PP", ring=flag == "RING", t8=flag == "T8")
    flags = {f for f, _ in _SIBLINGS.get((on_m, fmt), ())}
    return frozenset({p.name for p in fn.params if p.is_constexpr} - _LAUNCH_CONSTEXPRS - flags - {"PROGRAMS_PER_SM"})


def _check_sibling_keys(on_m: bool, fmt: str, cfg: dict[str, int]) -> None:
    """A pinned config that names a knob only another kernel of its class takes is an error: the kernel it selects
    would run without it (``_kernel_and_params`` keeps only the running kernel's keys). The first kernel's knobs are
    always accepted (a pinned config overlays the first kernel's fixed config)."""
    siblings = _SIBLINGS.get((on_m, fmt), ())
    running = next(((flag, name) for flag, name in siblings if cfg.get(flag)), None)
    allowed = _knobs(on_m, fmt, None) | (_knobs(on_m, fmt, running[0]) if running else frozenset())
    for flag, name in siblings:
        stray = sorted(set(cfg) & (_knobs(on_m, fmt, flag) - allowed))
        if stray:
            where = (f"not to {running[1]}, which {running[0]}=1 selects" if running else f"add {flag}=1")
            raise ValueError(f"mla_decode: {', '.join(f'{k}={cfg[k]}' for k in stray)} "
                             f"{'belongs' if len(stray) == 1 else 'belong'} to {name}: {where} (config {cfg})")


def _check_pp(on_m: bool, fmt: str, cfg: dict[str, int]) -> None:
    if not on_m or fmt not in ("bf16", "fp8") or cfg.get("BLOCK_N", BLOCK_N) != BLOCK_N:
        raise ValueError(f"config PP=1: the ping-pong kernel takes bf16 and fp8 caches with H % {BLOCK_H} == 0 and "
                         f"BLOCK_N={BLOCK_N}, got kv_format {fmt!r} with {'H % 64 == 0' if on_m else 'H < 64'}, "
                         f"BLOCK_N={cfg.get('BLOCK_N')}")
    # RELOAD: when WG0 reloads an odd tile's left half (kernel_hopper_pp: 1 by its last reader, 0 one pair later)
    if cfg.get("RELOAD", 1) not in (0, 1):
        raise ValueError(f"config RELOAD={cfg.get('RELOAD')}: the ping-pong kernel takes 0 or 1")
    # INDEP (pinned only): WG1's softmax from its own running max, before WG0's P is waited for (kernel_hopper_pp)
    if cfg.get("INDEP", 0) not in (0, 1) or (cfg.get("INDEP") and not cfg.get("WG1_FIRST")):
        raise ValueError(f"config INDEP={cfg.get('INDEP')}: the ping-pong kernel's independent softmax takes 0 or 1, "
                         f"and 1 with WG1_FIRST=1 only (got WG1_FIRST={cfg.get('WG1_FIRST', 0)})")
    # SM1, RA (bf16, both in HOPPER_PP_SPACE): the softmax off the hand-off's path, the rope copies after it
    for knob in ("SM1", "RA"):
        if cfg.get(knob, 0) not in (0, 1) or (cfg.get(knob) and fmt != "bf16"):
            raise ValueError(f"config {knob}={cfg.get(knob)}: the bf16 ping-pong kernel's {knob} takes 0 or 1, and 1 "
                             f"with a bf16 cache only (got kv_format {fmt!r})")
    # OUT32 (1 unless pinned 0): a whole request's output stored in whole 32-byte sectors (kernel_hopper_pp)
    if cfg.get("OUT32", 1) not in (0, 1):
        raise ValueError(f"config OUT32={cfg.get('OUT32')}: the ping-pong kernel's whole-sector output stores take 0 "
                         "or 1")


def _check_t8(on_m: bool, fmt: str, cfg: dict[str, int]) -> None:
    if not on_m or fmt != "fp8" or cfg.get("BLOCK_N", BLOCK_N) != BLOCK_N or cfg.get("PP", 0):
        raise ValueError(f"config T8=1: the fp8 ping-pong kernel with fp8 scores takes per-tensor fp8 caches with "
                         f"H % {BLOCK_H} == 0 and BLOCK_N={BLOCK_N}, without PP=1 (a kernel of its own), got kv_format "
                         f"{fmt!r} with {'H % 64 == 0' if on_m else 'H < 64'}, BLOCK_N={cfg.get('BLOCK_N')}, "
                         f"PP={cfg.get('PP', 0)}")
    # P8 (pinned only): P in e4m3 and P.V as fp8 wgmmas, FlashMLA's accuracy class (with the e4m3 query alone, from the
    # pre-pass or given in e4m3: launch checks the query)
    if cfg.get("P8", 0) not in (0, 1) or (cfg.get("P8") and cfg.get("Q8PRE", 1) == 0):
        raise ValueError(f"config P8={cfg.get('P8')}: T8's e4m3 P takes 0 or 1, and 1 with the query pair made before "
                         f"the kernel (got Q8PRE={cfg.get('Q8PRE', 1)})")
    # P8's schedule (pinned only): EI the next tiles' copies once a buffer's bytes are read, TE WG0's transposition
    # under its score MMAs, NF (with TE) the transpositions fenced by the hand-offs, VS V^T's rows in an order whose
    # transposition stores meet no bank conflict; PL (pinned only, T8_PL_CONFIG) P as an e4m3 pair
    for key, needs in (("EI", "P8"), ("TE", "P8"), ("NF", "TE"), ("VS", "P8"), ("PL", "P8")):
        if cfg.get(key, 0) not in (0, 1) or (cfg.get(key) and not cfg.get(needs)):
            raise ValueError(f"config {key}={cfg.get(key)}: P8's {key} takes 0 or 1, and 1 with {needs}=1 (got "
                             f"{needs}={cfg.get(needs, 0)})")
    # MIN_TILES (pinned only): each program's range at least that many tiles (MIN_TILES_PAIR's comment)
    least = cfg.get("MIN_TILES", 1)
    if not isinstance(least, int) or isinstance(least, bool) or not 1 <= least <= MIN_TILES_MAX:
        raise ValueError(f"config MIN_TILES={least!r}: T8's least tiles a program takes an int in 1..{MIN_TILES_MAX}")


def _check_ring(on_m: bool, fmt: str, cfg: dict[str, int]) -> None:
    slots, per_sm = cfg.get("NUM_SLOTS", RING_SLOTS), cfg.get("PROGRAMS_PER_SM", 1)
    most = RING_SLOTS if per_sm == 1 else RING_SLOTS_TWO_PER_SM
    early = cfg.get("EARLY_S", 0)
    if (on_m or fmt != "bf16" or cfg.get("BLOCK_N", BLOCK_N) != BLOCK_N or per_sm not in (1, 2)
            or not 9 <= slots <= most or early not in (0, 1) or (early and slots < 18)):
        raise ValueError(f"config RING=1: the ring kernel takes bf16 caches with H < {BLOCK_H}, BLOCK_N={BLOCK_N}, "
                         f"PROGRAMS_PER_SM 1 or 2, 9 <= NUM_SLOTS <= {RING_SLOTS} ({RING_SLOTS_TWO_PER_SM} with two "
                         f"programs per SM) and EARLY_S 0 or 1 (1 needs NUM_SLOTS >= 18), got kv_format {fmt!r} with "
                         f"{'H % 64 == 0' if on_m else 'H < 64'}, BLOCK_N={cfg.get('BLOCK_N')}, "
                         f"PROGRAMS_PER_SM={per_sm}, NUM_SLOTS={slots}, EARLY_S={early}")


def _check_v2(on_m: bool, fmt: str) -> None:
    if on_m or fmt not in ("fp8", DS_FORMAT):
        raise ValueError(f"config V2=1: the second tokens-on-M kernel takes fp8 caches with H < {BLOCK_H} (and "
                         "fp8_ds_mla ones, DS=1), "
                         f"got kv_format {fmt!r} with {'H % 64 == 0' if on_m else 'H < 64'}")


def _check_wg2(given: dict[str, Any], cfg: dict[str, int]) -> None:
    """The two-warpgroup kernel (``WG2=1``) runs TMA tiles of a per-tensor fp8 cache with one score chain and the
    plain loop: the one-warpgroup kernel's loaders and look-ahead schedules are refused in one line."""
    if not cfg.get("WG2"):
        return
    stray = {k: cfg[k] for k in ("GATHER", "DS", "LOOK", "PT_EARLY") if cfg.get(k)}
    if stray:
        raise ValueError(f"mla_decode: config {given}: WG2=1 (the two-warpgroup kernel) takes TMA tiles of a "
                         f"per-tensor fp8 cache and the plain loop, not {stray}")
    if cfg["NUM_BUF"] not in range(WG2_MIN_BUF, WG2_MAX_BUF + 1):
        raise ValueError(f"mla_decode: config {given}: WG2=1 takes NUM_BUF {WG2_MIN_BUF} to {WG2_MAX_BUF}, got "
                         f"{cfg['NUM_BUF']!r}")
    regs = cfg.get("WG1_REGS")
    if regs is None:        # (the kernel's default)
        return
    if isinstance(regs, bool) or not isinstance(regs, int) or regs % 8 or not 24 <= regs <= 256:
        raise ValueError(f"mla_decode: config {given}: WG1_REGS={regs!r}, expected a multiple of 8 from 24 to 256")


def _check_gather(page_size: int, cfg: dict[str, int]) -> None:
    """Pages that are not whole TMA tiles (page size 1) need the second fp8 tokens-on-M kernel's row gather."""
    if cfg.get("GATHER") and not cfg.get("V2"):
        raise ValueError(f"mla_decode: config {cfg}: GATHER=1 is a loader of the second fp8 tokens-on-M kernel, "
                         "it needs V2=1")
    block_n = cfg.get("BLOCK_N", BLOCK_N)
    if page_size % BLOCK_N == 0 and page_size % block_n and not cfg.get("GATHER"):
        raise ValueError(f"mla_decode: config BLOCK_N={block_n}: a TMA tile of {block_n} tokens would cross pages "
                         f"of {page_size} tokens (BLOCK_N must divide the page size)")
    if page_size % block_n and not cfg.get("GATHER"):
        raise ValueError(f"mla_decode: page size {page_size} on the Hopper path needs the row-gather loader: a pinned "
                         f"config needs V2=1, GATHER=1 (unpinned, fp8 and fp8_ds_mla with H < {BLOCK_H} run it tuned)")


@dataclass(frozen=True)
class Second:
    """The second kernel of a shape class, which the tuned path runs from ``min_batch`` requests up (where it
    measured faster than the class's first kernel), tuned per bucket over ``space`` as kernel ``name``. ``flag``:
    the pinned-config key that selects it (``V2`` / ``PP`` / ``DS``). fp8_ds_mla has no first Hopper kernel: its
    entry (from batch 1) is the format's only tuned Hopper kernel."""

    min_batch: int
    name: str
    space: list[dict[str, int]]
    flag: str
    num_warps: int

    def programs_per_sm(self, config: dict[str, Any]) -> int:
        return _tok_fp8_v2_programs_per_sm(config) if self.flag in ("V2", "DS") else 1


SECOND: dict[tuple[bool, str], Second] = {   # (heads on M, kv_format) -> its second kernel
    (False, "fp8"): Second(TOK_FP8_V2_MIN_BATCH, TOK_FP8_V2_NAME, HOPPER_TOK_FP8_V2_SPACE, "V2", TOK_NUM_WARPS),
    (True, "bf16"): Second(PP_MIN_BATCH, PP_NAME, HOPPER_PP_SPACE, "PP", PP_NUM_WARPS),
    (True, "fp8"): Second(PP_FP8_MIN_BATCH, PP_FP8_NAME, HOPPER_PP_FP8_SPACE, "PP", PP_NUM_WARPS),
    (False, DS_FORMAT): Second(1, TOK_DS_NAME, HOPPER_TOK_DS_SPACE, "DS", TOK_NUM_WARPS)}
# (heads on M, kv_format) -> its third kernel, which the tuned path runs from its ``min_batch`` up (above the second's)
THIRD: dict[tuple[bool, str], Second] = {
    (True, "fp8"): Second(T8_MIN_BATCH, T8_NAME, HOPPER_T8_SPACE, "T8", PP_NUM_WARPS)}
# the third kernel with ``p_precision="e4m3"`` (the e4m3 query too, so from T8_E4M3_MIN_BATCH): P8's schedules
THIRD_P8 = Second(T8_E4M3_MIN_BATCH, T8_P8_NAME, HOPPER_T8_P8_SPACE, "T8", PP_NUM_WARPS)


# Pages that are not whole 64-token TMA tiles (SGLang's default page size is 1): the second tokens-on-M kernel with
# the row gather (GATHER = 1: each tile's rows by cp.async through the page table), fp8 and fp8_ds_mla with H < 64,
# tuned per bucket over its format's space with GATHER on, from batch 1 (the first tokens-on-M kernel reads whole
# TMA tiles only). path="hopper" runs it at such page sizes; path="auto" where GATHER_AUTO is on: both formats, faster
# than the portable kernel (tuned per bucket too) at every cell timed on the H200 (session 16, run 3,
# benchmarks/probes/gather_route.py, H = 16, 4096 tokens, page sizes 1 and 16, batch 1 to 128, each checked): fp8 at
# page size 1 0.0142 / 0.0211 / 0.0406 / 0.0603 / 0.1006 ms against 0.0182 / 0.0292 / 0.0691 / 0.1137 / 0.1999 at
# batch 1 / 8 / 32 / 64 / 128 (3.02 TB/s against 1.52 at 128); fp8_ds_mla at page size 1 0.38-0.78x, at 16
# 0.37-0.79x; fp8 at 16 0.50-0.87x.
GATHER: dict[str, Second] = {
    "fp8": Second(1, "mla_decode_hopper_tok_fp8_gather",
                  [{**{k: v for k, v in c.items() if k != "COPY_FIRST"}, "GATHER": 1} for c in HOPPER_TOK_FP8_V2_SPACE],
                  "V2", TOK_NUM_WARPS),
    DS_FORMAT: Second(1, "mla_decode_hopper_tok_ds_gather", [{**c, "GATHER": 1} for c in HOPPER_TOK_DS_SPACE], "DS",
                      TOK_NUM_WARPS)}
GATHER_AUTO: dict[str, bool] = {"fp8": True, DS_FORMAT: True}


def _applies(kernels: dict[tuple[bool, str], Second], heads: int, fmt: str, batch: int) -> bool:
    extra = kernels.get((_heads_on_m(heads), fmt))
    return extra is not None and batch >= extra.min_batch


def second_applies(heads: int, fmt: str, batch: int) -> bool:
    """Whether the tuned path runs the shape class's second kernel (``SECOND``) for ``batch`` requests."""
    return _applies(SECOND, heads, fmt, batch)


def third_applies(heads: int, fmt: str, batch: int, q_lo: bool = True) -> bool:
    """Whether the tuned path runs the shape class's third kernel (``THIRD``) for ``batch`` requests (``q_lo=False``:
    ``query_precision="e4m3"``, from ``T8_E4M3_MIN_BATCH``)."""
    if not q_lo and (_heads_on_m(heads), fmt) == (True, "fp8"):
        return batch >= T8_E4M3_MIN_BATCH
    return _applies(THIRD, heads, fmt, batch)


def _extra(on_m: bool, fmt: str, gather: bool, third: bool, p8: bool = False) -> Second:
    """The tuned kernel other than a class's first that a launch names: the row gather, the third (``p8``: with P in
    e4m3, ``THIRD_P8``) or the second."""
    if gather:
        return GATHER[fmt]
    if third:
        return THIRD_P8 if p8 else THIRD[(on_m, fmt)]
    return SECOND[(on_m, fmt)]


def tuned_second_call(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor, seq_lens: torch.Tensor,
                      sm_scale: float, kv_scale: float | torch.Tensor, fmt: str, out: torch.Tensor, return_lse: bool,
                      *, sms: int, lse: torch.Tensor | None = None, gather: bool = False, third: bool = False,
                      q_lo: bool = True, query_replaced: bool = False, p8: bool = False):
    """:func:`tuned_call` for the shape class's second kernel (``gather``: the row-gather kernel, ``GATHER``;
    ``third``: its third kernel, ``THIRD``, which takes ``Q_LO``; with ``p8``, as :func:`launch` resolves it,
    ``THIRD_P8``): scratch for the most programs per SM of its space, the grid per config. ``query_replaced``: as
    :func:`_arguments`'s."""
    second = _extra(_heads_on_m(q.shape[1]), fmt, gather, third, p8)
    per_sm = max(second.programs_per_sm(c) for c in second.space)
    args, head_blocks, consts, scratch = _arguments(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale, fmt, out,
                                                    return_lse, sms=sms, block_n=second.space[0]["BLOCK_N"],
                                                    programs_per_sm=per_sm, lse=lse, v2=second.flag == "V2",
                                                    pp=second.flag == "PP", t8=second.flag == "T8",
                                                    query_replaced=query_replaced)
    if second.flag == "T8":
        consts = {**consts, "Q_LO": int(q_lo)}

    def grid(meta: dict[str, Any]) -> tuple[int, int]:
        return head_blocks, _programs(sms, second.programs_per_sm(meta), head_blocks, q.shape[0],
                                      meta.get("SPLIT_MAX", 0))
    return args, grid, consts, scratch


def tuned_second_kernel(on_m: bool, fmt: str, gather: bool = False, third: bool = False, q_lo: bool = True,
                        p8: bool = False):
    """The shape class's second kernel (``gather``: the row-gather kernel of ``GATHER``; ``third``: its third kernel,
    ``THIRD``, and with ``q_lo=False`` that kernel for ``query_precision="e4m3"``, tuned apart as ``T8_E4M3_NAME``;
    with ``p8`` too, ``p_precision="e4m3"``, P8's schedules, ``THIRD_P8``, tuned apart as ``T8_P8_NAME``) under
    ``graphtune.autotune``, per batch bucket (as :func:`tuned_kernel`): one object per kernel, however called."""
    third = bool(third) and not gather
    q_lo = bool(q_lo) or not third
    return _tuned_second_kernel(bool(on_m) and not gather, fmt, bool(gather), third, q_lo, bool(p8) and not q_lo)


@functools.lru_cache(maxsize=None)
def _tuned_second_kernel(on_m: bool, fmt: str, gather: bool, third: bool, q_lo: bool, p8: bool = False):
    from ... import Buckets, autotune
    from .space import CAPTURE_SIZES
    second = _extra(on_m, fmt, gather, third, p8)
    # (the kernels that read a plan fill it for the config's grid first: plan.plan_hook)
    # (T8's plan is filled by its launch, before its query pre-pass: _plan_first)
    reads = _reads_plan(on_m, fmt, {second.flag: 1, "GATHER": int(gather)}) and second.flag != "T8"
    hook = plan_mod.plan_hook if reads else None
    configs = [triton.Config(dict(c), num_warps=second.num_warps, pre_hook=hook) for c in second.space]
    fn = kernel_for(BLOCK_H if on_m else TOK_BLOCK_H, fmt, v2=second.flag == "V2", pp=second.flag == "PP",
                    t8=second.flag == "T8")
    return autotune(configs, key=["B", "H", "PAGE_SIZE", "RETURN_LSE"], buckets={"B": Buckets.explicit(CAPTURE_SIZES)},
                    default=configs[0], name=second.name if q_lo or p8 else T8_E4M3_NAME,
                    followed_by=reduction.after_hopper_split)(fn)


def tuned_call(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor, seq_lens: torch.Tensor,
               sm_scale: float, kv_scale: float | torch.Tensor, fmt: str, out: torch.Tensor, return_lse: bool, *,
               sms: int, lse: torch.Tensor | None = None):
    """A tuned launch: positional arguments (KV descriptors at the default config's tile: a config with
    another tile rebuilds them in its pre-hook), grid, the constexprs no config sets, and scratch with
    partial slots for every config of the space."""
    on_m, fp8 = _heads_on_m(q.shape[1]), fmt == "fp8"
    space = _SPACES[(on_m, fp8)]
    per_sm = _tok_fp8_programs_per_sm if (fp8 and not on_m) else (lambda config: 1)
    args, head_blocks, consts, scratch = _arguments(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale, fmt, out,
                                                    return_lse, sms=sms, block_n=space[0]["BLOCK_N"],
                                                    programs_per_sm=max(per_sm(c) for c in space), lse=lse)
    if fp8 and not on_m:
        def grid(meta: dict[str, Any]) -> tuple[int, int]:
            return head_blocks, _programs(sms, _tok_fp8_programs_per_sm(meta), head_blocks)
    else:
        def grid(meta: dict[str, Any]) -> tuple[int, int]:
            return head_blocks, _programs(sms, 1, head_blocks, q.shape[0], meta.get("SPLIT_MAX", 0))
    return args, grid, consts, scratch


def _kernel_and_params(heads: int, fmt: str, cfg: dict[str, int]):
    """The kernel a (pinned) config runs and the config's entries that kernel takes (``V2`` the second fp8
    tokens-on-M kernel, ``PP`` the ping-pong kernel; other kernels' keys, ``V2`` included, are dropped).
    ``cfg``: the constexprs :func:`hopper_call` returns, or a :func:`pinned_config`."""
    fn = kernel_for(heads, fmt, v2=bool(cfg.get("V2", 0)), pp=bool(cfg.get("PP", 0)), ring=bool(cfg.get("RING", 0)),
                    t8=bool(cfg.get("T8", 0)))
    names = set(fn.arg_names)
    return fn, {k: v for k, v in cfg.items() if k in names or k == "num_warps"}


def kernel_for(heads: int, fmt: str = "bf16", *, v2: bool = False, pp: bool = False, ring: bool = False,
               t8: bool = False):
    """The Gluon kernel that serves H heads: heads on M for H % 64 == 0, else tokens on M (bf16 or fp8; fp8
    heads on M: the widened-score kernel); ``v2``: the second fp8 tokens-on-M kernel; ``pp``: the heads-on-M
    ping-pong kernel (bf16, or fp8 widened in place: the second kernels of their classes, ``SECOND``); ``ring``:
    the bf16 tokens-on-M ring kernel (pinned only until timed); ``t8``: the fp8 heads-on-M ping-pong kernel with fp8
    scores, each warpgroup widening its own half of V (kernel_hopper_pp8.py: the class's third kernel, ``THIRD``)."""
    if t8:
        _check_t8(_heads_on_m(heads), fmt, {})
        return kernel_hopper_pp8._mla_decode_hopper_pp8_kernel
    if ring:
        _check_ring(_heads_on_m(heads), fmt, {})
        return kernel_hopper_ring._mla_decode_hopper_tok_ring_kernel
    if pp:
        _check_pp(_heads_on_m(heads), fmt, {})
        return (kernel_hopper_pp._mla_decode_hopper_pp_fp8_kernel if fmt == "fp8"
                else kernel_hopper_pp._mla_decode_hopper_pp_kernel)
    if v2 or fmt == DS_FORMAT:
        _check_v2(_heads_on_m(heads), fmt)
        return kernel_hopper_tok._mla_decode_hopper_tok_fp8_v2_kernel
    if fmt == "fp8":
        return (kernel_hopper_heads._mla_decode_hopper_fp8w_kernel if _heads_on_m(heads)
                else kernel_hopper._mla_decode_hopper_tok_fp8_kernel)
    return kernel_hopper._mla_decode_hopper_kernel if _heads_on_m(heads) else kernel_hopper._mla_decode_hopper_tok_kernel


_SPACES: dict[tuple[bool, bool], list[dict[str, int]]] = {
    (True, False): HOPPER_SPACE, (False, False): HOPPER_TOK_SPACE,
    (True, True): HOPPER_FP8_SPACE, (False, True): HOPPER_TOK_FP8_SPACE}


def space_configs(on_m: bool, fp8: bool) -> list[triton.Config]:
    """The candidate configs of one Hopper kernel (its fixed config first): launch options and, where the tile
    varies within the space, the pre-hook that rebuilds the KV descriptors."""
    space = _SPACES[(on_m, fp8)]
    hook = _kv_tiles if len({c["BLOCK_N"] for c in space}) > 1 else None
    if _reads_plan(on_m, "fp8" if fp8 else "bf16", {}):
        hook = plan_mod.plan_hook
    warps = NUM_WARPS if on_m else TOK_NUM_WARPS
    return [triton.Config(dict(c), num_warps=warps, pre_hook=hook) for c in space]


@functools.lru_cache(maxsize=None)
def tuned_kernel(on_m: bool, fp8: bool):
    """The Hopper kernel for (heads on M, fp8) under ``graphtune.autotune``, per batch bucket."""
    from ... import Buckets, autotune
    from .space import CAPTURE_SIZES
    configs = space_configs(on_m, fp8)
    fn = kernel_for(BLOCK_H if on_m else TOK_BLOCK_H, "fp8" if fp8 else "bf16")
    return autotune(configs, key=["B", "H", "PAGE_SIZE", "RETURN_LSE"], buckets={"B": Buckets.explicit(CAPTURE_SIZES)},
                    default=configs[0], name=KERNEL_NAMES[(on_m, fp8)], followed_by=reduction.after_hopper_split)(fn)


# constexprs every launch sets from its inputs (not config knobs)
_LAUNCH_CONSTEXPRS = frozenset({"PAGE_SIZE", "KV_SCALE_FROM_PTR", "RETURN_LSE", "B_CHUNK", "BLOCK_H", "Q_LO",
                                "num_warps"})


def _check_v2_params(params: dict[str, int], kernel: str) -> None:
    # (PROGRAMS_PER_SM: the launcher's, not a kernel parameter; hopper_call checks its range)
    unknown = sorted(set(params) - set(TOK_FP8_V2_PARAMS) - {"V2", "PROGRAMS_PER_SM"})
    if unknown:
        raise ValueError(f"mla_decode: config {params} has parameters {unknown} that {kernel} does not take (it "
                         f"takes {sorted(set(TOK_FP8_V2_PARAMS) | {'V2'})})")


def pinned_config(heads: int, fmt: str, params: dict[str, int]) -> dict[str, int]:
    """A config of the per-bucket space (its kernel parameters, e.g. an A/B candidate) as a pinned launch runs it:
    programs per SM as the tuned grid gives that config (``hopper_call`` sets them for ``V2=1``). Parameters the
    kernel does not have are a ValueError, and so is a knob of the class's sibling kernel without the flag that
    selects it (``NUM_SLOTS`` without ``RING=1``). fp8_ds_mla: the second tokens-on-M kernel's parameters over
    ``HOPPER_TOK_DS_CONFIG``."""
    if fmt == DS_FORMAT:
        _check_v2_params(params, "the fp8_ds_mla Hopper kernel")
        return {**HOPPER_TOK_DS_CONFIG, **params}
    key = (_heads_on_m(heads), fmt == "fp8")
    if key == (False, True) and params.get("V2"):
        # (the first kernel's keys would be dropped without a word: hopper_call keeps only the second's under V2)
        _check_v2_params(params, "the second fp8 tokens-on-M kernel (V2=1)")
    # the spaces' keys and every knob (a constexpr the launch does not set) of the kernels that serve the class
    known = set().union(*_SPACES[key], _SHIPPED[key])
    kernels = [kernel_for(heads, fmt)]
    if key == (False, True):   # V2=1: the second tokens-on-M kernel
        known |= {"V2"}
        kernels.append(kernel_for(heads, fmt, v2=True))
    if key[0]:                 # PP=1: the ping-pong kernel (bf16 and fp8)
        kernels.append(kernel_for(heads, fmt, pp=True))
    if key == (True, True):    # T8=1: the fp8 ping-pong kernel with fp8 scores
        kernels.append(kernel_for(heads, fmt, t8=True))
    if key == (False, False):  # RING=1: the ring kernel
        kernels.append(kernel_for(heads, fmt, ring=True))
    known |= {p.name for fn in kernels for p in fn.params if p.is_constexpr} - _LAUNCH_CONSTEXPRS
    unknown = sorted(set(params) - known)
    if unknown:
        raise ValueError(f"mla_decode: config {params} has parameters {unknown} that the Hopper kernel "
                         f"{KERNEL_NAMES[key]!r} does not take (it takes {sorted(known)})")
    _check_sibling_keys(key[0], fmt, params)
    cfg = dict(params)
    if not cfg.get("V2"):
        # a pinned launch overlays the config on the fixed one (hopper_call); the tuned kernel runs a space
        # config with the kernel's defaults for what it leaves out (e.g. EARLY 0 under PIPE 1): set those here,
        # and the fixed config's value for a knob without a default (PIPE of the bf16 heads-on-M kernel)
        fn = kernel_for(heads, fmt, pp=bool(cfg.get("PP", 0)), ring=bool(cfg.get("RING", 0)),
                        t8=bool(cfg.get("T8", 0)))
        names = set(fn.arg_names)
        defaults = {p.name: p.default for p in fn.params if p.is_constexpr and p.has_default}
        base = _base_config(*key)
        cfg.update({k: defaults.get(k, base[k]) for k in base if k not in cfg and k in names})
        missing = sorted({p.name for p in fn.params if p.is_constexpr and not p.has_default}
                         - _LAUNCH_CONSTEXPRS - set(cfg))
        if missing:
            raise ValueError(f"mla_decode: config {params} leaves out {missing}, which the Hopper kernel "
                             f"{fn.__name__} requires (the fixed config has no value for it)")
    if key == (False, True) and "PROGRAMS_PER_SM" not in cfg and not cfg.get("V2"):
        cfg["PROGRAMS_PER_SM"] = _tok_fp8_programs_per_sm({**_base_config(*key), **cfg})
    return cfg


def pinned(heads: int, fmt: str, config: dict[str, int] | None = None) -> bool:
    """Whether a launch runs a fixed config (``config`` given, or the module's fixed config changed from its
    shipped value) rather than the tuned kernel."""
    if fmt == DS_FORMAT:
        return config is not None or HOPPER_TOK_DS_CONFIG != _SHIPPED_DS
    key = (_heads_on_m(heads), fmt == "fp8")
    return config is not None or _base_config(*key) != _SHIPPED[key]


def launch(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor, seq_lens: torch.Tensor,
           sm_scale: float, kv_scale: float | torch.Tensor, fmt: str, out: torch.Tensor, return_lse: bool, *,
           sms: int, config: dict[str, int] | None = None, q_lo: bool = True,
           q_scale: float | torch.Tensor | None = None,
           plan: plan_mod.MLADecodePlan | None = None, p8: bool = False) -> tuple[torch.Tensor, torch.Tensor, Any]:
    """Run the Hopper split kernel, tuned per batch bucket unless pinned (:func:`pinned`); returns
    ``(lse, part_o, part_lse, seg)`` for the reduction. ``q_lo=False``: ``query_precision="e4m3"`` (the kernels that
    take ``Q_LO``, T8, score against the query's e4m3 hi half alone); with it ``p8``: ``p_precision="e4m3"`` (the
    tuned T8 is P8's, ``THIRD_P8``; a pinned config runs as given). An e4m3 ``q`` (its value ``q * q_scale``; with
    ``q_lo=False``): T8 and the second fp8 tokens-on-M kernel read it as it is (unpinned, an fp8 heads-on-M cache's
    runs T8 at every batch: no copy to make), every other kernel gets :func:`dequantize_query`'s bf16 copy."""
    heads = q.shape[1]
    fp8_q = q.dtype == torch.float8_e4m3fn
    if pinned(heads, fmt, config):
        cfg = {**(HOPPER_TOK_DS_CONFIG if fmt == DS_FORMAT else _base_config(_heads_on_m(heads), fmt == "fp8")),
               **(config or {})}
        reads = "T8" if cfg.get("T8") else "V2" if cfg.get("V2") else None
        if cfg.get("P8") and q_lo:
            raise ValueError(f"mla_decode: config {config}: P8=1 (P in e4m3, FlashMLA's accuracy class) runs with the "
                             "query in e4m3 too: pass query_precision='e4m3' or an e4m3 q")
        q_in = q if (reads or not fp8_q) else dequantize_query(q, q_scale)
        pair = reads == "T8" and not fp8_q and cfg.get("Q8PRE", 1)
        # (hopper_call checks the row gather against the config as it runs)
        args, grid, consts, scratch = hopper_call(q_in, kv_cache, page_table, seq_lens, sm_scale, kv_scale, fmt, out,
                                                  return_lse, sms=sms, config=config,
                                                  query_replaced=reads == "T8" and (fp8_q or pair))
        fn, consts = _kernel_and_params(heads, fmt, {**consts, "Q_LO": int(q_lo)})
        # (the plan made before T8's query pre-pass: T8 reads its row before it waits for the pass, _plan_first)
        filled = False      # (whether this call launched the plan kernel: the split then runs right behind it)
        if plan is not None and _reads_plan(_heads_on_m(heads), fmt, {**cfg, **consts}):
            counts = _streams(fmt, reads or ("PP" if cfg.get("PP") else None), heads)
            rows = plan_mod.attach(plan, seq_lens, page_table, kv_cache.shape[1], grid[1], lambda _: grid[1],
                                   _B_CHUNK, fp8=fmt == "fp8", slots=reduction.SEG_FROM_PLAN, counts=counts)
            filled = plan_mod.plan_hook({**consts, "plan_ptr": rows})
            consts = {**consts, "plan_ptr": rows, **({"done_ptr": plan.counters()} if counts else {})}
        if fp8_q and reads:
            args, consts = _fp8_query(args, consts, q, q_scale, reads)
        elif pair:
            args, consts = _query_pair(args, consts, q)
        fn[grid](*args, **consts, **_split_pdl(_takes_pdl(fn, fmt), consts, filled))
        return _with_plan_slots(scratch, consts)
    route = _tuned_route(heads, fmt, q.shape[0], kv_cache.shape[1], q_lo, fp8_q)
    p8 = bool(p8) and not q_lo and route == "third"
    reads = ("T8" if route == "third" else "V2" if not _heads_on_m(heads) and route != "first" else None)
    if fp8_q and not reads:
        q = dequantize_query(q, q_scale)
    if route == "first":
        args, grid, consts, scratch = tuned_call(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale, fmt, out,
                                                 return_lse, sms=sms)
    else:
        args, grid, consts, scratch = tuned_second_call(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale, fmt, out,
                                                        return_lse, sms=sms, gather=route == "gather",
                                                        third=route == "third", q_lo=q_lo,
                                                        query_replaced=reads == "T8", p8=p8)
    on_m = _heads_on_m(heads)
    extra = None if route == "first" else _extra(on_m, fmt, route == "gather", route == "third", p8)
    if plan is not None and _reads_plan(on_m, fmt, {} if extra is None else {extra.flag: 1,
                                                                             "GATHER": int(route == "gather")}):
        # room for the space's largest grid; each config's pre-hook fills the rows for its own (plan.plan_hook), but
        # T8's, filled here, before its query pre-pass (_plan_first)
        space = _SPACES[(on_m, fmt == "fp8")] if extra is None else extra.space
        counts = _streams(fmt, reads or ("PP" if extra is not None and extra.flag == "PP" else None), heads)
        consts = {**consts, "plan_ptr": plan_mod.attach(
            plan, seq_lens, page_table, kv_cache.shape[1], max(grid(c)[1] for c in space),
            lambda config: grid(config)[1], _B_CHUNK, fp8=fmt == "fp8", slots=reduction.SEG_FROM_PLAN,
            counts=counts)}
        if counts:
            consts["done_ptr"] = plan.counters()
        if reads == "T8":
            _plan_first(consts, space, grid)
    if fp8_q and reads:
        args, consts = _fp8_query(args, consts, q, q_scale, reads)
    elif reads == "T8":
        args, consts = _query_pair(args, consts, q)
    kernel = _route_kernel(route, heads, fmt, q_lo, p8)
    kernel[grid](*args, **consts, **_tuned_split_pdl(kernel, fmt, args, consts))
    return _with_plan_slots(scratch, consts)


# The split kernels that take the ``PDL`` constexpr (the second fp8 tokens-on-M kernel: fp8 and fp8_ds_mla, H < 64,
# its row gather included; the bf16 tokens-on-M kernel, H < 64; the bf16 ping-pong kernel, H a multiple of 64, each
# warpgroup waiting) launched as the programmatic dependent of the kernel before them: 1 waits for that kernel before
# the first global load, 2 reads the plan's row first and waits before the first segment's page ids, query and copies;
# pinned and tuned: 2 takes mode 2 where it is safe (:func:`_split_pdl`, :func:`_tuned_split_pdl`), 1 elsewhere; 0
# launches them as before. Mode 2 needs the plan's rows written by a kernel that completed before the kernel ahead
# started: a call whose own plan fill is the kernel ahead, a call without a plan and a call whose scales are tensors
# (which the query's quantisation ahead may write) wait first. Measured on an H100 (session 56, call A,
# `benchmarks/probes/split_pdl.py --ragged` and `--ahead copy`, fp8 H = 16, page size 64, 4096-token requests, pinned
# to the tuned path's two configs, a plan made before the graph, graph replay, median of three rounds): the previous
# call's reduction ahead, plan-first 0.0365 / 0.0623 / 0.1108 ms against 0.0373 / 0.0625 / 0.1109 off with three
# buffers at batch 32 / 64 / 128 (-2.2 / -0.2 / -0.1%), -0.6 / -0.6 / +0.0% with two, ragged -0.4 to -1.1% but +0.1%
# in one cell, wait-first -0.8 to +0.1%; a copy writing the query ahead (as a projection would), plan-first -1.0 /
# -0.1 / -0.5 / -0.1% at batch 32 / 32 / 64 / 64 (three / two buffers). Tuned (call B, `--configs '[{}]'`): -0.9 /
# -0.3 / -0.2% at batch 32 / 64 / 128 (ragged -0.5 / -0.6 / -0.0%), fp8_ds_mla -0.7 / -0.4%, the row gather at page
# size 1 -0.3 / -0.0%, -1.5% at batch 32 with a copy ahead; slower in no cell.
SPLIT_PDL = 2
# The bf16 kernels' PDL (the tokens-on-M kernel, H < 64, and the ping-pong kernel, H a multiple of 64, each warpgroup
# waiting; written in session 56). Measured on an H100 (session 57, call A, `benchmarks/probes/split_pdl.py --configs
# '[{}]' --ragged --cells "bf16:16:64:32,64,128 bf16:128:64:32,64"`, the tuned path, a plan made before the graph,
# graph replay, median of three rounds; off / plan-first ms): H = 16 0.0585 / 0.0577, 0.1075 / 0.1073, 0.2007 / 0.2006
# at batch 32 / 64 / 128 (-1.4 / -0.2 / -0.1%), H = 128 0.0763 / 0.0758, 0.1408 / 0.1337 at 32 / 64 (-0.6 / -5.0%);
# ragged -0.6 / -0.1 / -0.2% and -0.4 / +0.3%. Its GPU test cases (tuned and pinned, both kernels) and the bf16 decode
# tests with it passed there (7 and 27).
SPLIT_PDL_BF16 = True


def _takes_pdl(fn, fmt: str) -> bool:
    """Whether the split kernel ``fn`` (a JIT function, or a tuned kernel: both list their arguments' names) takes
    the ``PDL`` constexpr and is launched with it on a ``fmt`` cache (bf16: :data:`SPLIT_PDL_BF16`)."""
    return _has_pdl_arg(fn) and (fmt != "bf16" or bool(SPLIT_PDL_BF16))


@functools.lru_cache(maxsize=None)
def _has_pdl_arg(fn) -> bool:
    """Whether ``fn`` has a ``PDL`` argument, looked up once per kernel (every split launch asks: a scan of its
    arguments' names each time cost ~0.4 us of the dispatch path)."""
    return "PDL" in getattr(fn, "arg_names", ())


def _split_pdl(takes: bool, consts: dict[str, Any], filled: bool) -> dict[str, Any]:
    """The launch options :data:`SPLIT_PDL` adds to a split launch: none where it is 0 or the kernel does not take
    ``PDL`` (``takes``, :func:`_takes_pdl`); mode 2 only with a plan that this call did not fill (``filled``: the
    plan kernel just launched, right ahead of the split, writes the rows mode 2 reads before its wait) and scales given
    as floats (a scale tensor may be the kernel ahead's to write: the query's quantisation): mode 1 elsewhere."""
    mode = int(SPLIT_PDL)
    if mode not in (0, 1, 2):
        raise ValueError(f"interface_hopper.SPLIT_PDL {SPLIT_PDL!r}: expected 0, 1 or 2")
    if not mode or not takes:
        return {}
    if mode == 2 and (consts.get("plan_ptr") is None or filled or consts.get("KV_SCALE_FROM_PTR")
                      or consts.get("Q_DESCALE_FROM_PTR")):
        mode = 1
    return {"PDL": mode, "launch_pdl": True}


def _tuned_split_pdl(kernel, fmt: str, args: tuple, consts: dict[str, Any]) -> dict[str, Any]:
    """:func:`_split_pdl` for a tuned launch, whose plan (if any) the config's pre-hook fills right before the split:
    mode 2 only where the tuner's pick for this launch is known (``GraphtuneKernel.chosen``) and the plan holds that
    pick's split already, so its pre-hook launches nothing ahead of the split; mode 1 where the plan will be filled
    (the step's first layer) or the pick is not made yet (the tuner then times its configs, each filling the plan
    right ahead of its split)."""
    if not SPLIT_PDL or not _takes_pdl(kernel, fmt):
        return {}
    ready = False
    if consts.get("plan_ptr") is not None:
        config = kernel.chosen(args, consts)
        # (the split a config runs is a function of its constexprs alone: plan.attach's programs_of is the grid's)
        ready = config is not None and plan_mod.holds_for({**consts, **config.all_kwargs()})
    return _split_pdl(True, consts, filled=not ready)


def _streams(fmt: str, reads: str | None, heads: int = 16) -> bool:
    """Whether the launch gives the split kernel its plan's counters (``done_ptr``), the reduction streamed behind
    it (``reduction.STREAM``): the second fp8 tokens-on-M kernel (``reads == "V2"``, its row gather included: one
    kernel) on a per-tensor fp8 cache, with ``reduction.STREAM_DS`` on fp8_ds_mla rows too (``DS``, the same
    kernel), and with ``reduction.STREAM_PP`` the bf16 ping-pong kernel (``reads == "PP"``), whose plan carries the
    reduction's slots (``reduction.SEG_FROM_PLAN``). ``heads``: the ping-pong kernel counts per 64-head block, so
    at most ``kernel_hopper.STREAM_GROUPS`` of them (H <= 256)."""
    if not (reduction.STREAM and reduction.SEG_FROM_PLAN):
        return False
    if reads == "PP":
        return reduction.STREAM_PP and fmt == "bf16" and heads <= BLOCK_H * int(kernel_hopper.STREAM_GROUPS)
    return reads == "V2" and (fmt == "fp8" or (fmt == DS_FORMAT and reduction.STREAM_DS))


def _with_plan_slots(scratch: tuple, consts: dict[str, Any]) -> tuple:
    """The launch's scratch for the reduction, its ``seg`` the plan's slots where the launch read a plan filled with
    them (``reduction.SEG_FROM_PLAN``: the same values, written before the split kernel ran), marked with the plan's
    counters where the split kernel counted its segments in them (its config's buffers: ``plan.counted_of``;
    ``reduction.streamed``)."""
    rows = consts.get("plan_ptr")
    seg = plan_mod.slots_of(rows)
    if seg is None:
        return scratch
    counts = consts.get("done_ptr")
    if counts is None or not plan_mod.counted_of(rows):
        return (*scratch[:3], seg)
    return (*scratch[:3], reduction.streamed(seg, counts, plan_mod.geometry_of(rows)))


def _plan_first(consts: dict[str, Any], space: list[dict[str, int]], grid) -> None:
    """T8's plan filled now, before its query pre-pass (``query8``) is launched, rather than by a config pre-hook at
    its own launch: T8 runs as the pre-pass's programmatic dependent and reads its plan row before
    ``griddepcontrol.wait``, so the plan kernel must have completed before the pre-pass starts (a fill between the
    two would be what T8's wait waits for, its rows read early). So every config of T8's ``space`` runs one grid
    (``grid(config)``) and one split (``MIN_TILES``): a space whose configs differ there is a ValueError; the plan is
    filled for that grid, the space's grid keys (SPLIT_MAX) and split with the launch's constexprs. (Filled from the
    constexprs alone, which hold no SPLIT_MAX, a space of SPLIT_MAX 32 got a plan of a larger grid than it ran: wrong
    results, then an illegal address, on an H100 in session 38.)"""
    programs = [grid(c)[1] for c in space]
    if len(set(programs)) != 1:
        raise ValueError(f"T8's configs run grids of {sorted(set(programs))} programs: its plan is filled before its "
                         f"query pre-pass, for one grid")
    least = sorted({c.get("MIN_TILES", 1) for c in space})
    if len(least) != 1:
        raise ValueError(f"T8's configs split with MIN_TILES {least}: its plan is filled before its query pre-pass, "
                         f"for one split")
    plan_mod.plan_hook({**consts, **space[0]})


def _reads_plan(on_m: bool, fmt: str, flags: dict[str, Any]) -> bool:
    """Whether the split kernel that ``flags`` select (a config's kernel keys: ``T8``, ``V2`` / ``DS``, ``GATHER``,
    ``PP``, ``RING``; none: the class's first kernel) reads a step's plan: T8, the second fp8 / fp8_ds_mla tokens-on-M
    kernel (with the TMA loader or the row gather, ``GATHER``, which reads the split and the first segment from it, its
    page ids itself), the bf16 ping-pong kernel and the bf16 tokens-on-M kernel. The one place that rule is kept: the
    pinned and tuned launches and the tuned configs' pre-hook ask it."""
    if flags.get("T8") or flags.get("V2") or flags.get("DS"):
        return True
    return fmt == "bf16" and bool(flags.get("PP") or not (on_m or flags.get("RING")))


def _tuned_route(heads: int, fmt: str, batch: int, page_size: int, q_lo: bool = True, fp8_q: bool = False) -> str:
    """Which tuned kernel an unpinned launch runs: ``"gather"`` (pages that are not whole TMA tiles: ``GATHER``),
    ``"third"`` / ``"second"`` (the class's third / second kernel from its ``min_batch``: ``THIRD`` / ``SECOND``;
    ``q_lo=False``, the third from ``T8_E4M3_MIN_BATCH``; a query given in e4m3, ``fp8_q``, the third at every
    batch) or ``"first"``."""
    if page_size % BLOCK_N:
        if fmt not in GATHER or _heads_on_m(heads):
            _check_gather(page_size, {})     # (the other tuned kernels read whole TMA tiles: one clear error)
        return "gather"
    if third_applies(heads, fmt, batch, q_lo) or (fp8_q and (_heads_on_m(heads), fmt) in THIRD):
        return "third"
    return "second" if second_applies(heads, fmt, batch) else "first"


def tuned_for(heads: int, fmt: str, batch: int, page_size: int, q_lo: bool = True, fp8_q: bool = False,
              p8: bool = False):
    """The tuned kernel (``graphtune.autotune``, per batch bucket) an unpinned Hopper launch runs for ``batch``
    requests of ``heads`` heads on a ``fmt`` cache of ``page_size``-token pages (``q_lo=False``:
    ``query_precision="e4m3"``; ``fp8_q``: the query given in e4m3; ``p8``: ``p_precision="e4m3"``; its name is
    what ``graphtune.coverage`` reports)."""
    return _route_kernel(_tuned_route(heads, fmt, batch, page_size, q_lo, fp8_q), heads, fmt, q_lo, p8)


def _route_kernel(route: str, heads: int, fmt: str, q_lo: bool = True, p8: bool = False):
    if route == "first":
        return tuned_kernel(_heads_on_m(heads), fmt == "fp8")
    return tuned_second_kernel(_heads_on_m(heads), fmt, route == "gather", route == "third", q_lo, p8)
