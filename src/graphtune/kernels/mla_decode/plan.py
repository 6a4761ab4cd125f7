"""A decode step's plan of the Hopper split (:class:`MLADecodePlan`), made once and read by every layer's call.

Each split kernel call works out its programs' tile ranges from ``seq_lens`` and then its first segment's request
and page ids: two or three dependent round trips to memory before its first tile's copy, with the memory idle, and
the same work in every layer of a step. A plan holds those values, made by one small launch
(``kernel_hopper._mla_decode_plan_kernel``, the split kernel's own code) the first time a call of the step
needs them; the kernels that read it (the second fp8 tokens-on-M kernel, fp8 and fp8_ds_mla, H < 64; the bf16
tokens-on-M kernel, H < 64; the bf16 ping-pong kernel from batch 8 and T8, the fp8 one, H a multiple of 64; pages of
whole 64-token tiles, and the fp8 / fp8_ds_mla row gather at other page sizes, which reads the split and the first
segment's request from it and its page ids, one a row, itself) then issue their first copies one round trip after
they start. FlashMLA's metadata
(``get_mla_metadata``) is the same idea: made per step, shared by the layers. The tuned kernels fill it for their
config's grid in a pre-hook (:func:`plan_hook`), but T8, which runs as its query pre-pass's programmatic dependent
and reads its row before waiting for that pass: its launch fills the plan before the pass
(``interface_hopper._plan_first``).

Measured on an H100 (session 35 calls E and G, ``benchmarks/probes/plan_probe.py``, fp8 H = 16, page size 64, graph
replay, the plan made before the graph as FlashMLA's metadata is made outside its timed call): the public call tuned
per bucket 15 / 1 / 2 / 0.3-0.5 / 0.7-1% faster at batch 1 / 8 / 32 / 64 / 128 with 4096-token requests, 9-12 / -1 /
5-6 / 5-6 / 4-5% on ragged ones (batch 8 the one cell 0.1 us slower, both runs); pinned, two-buffer configs 2-15% faster
everywhere, three-buffer ones up to 13%. A plan made in every call (its launch inside a one-layer step) costs 2-3 us.
Session 36: T8 (fp8 H = 128) 10.3 / 6.6 / 1.3% faster at batch 16 / 32 / 64 (H200, call C), 9.3% at 8 (H100, call
E); the bf16 kernels 0.7-8.5% at H = 16 and up to 5.1% at H = 128 (H100, call B). Session 37 (H200): T8 8.7 / 10.4%
at batch 1 / 4 (call A); the row gather (fp8 H = 16, page size 1) 3.4 / 6.1 / 4.0% at batch 32 / 64 / 128, 2.94 TB/s
at 64 (call A); the bf16 kernels with the start priced (below) 0.4-3.4% uniform and 5.9-13.1% ragged (call B).
"""
from __future__ import annotations

from typing import Any

import torch

from ...capture import timer_graph
from ...descriptors import share_across_rotations
from . import kernel_hopper

try:    # torch's base for objects a custom op takes as an argument (reference opaque types; torch 2.10 on)
    from torch._opaque_base import OpaqueBase as _OpArgument
except ImportError:     # an older torch: the ops then take no plan (op.PLAN_UNDER_COMPILE says which)
    _OpArgument = object

PLAN_COLS = int(kernel_hopper.PLAN_COLS)
# The price of a request's start in the split a plan holds for the bf16 kernels (kernel_hopper's ``SEG_COST``, in
# tiles). The bf16 kernels split with none when they split themselves: at 4 ragged batches ran 2-12% faster but every
# call paid the priced pass's sums (uniform batches up to 3.5% slower; H200, session 33, kernel_hopper.BF16_SEG_COST).
# A plan makes that pass once per decode step, so its split carries the price at no per-call cost. Session 37 (call
# B, H200, `benchmarks/probes/plan_probe.py --format bf16 --heads 128|16 --batches 8,32,64 --plan-bf16-seg-cost 0|4`,
# ms with a plan, price 0 / 4): H = 128 ragged 0.0397 / 0.0343, 0.0849 / 0.0783, 0.1470 / 0.1403 at batch 8 / 32 /
# 64 (-13.6 / -7.8 / -4.6%), uniform 0.0308 / 0.0309, 0.0756 / 0.0759, 0.1273 / 0.1276 (within 0.4%, the two runs'
# FlashMLA 3.5% apart); H = 16 ragged 0.0207 / 0.0185, 0.0477 / 0.0437, 0.0820 / 0.0785, uniform 0.0164 / 0.0165,
# 0.0442 / 0.0441, 0.0788 / 0.0787.
BF16_PLAN_SEG_COST = 4
# How a tokens-on-M split kernel counts its written segments for the streamed reduction (MLADecodePlan.stream_geometry):
# per 16-head group, one count a segment (the reduction kernel's SPLIT_BH / WRITERS defaults).
TOKENS_ON_M_GEOMETRY = (16, 1)


