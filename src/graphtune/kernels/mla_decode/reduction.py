"""The MLA decode's reduction: the split kernels' partial outputs merged into each request's output.

Every split kernel (the portable one, kernel.py, and the Hopper ones) writes the same partials: per program and
request segment a [heads, 512] output (fp32, or fp16: :func:`partial_layout`; a bf16 cache's scaled per half-row) and
a log2-sum-exp, under slot ``program + request``, and for each request the first and last slot it used (``seg``); a
request written whole by one program needs no merge (its slots say so).
This module owns the launch of ``kernel._mla_decode_reduce_kernel`` over them: its block shapes
(:func:`reduce_blocks`), the launch (:func:`reduce_launch`, :func:`merge`), and the same launch as the work that
follows every tuned split kernel's launch while it is tuned (:func:`after_split`, :func:`after_hopper_split`:
``graphtune.autotune(followed_by=...)``), so that configs with more programs, which leave more partials, pay for them
in the comparison, and that launch as the decode makes it (``PDL_MIN_BATCH``).
"""
from __future__ import annotations

import functools
from typing import Any

import torch

from ... import settings
from . import kernel, kernel_hopper, plan
from .reference import D_NOPE

# The reduction's blocks (slots merged per step, heads and output columns per program). When the split grid has at
# least 64 programs per request (batch 1 to 4 on an H200), a request's partials fill a 64-slot step: the 512
# columns split four ways and 64 slots a step, one round trip of loads instead of a chain of 16-slot steps.
# Measured on an H200 (session 13, run 2, graph replay, 4096 tokens): the 64-slot blocks took batch 1 from 0.0126
# to 0.0095 ms (bf16, H = 16), 0.0157 to 0.0125 (fp8, H = 16), 0.0193 to 0.0182 (bf16, H = 128) and 0.0232 to
# 0.0221 (fp8, H = 128). Otherwise whole rows, as many slots a step as the grid has programs per request (rounded
# down to a power of two, 2 to 16) and heads per program to make 8 (slot, head) rows: the reduction alone, on the
# partials of the tuned Hopper path, measured 16 block shapes on an H200 (session 15, run 1,
# benchmarks/probes/reduce_sweep.py, graph replay): this rule took fp8 H = 128 batch 32 from 0.0146 to 0.0060 ms
# (16 slots a step, one head, the rule before), batch 64 from 0.0071 to 0.0037, fp8 H = 16 batch 128 from 0.0087
# to 0.0041 and batch 64 from 0.0054 to 0.0038, and was within 0.0005 ms of the best of the 16 shapes in 16 of the
# 18 cells (fp8 and bf16; H = 16 at batch 1 to 128, H = 128 at 1 to 64). In the decode (run 2, against the rule
# before in the same run): bf16 H = 128 batch 32 0.0936 -> 0.0848 ms, fp8 H = 16 batch 128 0.0965 -> 0.0934.
# The reduction as a programmatic dependent launch of a Hopper split kernel (griddepcontrol.wait before its first
# load; the split kernels let it launch from their start, kernel_hopper._launch_dependents), from this many requests
# up. Measured on H200s, the decode with and without it in one process (benchmarks/probes/reduce_sweep.py --pdl): in
# session 16 run 1 (18 cells) and run 6 (14 cells, the plain decode timed before and after), batches 8 and 32 were as
# fast or faster with it in both runs wherever timed (bf16 H = 16: 0.0149 -> 0.0144 and 0.0152 -> 0.0147 ms at 8,
# 0.0478 -> 0.0470 and 0.0478 -> 0.0472 at 32; fp8 H = 16 at 8: 0.0203 -> 0.0197 and 0.0200 -> 0.0196; bf16 H = 128 at
# 8: 0.0360 -> 0.0360 and 0.0368 -> 0.0358), batches 64 and 128 within 0.6% either way, and batch 1 slower in fp8 H =
# 16 both times (0.0133 -> 0.0147, 0.0136 -> 0.0155). Session 13 timed it without the split kernels' trigger: no gain.
# The portable split kernel gives no trigger: its reduction launches plainly. The tuner's follow-up
# (after_hopper_split, after_split) launches it the same way, so a tuned config is timed as the decode runs it: at fp8
# H = 16, batch 8 the two-buffer configs ran 1.4 us slower with it and the three-buffer ones 0.5 us faster (H200,
# session 20 run 2, benchmarks/probes/pick_check.py: 0.0188 / 0.0162 ms against 0.0174 / 0.0167 with a plain launch),
# and the tuner, timing plain launches, picked two buffers.
PDL_MIN_BATCH = 8
# The reduction's last round trips, after the split kernel's last program (session 52). Launched as a programmatic
# dependent, the reduction waits for the split kernel, then reads each request's slots (``seg``) and length, then its
# partials a step of BLOCK_S slots at a time, each a dependent round trip to memory after the last split program exits.
# SEG_FROM_PLAN: where the launch read a step's plan, the plan kernel writes the slots too (plan.MLADecodePlan.slots,
# the split kernels' own stores made ahead of time), so the reduction reads them and the lengths before its wait
# (``SEG_EARLY``): one round trip fewer after the split. Timed on an H100 (session 53, benchmarks/probes/reduce_tail.py
# --rounds 6, the public call tuned with a plan, as shipped against SEG_FROM_PLAN in alternating rounds): fp8 H = 16
# 0.6% / 0.7% faster at batch 32 / 64 (0.0379 -> 0.0376, 0.0638 -> 0.0634 ms), faster in every one of the six rounds;
# in the same session's two-round run also at batch 128, page size 1 and bf16 H = 16 batch 128 (0.1-0.5%); at H = 128
# the rounds spread more than the change (bf16 batch 64: -2.4% to +2.8% a round, fp8 batch 64: -7.0% to +3.6%),
# with no direction. Measured and removed beside it: ONE_STEP (BLOCK_S covering a request's slots in one step, 16 at
# fp8 H = 16 batch 32): slower in every round at fp8 H = 16 batch 32 (+0.6% to +1.8%) and bf16 H = 128 batch 32
# (+0.6% to +3.1%), no cell faster.
SEG_FROM_PLAN = True
# The reduction streamed behind the split (session 53). As a programmatic dependent the reduction starts only after
# the split kernel's last program: at fp8 H = 16 on an H100 the programs' exits spread over the kernel's last 3.8 / 5.7
# / 10.6 us at batch 32 / 64 / 128 (session 49, timelines), while the SMs that are done idle, and the reduction then
# adds 2.6 / 3.6 / 4.8 us (H200, session 20). With STREAM, where the launch read a plan filled with its slots
# (SEG_FROM_PLAN) and the split kernel counts (the second fp8 tokens-on-M kernel, its row gather included, in its
# configs of two buffers: kernel_hopper.STREAM_MAX_BUF), the split counts each request's written segments in the plan's
# counters and the reduction merges a request once its count reaches the request's slots (kernel_hopper.STREAM_GROUPS):
# its programs run on the SMs the split's first programs leave, during the split's tail. Timed on an H100 (session 53,
# benchmarks/probes/reduce_tail.py, fp8 H = 16, 4096-token requests or ragged 1..8191, a plan made before the graph,
# four alternating rounds, against SEG_FROM_PLAN alone): pinned to two buffers 1.9 / 1.3 / 0.7% faster at batch 32 /
# 64 / 128 (call H; 2.0 / 1.2 / 0.5% in call F), faster in every round; the public call tuned per way, page size 1
# (the row gather) 1.5 / 0.6% faster at batch 64 / 128 (calls H and J alike), ragged lengths -0.2 / -0.8 / -2.1% at
# batch 32 / 64 / 128 (call J; +0.2 / -2.2 / -1.9% in call H), uniform 0.0 / -1.2 / +1.1% (call J; +0.1 / -0.2 /
# +0.9% in call H): at uniform batch 128 the tuner took two buffers, streamed, over three by 0.3% of its own timing,
# and the decode ran 1% slower with them. On: the engines' batches are ragged.
STREAM = True
# The same for fp8_ds_mla rows (the same second tokens-on-M kernel, DS = 1, its two-buffer configs; written in session
# 54: the DS build with the counters adds the one release add and moves nothing else). Its GPU test passed on an H100
# (session 55, call A: two and three buffers, H = 32, the row gather, 132 / 7 / 1 SMs, then the tuned path captured)
# and, the public call tuned per way (benchmarks/probes/reduce_tail.py --stream-gated, three rounds, H = 16, page size
# 64), where the tuner took two buffers and streamed (ragged batch 64) 2.3% faster than the slots read early alone, in
# every round (0.0850-0.0851 ms against 0.0869-0.0872); where it took three buffers (no counting) -0.2 / +0.2 / +0.6%,
# the same kernel. On.
STREAM_DS = True
# The same for the bf16 ping-pong kernel (heads on M, H = 128: 231 KB of shared memory, one program an SM, so a
# reduction program only gets an SM once its split program has exited, as beside two fp8 programs): each warpgroup
# counts its half of a segment (plan.stream_geometry: 64-head groups, two counts a segment). Written in session 54;
# its GPU test passed on an H100 (session 55, call A: H = 128 and 256, 132 / 7 / 1 SMs, then the tuned path captured),
# but it does not pay: the public call tuned per way against the slots read early alone (reduce_tail.py
# --stream-gated, the same config picked), +1.3 / +0.6% at batch 32 uniform / ragged in call A (three rounds, slower in
# each) and +1.7 / +2.6% uniform, +1.4 / +1.2% ragged at batch 32 / 64 in call B (six rounds: slower in 21 of 24).
# Right, not faster: off; reduce_tail.py --stream-gated times it.
STREAM_PP = False
_REDUCE_SMALL = (64, 1, 128, 4)
_REDUCE_ROWS = 8         # (slot, head) rows of 512 fp32 columns a program holds per step (4 warps: 32 a thread)
_REDUCE_MAX_SLOTS = 16


