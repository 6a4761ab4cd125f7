"""MLA decode attention over a paged KV cache: validate, allocate, launch.

Two paths, picked per call: on sm_90 (H100, H200) a bf16 or fp8 (per-tensor) cache with pages of a multiple
of 64 tokens and H a multiple of 16 runs the Hopper Gluon kernels (kernel_hopper.py, launched by
interface_hopper.py, tuned per batch bucket over small spaces led by their measured fixed configs;
``interface_hopper.FP8_AUTO`` can send fp8 back to the portable kernel; fp8_ds_mla with H < 64 runs there
where ``interface_hopper.DS_AUTO`` says so); everything else (other page sizes, fp8_ds_mla otherwise) and every
other GPU (sm_80/86/89/100/120) runs the portable Triton kernel (kernel.py), tuned per batch bucket.

The split kernel is tuned per batch bucket by ``graphtune.autotune`` under the name ``"mla_decode"``
(force a config with ``graphtune.force("mla_decode", BLOCK_N=32, num_warps=8)`` or ``GRAPHTUNE_FORCE``).
Under the Triton interpreter one small config runs untuned. ``_launch(..., config=...)`` runs a given
``triton.Config`` on the plain jit kernel (benchmarks and A/B runs).

Capture safety: the grid depends only on the batch size, the head count and the SM count, never on
``seq_lens``; the per-request split is computed on the device. Allocations are plain ``torch.empty`` on
the current stream (inside a capture they come from the graph's pool).
"""
from __future__ import annotations

import functools
import math
from typing import Any

import torch
import triton

from ... import settings
from .._checks import finite_positive, tensor_problem
from . import interface_hopper, kernel, reduction, space
from .plan import MLADecodePlan
from .reference import D_NOPE, D_QK, cache_row_width, resolve_kv_format

_FORMAT_CODES = {"fp8": 0, "bf16": 1, "fp8_ds_mla": 2}
_KV_FORMATS = ("auto", *_FORMAT_CODES)
# "bf16": scores at the bf16 query's precision (an fp8 cache's kernels take the query as an e4m3 hi/lo pair);
# "e4m3": an fp8 cache's kernels may take the query as one e4m3 copy (hi alone: FlashMLA's fp8 accuracy class)
QUERY_PRECISIONS = ("bf16", "e4m3")
# "bf16": P, the softmax's probabilities, enters the P.V product in 16 bits; "e4m3" (with the e4m3 query): the fp8
# heads-on-M kernel T8 may round P to e4m3 and run P.V as fp8 MMAs, FlashMLA's fp8 path's other rounding
P_PRECISIONS = ("bf16", "e4m3")
# the reduction's launch (reduction.py), under the names the probes and tests use
reduce_blocks = reduction.reduce_blocks
reduce_launch = reduction.reduce_launch
_reduce = reduction.merge
_B_CHUNK = 128      # requests per step of the split kernel's on-device tile count
_INTERPRET_SMS = 3   # a few "SMs" under the interpreter, so requests straddle programs in CPU tests


@functools.lru_cache(maxsize=None)
def _properties(device_index: int):
    return torch.cuda.get_device_properties(device_index)


def _cuda_properties(device: torch.device):
    return _properties(device.index if device.index is not None else torch.cuda.current_device())


def _sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return _INTERPRET_SMS
    return _cuda_properties(device).multi_processor_count