class MLADecodePlan(_OpArgument):
    """One decode step's plan of the split, for ``mla_decode(..., plan=plan)``: make a new one per step (an empty
    object; the first call that needs it fills it on the device, so under CUDA graph capture make it inside the
    captured function, where its fill is captured with the first layer's call), pass it to each layer's call of that
    step. It belongs to that step's ``seq_lens`` and ``page_table`` tensors and their values: a call with other
    tensors is a ValueError; values changed in place after the fill are not seen (a new plan per step). Under
    torch.compile it is an input of the compiled function, which the ``graphtune::mla_decode_planned`` ops take as
    it is (op.py; a new one per step recompiles nothing)."""

    def __init__(self) -> None:
        self._rows: torch.Tensor | None = None
        self._slots: torch.Tensor | None = None  # the reduction's seg rows for the split of the last fill (slots=True)
        self._counts: torch.Tensor | None = None  # the streamed reduction's counters (counters())
        self._counted = False                   # whether the split of the last fill counts its segments in them
        self._geometry = TOKENS_ON_M_GEOMETRY   # its counts' head group and writers a segment (stream_geometry())
        self._inputs: tuple | None = None       # (seq_lens, page_table) identity and shape the plan belongs to
        self._filled: tuple | None = None       # (programs, page size, segment cost, least tiles, slots, the timer's
        #                                          graph: capture.timer_graph) last filled

    def __repr__(self) -> str:
        state = "empty" if self._inputs is None else f"batch {self._inputs[4]}"
        return f"MLADecodePlan({state})"

    def rows(self, seq_lens: torch.Tensor, page_table: torch.Tensor, max_programs: int) -> torch.Tensor:
        """The plan's rows on the device, room for ``max_programs`` programs (filled by :meth:`fill`)."""
        ident = (seq_lens.data_ptr(), page_table.data_ptr(), page_table.stride(0), seq_lens.device,
                 seq_lens.shape[0])
        if self._inputs is None:
            self._inputs = ident
        elif self._inputs != ident:
            raise ValueError(f"mla_decode: plan={self!r} was made for another batch's seq_lens / page_table (a plan "
                             "serves the calls of one decode step: make a new MLADecodePlan() per step)")
        if self._rows is None or self._rows.shape[0] < max_programs:
            # (the tuner's rotating input sets share the rows and the counters: each candidate's pre-hook fills the
            # rows for its grid, which a copy made before would not see: until session 53 a candidate timed on a
            # copy read the rows of whichever config had filled them last, read in the code: descriptors.py)
            self._rows = share_across_rotations(
                torch.empty(max_programs, PLAN_COLS, dtype=torch.int32, device=seq_lens.device))
            self._slots = torch.empty(seq_lens.shape[0], 2, dtype=torch.int32, device=seq_lens.device)
            self._slots._graphtune_plan_slots = True    # (reduction.merge reads them before its wait)
            self._counts = share_across_rotations(torch.zeros(
                2, seq_lens.shape[0], int(kernel_hopper.STREAM_GROUPS), dtype=torch.int32, device=seq_lens.device))
            self._filled = None
        return self._rows

    def counted(self) -> bool:
        """Whether the split kernel of the last fill counts its segments in :meth:`counters` (its config's buffers,
        ``kernel_hopper.STREAM_MAX_BUF``): the reduction after it then waits on them."""
        return self._counted

    def stream_geometry(self) -> tuple[int, int]:
        """How the split kernel of the last fill counts (:meth:`counted`): the heads of a head group it counts apart
        (its programs' block of heads: 16 in the tokens-on-M kernels, 64 in the ping-pong kernel) and the counts a
        segment adds (its warpgroups that store a part of it: 1, or 2 in the ping-pong kernel, each warpgroup its
        half of the output)."""
        return self._geometry

    def counters(self) -> torch.Tensor:
        """The streamed reduction's counters (``reduction.STREAM``): per request and head group of the split, its
        segments written and its reduction's readers done (``kernel_hopper.STREAM_GROUPS``), zero when made and
        after every launch that uses them (each split kernel that counts is followed by the reduction that clears
        them)."""
        if self._counts is None:
            raise ValueError(f"{self!r}: no counters before the plan's rows are made")
        return self._counts

    def slots(self) -> torch.Tensor | None:
        """The reduction's ``seg`` rows (each request's first and last partial slot) for the split of the last fill
        made with ``slots=True``, else None."""
        return self._slots if self._filled is not None and self._filled[4] else None

    def fill(self, seq_lens: torch.Tensor, page_table: torch.Tensor, page_size: int, programs: int,
             seg_cost: int, b_chunk: int, min_tiles: int = 1, slots: bool = False, counted: bool = False,
             geometry: tuple[int, int] = TOKENS_ON_M_GEOMETRY) -> bool:
        """Rows for a split over ``programs`` programs (each range at least ``min_tiles`` tiles: the split kernel's
        ``MIN_TILES``), made by one launch unless this plan holds them already (the tuner's configs differ in
        programs: each fill replaces the last); ``slots``: the reduction's ``seg`` rows of that split too
        (:meth:`slots`); ``counted``: the split kernel about to run counts its segments in :meth:`counters`
        (:meth:`counted`), ``geometry`` its head group and writers a segment (:meth:`stream_geometry`). Returns
        whether it launched the plan kernel (the split launched next then runs right behind it)."""
        self._counted = counted
        self._geometry = geometry
        want = self._split(programs, page_size, seg_cost, min_tiles, slots)
        if self._filled == want:
            return False
        kernel_hopper._mla_decode_plan_kernel[(1, programs)](
            seq_lens, page_table, self._rows, seq_lens.shape[0], page_table.stride(0), PAGE_SIZE=page_size,
            B_CHUNK=b_chunk, BLOCK_N=64, SEG_COST=seg_cost, MIN_TILES=min_tiles, num_warps=4,
            **({"seg_ptr": self._slots} if slots else {}))
        self._filled = want
        return True

    def holds(self, programs: int, page_size: int, seg_cost: int, min_tiles: int = 1, slots: bool = False) -> bool:
        """Whether the rows hold that split already (:meth:`fill` would launch nothing)."""
        return self._filled == self._split(programs, page_size, seg_cost, min_tiles, slots)

    @staticmethod
    def _split(programs: int, page_size: int, seg_cost: int, min_tiles: int, slots: bool) -> tuple:
        """What a fill is for: the split's terms and the tuner's timing graph it is made in (in each of those graphs
        the rows are filled again: ``capture.timer_graph``)."""
        return (programs, page_size, seg_cost, min_tiles, slots, timer_graph())