# An fp8 cache's partial outputs in fp16, from every Hopper split kernel: each partial is a convex combination of the
# cache's values times its per-tensor scale, so |partial| <= 448 x kv_scale (448: e4m3's largest finite value), within
# fp16's 65,504 for any scale up to 146. Half the partials' bytes: at H = 16, 4096 tokens a request on 132 SMs (two
# programs an SM), 264 slots of 32 KB, 8.4 MB written and read back a call in fp32 beside the cache's 75.5 MB at batch
# 32. fp16 keeps 11 significant bits, the bf16 output 8: the output stays as accurate against the exact result
# (session 26's CPU probe, the benchmark's inputs in float64: 1.64e-3 with fp32 partials, 1.65e-3 with fp16 ones at
# 2 / 4 / 8 segments a request); against the reference rounded to bf16 the worst error read 7.2e-4 / 9.3e-4 (uniform
# batches, fp32 / fp16) on the timed inputs. Measured against fp32 partials in the same call (docs/benchmarks.md):
# on an H100 (session 34, call E) H = 16 batch 1 / 8 / 32 / 64 8.1 / 6.4 / 5.2 / 3.7% faster, 128 within noise, ragged
# batches 1.1-6.6% faster. The heads-on-M kernels (H >= 64) were 1-17% slower there while they stored fp16 two columns
# a thread (half a 32-byte sector a row per store); they store whole sectors now (kernel_hopper._store_partial_sectors)
# and on an H200 (session 35, call A) H = 128 went 7.1 / 7.8 / 3.0% faster at batch 1 / 8 / 32 (uniform), 11.4 / 4.1 /
# 4.3% (ragged), batch 64 within noise, no cell of H = 16 or 128 slower. fp32 stays for a scale given as a tensor (read
# on the device, unknown here), bf16 caches and fp8_ds_mla (group scales); the portable kernel keeps fp32 (not
# measured).
_FP16_PARTIAL_MAX_SCALE = 65504.0 / 448.0
# A bf16 cache's partials in fp16 too, scaled, where the launch asks for it (``interface_hopper.PP_PART16_MAX_BATCH``:
# where it measured faster): nothing bounds a bf16 cache's values (past 65504 fp16 overflows, below 2^-14 it loses
# bits), so each partial half-row (64 or 16 heads x 256 columns) is stored times 2^-k, k = ceil(log2 of its largest
# magnitude) - 15 (its largest value then in [2^14, 2^15]: fp16's full 11 bits for it, the row's smaller values as
# fp16 keeps them), and k beside its LSE: the slot's row of ``part_lse`` holds [LSE of H heads | k of columns 0-255 |
# k of columns 256-511] (``3 H`` columns; the reduction weighs each partial by 2^k, its sum of weights without).


