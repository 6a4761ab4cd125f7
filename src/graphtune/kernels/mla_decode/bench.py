"""A/B target of the MLA decode kernel: inputs for one batch size, a forced config, bytes moved.

``AB_TARGET.make(size, config)`` returns zero-argument callables, each with its own input set (query,
cache, page table, lengths, output), so that cycling through them reads more than the 60 MB L2 and every
timed call misses the cache as a server's would. Each callable runs ``config`` on the plain jit kernel
(``interface._launch(..., config=...)``), never the tuner.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
import triton

from . import interface, interface_hopper, space
from .plan import MLADecodePlan
from .reference import D_QK, ROW_BYTES, quantize_ds_mla

L2_BYTES = 60 * 2 ** 20
ROTATE_BYTES = 3 * L2_BYTES     # the input sets of one size together exceed the L2 three times over
MAX_SETS = 64


@dataclass(frozen=True)
class Problem:
    """One benchmark shape: ``batch`` requests of ``tokens`` each, ``heads`` heads, one cache format."""

    batch: int
    heads: int = 16
    tokens: int = 4096
    page_size: int = 1
    kv_format: str = "fp8"

    @property
    def row_bytes(self) -> int:
        return ROW_BYTES[self.kv_format]

    def bytes_moved(self) -> int:
        """The fewest bytes a decode step must read: each token's row once plus its 4-byte index."""
        return self.batch * self.tokens * (self.row_bytes + 4)


