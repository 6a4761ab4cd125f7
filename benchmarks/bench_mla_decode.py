"""Benchmark of graphtune's MLA decode kernel on a CUDA GPU (a script, not a timed test).

For each cache format and page size: every config of the sweep at every batch size, timed by CUDA graph
replay over rotating input sets larger than the L2 (one graph holds one call per set; time = replay time /
sets). Prints ms, effective TB/s (bytes = B * tokens * (row bytes + 4)) and the percentage of a
device-to-device copy measured in the same run, the per-bucket winners and the gain of per-bucket choice
over the best single config; writes everything to JSON (GPU, versions, commit).

    PYTHONPATH=src python benchmarks/bench_mla_decode.py                       # space.CONFIGS, all sizes
    PYTHONPATH=src python benchmarks/bench_mla_decode.py --configs default --formats fp8 --page-sizes 1
    PYTHONPATH=src python benchmarks/bench_mla_decode.py --check               # correctness first
    PYTHONPATH=src python benchmarks/bench_mla_decode.py --vs-flashmla         # side by side with FlashMLA

``--vs-flashmla``: page size 64, bf16 and fp8 caches, H = 16 (batches 1..128) and H = 128 (1..64), FlashMLA
timed in the same run as graphtune (its per-bucket best config of ``--configs``) when ``flash_mla`` imports
(the ``sgl-flash-mla`` wheel; its columns are skipped with a note otherwise), plus the relative error of
both against the fp32 reference on fresh random inputs with mixed lengths. ``--vs-ragged`` adds FlashMLA and the
public call on ragged batches (lengths uniform in 1 .. 2 x ``--tokens`` - 1, fresh each run), the batches servers run.

``--configs`` takes ``space``, ``default`` or ``;``-separated ``NAME=VALUE,...`` configs (missing names
keep the default's values). List flags take comma lists; an empty one is an empty list (``--vs-batches-h128 ""``
leaves H = 128 out); a bad item is one line naming the flag (exit status 2).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import triton

import graphtune
from graphtune.configs import (config_from_dict, config_label, config_to_dict, config_with, name_value, number,
                               parse_list)
from graphtune.errors import ConfigError
from graphtune.kernels.mla_decode import MLADecodePlan, bench, interface, interface_hopper, reference, space

ROOT = Path(__file__).resolve().parent.parent


def parse_configs(text: str) -> list[triton.Config]:
    """``space``, ``default``, ``none`` or ``;``-separated ``NAME=VALUE,...`` configs over the default; a name the
    portable kernel does not have or a value of the wrong kind is a ConfigError naming it."""
    if text == "space":
        return list(space.CONFIGS)
    if text == "default":
        return [space.DEFAULT]
    if text == "none":   # the Hopper variants only
        return []
    configs = []
    for item in (part.strip() for part in text.split(";")):
        if item:
            params = dict(parse_list(item, name_value, what=f"config {item!r}", error=ConfigError))
            configs.append(config_with(space.DEFAULT, params, allowed_meta=space.META_NAMES,
                                       where=f"config {item!r}", examples=space.CONFIGS))
    if not configs:
        raise ConfigError(f"no config in {text!r} (space, default, none or NAME=VALUE,...;...)")
    return configs


def _configs_arg(text: str) -> list[triton.Config]:
    try:
        return parse_configs(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def comma_list(parse_item: Callable[[str], Any]) -> Callable[[str], list]:
    """The ``type=`` of every list flag: the items through ``parse_item`` (configs.parse_list, the project's one
    comma-list parser); a bad item is argparse's one line naming the flag, the item and the value (``argument
    --batches: list: 'x' is not an integer (in '1,x')``). An empty value is the empty list."""
    def parse(text: str) -> list:
        return parse_list(text, parse_item, what="list", nothing=None, error=argparse.ArgumentTypeError)
    return parse


def _size(item: str) -> int:
    return int(number(item, integer=True, minimum=1))


def _one_of(choices: Sequence[Any], convert: Callable[[str], Any] = str) -> Callable[[str], Any]:
    def parse(item: str) -> Any:
        value = convert(item)
        if value not in choices:
            raise ValueError(f"{item!r} is not one of {list(choices)}")
        return value
    return parse


def _int_setting(item: str) -> tuple[str, int]:
    name, value = name_value(item)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{item!r} is not NAME=INT")
    return name, value


FORMATS = tuple(reference.ROW_BYTES)


def git_commit() -> str:
    if os.environ.get("GIT_COMMIT"):
        return os.environ["GIT_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def copy_bandwidth(nbytes: int = 2 * 2 ** 30) -> float:
    """Device-to-device copy, bytes read plus written, TB/s (median of 10)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    src.random_(0, 255)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(10):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    del src, dst
    return 2 * nbytes / statistics.median(times) / 1e12


def capture_graph(calls: list) -> torch.cuda.CUDAGraph:
    """``calls`` run once eagerly (compiles, tuning), then captured in order into one CUDA graph, replayed once."""
    for c in calls:
        c()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for c in calls:
            c()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def graph_time_ms(calls: list, reps: int = 10, trials: int = 3) -> float:
    """Median over trials of (graph replay time / calls per graph); the graph replays ``reps`` times a trial."""
    graph = capture_graph(calls)
    out = []
    for _ in range(trials):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            graph.replay()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) / (reps * len(calls)))
    del graph
    return statistics.median(out)


def _compile_job(job: tuple[str, int, int, dict, bool]) -> str:
    """Worker: run one (format, page size, heads, config, lse) once on tiny inputs to fill Triton's cache."""
    kv_format, page_size, heads, cfg, lse = job
    config = config_from_dict(cfg)
    try:
        problem = bench.Problem(batch=3, heads=heads, tokens=64 * max(1, page_size), page_size=page_size,
                                kv_format=kv_format)
        x = bench.make_inputs(problem)
        interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], 0.04, x["kv_scale"], kv_format,
                          x["out"], lse, config=config)
        torch.cuda.synchronize()
        return ""
    except Exception as exc:  # noqa: BLE001 - reported by the parent
        return f"{kv_format} ps{page_size} H{heads} {config_label(config)}: {type(exc).__name__}: {str(exc)[:300]}"


def precompile(jobs: list[tuple[str, int, int, triton.Config, bool]], workers: int) -> list[str]:
    """Compile every job in parallel processes; the parent then loads the binaries from the cache."""
    payload = [(f, p, h, config_to_dict(c), lse) for f, p, h, c, lse in jobs]
    if workers <= 1 or len(jobs) <= 1:
        return [e for e in map(_compile_job, payload) if e]
    import multiprocessing as mp
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        errs = list(pool.map(_compile_job, payload))
    return [e for e in errs if e]


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    if not torch.isfinite(a).all():
        return float("inf")
    return ((a - b).norm() / b.norm()).item()


def check(configs: list[triton.Config], heads_list: list[int]) -> list[dict]:
    """Each config on mixed lengths (fp8 and fp8_ds_mla), and each format's default over page sizes x H."""
    rows = []
    gen = torch.Generator().manual_seed(1234)

    def case(kv_format: str, page_size: int, heads: int, config: triton.Config, batch: int = 5,
             lse_too: bool = False) -> dict:
        lens = torch.randint(1, 3000, (batch,), generator=gen).to(torch.int32)
        lens[0] = 1
        problem = bench.Problem(batch, heads, int(lens.max()), page_size, kv_format)
        x = bench.make_inputs(problem, seed=int(torch.randint(0, 1000, (1,), generator=gen)))
        x["seq_lens"] = lens.cuda()
        x["out"].fill_(float("nan"))
        sm = 1.0 / math.sqrt(576)
        got = interface._launch(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], sm, x["kv_scale"],
                                kv_format, x["out"], lse_too, config=config)
        ref, ref_lse = reference.mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], sm,
                                                      kv_scale=x["kv_scale"], kv_format=kv_format, return_lse=True)
        out = got[0] if lse_too else got
        lse_err = (got[1] - ref_lse).abs().max().item() if lse_too else None
        row = dict(kv_format=kv_format, page_size=page_size, heads=heads, config=config_label(config),
                   rel_err=rel_err(out, ref), lse_err=lse_err)
        # Printed as it completes: a kernel fault ends the process, and what passed before it stays known.
        print(f"check {kv_format} ps{page_size} H{heads} {row['config']}: rel err {row['rel_err']:.2e}"
              + (f", lse err {lse_err:.1e}" if lse_err is not None else ""), flush=True)
        return row

    for config in configs:
        for kv_format in ("fp8", "fp8_ds_mla"):
            try:
                rows.append(case(kv_format, 1, 16, config))
            except Exception as exc:  # noqa: BLE001 - e.g. out of shared memory for this format: recorded
                rows.append(dict(kv_format=kv_format, page_size=1, heads=16, config=config_label(config),
                                 rel_err=float("nan"), error=f"{type(exc).__name__}: {str(exc)[:200]}"))
    for kv_format in ("fp8", "bf16", "fp8_ds_mla"):
        for page_size in (1, 16, 64):
            for heads in heads_list:
                rows.append(case(kv_format, page_size, heads, space.default_for(kv_format), batch=3, lse_too=True))
    return rows