def partial_layout(kv_format: str, kv_scale: float | torch.Tensor, scaled: bool = False) -> tuple[torch.dtype, bool]:
    """The dtype of the Hopper split kernels' partial outputs for this cache, and whether they are stored scaled per
    half-row: fp16 for a per-tensor fp8 cache whose scale (a float) bounds them within fp16's range, fp16 scaled for a
    bf16 cache where the launch asks (``scaled``), else fp32. The kernels store partials in their buffer's dtype and
    the reduction reads either."""
    if kv_format == "fp8" and not isinstance(kv_scale, torch.Tensor) and kv_scale <= _FP16_PARTIAL_MAX_SCALE:
        return torch.float16, False
    if kv_format == "bf16" and scaled:
        return torch.float16, True
    return torch.float32, False


# Scaled partials merged by half rows (one k a program, one warp) rather than whole rows (a select per value between
# the two halves' factors, two warps). Session 37 call E (H100) timed scaled fp16 partials 2-6% slower than unscaled
# ones, which the reduction merges by whole rows at two warps. Session 38 call A (H100, `partials_probe.py --heads 128
# --batches 8,32,64`, the public call with a plan, half rows / whole rows, ms): uniform 0.0323 / 0.0317 at batch 8,
# 0.0793 / 0.0793 at 32, 0.1458 / 0.1437 at 64; ragged 0.0354 / 0.0349, 0.0824 / 0.0820, 0.1508 / 0.1504, the same
# errors (1.70-1.99e-3): whole rows, never slower. (Unscaled fp16 stays 1-3% ahead of either where it is safe: the
# scaling's pass in the split kernel's epilogue is what is left of the cost.)
SCALED_HALF_ROWS = False