def make_inputs(problem: Problem, device: str | torch.device = "cuda", seed: int = 0) -> dict:
    """Random inputs: a cache holding exactly the batch's pages, shuffled, addressed by a page table; every value
    drawn from ``seed`` (the cache and the query from a generator on ``device``, the page order on the CPU), so a
    failure's seed gives its inputs again (until session 56 the cache and the query came from torch's global
    generator: a test's printed seed gave other values)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    values_gen = torch.Generator(device=device).manual_seed(seed)
    pages_per_req = triton.cdiv(problem.tokens, problem.page_size)
    num_pages = problem.batch * pages_per_req
    shape = (num_pages, problem.page_size)
    if problem.kv_format == "fp8_ds_mla":
        values = torch.randn(*shape, D_QK, device=device, generator=values_gen)
        kv = quantize_ds_mla(values)
        del values
    else:
        kv = torch.randn(*shape, D_QK, device=device, generator=values_gen).to(
            torch.float8_e4m3fn if problem.kv_format == "fp8" else torch.bfloat16)
    # Scattered pages (random page ids), as a long-running server's allocator leaves them.
    perm = torch.randperm(num_pages, generator=gen).to(device=device, dtype=torch.int32)
    page_table = perm.view(problem.batch, pages_per_req).contiguous()
    seq_lens = torch.full((problem.batch,), problem.tokens, dtype=torch.int32, device=device)
    q = torch.randn(problem.batch, problem.heads, D_QK, device=device, generator=values_gen).to(torch.bfloat16)
    out = torch.empty(problem.batch, problem.heads, 512, dtype=torch.bfloat16, device=device)
    return dict(q=q, kv_cache=kv, page_table=page_table, seq_lens=seq_lens, out=out,
                kv_scale=0.05 if problem.kv_format == "fp8" else 1.0)


def run_inputs(inputs: dict, kv_format: str, config: triton.Config | None,
               num_sms: int | None = None, path: str = "auto", query_precision: str = "bf16",
               fp8_query: bool = False, plan: bool = False, p_precision: str = "bf16") -> Callable[[], None]:
    """A zero-argument call of the kernel on ``inputs`` with ``config`` forced (None: the tuned path, or the
    Hopper kernel where it applies); ``path``, ``query_precision`` and ``p_precision`` as ``interface._launch``;
    ``fp8_query``: the
    query handed over cast to e4m3 (scale 1, as the benchmark hands it to FlashMLA's fp8 path), cast here, outside
    the call; ``plan``: every call given one MLADecodePlan made here (filled by the first call: a decode step's)."""
    sm_scale = 1.0 / math.sqrt(D_QK)
    q = inputs["q"].to(torch.float8_e4m3fn) if fp8_query else inputs["q"]
    args = (q, inputs["kv_cache"], inputs["page_table"], inputs["seq_lens"], sm_scale,
            inputs["kv_scale"], kv_format, inputs["out"], False)
    extra = dict(q_scale=1.0) if fp8_query else dict(query_precision=query_precision)
    if p_precision != "bf16":
        extra["p_precision"] = p_precision
    if plan:
        extra["plan"] = MLADecodePlan()

    def call() -> None:
        interface._launch(*args, config=config, num_sms=num_sms, path=path, **extra)
    return call


@dataclass
class MlaDecodeTarget:
    """What the A/B harness needs: a name, default sizes, configs, calls per (size, config), bytes."""

    name: str = "mla_decode"
    default_sizes: tuple[int, ...] = (1, 8, 32, 60, 90, 128)
    configs: list[triton.Config] = field(default_factory=lambda: list(space.CONFIGS))
    heads: int = 16
    tokens: int = 4096
    page_size: int = 1
    kv_format: str = "fp8"
    path: str = "auto"        # as ``interface._launch``: the calls of ``make`` without a path of their own
    query_precision: str = "bf16"   # as ``interface._launch``, where ``make`` is not given one
    _inputs: dict[int, list[dict]] = field(default_factory=dict, repr=False)

    def problem(self, size: int) -> Problem:
        return Problem(size, self.heads, self.tokens, self.page_size, self.kv_format)

    def inputs(self, size: int) -> list[dict]:
        """The rotating input sets of one size, built once and shared by every config."""
        if size not in self._inputs:
            problem = self.problem(size)
            sets = max(2, min(MAX_SETS, triton.cdiv(ROTATE_BYTES, problem.bytes_moved())))
            self._inputs[size] = [make_inputs(problem, seed=i) for i in range(sets)]
        return self._inputs[size]

    def make(self, size: int, config: triton.Config | None, path: str | None = None,
             query_precision: str | None = None, fp8_query: bool = False) -> list[Callable[[], None]]:
        return [run_inputs(x, self.kv_format, config, path=path or self.path,
                           query_precision=query_precision or self.query_precision, fp8_query=fp8_query)
                for x in self.inputs(size)]

    def bytes_moved(self, size: int) -> int:
        return self.problem(size).bytes_moved()

    def release(self) -> None:
        self._inputs.clear()


AB_TARGET = MlaDecodeTarget()


@dataclass
class MlaDecodeHopperTarget(MlaDecodeTarget):
    """The A/B target of the Hopper (sm_90) kernel that serves ``heads`` and ``kv_format``: its per-bucket space
    (``interface_hopper.space_configs``; where the class has a second or third kernel, ``interface_hopper.SECOND`` /
    ``THIRD``, their spaces too: fp8 with H < 64 ``V2=1``, H % 64 == 0 ``PP=1`` and fp8 ``T8=1``; heads on M, the
    ping-pong kernels with ``SPLIT_MAX``, ``interface_hopper.SPLIT_MAX_PINNED``), each config pinned
    on its kernel
    (``path="hopper"``), page size 64."""

    name: str = "mla_decode_hopper"
    configs: list[triton.Config] = field(default_factory=list)
    page_size: int = 64
    path: str = "hopper"

    def __post_init__(self) -> None:
        if not self.configs:
            on_m, fp8 = interface_hopper._heads_on_m(self.heads), self.kv_format == "fp8"
            self.configs = interface_hopper.space_configs(on_m, fp8)
            for table in (interface_hopper.SECOND, interface_hopper.THIRD):
                extra = table.get((on_m, self.kv_format))
                if extra is not None:   # the tuned path runs the class's second / third kernel from its min_batch
                    self.configs += [triton.Config({**c, extra.flag: 1}, num_warps=extra.num_warps)
                                     for c in extra.space]
            if on_m:    # the ping-pong kernels with SPLIT_MAX, pinned (which batch 1 would need them)
                self.configs += [triton.Config(dict(c), num_warps=interface_hopper.PP_NUM_WARPS)
                                 for c in interface_hopper.SPLIT_MAX_PINNED[self.kv_format]]


# ``graphtune ab mla_decode_hopper``: fp8, H = 16 (the tensor-parallel case), the tokens-on-M kernel's space
AB_HOPPER_TARGET = MlaDecodeHopperTarget()
# ``graphtune ab mla_decode_hopper_h128`` / ``mla_decode_hopper_h128_bf16``: H = 128 (data-parallel attention), the
# heads-on-M kernels' spaces (fp8: the first kernel, the ping-pong kernel and T8; bf16: the first and the ping-pong)
AB_HOPPER_H128_TARGET = MlaDecodeHopperTarget(name="mla_decode_hopper_h128", heads=128)
AB_HOPPER_H128_BF16_TARGET = MlaDecodeHopperTarget(name="mla_decode_hopper_h128_bf16", heads=128, kv_format="bf16")
# ``graphtune ab mla_decode_hopper_h128_e4m3``: the fp8 heads-on-M spaces again, every launch with
# ``query_precision="e4m3"`` (T8 then scores against the query's e4m3 hi half alone; the other kernels have no lo
# half to drop): per bucket, which kernel that mode should run (``interface_hopper.T8_E4M3_MIN_BATCH``)
AB_HOPPER_H128_E4M3_TARGET = MlaDecodeHopperTarget(name="mla_decode_hopper_h128_e4m3", heads=128,
                                                   query_precision="e4m3")
# ``graphtune ab mla_decode_hopper_h128_p8``: T8's space with the e4m3 query, PL (P as an e4m3 pair, pinned) and P8's
# schedules (P in e4m3 too, ``p_precision="e4m3"``'s tuned space), each pinned: per bucket, what each rounding of P
# buys over the e4m3 query alone
AB_HOPPER_H128_P8_TARGET = MlaDecodeHopperTarget(
    name="mla_decode_hopper_h128_p8", heads=128, query_precision="e4m3",
    configs=[triton.Config(dict(c), num_warps=interface_hopper.PP_NUM_WARPS)
             for c in [*interface_hopper.HOPPER_T8_SPACE, interface_hopper.T8_PL_CONFIG,
                       *interface_hopper.HOPPER_T8_P8_SPACE]])
# page size 1 (FlashMLA cannot) on the Hopper path: the second fp8 tokens-on-M kernel's row gather
# (``graphtune ab graphtune.kernels.mla_decode.bench:AB_HOPPER_GATHER_TARGET``), next to the portable kernel there
# (``graphtune ab mla_decode``, page size 1 too)
AB_HOPPER_GATHER_TARGET = MlaDecodeHopperTarget(
    name="mla_decode_hopper_gather", page_size=1,
    configs=[triton.Config({**c, "V2": 1}, num_warps=4) for c in interface_hopper.GATHER["fp8"].space])


@dataclass
class MlaDecodeTuneTarget:
    """Offline / sharded tuning target (``graphtune tune graphtune.kernels.mla_decode.bench:TUNE_TARGET``):
    the portable split kernel's arguments for one batch size, for the tuned kernel itself. The portable kernel serves
    fp8 at page size 1 off sm_90; on sm_90 the public call runs the Hopper row-gather kernel there
    (``interface_hopper.GATHER_AUTO``), which a server's warm-up tunes (``interface.serving_kernel`` names it)."""

    heads: int = 16
    tokens: int = 4096
    page_size: int = 1
    kv_format: str = "fp8"
    default_sizes: tuple[int, ...] = space.CAPTURE_SIZES

    @property
    def kernel(self):
        return interface._tuned_kernel()

    def make_args(self, size: int):
        problem = Problem(batch=size, heads=self.heads, tokens=self.tokens, page_size=self.page_size,
                          kv_format=self.kv_format)
        inputs = make_inputs(problem, seed=size)
        args, grid, _ = interface.split_call(inputs["q"], inputs["kv_cache"], inputs["page_table"], inputs["seq_lens"],
                                             1.0 / math.sqrt(D_QK), inputs["kv_scale"], self.kv_format, inputs["out"],
                                             False, sms=interface._sm_count(inputs["q"].device))
        return args, {}, grid

    def describe(self) -> dict:
        return {"kernel": "mla_decode split", "heads": self.heads, "tokens": self.tokens,
                "page_size": self.page_size, "kv_format": self.kv_format}


TUNE_TARGET = MlaDecodeTuneTarget()