def plan_hook(nargs: dict[str, Any]) -> bool:
    """Config pre-hook of the tuned kernels that read a plan: the launch's ``plan_ptr`` (a plan's rows, or None)
    filled for this config's grid before the launch (:func:`attach`). Returns whether a fill launched the plan
    kernel."""
    rows = nargs.get("plan_ptr")
    fill = getattr(rows, "_graphtune_fill", None)
    return bool(fill(nargs)) if fill is not None else False


def attach(plan: MLADecodePlan, seq_lens: torch.Tensor, page_table: torch.Tensor, page_size: int, max_programs: int,
           programs_of, b_chunk: int, fp8: bool = True, slots: bool = False, counts: bool = False) -> torch.Tensor:
    """The rows a launch passes as ``plan_ptr``, with the fill its config's pre-hook runs (:func:`plan_hook`):
    ``programs_of(config)`` gives the grid's programs (the split's ``B_CHUNK`` is ``b_chunk``); the split's price of
    a request's start is the fp8 kernels' for a per-tensor fp8 cache (``fp8``), none for fp8_ds_mla configs (``DS``,
    the even split as theirs), and :data:`BF16_PLAN_SEG_COST` for a bf16 cache, read when the plan is made; each range
    at least the config's ``MIN_TILES`` tiles (T8's); ``slots``: each fill makes the reduction's ``seg`` rows too,
    which :func:`slots_of` the rows then returns; ``counts``: the launch gives the split kernel the plan's counters,
    which a config of at most ``kernel_hopper.STREAM_MAX_BUF`` buffers counts its segments in (:func:`counted_of`)."""
    rows = plan.rows(seq_lens, page_table, max_programs)

    def split(nargs: dict[str, Any]) -> tuple[int, int, int, int, bool]:
        # (programs, page size, price of a request's start, least tiles, slots) of the split a config runs
        if nargs.get("DS"):
            seg_cost = 0
        else:
            seg_cost = int(kernel_hopper.FP8_SEG_COST) if fp8 else BF16_PLAN_SEG_COST
        return programs_of(nargs), page_size, seg_cost, int(nargs.get("MIN_TILES", 1)), slots

    def fill(nargs: dict[str, Any]) -> bool:
        programs, size, seg_cost, least, want_slots = split(nargs)
        return plan.fill(seq_lens, page_table, size, programs, seg_cost, b_chunk, least, want_slots,
                         counts and int(nargs.get("NUM_BUF", 2)) <= int(kernel_hopper.STREAM_MAX_BUF),
                         stream_geometry(nargs))
    rows._graphtune_fill = fill
    rows._graphtune_holds = lambda nargs: plan.holds(*split(nargs))
    rows._graphtune_slots = plan.slots
    rows._graphtune_counted = plan.counted
    rows._graphtune_geometry = plan.stream_geometry
    return rows