def lse_columns(heads: int, scaled: bool) -> int:
    """Columns of ``part_lse``'s slot rows: the heads' LSEs, and with scaled partials each half-row's k after them."""
    return 3 * heads if scaled else heads


def reduce_blocks(batch: int, slots: int, heads: int, partial_bytes: int = 4,
                  scaled: bool = False) -> tuple[int, int, int, int]:
    """``(BLOCK_S, BLOCK_H, BLOCK_D, num_warps)`` of the reduction for ``batch`` requests of ``heads`` heads and
    ``slots`` partial slots (the split grid's programs + ``batch``, as the split kernels' scratch is sized) of
    ``partial_bytes``-byte values. Whole rows of fp16 partials take two warps: Triton loads them 8 to a thread (16
    bytes), so 4 warps cover a 512-column row twice over and split the slots between warps, whose sum then crosses
    warps through shared memory every step (compiled for sm_90: 4-16 KB and 5-14 barriers against none at two warps,
    as the fp32 rows have at four); on an H100 that made the reduction 1.2-4x slower (session 34, call D). ``scaled``
    partials (one k a 256-column half-row) take half rows, one warp each (the same 8 values a thread), unless
    :data:`SCALED_HALF_ROWS` is off (whole rows, each column's factor selected by its half)."""
    per_request = -(-(slots - batch) // batch)      # the grid's programs per request, rounded up
    if per_request >= _REDUCE_SMALL[0]:
        return _REDUCE_SMALL
    block_s = min(_REDUCE_MAX_SLOTS, max(2, 1 << (per_request.bit_length() - 1)))
    block_h = max(1, _REDUCE_ROWS // block_s)
    while heads % block_h:
        block_h //= 2
    if scaled and SCALED_HALF_ROWS:
        return block_s, block_h, D_NOPE // 2, 1
    return block_s, block_h, D_NOPE, 4 if partial_bytes >= 4 else 2


def reduce_launch(seg: torch.Tensor, part_o: torch.Tensor, part_lse: torch.Tensor, out: torch.Tensor,
                  lse: torch.Tensor, seq_lens: torch.Tensor, return_lse: bool,
                  blocks: tuple[int, int, int, int], pdl: bool = False) -> None:
    """Launch the reduction with ``blocks`` = ``(BLOCK_S, BLOCK_H, BLOCK_D, num_warps)`` (:func:`reduce_blocks`
    picks them; a probe may pass others); ``pdl``: as a programmatic dependent of the split kernel before it (sm_90+,
    compiled; else a plain launch). ``seg`` a plan's slots (:func:`planned_slots`): with ``pdl`` read before the
    wait (:data:`SEG_FROM_PLAN`)."""
    batch, heads, _ = out.shape
    block_s, block_h, block_d, warps = blocks
    scaled = part_lse.shape[1] > heads       # (the slot rows carry each half-row's k: lse_columns)
    pdl = (pdl and out.device.type == "cuda" and not settings.interpret()
           and device_capability(out.device)[0] >= 9)
    kernel._mla_decode_reduce_kernel[(batch, heads // block_h, D_NOPE // block_d)](
        seg, part_o, part_lse, out, lse, seq_lens,
        heads,
        part_o.stride(0), part_o.stride(1),
        part_lse.stride(0),
        out.stride(0), out.stride(1),
        return_lse, block_s, block_d, block_h, pdl, scaled, pdl and planned_slots(seg), num_warps=warps,
        launch_pdl=pdl, **_stream_args(seg))


def _stream_args(seg: torch.Tensor) -> dict[str, Any]:
    """The streamed reduction's arguments where ``seg`` came from :func:`streamed`: the counters, the split's head
    group and its counts a segment."""
    counts = streamed_counts(seg)
    if counts is None:
        return {}
    group, writers = seg._graphtune_geometry
    return {"done_ptr": counts, "SPLIT_BH": group, "WRITERS": writers}


def planned_slots(seg: torch.Tensor) -> bool:
    """Whether ``seg`` holds a step's plan's slots (plan.MLADecodePlan.slots: written before the split kernel
    ran), not the split kernel's own."""
    return bool(getattr(seg, "_graphtune_plan_slots", False))


def streamed(slots: torch.Tensor, counts: torch.Tensor,
             geometry: tuple[int, int] = plan.TOKENS_ON_M_GEOMETRY) -> torch.Tensor:
    """A plan's slots as the ``seg`` of a launch whose split kernel counted its segments in ``counts`` (the
    plan's counters, :data:`STREAM`) as ``geometry`` says (``plan.MLADecodePlan.stream_geometry``: its head group
    and the counts a segment adds): a view of them, marked so that the reduction waits per request on the counts
    (:func:`streamed_counts`) rather than for the whole split kernel."""
    view = getattr(slots, "_graphtune_streamed", None)     # (made once per plan, not per call: the dispatch path)
    if view is None or view._graphtune_counts is not counts or view._graphtune_geometry != geometry:
        view = slots.view(slots.shape)
        view._graphtune_plan_slots = True
        view._graphtune_counts = counts
        view._graphtune_geometry = geometry
        slots._graphtune_streamed = view
    return view


def streamed_counts(seg: torch.Tensor) -> torch.Tensor | None:
    """The counters the split kernel counted its segments in, where ``seg`` came from :func:`streamed`."""
    return getattr(seg, "_graphtune_counts", None)


def merge(batch: int, heads: int, seg: torch.Tensor, part_o: torch.Tensor, part_lse: torch.Tensor,
          out: torch.Tensor, lse: torch.Tensor, seq_lens: torch.Tensor, return_lse: bool,
          pdl: bool = False) -> None:
    """Merge the split kernel's partials (every split kernel writes the same partial layout); ``pdl``: see
    :func:`reduce_launch`."""
    reduce_launch(seg, part_o, part_lse, out, lse, seq_lens, return_lse,
                  reduce_blocks(batch, part_o.shape[0], heads, part_o.element_size(), part_lse.shape[1] > heads), pdl)


def after_split(named: dict[str, Any]) -> None:
    """The reduction after a split kernel's launch, from that launch's arguments by name (every split kernel has
    ``B``, ``H``, ``seg_ptr``, ``part_o_ptr``, ``part_lse_ptr``, ``out_ptr``, ``lse_ptr``, ``seq_lens_ptr`` and
    ``RETURN_LSE``): ``graphtune.autotune(followed_by=...)`` of the tuned portable split kernel, launched plainly as
    the decode launches it after that kernel (which gives no trigger)."""
    _follow(named, False)


def after_hopper_split(named: dict[str, Any]) -> None:
    """:func:`after_split` for the tuned Hopper split kernels: launched as the decode launches it after them, a
    programmatic dependent from ``PDL_MIN_BATCH`` requests up."""
    _follow(named, int(named["B"]) >= PDL_MIN_BATCH)


def _follow(named: dict[str, Any], pdl: bool) -> None:
    # (a launch that read a plan filled with its slots: the reduction reads those, as the decode does; one whose
    # split counted its segments (done_ptr) is merged streamed. The timer's rotating sets share the plan's rows and
    # counters, so its copies reach the slots too; rows that lead to none (not made by plan.attach) with counters
    # given are merged plainly and the counts cleared)
    seg = plan.slots_of(named.get("plan_ptr")) if SEG_FROM_PLAN else None
    counts = named.get("done_ptr")
    if counts is not None and int(named.get("NUM_BUF", 2)) > int(kernel_hopper.STREAM_MAX_BUF):
        counts = None       # (a config that does not count)
    if seg is not None and counts is not None:
        seg = streamed(seg, counts, plan.geometry_of(named.get("plan_ptr")))
    merge(int(named["B"]), int(named["H"]), named["seg_ptr"] if seg is None else seg, named["part_o_ptr"],
          named["part_lse_ptr"], named["out_ptr"], named["lse_ptr"], named["seq_lens_ptr"], bool(named["RETURN_LSE"]),
          pdl=pdl)
    if counts is not None and seg is None:
        counts.zero_()


def device_capability(device: torch.device) -> tuple[int, int]:
    """The CUDA device's compute capability, cached (the decode asks on every call: the Hopper path's check and the
    reduction's programmatic launch)."""
    return _capability(device.index if device.index is not None else torch.cuda.current_device())


@functools.lru_cache(maxsize=None)
def _capability(device_index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device_index)