def split_programs(num_sms: int, heads: int, block_h: int, programs_per_sm: int) -> int:
    """Programs per head block of the split grid: fill the SMs once over all head blocks."""
    head_blocks = triton.cdiv(heads, block_h)
    return max(1, (num_sms * programs_per_sm) // head_blocks)


def max_partials(num_sms: int, batch: int, programs_per_sm: int) -> int:
    """Partial slots the split kernel may write: one per (program, request) segment, at most P + B."""
    return num_sms * programs_per_sm + batch


@functools.lru_cache(maxsize=1)
def _tuned_kernel():
    from ... import Buckets, autotune
    return autotune(configs=space.CONFIGS, key=["B", "H", "PAGE_SIZE", "KV_FORMAT", "RETURN_LSE", "Q_LO"],
                    buckets={"B": Buckets.explicit(space.CAPTURE_SIZES)}, default=space.DEFAULT,
                    name="mla_decode", prune_configs_by={"early_config_prune": space.prune},
                    followed_by=reduction.after_split)(kernel._mla_decode_split_kernel)


def _fail(name: str, what: str) -> None:
    raise ValueError(f"mla_decode: {name}: {what}")


def _check_tensor(name: str, t: Any, dtype: torch.dtype | tuple[torch.dtype, ...], ndim: int,
                  device: torch.device | None) -> None:
    problem = tensor_problem(t, dtype if isinstance(dtype, tuple) else (dtype, ), ndim=ndim, device=device,
                             device_of="q")
    if problem is not None:
        _fail(name, problem)


def _check_kv_format(kv_format: Any) -> None:
    if kv_format not in _KV_FORMATS:
        _fail("kv_format", f"{kv_format!r}, expected one of {list(_KV_FORMATS)}")


def check_query_precision(value: Any, fmt: str | None) -> None:
    """``query_precision`` is one of ``QUERY_PRECISIONS``, and "e4m3" comes with an fp8 cache (``fmt``, when known),
    else one line naming it."""
    if not isinstance(value, str) or value not in QUERY_PRECISIONS:
        _fail("query_precision", f"{value!r}, expected one of {list(QUERY_PRECISIONS)}")
    if value == "e4m3" and fmt == "bf16":
        _fail("query_precision", "'e4m3' applies to an fp8 cache (kv_format 'fp8' or 'fp8_ds_mla'), not 'bf16': a "
                                 "bf16 cache scores against the bf16 query")


def check_p_precision(value: Any, fmt: str | None, query_precision: str | None) -> None:
    """``p_precision`` is one of ``P_PRECISIONS``; "e4m3" comes with an fp8 cache (``fmt``, when known) and the e4m3
    query (``query_precision``, the resolved one, when known), else one line naming it."""
    if not isinstance(value, str) or value not in P_PRECISIONS:
        _fail("p_precision", f"{value!r}, expected one of {list(P_PRECISIONS)}")
    if value != "e4m3":
        return
    if fmt == "bf16":
        _fail("p_precision", "'e4m3' applies to an fp8 cache (kv_format 'fp8' or 'fp8_ds_mla'), not 'bf16'")
    if query_precision == "bf16":
        _fail("p_precision", "'e4m3' with query_precision='bf16': P in e4m3 is FlashMLA's fp8 accuracy class, which "
                             "takes the query in e4m3 too (pass query_precision='e4m3' or an e4m3 q)")


def check_scale(name: str, value: Any, expected: str) -> None:
    """A scale argument (``_checks.finite_positive``), else one line naming it."""
    if not finite_positive(value):
        _fail(name, f"{value!r}, expected {expected}")


def query_precision_of(q: torch.Tensor, query_precision: str | None) -> str:
    """``query_precision`` as given, or (None) the query's own: "e4m3" for an fp8 query, else "bf16"."""
    if query_precision is None:
        return "e4m3" if q.dtype == torch.float8_e4m3fn else "bf16"
    return query_precision


def _check_query_scale(q: torch.Tensor, q_scale: Any, precision: Any, fmt: str) -> None:
    """An e4m3 query comes with its scale (its value is ``q * q_scale``), an fp8 cache and the e4m3 precision; a bf16
    one without a scale."""
    if q.dtype != torch.float8_e4m3fn:
        if q_scale is not None:
            _fail("q_scale", f"{q_scale!r} given with a bf16 query: it scales an e4m3 (torch.float8_e4m3fn) one")
        return
    if fmt == "bf16":
        _fail("q", "dtype torch.float8_e4m3fn (an e4m3 query) needs an fp8 cache (kv_format 'fp8' or 'fp8_ds_mla'), "
                   "got kv_format='bf16'")
    if precision != "e4m3":
        _fail("query_precision", f"{precision!r} with an e4m3 query (q is torch.float8_e4m3fn): its precision is "
                                 "'e4m3' (leave query_precision out)")
    if q_scale is None:
        _fail("q_scale", "None: an e4m3 query needs its scale (the query is q * q_scale; 1.0 for a plain cast)")
    if isinstance(q_scale, torch.Tensor):
        if q_scale.numel() != 1 or q_scale.dtype != torch.float32 or q_scale.device != q.device:
            _fail("q_scale", f"tensor of shape {tuple(q_scale.shape)}, dtype {q_scale.dtype} on {q_scale.device}; "
                             f"expected one float32 element on {q.device}")
    else:
        check_scale("q_scale", q_scale, "a finite float > 0 or a one-element float32 tensor")


def _validate(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale, kv_format, out,
              query_precision: str | None = None, q_scale: Any = None, p_precision: Any = "bf16") -> str:
    if not isinstance(q, torch.Tensor):
        _fail("q", f"expected a torch.Tensor, got {type(q).__name__}")
    device = q.device
    _check_tensor("q", q, (torch.bfloat16, torch.float8_e4m3fn), 3, None)
    if q.shape[2] != D_QK:
        _fail("q", f"shape {tuple(q.shape)}: last dim must be {D_QK} (512 latent + 64 rope)")
    if q.shape[1] < 1:
        _fail("q", f"shape {tuple(q.shape)}: needs at least one head")
    _check_kv_format(kv_format)
    _check_tensor("kv_cache", kv_cache, (torch.float8_e4m3fn, torch.bfloat16, torch.uint8), 3, device)
    fmt = resolve_kv_format(kv_cache, kv_format)
    want_dtype = {"fp8": torch.float8_e4m3fn, "bf16": torch.bfloat16, "fp8_ds_mla": torch.uint8}[fmt]
    want_last = cache_row_width(fmt)
    if kv_cache.dtype != want_dtype:
        _fail("kv_cache", f"dtype {kv_cache.dtype} does not match kv_format={fmt!r} (needs {want_dtype})")
    if kv_cache.shape[2] != want_last:
        _fail("kv_cache", f"shape {tuple(kv_cache.shape)}: last dim must be {want_last} for kv_format={fmt!r}")
    if kv_cache.shape[0] < 1 or kv_cache.shape[1] < 1:
        _fail("kv_cache", f"shape {tuple(kv_cache.shape)}: needs at least one page of at least one token")
    precision = query_precision_of(q, query_precision)
    _check_query_scale(q, q_scale, precision, fmt)
    check_query_precision(precision, fmt)
    check_p_precision(p_precision, fmt, precision)
    batch = q.shape[0]
    _check_tensor("page_table", page_table, torch.int32, 2, device)
    if page_table.shape[0] != batch or page_table.shape[1] < 1:
        _fail("page_table", f"shape {tuple(page_table.shape)}, expected [{batch}, max_pages >= 1] (B from q)")
    _check_tensor("seq_lens", seq_lens, torch.int32, 1, device)
    if seq_lens.shape[0] != batch:
        _fail("seq_lens", f"shape {tuple(seq_lens.shape)}, expected [{batch}] (B from q)")
    check_scale("sm_scale", sm_scale, "a finite float > 0 (usually 1 / sqrt(576))")
    if isinstance(kv_scale, torch.Tensor):
        if fmt != "fp8":
            _fail("kv_scale", f"a tensor scale applies only to kv_format='fp8', not {fmt!r}")
        if kv_scale.numel() != 1 or kv_scale.dtype != torch.float32 or kv_scale.device != device:
            _fail("kv_scale", f"tensor of shape {tuple(kv_scale.shape)}, dtype {kv_scale.dtype} on "
                              f"{kv_scale.device}; expected one float32 element on {device}")
    else:
        check_scale("kv_scale", kv_scale, "a finite float > 0 or a one-element float32 tensor")
        if fmt != "fp8" and kv_scale != 1.0:
            _fail("kv_scale", f"{kv_scale} given with kv_format={fmt!r}; only 'fp8' uses a per-tensor scale")
    if out is not None:
        _check_tensor("out", out, torch.bfloat16, 3, device)
        if tuple(out.shape) != (batch, q.shape[1], D_NOPE):
            _fail("out", f"shape {tuple(out.shape)}, expected {(batch, q.shape[1], D_NOPE)}")
    # Reading seq_lens / page_table costs a device synchronisation: only under GRAPHTUNE_CHECK=1, or on a
    # CPU tensor where it costs nothing. Never during a capture.
    if batch > 0 and (device.type == "cpu" or settings.check()) and not _capturing(device):
        _check_contents(kv_cache, page_table, seq_lens)
        for name, scale in (("kv_scale", kv_scale), ("q_scale", q_scale)):
            if isinstance(scale, torch.Tensor):
                value = float(scale.reshape(()).cpu())
                if not math.isfinite(value) or value <= 0:
                    _fail(name, f"tensor holding {value}, expected a finite value > 0")
    return fmt


def _capturing(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def _check_contents(kv_cache: torch.Tensor, page_table: torch.Tensor, seq_lens: torch.Tensor) -> None:
    num_pages, page_size = kv_cache.shape[0], kv_cache.shape[1]
    limit = page_table.shape[1] * page_size
    lens = seq_lens.cpu()
    bad = ((lens < 0) | (lens > limit)).nonzero().flatten().tolist()
    if bad:
        shown = {i: int(lens[i]) for i in bad[:8]}
        _fail("seq_lens", f"requests {shown} outside [0, {limit}] (max_pages {page_table.shape[1]} x "
                          f"page_size {page_size})")
    used = (lens + page_size - 1) // page_size
    pages = page_table.cpu()
    cols = torch.arange(pages.shape[1])[None, :]
    in_use = cols < used[:, None]
    out_of_range = in_use & ((pages < 0) | (pages >= num_pages))
    if out_of_range.any():
        rows, cs = out_of_range.nonzero(as_tuple=True)
        shown = [(int(r), int(c), int(pages[r, c])) for r, c in zip(rows[:8], cs[:8])]
        _fail("page_table", f"page ids out of range [0, {num_pages}) at (request, slot, id) {shown}")


def mla_decode(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor, seq_lens: torch.Tensor,
               sm_scale: float, *, kv_scale: float | torch.Tensor = 1.0, kv_format: str = "auto",
               out: torch.Tensor | None = None, return_lse: bool = False, query_precision: str | None = None,
               q_scale: float | torch.Tensor | None = None, plan: MLADecodePlan | None = None,
               p_precision: str = "bf16") -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Decode attention of DeepSeek-style MLA over a paged KV cache.

    Args:
        q: ``[B, H, 576]`` bf16, the absorbed query (512 latent dims, then 64 rope dims); or, with an fp8 cache,
            float8_e4m3fn with ``q_scale`` (the query is ``q * q_scale``, as FlashMLA's ``descale_q`` takes it).
        kv_cache: ``[num_pages, page_size, 576]`` float8_e4m3fn (value = stored * ``kv_scale``) or bf16;
            or with ``kv_format="fp8_ds_mla"`` ``[num_pages, page_size, 656]`` uint8 (512 fp8 e4m3 latent
            values, 4 fp32 scales one per 128 of them, 64 bf16 rope values). Keys are all 576 dims of a
            token's row, values its first 512.
        page_table: ``[B, max_pages]`` int32 page ids; token ``t`` of request ``b`` is row
            ``t % page_size`` of page ``page_table[b, t // page_size]``.
        seq_lens: ``[B]`` int32, ``0 <= seq_len <= max_pages * page_size`` (checked only under
            ``GRAPHTUNE_CHECK=1`` on CUDA, as is the page-id range: checking costs a synchronisation). A
            request of no tokens (a padding slot of a captured batch) gets zeros and an LSE of -inf.
        sm_scale: softmax scale applied to ``q . k``.
        kv_scale: per-tensor dequantisation scale of an fp8 cache (float, or a one-element fp32 tensor
            on the device, read there: capture-safe).
        kv_format: ``"auto"`` (from dtype and shape), ``"fp8"``, ``"bf16"`` or ``"fp8_ds_mla"``.
        out: optional ``[B, H, 512]`` bf16 output buffer.
        return_lse: also return ``[B, H]`` fp32 log-sum-exp of the scaled scores, in natural log.
        query_precision: None (default): the query's own, ``"e4m3"`` for an fp8 ``q``, else ``"bf16"``. ``"bf16"``:
            the scores carry the bf16 query's precision (with an fp8 cache the
            query enters the fp8 score MMAs as an e4m3 hi/lo pair, ``hi + lo`` equal to the query up to a power of
            two per head). ``"e4m3"`` (fp8 caches only): a kernel may take the query as its e4m3 copy ``hi``
            alone, the accuracy class of FlashMLA's fp8 path (which quantises the query), for one score MMA
            instead of two where that pays: the fp8 heads-on-M kernel T8 on sm_90 (H a multiple of 64, from
            ``interface_hopper.T8_E4M3_MIN_BATCH`` requests) and the portable kernel's fp8 scores (a config of
            its that widens the tile first, ``QK8 = 0``, scores against the bf16 query); the other kernels keep the
            pair. ``reference.e4m3_query(q)`` is the query that mode scores against: e4m3 keeps 4
            significant bits, so the error grows with the logits' spread (in float64, benchmarks/probes/
            query_rounding.py: on the benchmark's 4096-token requests 4.1e-3 relative to the exact output, the bf16
            output's own rounding being 1.7e-3; on its accuracy check's inputs 2.0e-4 - 2.1e-4 against
            ``mla_decode_reference``, where FlashMLA's fp8 path measured 1.3e-3 - 1.6e-3 on an H200).
        q_scale: with an fp8 ``q`` only: its scale, a float > 0 or a one-element fp32 tensor on the device (read
            there: capture-safe). T8 (which an fp8 heads-on-M cache then runs at every batch), the second fp8
            tokens-on-M kernel (H < 64) and the portable kernel read such a query as it is (T8: no conversion); a
            pinned config of another Hopper kernel gets it as bf16 (``interface_hopper.dequantize_query``: exact
            for a power-of-two scale).

        plan: a :class:`graphtune.kernels.MLADecodePlan` made for this decode step (one per step,
            passed to every layer's call of it; under CUDA graph capture made inside the captured function): the
            split of the work over the SMs is then made once per step instead of in every call. Read where a kernel
            takes it (sm_90: the tuned tokens-on-M kernels, H < 64, the fp8 / fp8_ds_mla row gather at pages that
            are not whole 64-token tiles, and with H a multiple of 64 T8, the fp8 kernel, at every batch and the bf16
            ping-pong kernel from batch 8; ``interface_hopper._reads_plan``); the others compute their split as
            without it. Under torch.compile pass it into the compiled function (``op.PLAN_UNDER_COMPILE``).
        p_precision: ``"bf16"`` (default): P, the softmax's probabilities, enters the P.V product in 16 bits.
            ``"e4m3"`` (fp8 caches, with the e4m3 query: ``query_precision="e4m3"`` or an fp8 ``q``): the fp8
            heads-on-M kernel T8 (sm_90, H a multiple of 64, every batch) may round P to e4m3 and run P.V as fp8
            MMAs on a transposed V, FlashMLA's fp8 accuracy class whole (FlashMLA rounds P to e4m3 too): 2.21e-2
            relative error on two 4096-token requests against FlashMLA's 2.10e-2 on the same inputs (H100, session
            46, benchmarks/bench_mla_decode.py --vs-e4m3). Tuned per bucket under its own name
            (``interface_hopper.T8_P8_NAME``) over ``interface_hopper.HOPPER_T8_P8_SPACE``; the other kernels keep P
            in 16 bits.

    Returns:
        ``out`` (``[B, H, 512]`` bf16), or ``(out, lse)`` with ``return_lse``.
    """
    fmt = _validate(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale, kv_format, out, query_precision, q_scale,
                    p_precision)
    if not isinstance(return_lse, bool):
        _fail("return_lse", f"{return_lse!r}, expected True or False")
    if plan is not None and not isinstance(plan, MLADecodePlan):
        _fail("plan", f"{type(plan).__name__} {plan!r:.80}, expected a graphtune.kernels.MLADecodePlan "
                      "or None")
    return _launch(q, kv_cache, page_table, seq_lens, float(sm_scale), kv_scale, fmt, out, return_lse,
                   query_precision=query_precision, q_scale=q_scale, plan=plan, p_precision=p_precision)


def split_call(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor, seq_lens: torch.Tensor,
               sm_scale: float, kv_scale: float | torch.Tensor, fmt: str, out: torch.Tensor, return_lse: bool, *,
               sms: int, programs_per_sm: int | None = None, lse: torch.Tensor | None = None, q_lo: bool = True,
               q_scale: float | torch.Tensor | None = None):
    """The split kernel's positional arguments and grid for these inputs (scratch buffers allocated here),
    plus ``(lse, part_o, part_lse, seg)`` for the reduce kernel. ``programs_per_sm=None`` sizes the scratch
    for every config of the space (the tuned path). ``q_lo=False``: ``query_precision="e4m3"`` (the fp8 scores
    against the query's e4m3 hi half alone); ``q_scale``: an e4m3 ``q``'s scale (the kernel reads that query as it
    is and scales its scores). Used by ``_launch`` and by offline tuning."""
    batch, heads, _ = q.shape
    device = q.device
    interpret = settings.interpret()
    if lse is None:
        lse = torch.empty(batch, heads, dtype=torch.float32, device=device) if return_lse else out
    pps = programs_per_sm if programs_per_sm is not None else \
        max(c.kwargs["PROGRAMS_PER_SM"] for c in [*space.CONFIGS, space.DEFAULT])
    slots = max_partials(sms, batch, pps)
    part_o = torch.empty(slots, heads, D_NOPE, dtype=torch.float32, device=device)
    part_lse = torch.empty(slots, heads, dtype=torch.float32, device=device)
    seg = torch.empty(batch, 2, dtype=torch.int32, device=device)
    # fp8 formats go in as bytes (the kernel reads fp8, fp32 scales and bf16 rope from one row); a bf16
    # cache as bf16, so that its row offsets count elements and Triton vectorises the loads (kernel.py).
    kv_bytes = kv_cache if fmt == "bf16" else kv_cache.view(torch.uint8)
    if isinstance(kv_scale, torch.Tensor):
        scale_ptr, scale_value, scale_from_ptr = kv_scale, 1.0, True
    else:
        scale_ptr, scale_value, scale_from_ptr = seq_lens, float(kv_scale), False  # pointer unused

    if isinstance(q_scale, torch.Tensor):
        q_scale_ptr, q_scale_value, q_scale_from_ptr = q_scale, 1.0, True
    else:
        q_scale_ptr, q_scale_value, q_scale_from_ptr = seq_lens, float(q_scale or 1.0), False  # pointer unused
    args = (q, kv_bytes, page_table, seq_lens, scale_ptr, q_scale_ptr,
            out, lse, part_o, part_lse, seg,
            sm_scale, scale_value, q_scale_value,
            batch, heads,
            q.stride(0), q.stride(1),
            kv_bytes.stride(0), kv_bytes.stride(1),
            page_table.stride(0),
            out.stride(0), out.stride(1),
            part_o.stride(0), part_o.stride(1),
            part_lse.stride(0),
            kv_cache.shape[1], _FORMAT_CODES[fmt], scale_from_ptr, return_lse, interpret,
            _B_CHUNK, int(q_lo), q_scale_from_ptr)

    def grid(meta: dict[str, Any]) -> tuple[int, int]:
        # at most the programs the scratch has partial slots for: a forced PROGRAMS_PER_SM above the space's
        # (graphtune.force accepts any int >= 0) runs on fewer programs instead of writing past part_o
        block_h = meta["BLOCK_H"]
        return (triton.cdiv(heads, block_h),
                min(split_programs(sms, heads, block_h, meta["PROGRAMS_PER_SM"]), slots - batch))

    return args, grid, (lse, part_o, part_lse, seg)


def serving_kernel(q: torch.Tensor, kv_cache: torch.Tensor, kv_format: str = "auto",
                   query_precision: str | None = None, p_precision: str = "bf16"):
    """The tuned kernel (``graphtune.autotune``, per batch bucket) that :func:`mla_decode` runs for these inputs on
    this machine: a Hopper kernel where ``path="auto"`` takes one (sm_90, ``interface_hopper.supported``), else the
    portable kernel; None where a pinned Hopper config (a fixed config changed from its shipped value) runs
    instead. Its ``name`` is what ``graphtune.coverage`` reports; a warm-up tunes its buckets."""
    _check_kv_format(kv_format)
    fmt = resolve_kv_format(kv_cache, kv_format)
    query_precision = query_precision_of(q, query_precision)
    check_query_precision(query_precision, fmt)
    check_p_precision(p_precision, fmt, query_precision)
    if settings.interpret() or interface_hopper.supported(q, kv_cache, fmt) is not None:
        return _tuned_kernel()
    if interface_hopper.pinned(q.shape[1], fmt):
        return None
    return interface_hopper.tuned_for(q.shape[1], fmt, q.shape[0], kv_cache.shape[1],
                                      q_lo=query_precision != "e4m3", fp8_q=q.dtype == torch.float8_e4m3fn,
                                      p8=p_precision == "e4m3")


def _launch(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor, seq_lens: torch.Tensor,
            sm_scale: float, kv_scale: float | torch.Tensor, fmt: str, out: torch.Tensor | None,
            return_lse: bool, config: triton.Config | None = None,
            num_sms: int | None = None, path: str = "auto", query_precision: str | None = None,
            q_scale: float | torch.Tensor | None = None, plan: MLADecodePlan | None = None,
            p_precision: str = "bf16") -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Allocate and launch (inputs already validated).

    ``config`` runs that config on the plain jit kernel instead of the tuned one (benchmarks, A/B): the portable
    kernel's, or with ``path="hopper"`` one of the Hopper kernel's space (``interface_hopper.pinned_config``);
    ``num_sms`` overrides the SM count that sizes the split grid (tests vary it). ``path``: ``"auto"`` runs
    the Hopper kernel (kernel_hopper.py) where it applies (sm_90, see ``interface_hopper.supported``) and no
    ``config`` is given, else the portable one; ``"portable"`` / ``"hopper"`` force one (``"hopper"`` raises
    ValueError with the reason when it does not apply). ``query_precision``, ``q_scale``, ``plan`` and
    ``p_precision``: as :func:`mla_decode` (validated there, with the rest).
    """
    if path not in ("auto", "portable", "hopper"):
        raise ValueError(f"mla_decode: path {path!r}, expected 'auto', 'portable' or 'hopper'")
    q_lo = query_precision_of(q, query_precision) != "e4m3"
    batch, heads, _ = q.shape
    device = q.device
    if out is None:
        out = torch.empty(batch, heads, D_NOPE, dtype=torch.bfloat16, device=device)
    lse = torch.empty(batch, heads, dtype=torch.float32, device=device) if return_lse else out
    if batch == 0:
        return (out, lse) if return_lse else out
    interpret = settings.interpret()
    sms = num_sms if num_sms is not None else _sm_count(device)
    if interpret and config is None:
        config = space.INTERPRET_CONFIG
    hopper_why = "interpreted" if interpret else (interface_hopper.supported(q, kv_cache, fmt, path == "hopper")
                                                    if path == "hopper" or (path == "auto" and config is None)
                                                    else "not asked for")
    if path == "hopper" and hopper_why is not None:
        raise ValueError(f"mla_decode: path='hopper' does not apply: {hopper_why}")
    if hopper_why is None:
        pinned = None if config is None else interface_hopper.pinned_config(heads, fmt, config.kwargs)
        lse, part_o, part_lse, seg = interface_hopper.launch(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale,
                                                             fmt, out, return_lse, sms=sms, config=pinned, q_lo=q_lo,
                                                             q_scale=q_scale, plan=plan, p8=p_precision == "e4m3")
        _reduce(batch, heads, seg, part_o, part_lse, out, lse, seq_lens, return_lse,
                pdl=batch >= reduction.PDL_MIN_BATCH)
        return (out, lse) if return_lse else out
    pps = None if config is None else config.kwargs["PROGRAMS_PER_SM"]
    args, grid, (lse, part_o, part_lse, seg) = split_call(q, kv_cache, page_table, seq_lens, sm_scale, kv_scale,
                                                          fmt, out, return_lse, sms=sms, programs_per_sm=pps,
                                                          lse=lse, q_lo=q_lo, q_scale=q_scale)
    if config is None:
        _tuned_kernel()[grid](*args)
    else:
        kernel._mla_decode_split_kernel[grid](*args, **config.all_kwargs())
    _reduce(batch, heads, seg, part_o, part_lse, out, lse, seq_lens, return_lse)
    return (out, lse) if return_lse else out


def inspect_signature(heads: int = 16, page_size: int = 64, kv_format: str = "fp8") -> tuple[dict, dict]:
    """Triton signature and constexprs of the split kernel as a real launch of this shape has them, for the
    resource inspector (``graphtune.inspect``) on any target, without a GPU. Built from a tiny CPU launch
    description; ``INTERPRET`` is forced off so the compiled code is the GPU's."""
    from ...resources import signature_from_args
    row = cache_row_width(kv_format)
    dtype = {"fp8": torch.float8_e4m3fn, "bf16": torch.bfloat16, "fp8_ds_mla": torch.uint8}[kv_format]
    q = torch.empty(1, heads, D_QK, dtype=torch.bfloat16)
    kv = torch.empty(2, page_size, row, dtype=dtype)
    pt = torch.zeros(1, 2, dtype=torch.int32)
    sl = torch.ones(1, dtype=torch.int32)
    out = torch.empty(1, heads, D_NOPE, dtype=torch.bfloat16)
    args, _, _ = split_call(q, kv, pt, sl, 0.1, 1.0, kv_format, out, False, sms=132)
    fn = kernel._mla_decode_split_kernel
    signature, constexprs = signature_from_args(fn, dict(zip(fn.arg_names, args)))
    constexprs["INTERPRET"] = False
    return signature, constexprs