def holds_for(nargs: dict[str, Any]) -> bool:
    """Whether the plan whose rows ``nargs`` pass as ``plan_ptr`` holds the split of the config ``nargs`` (a launch's
    arguments and constexprs) already, so that :func:`plan_hook` would launch nothing ahead of that launch; False
    without a plan or for rows not made by :func:`attach`."""
    holds = getattr(nargs.get("plan_ptr"), "_graphtune_holds", None)
    return bool(holds(nargs)) if holds is not None else False


def stream_geometry(nargs: dict[str, Any]) -> tuple[int, int]:
    """How the split kernel that a launch's constexprs ``nargs`` select counts its segments
    (:meth:`MLADecodePlan.stream_geometry`): the ping-pong kernel (``PP``) per 64-head block, both warpgroups
    adding one; the tokens-on-M kernels per 16 heads (their ``BLOCK_H``), once."""
    return (int(nargs.get("BLOCK_H", 64)), 2) if nargs.get("PP") else (int(nargs.get("BLOCK_H", 16)), 1)


def slots_of(rows: Any) -> torch.Tensor | None:
    """The slots (:meth:`MLADecodePlan.slots`) of the plan whose rows a launch passed as ``plan_ptr`` (None without a
    plan, or where its last fill made none)."""
    slots = getattr(rows, "_graphtune_slots", None)
    return slots() if slots is not None else None


def geometry_of(rows: Any) -> tuple[int, int]:
    """The stream geometry (:meth:`MLADecodePlan.stream_geometry`) of the plan whose rows a launch passed as
    ``plan_ptr`` (:data:`TOKENS_ON_M_GEOMETRY` for rows not made by :func:`attach`)."""
    geometry = getattr(rows, "_graphtune_geometry", None)
    return geometry() if geometry is not None else TOKENS_ON_M_GEOMETRY


def counted_of(rows: Any) -> bool:
    """Whether the split kernel that read the plan whose rows a launch passed as ``plan_ptr`` counted its segments
    in the plan's counters (:meth:`MLADecodePlan.counted`, as its config's pre-hook filled it)."""
    counted = getattr(rows, "_graphtune_counted", None)
    return bool(counted()) if counted is not None else False