def summarize(times: dict[str, dict[int, float]], sizes: list[int]) -> dict:
    """Per-bucket winners, the best single config (least summed time over sizes) and the tuning gain."""
    winners = {b: min(times, key=lambda c: times[c][b]) for b in sizes}
    single = min(times, key=lambda c: sum(times[c][b] for b in sizes))
    gains = {b: times[single][b] / times[winners[b]][b] for b in sizes}
    return dict(total_ms={c: sum(t[b] for b in sizes) for c, t in times.items()},
                winners={b: [winners[b], times[winners[b]][b]] for b in sizes}, best_single=single,
                best_single_ms={b: times[single][b] for b in sizes},
                gain_per_bucket=gains, gain_total=sum(times[single][b] for b in sizes)
                / sum(times[winners[b]][b] for b in sizes))


# ------------------------------------------------------------------------------ side by side with FlashMLA

def import_flashmla():
    """``(module, None)``, or ``(None, why)`` when FlashMLA (the ``sgl-flash-mla`` wheel) is not importable."""
    try:
        import flash_mla  # noqa: PLC0415 - optional, compared against only
        return flash_mla, None
    except Exception as exc:  # noqa: BLE001 - any import failure means: no FlashMLA columns
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"


def flashmla_call(fm, x: dict, kv_format: str, sm_scale: float):
    """A zero-argument FlashMLA decode call on ``x`` (bench.make_inputs, page size 64) and a function that
    returns its last output ``[B, H, 512]``. Dense decoding goes through the legacy SM90 kernels
    (``use_legacy=True``); fp8 takes an fp8 query (cast here, outside the timed call: FlashMLA quantises the
    query, graphtune does not) and the per-tensor scale as ``descale_k``."""
    q, kv, pt, lens = x["q"], x["kv_cache"], x["page_table"], x["seq_lens"]
    batch, heads, _ = q.shape
    kv4 = kv.view(kv.shape[0], kv.shape[1], 1, kv.shape[2])
    meta, _ = fm.get_mla_metadata()
    last: dict = {}
    if kv_format == "bf16":
        q4 = q.view(batch, 1, heads, q.shape[2])

        def call() -> None:
            last["out"] = fm.flash_mla_with_kvcache(q4, kv4, pt, lens, 512, meta, softmax_scale=sm_scale,
                                                    causal=False, use_legacy=True)[0]
    elif kv_format == "fp8":
        meta.tile_scheduler_metadata, meta.num_splits = fm.flash_mla_interface.get_mla_decoding_metadata(
            lens, heads, 1, heads, is_fp8_kvcache=True, use_legacy=True)
        q8 = q.to(torch.float8_e4m3fn).view(batch, 1, heads, q.shape[2])
        one = torch.ones(1, dtype=torch.float32, device=q.device)
        descale_k = torch.full((1,), float(x["kv_scale"]), dtype=torch.float32, device=q.device)

        def call() -> None:
            last["out"] = fm.flash_mla_with_kvcache(q8, kv4, pt, lens, 512, meta, softmax_scale=sm_scale,
                                                    causal=False, is_fp8_kvcache=True, use_legacy=True,
                                                    descale_q=one, descale_k=descale_k)[0]
    else:
        raise ValueError(f"flashmla_call: kv_format {kv_format!r}: FlashMLA's dense kernels take bf16 or fp8")
    return call, lambda: last["out"].view(batch, heads, 512)


def _accuracy_inputs(batch: int, heads: int, kv_format: str, seed: int) -> dict:
    """Fresh random inputs with mixed lengths (1, odd, full), page size 64, output poisoned with NaN."""
    gen = torch.Generator().manual_seed(seed)
    lens = torch.randint(1, 3001, (batch,), generator=gen).to(torch.int32)
    lens[0] = 1
    lens[-1] = 3000
    x = bench.make_inputs(bench.Problem(batch, heads, 3000, 64, kv_format), seed=seed)
    x["seq_lens"] = lens.cuda()
    x["out"].fill_(float("nan"))
    return x


class HopperVariant(dict):
    """One fixed config of the Hopper kernel that serves the shape, as one more graphtune variant; ``PLAN=1`` (not a
    kernel key): every call given one step's plan (``bench.run_inputs(plan=True)``: filled by the first call, read by
    the rest, as a decode step's layers share one), so the config starts from the plan's rows as a plan= call does."""

    def kernel_keys(self) -> dict:
        return {k: v for k, v in self.items() if k != "PLAN"}


def _hopper_candidates(x: dict, heads: int, kv_format: str) -> list[HopperVariant]:
    """The Hopper variants timed beside the portable configs: the fp8 kernels' variants, bf16's fixed config (and
    with heads on M the ping-pong kernel's configs, which the tuned path runs from ``PP_MIN_BATCH`` up)."""
    if not _hopper_applies(x, kv_format):
        return []
    if kv_format == "fp8":
        variants = HOPPER_ON_M_FP8_VARIANTS if interface_hopper._heads_on_m(heads) else HOPPER_TOK_FP8_VARIANTS
        return [HopperVariant(v) for v in variants]
    if kv_format == "fp8_ds_mla":
        return [HopperVariant(v) for v in HOPPER_TOK_DS_VARIANTS]
    if interface_hopper._heads_on_m(heads):   # the fixed config and the ping-pong kernel's space (PP = 1)
        return [HopperVariant()] + [HopperVariant(v) for v in interface_hopper.HOPPER_PP_SPACE]
    return [HopperVariant(v) for v in HOPPER_TOK_VARIANTS]


class Tuned:
    """graphtune as a user gets it: the public call's tuned path (``path="auto"``, no config), tuned per bucket by
    its first call outside capture, over the shipped spaces, with the shipped fixed configs; ``query_precision``
    as the call's (``"e4m3"``: the opt-in of fp8 caches, the query's part of FlashMLA's fp8 accuracy class) and
    ``p_precision`` (``"e4m3"``: P too, FlashMLA's fp8 accuracy class whole)."""

    def __init__(self, label: str = "tuned (as shipped)", query_precision: str = "bf16",
                 fp8_query: bool = False, plan: bool = False, p_precision: str = "bf16") -> None:
        self.label = label
        self.query_precision = query_precision
        self.p_precision = p_precision
        self.fp8_query = fp8_query      # the query handed over in e4m3 (scale 1), as the benchmark gives FlashMLA's
        self.plan = plan                # a step's MLADecodePlan per input set, filled by the warm call before capture


TUNED = Tuned()
TUNED_E4M3 = Tuned("tuned, e4m3 query (opt-in)", "e4m3")
TUNED_FP8Q = Tuned("tuned, query given in e4m3", "e4m3", fp8_query=True)
TUNED_P8 = Tuned("tuned, e4m3 query and P (opt-in)", "e4m3", p_precision="e4m3")
# (with --vs-plan: the e4m3 columns given a step's plan too)
TUNED_E4M3_PLAN = Tuned("tuned, e4m3 query, with a step's plan", "e4m3", plan=True)
TUNED_P8_PLAN = Tuned("tuned, e4m3 query and P, with a step's plan", "e4m3", p_precision="e4m3", plan=True)
# (FlashMLA's own terms: its query cast to e4m3 outside its timed call, its metadata made outside it, P in e4m3)
TUNED_FP8Q_P8_PLAN = Tuned("tuned, query given in e4m3, e4m3 P, with a step's plan", "e4m3", fp8_query=True,
                           p_precision="e4m3", plan=True)
# (the e4m3 columns: the best variant of the default accuracy leaves them out)
_E4M3_LABELS = (TUNED_E4M3.label, TUNED_FP8Q.label, TUNED_P8.label, TUNED_E4M3_PLAN.label, TUNED_P8_PLAN.label,
                TUNED_FP8Q_P8_PLAN.label)
# ``--vs-plan``: the public call given a decode step's plan (``mla_decode(..., plan=MLADecodePlan())``), made per input
# set and filled by the warm call before the graph is captured, as FlashMLA's metadata is made outside its timed call
TUNED_PLAN = Tuned("tuned, with a step's plan", plan=True)


def _select(config, heads: int, kv_format: str) -> None:
    if isinstance(config, Tuned):
        restore_hopper_configs()
    elif isinstance(config, HopperVariant):
        # keyed by the config dict (H 64 and 128 share one), so its shipped state is what is kept
        canonical = interface_hopper.BLOCK_H if interface_hopper._heads_on_m(heads) else interface_hopper.TOK_BLOCK_H
        base = SAVED_HOPPER.setdefault((canonical, kv_format), dict(_hopper_dict(heads, kv_format)))
        d = _hopper_dict(heads, kv_format)
        d.clear()
        d.update({**base, **config.kernel_keys()})


SAVED_HOPPER: dict = {}


def _activate(config, heads: int, kv_format: str) -> str:
    """Make ``config`` the one the next launch (or capture) runs, and return its label: one call, so a row is
    never labelled with a variant other than the one that ran."""
    _select(config, heads, kv_format)
    return _variant_label(config, heads, kv_format)


def _variant_kwargs(config, heads: int, kv_format: str) -> dict:
    """The launch keywords of one timed variant: a Hopper variant pinned as the shipped fixed config overlaid
    with it (unpinned, one equal to the shipped config would run the tuned kernel), a portable config as given,
    ``TUNED`` the public call's path."""
    if isinstance(config, Tuned):
        return dict(config=None, path="auto", query_precision=config.query_precision, fp8_query=config.fp8_query,
                    plan=config.plan, p_precision=config.p_precision)
    if isinstance(config, HopperVariant):
        keys, plan = config.kernel_keys(), bool(config.get("PLAN"))
        if config.get("V2"):   # the second fp8 kernel's own keys (a V2 config overlays its fixed config, not these)
            return dict(config=triton.Config(keys), path="hopper", plan=plan)
        canonical = interface_hopper.BLOCK_H if interface_hopper._heads_on_m(heads) else interface_hopper.TOK_BLOCK_H
        base = SAVED_HOPPER.get((canonical, kv_format), _hopper_dict(heads, kv_format))
        return dict(config=triton.Config({**base, **keys}), path="hopper", plan=plan)
    return dict(config=config, path="portable")


def _variant_label(config, heads: int = 128, kv_format: str = "bf16") -> str:
    if isinstance(config, Tuned):
        return config.label
    if isinstance(config, HopperVariant):
        kind = "heads-on-M" if interface_hopper._heads_on_m(heads) else "tokens-on-M"
        return (f"hopper {kind} " + ",".join(f"{k}={v}" for k, v in _hopper_dict(heads, kv_format).items())
                + (", with a step's plan" if config.get("PLAN") else ""))
    return config_label(config)


def _hopper_applies(x: dict, kv_format: str) -> bool:
    """A Hopper kernel takes these inputs on this GPU (fp8 included: it is timed whether or not
    ``path="auto"`` picks it yet)."""
    return (interface_hopper.shape_supported(x["q"], x["kv_cache"], kv_format, explicit=True) is None
            and torch.cuda.get_device_capability() == (9, 0))


def _vs_candidates(args, x: dict, heads: int, kv_format: str) -> list[HopperVariant]:
    """The Hopper variants ``--vs-flashmla`` times: all of them, or those whose dict's text contains one of the
    '|'-separated parts of ``--vs-variant-filter`` (``str(dict)``, e.g. ``{}`` for a fixed config unchanged)."""
    variants = _hopper_candidates(x, heads, kv_format)
    if not args.vs_variant_filter:
        return variants
    parts = args.vs_variant_filter.split("|")
    return [v for v in variants if any(p in str(dict(v)) for p in parts)]


def _e4m3(args, kv_format: str) -> list[Tuned]:
    """``--vs-e4m3``: the public call with ``query_precision="e4m3"`` too, on the per-tensor fp8 cache, from the bf16
    query and from the query cast to e4m3 outside the call (FlashMLA's input), and with ``p_precision="e4m3"`` as
    well (FlashMLA's fp8 accuracy class whole); with ``--vs-plan`` the first and the last given a step's plan too, and
    the query given in e4m3 with P in e4m3 and a step's plan (FlashMLA's terms: its query cast and its metadata made
    outside its timed call)."""
    if not (args.vs_e4m3 and kv_format == "fp8"):
        return []
    planned = [TUNED_E4M3_PLAN, TUNED_P8_PLAN, TUNED_FP8Q_P8_PLAN] if getattr(args, "vs_plan", False) else []
    return [TUNED_E4M3, TUNED_FP8Q, TUNED_P8, *planned]


def _extras(args, kv_format: str) -> list[Tuned]:
    """The public call's extra columns: :func:`_e4m3`'s, and with ``--vs-plan`` the call given a step's plan."""
    return _e4m3(args, kv_format) + ([TUNED_PLAN] if args.vs_plan else [])


def _publics(args, kv_format: str) -> list[Tuned]:
    """The public call's columns in the order they are timed and checked: as shipped first (each batch bucket is tuned
    by the first call that meets it, so the others run its configs), then :func:`_extras`; ``--vs-plan-first``: the
    call given a step's plan first (the buckets tuned with a plan, as a server whose warm-up passes one tunes them)."""
    extras = _extras(args, kv_format)
    if getattr(args, "vs_plan_first", False) and TUNED_PLAN in extras:
        return [TUNED_PLAN, TUNED, *[e for e in extras if e is not TUNED_PLAN]]
    return [TUNED, *extras]


def ragged_inputs(batch: int, heads: int, tokens: int, kv_format: str, seed: int, device: str = "cuda") -> dict:
    """Inputs of a ragged decode batch: each request's length drawn uniformly from 1 to ``2 * tokens - 1`` (mean
    ``tokens``), a cache of ``2 * tokens`` slots a request at page size 64, output poisoned with NaN."""
    gen = torch.Generator().manual_seed(seed)
    x = bench.make_inputs(bench.Problem(batch, heads, 2 * tokens, 64, kv_format), device=device, seed=seed)
    x["seq_lens"] = torch.randint(1, 2 * tokens, (batch,), generator=gen).to(device=device, dtype=torch.int32)
    x["out"].fill_(float("nan"))
    return x


def _time_variants(args, fm, xs: list[dict], heads: int, kv_format: str, configs: list,
                   where: str) -> list[tuple[str, str, float]]:
    """FlashMLA (when it imports) and every graphtune variant of the tables (the public call, the e4m3 columns, the
    portable ``configs``, the pinned Hopper variants) timed by graph replay over the input sets ``xs``:
    ``(impl, label, ms)``, a failing one recorded as inf with one line naming it (``where`` leads that line)."""
    sm = 1.0 / math.sqrt(576)
    timed = [("flashmla", None, [flashmla_call(fm, x, kv_format, sm)[0] for x in xs])] if fm is not None else []
    for config in [*_publics(args, kv_format), *configs, *_vs_candidates(args, xs[0], heads, kv_format)]:
        kwargs = _variant_kwargs(config, heads, kv_format)
        timed.append(("graphtune", config, [bench.run_inputs(x, kv_format, **kwargs) for x in xs]))
    got = []
    for impl, config, calls in timed:
        # the calls read the Hopper config when captured (graph_time_ms captures them)
        label = _activate(config, heads, kv_format) if impl == "graphtune" else ""
        try:
            ms = graph_time_ms(calls)
        except Exception as exc:  # noqa: BLE001 - a failing variant is recorded, not fatal
            print(f"  {where}{impl} H{heads} {kv_format} {label}: {type(exc).__name__}: {exc}"[:300], flush=True)
            ms = float("inf")
        got.append((impl, label, ms))
    return got


def vs_ragged(args, fm, heads_batches: list, formats: list[str], configs: list, result: dict, out: Path) -> list[dict]:
    """``--vs-ragged``: FlashMLA and graphtune (every variant the uniform table times: the public call, tuned as the
    uniform table left it, as a server's warm-up tunes on lengths other than the ones it serves; the e4m3 columns;
    pinned variants) on ragged batches, the lengths fresh each run (the seed in the JSON), the same input sets for
    all; bytes = the tokens each set holds times (row bytes + 4), averaged over the sets."""
    seed0 = args.ragged_seed if args.ragged_seed is not None else int(time.time()) % 100_000
    result["ragged_seed"] = seed0
    rows = []
    for heads, batches in heads_batches:
        for kv_format in formats:
            row_bytes = reference.ROW_BYTES[kv_format] + 4
            for b in batches:
                # as many sets as the uniform table rotates through at this size (their bytes exceed the L2)
                n_sets = max(2, min(bench.MAX_SETS, -(-bench.ROTATE_BYTES // (b * args.tokens * row_bytes))))
                xs = [ragged_inputs(b, heads, args.tokens, kv_format, seed0 + 97 * b + heads + i)
                      for i in range(n_sets)]
                lens = torch.cat([x["seq_lens"] for x in xs]).cpu()
                nbytes = int(lens.sum()) * row_bytes / n_sets
                for impl, label, ms in _time_variants(args, fm, xs, heads, kv_format, configs, f"ragged B{b} "):
                    rows.append(dict(impl=impl, heads=heads, kv_format=kv_format, batch=b, config=label, sets=n_sets,
                                     ms=ms, tbs=nbytes / (ms * 1e-3) / 1e12, len_min=int(lens.min()),
                                     len_mean=float(lens.float().mean()), len_max=int(lens.max())))
                del xs
                torch.cuda.empty_cache()
            result["ragged_rows"] = rows
            out.write_text(json.dumps(result, indent=1, default=str))
    restore_hopper_configs()
    return rows


def print_table(rows: list[dict], formats: list[str], e4m3_formats: list[str], heads_batches: list,
                lengths: bool = False, plan: bool = False, e4m3_labels: tuple[str, ...] = ()) -> dict:
    """The side-by-side table of ``rows`` (the uniform or the ragged ones): per (H, B) and format, FlashMLA, graphtune
    as shipped (the tuned path) and the best variant timed (pinned; it may be one the tuned path does not run), and
    the e4m3 columns where timed (``e4m3_labels``, in that order); ms (TB/s), ratios to FlashMLA. ``lengths``: a
    column of the batch's lengths. Returns the best variant's label per cell."""
    e4m3_labels = e4m3_labels or (TUNED_E4M3.label, TUNED_FP8Q.label)
    e4m3_head = "".join(f" {label.removeprefix('tuned, ')} | ratio |" for label in e4m3_labels)
    head = "| heads, batch |" + (" lengths min / mean / max |" if lengths else "") + "".join(
        f" FlashMLA {f} | graphtune {f} tuned | ratio | best variant | ratio |"
        + (e4m3_head if f in e4m3_formats else "")
        + (" tuned, with a step's plan | ratio |" if plan else "") for f in formats)
    print(head)
    print("|" + " --- |" * (1 + lengths + (5 + 2 * plan) * len(formats) + 2 * len(e4m3_labels) * len(e4m3_formats)))
    best = {}
    for heads, batches in heads_batches:
        for b in batches:
            cells = []
            here = [r for r in rows if r["heads"] == heads and r["batch"] == b]
            if not here:
                continue
            for kv_format in formats:
                mine = [r for r in here if r["kv_format"] == kv_format]
                # (the best variant among those of the default accuracy: the e4m3 query has its own column)
                g = min((r for r in mine if r["impl"] == "graphtune" and r["config"] not in _E4M3_LABELS),
                        key=lambda r: r["ms"], default=None)
                t = next((r for r in mine if r["impl"] == "graphtune" and r["config"] == TUNED.label), None)
                f = next((r for r in mine if r["impl"] == "flashmla"), None)
                best[f"H{heads}/B{b}/{kv_format}"] = g["config"] if g else None
                cells += [_cell(f), _cell(t), _ratio(t, f), _cell(g), _ratio(g, f)]
                if kv_format in e4m3_formats:
                    for label in e4m3_labels:
                        e = next((r for r in mine if r["impl"] == "graphtune" and r["config"] == label), None)
                        cells += [_cell(e), _ratio(e, f)]
                if plan:
                    e = next((r for r in mine if r["impl"] == "graphtune" and r["config"] == TUNED_PLAN.label), None)
                    cells += [_cell(e), _ratio(e, f)]
            r0 = here[0]
            span = f"{r0['len_min']} / {r0['len_mean']:.0f} / {r0['len_max']} | " if lengths else ""
            print(f"| H={heads}, B={b} | " + span + " | ".join(cells) + " |")
    return best


def _cell(r) -> str:
    return f"{r['ms']:.4f} ({r['tbs']:.2f})" if r and math.isfinite(r["ms"]) else "-"


def _ratio(g, f) -> str:
    ok = f and g and math.isfinite(f["ms"]) and math.isfinite(g["ms"])
    return f"{g['ms'] / f['ms']:.2f}" if ok else "-"


def vs_flashmla(args, configs: list[triton.Config], result: dict, out: Path) -> None:
    """FlashMLA and graphtune in one run: graph-replay times, then the accuracy of every config timed (the tuned path
    as it was tuned on the timed inputs); table last."""
    fm, why = import_flashmla()
    result["flashmla"] = dict(available=fm is not None, why=why,
                              version=getattr(fm, "__version__", None) if fm else None)
    if fm is None:
        print(f"FlashMLA columns skipped: flash_mla does not import ({why})", flush=True)
    sm = 1.0 / math.sqrt(576)
    # an empty list leaves that head count out
    heads_batches = [(h, bs) for h, bs in ((16, args.vs_batches_h16), (128, args.vs_batches_h128)) if bs]
    formats = args.vs_formats
    rows = []
    for heads, batches in heads_batches:
        for kv_format in formats:
            target = bench.MlaDecodeTarget(heads=heads, tokens=args.tokens, page_size=64, kv_format=kv_format)
            for b in batches:
                nbytes = target.bytes_moved(b)
                for impl, label, ms in _time_variants(args, fm, target.inputs(b), heads, kv_format, configs,
                                                      f"B{b} "):
                    rows.append(dict(impl=impl, heads=heads, kv_format=kv_format, batch=b, config=label, ms=ms,
                                     tbs=nbytes / (ms * 1e-3) / 1e12))
                target.release()
                torch.cuda.empty_cache()
            result["vs_rows"] = rows
            out.write_text(json.dumps(result, indent=1, default=str))
    ragged = vs_ragged(args, fm, heads_batches, formats, configs, result, out) if args.vs_ragged else []
    # accuracy after the times: the tuned path tunes each batch bucket on the first inputs it meets, and the
    # check's batch of 6 (bucket 8, lengths 1 to 3000) would otherwise pick bucket 8's config for the timed
    # 4096-token requests (session 21: two buffers at fp8 H = 16, 0.0188 ms, where tuned on the timed inputs
    # it picks three, 0.0163); so every config is checked as it was timed
    # two input sets: the check's mixed lengths (a one-token request first, whose exact output dominates the norm)
    # and two requests of the timed length, the timed inputs' kind (where rounding errors do not average out)
    acc_rows = []
    for heads, _ in heads_batches:
        for kv_format in formats:
            for kind in ("mixed", "uniform"):
                if kind == "mixed":
                    x = _accuracy_inputs(6, heads, kv_format, seed=1000 + heads)
                else:
                    x = bench.make_inputs(bench.Problem(2, heads, args.tokens, 64, kv_format), seed=2000 + heads)
                    x["out"].fill_(float("nan"))
                ref = reference.mla_decode_reference(x["q"], x["kv_cache"], x["page_table"], x["seq_lens"], sm,
                                                     kv_scale=x["kv_scale"], kv_format=kv_format)
                for config in [*_publics(args, kv_format), *configs,
                               *_vs_candidates(args, x, heads, kv_format)]:
                    label = _activate(config, heads, kv_format)
                    x["out"].fill_(float("nan"))
                    kwargs = _variant_kwargs(config, heads, kv_format)
                    q_in = x["q"]
                    if kwargs.pop("plan", False):
                        kwargs["plan"] = MLADecodePlan()
                    if kwargs.pop("fp8_query", False):
                        q_in = x["q"].to(torch.float8_e4m3fn)
                        kwargs = {**{k: v for k, v in kwargs.items() if k != "query_precision"}, "q_scale": 1.0}
                    try:
                        got = interface._launch(q_in, x["kv_cache"], x["page_table"], x["seq_lens"], sm,
                                                x["kv_scale"], kv_format, x["out"], False, **kwargs)
                        err = rel_err(got, ref)
                    except Exception as exc:  # noqa: BLE001 - e.g. out of shared memory: recorded, not fatal
                        err = float("nan")
                        print(f"  graphtune {kv_format} H{heads} {label}: {type(exc).__name__}: "
                              f"{str(exc)[:160]}", flush=True)
                    acc_rows.append(dict(impl="graphtune", heads=heads, kv_format=kv_format, inputs=kind,
                                         config=label, rel_err=err))
                if fm is not None:
                    call, get = flashmla_call(fm, x, kv_format, sm)
                    call()
                    acc_rows.append(dict(impl="flashmla", heads=heads, kv_format=kv_format, inputs=kind,
                                         config="", rel_err=rel_err(get(), ref)))
                torch.cuda.synchronize()
                mine = [r for r in acc_rows if r["heads"] == heads and r["kv_format"] == kv_format
                        and r["inputs"] == kind]
                worst = {impl: max((r["rel_err"] for r in mine if r["impl"] == impl
                                    and r["config"] not in _E4M3_LABELS), default=float("nan"))
                         for impl in ("graphtune", "flashmla")}
                e4m3 = [f", {r['config']} {r['rel_err']:.2e}" for r in mine if r["config"] in _E4M3_LABELS]
                print(f"accuracy H{heads} {kv_format} ({kind}): worst rel err graphtune {worst['graphtune']:.2e}"
                      f"{''.join(e4m3)}, FlashMLA {worst['flashmla']:.2e}", flush=True)
    result["vs_accuracy"] = acc_rows
    out.write_text(json.dumps(result, indent=1, default=str))
    # The table: per (H, B) and format, FlashMLA, graphtune as shipped (the tuned path) and the best variant timed
    # (pinned; it may be one the tuned path does not run); ms (TB/s), ratios to FlashMLA.
    print(f"\nMLA decode vs FlashMLA, page size 64, {args.tokens} tokens per request, {result['gpu']}; "
          "ms (effective TB/s); tuned = the public call as shipped (tuned per bucket), best = the fastest variant "
          "timed (pinned); ratio = graphtune / FlashMLA")
    e4m3 = [f for f in formats if _e4m3(args, f)]
    labels = tuple(t.label for t in _e4m3(args, "fp8"))
    best = print_table(rows, formats, e4m3, heads_batches, plan=args.vs_plan, e4m3_labels=labels)
    if ragged:
        print(f"\nRagged batches (lengths uniform in 1..{2 * args.tokens - 1}, fresh each run), page size 64; as above")
        result["ragged_best_config"] = print_table(ragged, formats, e4m3, heads_batches, lengths=True,
                                                   plan=args.vs_plan, e4m3_labels=labels)
    print("graphtune's best variant per cell:")
    for key, label in best.items():
        print(f"  {key}: {label}")
    # what the tuned rows ran: each Hopper kernel's pick per batch bucket (graphtune.coverage)
    picks = graphtune.coverage().to_dict()["kernels"]
    result["vs_tuned_picks"] = picks
    print("the tuned path's picks (kernel, bucket key, config):")
    for kernel in picks:
        for row in kernel["tuned"]:
            print(f"  {kernel['name']} {row['key']}: {row['config']} ({row['source']})")
            for t in row.get("timings", []):     # the tuner's own timing of each candidate, fastest first
                ms = "-" if t["median_ms"] is None else f"{t['median_ms']:.4f} ms"
                out_round = f", out in round {t['eliminated_round']}" if "eliminated_round" in t else ""
                print(f"      {ms} (n={t['n']}{out_round}): {t['config']}")
    result["vs_best_config"] = best
    out.write_text(json.dumps(result, indent=1, default=str))
    restore_hopper_configs()


def restore_hopper_configs() -> None:
    """The Hopper kernels' module-level fixed configs back as they were before the first variant was selected."""
    for (heads, kv_format), cfg in SAVED_HOPPER.items():
        d = _hopper_dict(heads, kv_format)
        d.clear()
        d.update(cfg)


# ----------------------------------------------------------------------------- Hopper kernel variants

# bf16 heads on M: the fixed config, and the FA3-style overlap (PIPE 1) with 32-token tiles four deep (issue 14's
# run 4 timed 64/2/PIPE 1 and 32/3-4/PIPE 0, all slower than 64/2/PIPE 0: docs/mla_decode.md).
# (32/4/PIPE 1, still in interface_hopper's space, was slower in every cell of every run; timed no more here.)
# PSMEM: P through a shared tile for the P.V wgmma instead of the register operand; XCH: the softmax's exchange
# between the warpgroups with one barrier (2: the next TMA issued after it: slower in run 1); EARLY: the next
# TMA issued before the score MMAs. kernel_hopper.py; docs/mla_decode.md has what each measured.
HOPPER_ON_M_VARIANTS = [dict(BLOCK_N=64, NUM_BUF=2, PIPE=0), dict(BLOCK_N=64, NUM_BUF=2, PIPE=0, XCH=1),
                        dict(BLOCK_N=64, NUM_BUF=2, PIPE=0, XCH=1, EARLY=1),
                        dict(BLOCK_N=64, NUM_BUF=2, PIPE=0, PSMEM=1, XCH=1, EARLY=1),
                        dict(BLOCK_N=32, NUM_BUF=4, PIPE=0, XCH=1, EARLY=1),
                        # PP = 1: the ping-pong kernel (kernel_hopper_pp.py: the warpgroups take alternate tiles,
                        # each a whole score tile and half of O's columns); RELOAD: when WG0 reloads the left half
                        # of an odd tile's buffer; WG1_FIRST: WG1's softmax before its P.V MMAs
                        dict(BLOCK_N=64, NUM_BUF=2, PP=1, RELOAD=1), dict(BLOCK_N=64, NUM_BUF=2, PP=1, RELOAD=0),
                        dict(BLOCK_N=64, NUM_BUF=2, PP=1, RELOAD=1, WG1_FIRST=1),
                        # INDEP = 1 (session 20, pinned only): WG1's softmax from its own running max, the pair's two
                        # softmaxes at once
                        dict(BLOCK_N=64, NUM_BUF=2, PP=1, RELOAD=1, WG1_FIRST=1, INDEP=1),
                        # OUT32 = 0: a whole request's output stored in the wgmma layout's half sectors (whole sectors
                        # are the default since session 21)
                        dict(BLOCK_N=64, NUM_BUF=2, PP=1, RELOAD=1, WG1_FIRST=1, OUT32=0)]
# bf16 tokens on M: PIPE 1 retires P.V(i - 1) at the top of tile i and issues the next load before tile i's wait;
# PIPE 2 also keeps the softmax sum per token slot and takes the max across warps with one barrier.
# RING 1 (session 13): the ring kernel (kernel_hopper_ring.py; it ignores NUM_BUF and PIPE), 25 chunk slots (up to
# two tiles and seven chunks in flight), 18 (two tiles, as the first kernel's buffers), two programs an SM of 11, and
# EARLY_S (a tile's score MMAs queued behind the previous tile's P.V) with 25 and 18.
HOPPER_TOK_VARIANTS = [dict(BLOCK_N=64, NUM_BUF=2, PIPE=0), dict(BLOCK_N=64, NUM_BUF=2, PIPE=1),
                       dict(BLOCK_N=64, NUM_BUF=2, PIPE=2), dict(BLOCK_N=64, RING=1, NUM_SLOTS=25),
                       dict(BLOCK_N=64, RING=1, NUM_SLOTS=18), dict(BLOCK_N=64, RING=1, NUM_SLOTS=11, PROGRAMS_PER_SM=2),
                       dict(BLOCK_N=64, RING=1, NUM_SLOTS=25, EARLY_S=1),
                       dict(BLOCK_N=64, RING=1, NUM_SLOTS=18, EARLY_S=1),
                       # the shipped config with a step's plan
                       dict(BLOCK_N=64, NUM_BUF=2, PIPE=2, PLAN=1)]
# The fp8 tokens-on-M kernel: how V^T reaches the P.V wgmma (WIDEN 0: byte gathers into registers; 1: widened
# into four fp16 chunk buffers in shared memory; 2: into one) x buffers x programs per SM (two fit when the
# block needs <= 113 KB: WIDEN 0 or 2 with two buffers).
# V2=0 pins the first kernel (the shipped config unpinned runs the tuned path, which picks the second kernel from
# TOK_FP8_V2_MIN_BATCH requests up). Both kernels' fixed configs have CHAIN 1 (session 11): a variant runs with it
# unless it names CHAIN 0 (the rows without the fold, for comparison).
HOPPER_TOK_FP8_VARIANTS = [dict(V2=0, NUM_BUF=4, WIDEN=0, PROGRAMS_PER_SM=1),
                           dict(V2=0, NUM_BUF=2, WIDEN=0, PROGRAMS_PER_SM=2),
                           dict(V2=0, NUM_BUF=2, WIDEN=0, PROGRAMS_PER_SM=2, CHAIN=0),
                           dict(V2=0, NUM_BUF=3, WIDEN=1, PROGRAMS_PER_SM=1),
                           dict(V2=0, NUM_BUF=2, WIDEN=2, PROGRAMS_PER_SM=2),
                           dict(V2=0, NUM_BUF=3, WIDEN=2, PROGRAMS_PER_SM=1),
                           # the second kernel (kernel_hopper_tok.py): 40 KB tiles, two programs per SM with 2 buffers,
                           # one with 3 or 5; V^T chunks 0-1 loaded under the score MMAs (PREFETCH), the running max
                           # across warps with one barrier (FAST_MAX)
                           *[dict(V2=1, NUM_BUF=n, PREFETCH=p, FAST_MAX=f) for n, p, f in
                             ((2, 0, 0), (2, 1, 0), (2, 1, 1), (3, 1, 1), (5, 1, 1))],
                           # its schedules (session 9): S(i + 1) issued before tile i's softmax (LOOK 1) or between
                           # its P.V chunks 1 and 2 (LOOK 2); RK64: the rope's score MMAs over its 64 columns only
                           # (2 of the 20 fp8 MMAs multiplied the zero padding); PT_EARLY: the page ids of the tile
                           # a buffer takes next loaded a tile ahead (the TMA's coordinates waited on that load)
                           # (LOOK runs with one score chain: CHAIN 0 with it)
                           *[dict(V2=1, NUM_BUF=n, PREFETCH=1, FAST_MAX=1, LOOK=look, RK64=rk, PT_EARLY=pe,
                                  **({"CHAIN": 0} if look else {}))
                             for n, look, rk, pe in ((2, 0, 1, 0), (2, 0, 0, 1), (2, 0, 1, 1), (2, 2, 1, 0), (2, 2, 1, 1),
                                                     (2, 1, 1, 1), (3, 1, 1, 0), (3, 1, 1, 1), (3, 0, 1, 1))],
                           # CHAIN 0: the shipped space's two configs without the fold (one fp8 chain over all 576
                           # dims, which the compiler accumulates in the tensor core's reduced precision)
                           *[dict(V2=1, NUM_BUF=n, PREFETCH=1, FAST_MAX=1, CHAIN=0) for n in (2, 3)],
                           # the tuned space's schedules with a step's plan (whose rows carry a program's first page
                           # ids), PT_EARLY on and off: session 51's H200 run had two buffers without PT_EARLY 4% faster
                           # at batch 32 than the tuner's pick (three buffers with it)
                           *[dict(V2=1, NUM_BUF=n, PREFETCH=1, FAST_MAX=1, RK64=1, PT_EARLY=pe, PLAN=1)
                             for n in (2, 3) for pe in (0, 1)]]
# The fp8 heads-on-M kernel (H % 64 == 0): the tile widened to fp16 once, fp16 query, the bf16 kernel's MMAs
# (kernel_hopper_heads.py; WOVL, PSMEM, XCH, LSUM, MAX1 there). Every variant names PSMEM: the variants overlay
# one another in the module's fixed config. (The hi/lo fp8-score kernel, 11-19% slower in every cell, was removed
# in session 9.)
HOPPER_ON_M_FP8_VARIANTS = [dict(NUM_BUF=2, WOVL=1, PSMEM=0, XCH=1), dict(NUM_BUF=2, WOVL=1, PSMEM=1, XCH=1),
                            # PP = 1 (session 11): the ping-pong kernel on the fp8 cache, each tile widened in place
                            # by its owner (kernel_hopper_pp.py)
                            dict(PP=1, RELOAD=1), dict(PP=1, RELOAD=1, WG1_FIRST=1), dict(PP=1, RELOAD=0),
                            dict(PP=1, RELOAD=1, WG1_FIRST=1, INDEP=1),
                            dict(PP=1, RELOAD=1, WG1_FIRST=1, INDEP=1, OUT32=0),
                            # T8 = 1 (session 23): the ping-pong schedule with fp8 scores on the landed tile and each
                            # warpgroup widening its own half of V off the hand-offs' path (kernel_hopper_pp8.py; PP 0:
                            # the variants overlay the fixed config, whose PP 1 names the other kernel; WL1 1: WG1
                            # widens its tile's left half after its hand-off; the tuned path's third kernel from batch 32;
                            # given a bf16 query its pair made by a pre-pass since session 29, Q8PRE 0: in the kernel)
                            dict(PP=0, T8=1), dict(PP=0, T8=1, WL1=1), dict(PP=0, T8=1, Q8PRE=0)]
# fp8_ds_mla (656-byte rows), H < 64: the second tokens-on-M kernel with DS = 1 (session 9: compiled on a CPU, not
# yet run; pinned-only): the fixed config (2 buffers, 2 programs per SM, PREFETCH 0: PREFETCH 1 spills in the tile
# loop), three buffers at one program per SM, the page ids a tile ahead. Pages below 64 tokens: the row gather,
# `--hopper-overlay GATHER=1 --hopper-page-size 16` (or 1).
HOPPER_TOK_DS_VARIANTS = [dict(DS=1, NUM_BUF=2, PREFETCH=0, FAST_MAX=1), dict(DS=1, NUM_BUF=3, PREFETCH=0, FAST_MAX=1),
                          dict(DS=1, NUM_BUF=2, PREFETCH=0, FAST_MAX=1, PT_EARLY=1)]

# --hopper-variants, phase by phase: (kind, kv_format, H, batches, variants). fp8_ds_mla in its own phase, last: not
# yet run on a GPU when written (a fault there, which ends the CUDA context, leaves the fp8 phase's checks and times
# on disk).
HOPPER_PHASES = [[("heads-on-M", "bf16", 128, [1, 8, 32, 64], HOPPER_ON_M_VARIANTS),
                  ("tokens-on-M", "bf16", 16, [1, 8, 32, 64, 128], HOPPER_TOK_VARIANTS)],
                 [("tokens-on-M fp8", "fp8", 16, [1, 8, 32, 64, 128], HOPPER_TOK_FP8_VARIANTS),
                  ("heads-on-M fp8", "fp8", 128, [1, 8, 32, 64], HOPPER_ON_M_FP8_VARIANTS)],
                 [("tokens-on-M fp8_ds_mla", "fp8_ds_mla", 16, [1, 8, 32, 64, 128], HOPPER_TOK_DS_VARIANTS)]]
HOPPER_KINDS = tuple(entry[0] for phase in HOPPER_PHASES for entry in phase)
HOPPER_HEADS = tuple(sorted({entry[2] for phase in HOPPER_PHASES for entry in phase}))


# The portable configs timed beside the Hopper variants: bf16's fixed config; for fp8 the two that won cells of
# run 5 (docs/mla_decode.md: BLOCK_N 64 with 2 stages, and 128 tokens / 8 warps / 5 stages).
PORTABLE_REFS = {"bf16": [space.BF16_CONFIG],
                 "fp8": parse_configs("BLOCK_N=64,num_stages=2;BLOCK_N=128,PROGRAMS_PER_SM=1,num_warps=8,num_stages=5"),
                 # fp8_ds_mla: the portable kernel's default for the format (what path="auto" runs untuned)
                 "fp8_ds_mla": [space.default_for("fp8_ds_mla")]}


def _hopper_dict(heads: int, kv_format: str) -> dict:
    """The module-level fixed config of the Hopper kernel that serves (heads, kv_format)."""
    on_m = interface_hopper._heads_on_m(heads)
    if kv_format == "fp8_ds_mla":
        return interface_hopper.HOPPER_TOK_DS_CONFIG
    if kv_format == "fp8":
        return interface_hopper.HOPPER_FP8_CONFIG if on_m else interface_hopper.HOPPER_TOK_FP8_CONFIG
    return interface_hopper.HOPPER_CONFIG if on_m else interface_hopper.HOPPER_TOK_CONFIG


def _use_hopper_config(heads: int, variant: dict, kv_format: str = "bf16") -> triton.Config:
    """Select the fixed config as shipped overlaid with the variant (not with the previous variant's keys), and
    return it as the config to pin: without one, a variant equal to the shipped config would run the tuned kernel
    (the space's choice for the bucket, or a shape class's second kernel), not the variant."""
    _select(HopperVariant(variant), heads, kv_format)
    return _variant_kwargs(HopperVariant(variant), heads, kv_format)["config"]


def _hopper_check(kind: str, kv_format: str, variant: dict, gen: torch.Generator) -> float:
    """Worst relative error of one Hopper config over mixed lengths with every cache row past seq_len set
    to NaN (TMA reads whole tiles), two SM counts, NaN-poisoned output."""
    sm = 1.0 / math.sqrt(576)
    cases = ([(64, 64, [1, 63, 64, 65, 3001, 4096]), (128, 64, [4096, 1, 129, 2000, 77]),
              (128, 128, [300, 1, 4096, 191])] if kind == "heads-on-M" else
             [(16, 64, [1, 63, 64, 65, 3001, 4096]), (32, 128, [300, 1, 4096, 191]), (16, 64, [4096] * 3)])
    worst = 0.0
    for heads, ps, lens in cases:
        pinned = _use_hopper_config(heads, variant, kv_format)
        x = bench.make_inputs(bench.Problem(len(lens), heads, max(lens), ps, kv_format),
                              seed=int(torch.randint(0, 999, (1,), generator=gen)))
        x["seq_lens"].copy_(torch.tensor(lens, dtype=torch.int32))
        pt = x["page_table"]
        for b, n in enumerate(lens):
            tail = torch.arange(n, pt.shape[1] * ps, device=pt.device)
            # (fp8_ds_mla: all-ones bytes, NaN as its fp8 latent, fp32 scales and bf16 rope)
            x["kv_cache"][pt[b, tail // ps].long(), tail % ps] = 255 if kv_format == "fp8_ds_mla" else float("nan")
        ref = reference.mla_decode_reference(x["q"], x["kv_cache"], pt, x["seq_lens"], sm,
                                             kv_scale=x["kv_scale"], kv_format=kv_format)
        for sms in (132, 7):
            x["out"].fill_(float("nan"))
            try:
                got = interface._launch(x["q"], x["kv_cache"], pt, x["seq_lens"], sm, x["kv_scale"], kv_format,
                                        x["out"], False, num_sms=sms, path="hopper", config=pinned)
                err = rel_err(got, ref)
            except Exception as exc:  # noqa: BLE001 - recorded, not fatal
                print(f"  {kind} H{heads} {variant}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                err = float("inf")
            worst = max(worst, err if math.isfinite(err) else float("inf"))
    return worst


def hopper_variants(args, result: dict, out: Path) -> None:
    """The Hopper kernels' configs, page size 64: correctness first (``_hopper_check``), then graph-replay
    times next to FlashMLA and a portable config in the same run. bf16 first; the fp8 kernel (not yet run
    on a GPU when written) last, so that a fault there leaves the bf16 results on disk."""
    sm = 1.0 / math.sqrt(576)
    gen = torch.Generator().manual_seed(5)
    fm, why = import_flashmla()
    if fm is None:
        print(f"FlashMLA column skipped: flash_mla does not import ({why})", flush=True)
    result["hopper_check"], result["hopper_times"] = [], []
    phases = HOPPER_PHASES
    if args.hopper_phases != "all":
        phases = [phases[{"bf16": 0, "fp8": 1, "fp8_ds_mla": 2}[args.hopper_phases]]]
    phases = [[entry for entry in phase if entry[2] in args.hopper_heads] for phase in phases]
    if args.hopper_kinds:
        phases = [[k for k in phase if k[0] in args.hopper_kinds] for phase in phases]
    if args.hopper_variant_filter:
        # only the variants whose dict's text contains one of the '|'-separated parts
        parts = args.hopper_variant_filter.split("|")
        phases = [[(k, f, h, bs, [v for v in vs if any(p in str(v) for p in parts)]) for k, f, h, bs, vs in phase]
                  for phase in phases]
    if args.hopper_overlay:
        # every variant of the selected kernels with these keys set (e.g. GATHER=1 for page size 1)
        overlay = dict(args.hopper_overlay)
        phases = [[(k, f, h, bs, [{**v, **overlay} for v in vs]) for k, f, h, bs, vs in phase] for phase in phases]
    if args.hopper_batches:
        phases = [[(k, f, h, [b for b in bs if b in args.hopper_batches] if h == 16 else bs, vs)
                   for k, f, h, bs, vs in phase]
                  for phase in phases]
    for phase in phases:
        good = []
        for kind, kv_format, heads, batches, variants in phase:
            ok = []
            for variant in variants:
                worst = _hopper_check(kind.split(" ")[0], kv_format, variant, gen)
                result["hopper_check"].append(dict(kernel=kind, variant=variant, worst_rel_err=worst))
                print(f"check {kind} {variant}: worst rel err {worst:.2e}", flush=True)
                if worst <= 1e-2:
                    ok.append(variant)
            out.write_text(json.dumps(result, indent=1, default=str))
            good.append((kind, kv_format, heads, batches, ok))
        for kind, kv_format, heads, batches, variants in good:
            target = bench.MlaDecodeTarget(heads=heads, tokens=args.tokens, page_size=args.hopper_page_size,
                                           kv_format=kv_format)
            for b in batches:
                # bytes: what the decode must read and write (fp8_ds_mla rows are 656 bytes, fp8's 576): the rows of
                # two formats compare per byte moved as bytes / time
                row: dict = dict(heads=heads, kv_format=kv_format, batch=b, page_size=args.hopper_page_size,
                                 bytes=target.bytes_moved(b))
                # (FlashMLA takes pages of 64 only; its dense kernels take bf16 and per-tensor fp8 caches)
                if fm is not None and args.hopper_page_size == 64 and kv_format in ("bf16", "fp8"):
                    row["flashmla"] = graph_time_ms([flashmla_call(fm, x, kv_format, sm)[0] for x in target.inputs(b)])
                for variant in variants:
                    pinned = _use_hopper_config(heads, variant, kv_format)
                    key = "hopper " + ",".join(f"{k}={v}" for k, v in variant.items())
                    try:
                        row[key] = graph_time_ms(target.make(b, pinned, path="hopper"))
                    except Exception as exc:  # noqa: BLE001
                        print(f"  H{heads} B{b} {variant}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                        row[key] = float("inf")
                for portable in ([] if args.hopper_no_portable else PORTABLE_REFS[kv_format]):
                    row["portable " + config_label(portable)] = graph_time_ms(target.make(b, portable,
                                                                                          path="portable"))
                # effective TB/s of each timed entry (bytes / time: the per-byte comparison across formats)
                timed = [k for k in row if k == "flashmla" or k.startswith(("hopper ", "portable "))]
                row["tbs"] = {k: round(row["bytes"] / (row[k] * 1e-3) / 1e12, 3) for k in timed
                              if math.isfinite(row[k]) and row[k] > 0}
                result["hopper_times"].append(row)
                print(" ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
                      flush=True)
                target.release()
                out.write_text(json.dumps(result, indent=1, default=str))
    restore_hopper_configs()


# ----------------------------------------------------------------------------- the load path's ceiling

# (format, buffers, programs per SM): fp8 as the second tokens-on-M kernel's configs (40 KB tiles: 2 buffers at
# two programs per SM, 5 at one); bf16 as the tokens-on-M kernel (72 KB tiles, 2 buffers) and one deeper.
# Page size 1 (fp8): the row gather of the second kernel (GATHER = 1) in place of TMA, two and three buffers.
STREAM_CONFIGS = [("fp8", 2, 2), ("fp8", 5, 1), ("bf16", 2, 1), ("bf16", 3, 1)]
STREAM_GATHER_CONFIGS = [("fp8", 2, 2), ("fp8", 3, 1)]


def stream_launch(x: dict, kv_format: str, num_buf: int, per_sm: int, gather: int = 0, sms: int | None = None):
    """A call of ``kernel_hopper_tok._kv_stream_kernel`` on inputs ``x`` taking a stamp buffer or None
    (benchmarks/probes/timeline.py), and its programs: the decode kernels' TMA boxes (fp8: [64, 512] + the [64, 128]
    zero-padded rope box; bf16: [64, 512] + [64, 64]), or their row gather (``gather``), and their grid at H = 16
    (``per_sm`` programs on each of the ``sms``, the device's by default)."""
    from graphtune.kernels.mla_decode import kernel_hopper_tok
    sms = sms or torch.cuda.get_device_properties(0).multi_processor_count
    kv = x["kv_cache"]
    kv2 = kv.view(kv.shape[0] * kv.shape[1], 576)
    nope = interface_hopper._descriptor(kv2, [64, 512])
    if kv_format == "fp8":
        rope, col = interface_hopper._descriptor(kv2, [64, 128]), 512
    else:
        rope, col = interface_hopper._descriptor(kv2[:, 512:], [64, 64]), 0
    progs = sms * per_sm
    out = torch.empty(progs, dtype=torch.int32, device=kv.device)

    def call(stamps: torch.Tensor | None = None) -> None:
        kernel_hopper_tok._kv_stream_kernel[(progs,)](
            nope, rope, x["kv_cache"], x["page_table"], x["seq_lens"], out, x["q"].shape[0],
            x["page_table"].stride(0), PAGE_SIZE=x["kv_cache"].shape[1], ROPE_COL=col, B_CHUNK=128, BLOCK_N=64,
            NUM_BUF=num_buf, num_warps=4, GATHER=gather, **({} if stamps is None else {"STAMPS": stamps}))
    return call, progs


def _stream_calls(xs: list[dict], kv_format: str, num_buf: int, per_sm: int, gather: int = 0) -> list:
    """Calls of ``kernel_hopper_tok._kv_stream_kernel`` over the input sets ``xs`` (:func:`stream_launch`)."""
    return [stream_launch(x, kv_format, num_buf, per_sm, gather)[0] for x in xs]


def stream_ceiling(args, result: dict, out: Path) -> None:
    """What a kernel that only streams the KV tiles reaches (page size 64 by TMA, page size 1 by the row gather;
    H = 16's grid), in the same run."""
    batches = args.hopper_batches or args.vs_batches_h16
    rows = []
    for (kv_format, num_buf, per_sm), page_size, gather in (
            [(c, 64, 0) for c in STREAM_CONFIGS] + [(c, 1, 1) for c in STREAM_GATHER_CONFIGS]):
        target = bench.MlaDecodeTarget(heads=16, tokens=args.tokens, page_size=page_size, kv_format=kv_format)
        for b in batches:
            try:
                ms = graph_time_ms(_stream_calls(target.inputs(b), kv_format, num_buf, per_sm, gather))
            except Exception as exc:  # noqa: BLE001 - recorded, not fatal
                print(f"  stream {kv_format} {num_buf}x{per_sm} B{b}: {type(exc).__name__}: {str(exc)[:200]}",
                      flush=True)
                ms = float("inf")
            tbs = target.bytes_moved(b) / (ms * 1e-3) / 1e12
            rows.append(dict(kv_format=kv_format, page_size=page_size, gather=gather, num_buf=num_buf,
                             programs_per_sm=per_sm, batch=b, ms=ms, tbs=tbs))
            print(f"stream-only {kv_format} page size {page_size} {'gather' if gather else 'TMA'} NUM_BUF={num_buf} "
                  f"PROGRAMS_PER_SM={per_sm} B={b}: {ms:.4f} ms ({tbs:.2f} TB/s)", flush=True)
            target.release()
        result["stream_ceiling"] = rows
        out.write_text(json.dumps(result, indent=1, default=str))


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sizes, formats = comma_list(_size), comma_list(_one_of(FORMATS))
    ap.add_argument("--formats", type=formats, default="fp8,fp8_ds_mla")
    ap.add_argument("--page-sizes", type=sizes, default="1,64")
    ap.add_argument("--batches", type=sizes, default="1,8,32,60,90,128")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--configs", type=_configs_arg, default="space")
    ap.add_argument("--configs-file", default=None, help="read --configs from this file")
    ap.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1))
    ap.add_argument("--check", action="store_true", help="correctness against the reference first")
    ap.add_argument("--check-heads", type=sizes, default="16,32,64,128")
    ap.add_argument("--check-only", action="store_true", help="correctness only: no timing")
    ap.add_argument("--out", default=None, help="JSON path (default benchmarks/results/mla_decode_<time>.json)")
    ap.add_argument("--tag", default="")
    ap.add_argument("--top-after-first", type=int, default=0,
                    help="time only the N best configs of the first format/page size on the others (0: all)")
    ap.add_argument("--vs-flashmla", action="store_true",
                    help="side by side with FlashMLA (page size 64, bf16 and fp8, H 16 and 128) instead of the sweep")
    ap.add_argument("--hopper-variants", action="store_true",
                    help="the Hopper kernels' configs (bf16, page size 64): correctness, then times next to FlashMLA")
    ap.add_argument("--hopper-phases", choices=["all", "bf16", "fp8", "fp8_ds_mla"], default="all",
                    help="with --hopper-variants: which kernels (default all)")
    ap.add_argument("--hopper-heads", type=comma_list(_one_of(HOPPER_HEADS, _size)), default="16,128",
                    help="with --hopper-variants: which H (16, 128)")
    ap.add_argument("--hopper-kinds", type=comma_list(_one_of(HOPPER_KINDS)), default="",
                    help="with --hopper-variants: only these kernels (comma list, e.g. 'tokens-on-M fp8')")
    ap.add_argument("--hopper-variant-filter", default="",
                    help="with --hopper-variants: only variants whose dict's text contains one of these "
                         "'|'-separated parts")
    ap.add_argument("--hopper-no-portable", action="store_true",
                    help="with --hopper-variants: do not time the portable kernel's reference configs")
    ap.add_argument("--hopper-batches", type=sizes, default="",
                    help="with --hopper-variants: H = 16 batches (comma list)")
    ap.add_argument("--hopper-page-size", type=int, default=64,
                    help="with --hopper-variants: the timed cache's page size (FlashMLA is timed at 64 only; the "
                         "correctness check runs its own page sizes)")
    ap.add_argument("--hopper-overlay", type=comma_list(_int_setting), default="",
                    help="with --hopper-variants: keys set on every selected variant, e.g. 'GATHER=1' (page size 1)")
    ap.add_argument("--stream-ceiling", action="store_true",
                    help="with --hopper-variants: also time a kernel that only streams the KV tiles (TMA at page size "
                         "64, the row gather at 1; no math)")
    ap.add_argument("--vs-formats", type=formats, default="bf16,fp8")
    ap.add_argument("--vs-batches-h16", type=sizes, default="1,8,32,64,128")
    ap.add_argument("--vs-batches-h128", type=sizes, default="1,8,32,64", help="an empty list leaves H = 128 out")
    ap.add_argument("--vs-plan-first", action="store_true",
                    help="with --vs-plan: time the call given a step's plan before the one as shipped, so each batch "
                         "bucket is tuned with a plan (a server whose warm-up passes one)")
    ap.add_argument("--vs-plan", action="store_true",
                    help="with --vs-flashmla: also time and check the public call given a decode step's plan "
                         "(mla_decode(..., plan=MLADecodePlan()), made per input set before the graph)")
    ap.add_argument("--vs-e4m3", action="store_true",
                    help="with --vs-flashmla: also time and check the public call with query_precision='e4m3' on "
                         "the fp8 cache (from the bf16 query and from one given in e4m3), and with "
                         "p_precision='e4m3' as well (FlashMLA's fp8 accuracy class), in columns of their own "
                         "(with --vs-plan, the first and the last given a step's plan too)")
    ap.add_argument("--vs-ragged", action="store_true",
                    help="with --vs-flashmla: also time FlashMLA and the public call on ragged batches (lengths "
                         "uniform in 1 .. 2 * --tokens - 1, fresh each run), after the uniform table")
    ap.add_argument("--ragged-seed", type=int, default=None,
                    help="with --vs-ragged: the lengths' seed (default: from the clock, recorded in the JSON)")
    ap.add_argument("--vs-variant-filter", default="",
                    help="with --vs-flashmla: only the Hopper variants whose dict's text contains one of these "
                         "'|'-separated parts (--configs none: no portable config)")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    configs = args.configs
    if args.configs_file:
        try:
            configs = parse_configs(Path(args.configs_file).read_text().strip())
        except (OSError, ConfigError) as exc:
            ap.error(f"argument --configs-file {args.configs_file!r}: {exc}")
    if not torch.cuda.is_available():
        print("bench_mla_decode: needs a CUDA GPU", file=sys.stderr)
        return 2
    formats, page_sizes, sizes = args.formats, args.page_sizes, args.batches
    if args.check_only:
        args.check = True
        formats, page_sizes = [], []
    if args.vs_flashmla or args.hopper_variants:
        formats, page_sizes, args.check = [], [], False
    t0 = time.time()
    jobs = [(f, p, args.heads, c, False) for f in formats for p in page_sizes for c in configs]
    if args.vs_flashmla:
        jobs += [(f, 64, 16, c, False) for f in args.vs_formats for c in configs]
    if args.check:
        heads_list = args.check_heads
        jobs += [(f, 1, 16, c, False) for f in ("fp8", "fp8_ds_mla") for c in configs]
        # H is an int argument: 16, 32, 64 and 128 share one binary (all divisible by 16).
        jobs += [(f, p, 16, space.default_for(f), True) for f in ("fp8", "bf16", "fp8_ds_mla") for p in (1, 16, 64)]
    seen, unique = set(), []
    for f, p, h, c, lse in jobs:
        k = (f, p, h, config_label(c), lse)
        if k not in seen:
            seen.add(k)
            unique.append((f, p, h, c, lse))
    errors = precompile(unique, args.workers)
    print(f"compiled {len(unique)} variants in {time.time() - t0:.0f} s; {len(errors)} failed", flush=True)
    for e in errors:
        print("  compile error:", e, flush=True)
    result: dict = dict(
        gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
        python=platform.python_version(), commit=git_commit(), tag=args.tag,
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        command=" ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), heads=args.heads, tokens=args.tokens,
        compile_errors=errors)
    copy_tbs = copy_bandwidth() if formats or args.vs_flashmla or args.hopper_variants else float("nan")
    result["copy_tbs"] = copy_tbs
    print(f"device-to-device copy: {copy_tbs:.2f} TB/s (read + write)", flush=True)
    rows, summaries = [], {}
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / (
        "mla_decode_" + datetime.datetime.now().strftime("%Y%m%d_%H%M%S") + ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    all_configs = list(configs)
    combos = [(f, p) for f in formats for p in page_sizes]
    for n_combo, (kv_format, page_size) in enumerate(combos):
        if n_combo == 1 and args.top_after_first and summaries:
            first = next(iter(summaries.values()))
            ranked = sorted(first["total_ms"], key=first["total_ms"].get)[:args.top_after_first]
            configs = [c for c in configs if config_label(c) in ranked]
            result["top_after_first"] = ranked
        target = bench.MlaDecodeTarget(heads=args.heads, tokens=args.tokens, page_size=page_size,
                                       kv_format=kv_format)
        times: dict[str, dict[int, float]] = {}
        for b in sizes:
            for config in configs:
                label = config_label(config)
                try:
                    ms = graph_time_ms(target.make(b, config))
                except Exception as exc:  # noqa: BLE001 - a failing config is recorded, not fatal
                    print(f"  {kv_format} ps{page_size} B{b} {label}: {type(exc).__name__}: {exc}"[:300])
                    ms = float("inf")
                tbs = target.bytes_moved(b) / (ms * 1e-3) / 1e12
                times.setdefault(label, {})[b] = ms
                rows.append(dict(kv_format=kv_format, page_size=page_size, batch=b, config=label, ms=ms,
                                 tbs=tbs, pct_copy=100 * tbs / copy_tbs))
            target.release()
            torch.cuda.empty_cache()
        good = {c: t for c, t in times.items() if all(math.isfinite(v) for v in t.values())}
        if good:
            summaries[f"{kv_format}/ps{page_size}"] = summarize(good, sizes)
            best = summaries[f"{kv_format}/ps{page_size}"]["winners"]
            print(f"{kv_format} ps{page_size}: " + " ".join(f"B{b}={ms:.4f}" for b, (_, ms) in best.items())
                  + f" ({time.time() - t0:.0f} s)", flush=True)
        result["rows"] = rows
        result["summaries"] = summaries
        out.write_text(json.dumps(result, indent=1, default=str))   # after each combination
    if args.hopper_variants:
        configs = []
        if args.stream_ceiling:
            stream_ceiling(args, result, out)
        hopper_variants(args, result, out)
        print(f"wrote {out} ({time.time() - t0:.0f} s)")
        return 0
    if args.vs_flashmla:
        vs_flashmla(args, configs, result, out)
        print(f"wrote {out} ({time.time() - t0:.0f} s)")
        return 0
    # Correctness last: a kernel fault ends the process, and the timings are on disk by then.
    if args.check:
        result["check"] = check(all_configs, heads_list)
        out.write_text(json.dumps(result, indent=1, default=str))
        worst = max((r["rel_err"] for r in result["check"] if math.isfinite(r["rel_err"])), default=float("nan"))
        print(f"check: {len(result['check'])} cases, worst rel err {worst:.2e}", flush=True)
        for r in result["check"]:
            if "error" in r:
                print("  could not run:", r["kv_format"], r["config"], r["error"][:120], flush=True)
            elif not r["rel_err"] <= 1e-2:
                print("  FAIL", r, flush=True)
    # The table last: it is what a reader (and a remote run's output tail) sees.
    print(f"\n{'format':<11}{'ps':>3}{'B':>5}  {'best config':<58}{'ms':>8}{'TB/s':>7}{'%copy':>7}")
    for key, s in summaries.items():
        kv_format, ps = key.split("/ps")
        for b, (label, ms) in s["winners"].items():
            tbs = bench.Problem(b, args.heads, args.tokens, int(ps), kv_format).bytes_moved() / (ms * 1e-3) / 1e12
            print(f"{kv_format:<11}{ps:>3}{b:>5}  {label:<58}{ms:8.4f}{tbs:7.2f}{100 * tbs / copy_tbs:7.1f}")
        print(f"  best single config {s['best_single']}: "
              + " ".join(f"B{b}={ms:.4f}" for b, ms in s["best_single_ms"].items())
              + f"; per-bucket tuning gains {100 * (s['gain_total'] - 1):.1f}% in total")
    print(f"wrote {out} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
