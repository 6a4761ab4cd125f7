"""``graphtune demo``: the whole story on one screen.

With a GPU: a decode loop shaped like an inference server's CUDA-graph runner (capture sizes
1, 2, 4, 8, 12, 16, 24, 32, ..., 128, two eager warm-up passes per size, largest first, one shared graph
memory pool, runtime batches padded up to the next captured size) running the MLA decode kernel and the
fused add + RMSNorm kernel. Side by side: stock ``triton.autotune`` without full warm-up coverage (the capture
fails; graphtune's diagnosis names the kernel and the size), and graphtune (every size captured, zero
benchmarks inside capture, per-bucket configs, replay equal to eager). Writes demo.json and demo.png.

Without a GPU: what can run, labelled as such: the resource inspector on the MLA kernel's config space for
sm_90 and sm_120, the throughput model's worked example, and the tuning + capture-policy flow through the
Triton interpreter at tiny sizes (untimed: interpreter wall clock is not GPU time).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ._outputs import report_json
from .keys import ENGINE_CAPTURE_SIZES

CAPTURE_SIZES = [s for s in ENGINE_CAPTURE_SIZES if s <= 128]   # the demo stops at 128
RUNTIME_BATCHES = [3, 5, 37, 100, 127]


def _console():
    import shutil
    from rich.console import Console
    return Console(width=max(140, shutil.get_terminal_size((140, 40)).columns))


# ---------------------------------------------------------------------------------------------- stock

_STOCK_SCRIPT = r"""
import sys, torch, triton, triton.language as tl
import graphtune

@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (512, 2048) for w in (4, 8)],
                 key=["B"])
@triton.jit
def engine_silu_mul_kernel(x_ptr, out_ptr, B, D, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, D, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < D
        g = tl.load(x_ptr + row * 2 * D + offs, mask=m).to(tl.float32)
        u = tl.load(x_ptr + row * 2 * D + D + offs, mask=m).to(tl.float32)
        tl.store(out_ptr + row * D + offs, (g / (1 + tl.exp(-g)) * u).to(out_ptr.dtype.element_ty), mask=m)

mode = sys.argv[1]
if mode == "graphtune":        # the engine's kernel is untouched; graphtune is switched on from outside
    graphtune.patch_triton()
    graphtune.set_policy("raise")

D = 18432
def step(B):
    x = torch.randn(B, 2 * D, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(B, D, device="cuda", dtype=torch.bfloat16)
    engine_silu_mul_kernel[(B,)](x, out, B, D)

for B in (1, 2, 4, 8):          # warm-up covered only the small sizes
    step(B)
torch.cuda.synchronize()

g = torch.cuda.CUDAGraph()
x = torch.randn(16, 2 * D, device="cuda", dtype=torch.bfloat16)
out = torch.empty(16, D, device="cuda", dtype=torch.bfloat16)
try:
    with torch.cuda.graph(g):
        engine_silu_mul_kernel[(16,)](x, out, 16, D)
    print("RESULT capture ok")
except Exception as exc:
    print("RESULT", type(exc).__name__ + ":", " ".join(str(exc).split())[:600])
"""


def _stock_side_by_side() -> dict[str, Any]:
    """Each in its own process: a failed capture leaves torch's CUDA RNG state unusable in that process."""
    import tempfile
    out: dict[str, Any] = {}
    with tempfile.NamedTemporaryFile("w", suffix="_graphtune_demo_stock.py", delete=False) as f:
        f.write(_STOCK_SCRIPT)      # @triton.jit needs its source in a file
    for mode in ("stock", "graphtune"):
        proc = subprocess.run([sys.executable, f.name, mode], capture_output=True, text=True,
                              timeout=600, env={**os.environ, "PYTHONWARNINGS": "ignore", "GRAPHTUNE_NO_DB": "1"})
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
        out[mode] = lines[-1][len("RESULT "):] if lines else f"(no result; rc={proc.returncode}) {proc.stderr[-400:]}"
    return out


# ------------------------------------------------------------------------------------------------- GPU


def run_gpu(out_dir: Path, *, tokens: int = 2048, heads: int = 16, page_size: int = 16) -> dict[str, Any]:
    # page size 16, fp8: served by a kernel tuned per bucket on every GPU (the demo shows per-bucket tuning): on
    # sm_90 the Hopper row-gather kernel, elsewhere the portable one (interface.serving_kernel says which).
    import torch

    import graphtune
    from graphtune.kernels.mla_decode import mla_decode
    from graphtune.kernels.mla_decode.interface import serving_kernel
    from graphtune.kernels.rmsnorm import fused_add_rmsnorm, rmsnorm_kernel

    console = _console()
    console.rule("[bold]1. stock triton.autotune vs graphtune, warm-up covered batch 1-8, capture at 16")
    side = _stock_side_by_side()
    console.print(f"[red]stock triton.autotune:[/red] {side['stock']}")
    console.print(f"[green]graphtune.patch_triton() + policy='raise':[/green] {side['graphtune']}")

    console.rule("[bold]2. graphtune: server-style CUDA-graph runner")
    dev = torch.device("cuda")
    hidden = 7168
    max_b = max(CAPTURE_SIZES)
    pages_per_req = tokens // page_size
    num_pages = max_b * pages_per_req + 7
    gen = torch.Generator(device="cpu").manual_seed(int(time.time()))
    kv = (torch.randn(num_pages, page_size, 576, generator=gen) * 0.5).to(dev).to(torch.float8_e4m3fn)
    perm = torch.randperm(num_pages, generator=gen)[: max_b * pages_per_req].view(max_b, pages_per_req)
    page_table = perm.to(torch.int32).to(dev)
    seq_lens_all = torch.randint(tokens // 2, tokens + 1, (max_b,), generator=gen).to(torch.int32).to(dev)
    weight = torch.randn(hidden, device=dev, dtype=torch.bfloat16)
    w_q = torch.randn(hidden, heads * 576, device=dev, dtype=torch.bfloat16) / hidden ** 0.5
    sm_scale = 576 ** -0.5

    # static buffers, as a graph runner keeps them
    x_buf = torch.randn(max_b, hidden, device=dev, dtype=torch.bfloat16)
    res_buf = torch.randn(max_b, hidden, device=dev, dtype=torch.bfloat16)
    out_buf = torch.empty(max_b, heads, 512, device=dev, dtype=torch.bfloat16)
    seq_buf = seq_lens_all.clone()

    def step(b: int) -> torch.Tensor:
        h, _ = fused_add_rmsnorm(x_buf[:b], res_buf[:b], weight)
        q = (h @ w_q).view(b, heads, 576)
        return mla_decode(q, kv, page_table[:b], seq_buf[:b], sm_scale, out=out_buf[:b])

    mla_k = serving_kernel(torch.empty(max_b, heads, 576, device=dev, dtype=torch.bfloat16), kv)
    # (None: a Hopper fixed config edited from its shipped value runs pinned, with nothing to tune)
    kernels = {**({mla_k.name: mla_k} if mla_k is not None else {}), "fused_add_rmsnorm": rmsnorm_kernel}
    t0 = time.perf_counter()
    for b in sorted(CAPTURE_SIZES, reverse=True):      # largest first, two eager passes per size
        step(b)
        step(b)
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    bench_before = {n: k.bench_calls for n, k in kernels.items()}

    pool = torch.cuda.graph_pool_handle()
    graphs: dict[int, Any] = {}
    outs: dict[int, torch.Tensor] = {}
    stream = torch.cuda.Stream()
    t0 = time.perf_counter()
    for b in sorted(CAPTURE_SIZES, reverse=True):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool, stream=stream):
            outs[b] = step(b)
        graphs[b] = g
    torch.cuda.synchronize()
    capture_s = time.perf_counter() - t0
    bench_in_capture = {n: k.bench_calls - bench_before[n] for n, k in kernels.items()}

    rows = []
    worst = 0.0
    for b in CAPTURE_SIZES:
        x_buf.copy_(torch.randn_like(x_buf))
        res_buf.copy_(torch.randn_like(res_buf))
        seq_buf.copy_(torch.randint(1, tokens + 1, (max_b,), device=dev, dtype=torch.int32))
        out_buf.fill_(float("nan"))       # an element the replay does not write shows up as NaN
        graphs[b].replay()
        replayed = outs[b].float().clone()
        eager = step(b).float()
        err = ((replayed - eager).norm() / eager.norm().clamp_min(1e-30)).item()
        worst = max(worst, err)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            graphs[b].replay()
        end.record()
        torch.cuda.synchronize()
        rows.append({"batch": b, "replay_ms": start.elapsed_time(end) / 20, "replay_vs_eager_rel_err": err,
                     "mla_config": _config_of(mla_k, b) if mla_k is not None else "pinned (edited fixed config)",
                     "rmsnorm_config": _config_of(rmsnorm_kernel, b)})

    padded = []
    for b in RUNTIME_BATCHES:
        cap = min(s for s in CAPTURE_SIZES if s >= b)
        graphs[cap].replay()
        padded.append({"runtime_batch": b, "captured_size": cap})
    torch.cuda.synchronize()

    cov = graphtune.coverage(list(kernels))
    report = {
        "mode": "gpu", "capture_sizes": CAPTURE_SIZES, "tokens_per_request": tokens, "heads": heads,
        "page_size": page_size, "stock_vs_graphtune": side, "warmup_s": warm_s, "capture_s": capture_s,
        "benchmarks_inside_capture": bench_in_capture, "max_replay_vs_eager_rel_err": worst, "rows": rows,
        "padded_runtime_batches": padded, "coverage": cov.to_dict(),
    }
    _print_gpu_table(rows, report)
    _save(out_dir, report, rows)
    return report


def _config_of(kernel, batch: int) -> str:
    """The config the batch's bucket launches (the key's first element is the bucketed batch)."""
    bucket = kernel.buckets["B"](batch) if "B" in kernel.buckets else batch
    for key, info in kernel.coverage().tuned.items():
        if key and key[0] == bucket:
            return f"{info['config']} ({info['source']})"
    return "-"


def _short_labels(labels: list[str]) -> list[str]:
    """Keep only the parameters whose values differ between the labels (the rest is common to all)."""
    from .configs import shared_and_varying
    parsed = [dict(p.split("=", 1) for p in lab.split(",") if "=" in p) for lab in labels]
    _, varying = shared_and_varying(parsed)
    return [",".join(f"{k}={d.get(k)}" for k in varying) or lab for d, lab in zip(parsed, labels)]


def _print_gpu_table(rows, report) -> None:
    from rich.table import Table
    t = Table(title="graphtune: every captured size (per-bucket configs)")
    for col in ("batch", "replay ms", "replay vs eager", "MLA decode config", "RMSNorm config"):
        t.add_column(col)
    for r in rows:
        t.add_row(str(r["batch"]), f"{r['replay_ms']:.4f}", f"{r['replay_vs_eager_rel_err']:.1e}",
                  r["mla_config"], r["rmsnorm_config"])
    c = _console()
    c.print(t)
    c.print(f"warm-up (tuning) {report['warmup_s']:.1f} s; capture of {len(rows)} sizes {report['capture_s']:.2f} s; "
            f"benchmarks inside capture: {report['benchmarks_inside_capture']}; worst replay-vs-eager relative "
            f"error {report['max_replay_vs_eager_rel_err']:.1e}")


def _save(out_dir: Path, report: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "demo.json").write_text(report_json(report, indent=2, default=str))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _console().print("matplotlib not installed: demo.png skipped (pip install graphtune[plot])")
        return
    fig, ax = plt.subplots(figsize=(9, 4.5))
    xs = [r["batch"] for r in rows]
    ys = [r["replay_ms"] for r in rows]
    configs = _short_labels([r["mla_config"].split(" (")[0] for r in rows])
    palette = {c: i for i, c in enumerate(dict.fromkeys(configs))}
    cmap = plt.get_cmap("tab10")
    for c, i in palette.items():
        sel = [(x, y) for x, y, cc in zip(xs, ys, configs) if cc == c]
        ax.scatter([s[0] for s in sel], [s[1] for s in sel], color=cmap(i % 10), label=c[:60], zorder=3)
    ax.plot(xs, ys, color="grey", lw=0.8, zorder=2)
    ax.set_xlabel("captured batch size")
    ax.set_ylabel("graph replay ms per decode step")
    ax.set_title("graphtune demo: per-bucket MLA decode configs (colour) under CUDA graph replay")
    ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    fig.savefig(out_dir / "demo.png", dpi=120)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------- CPU


def run_cpu(out_dir: Path, *, full_space: bool = False) -> dict[str, Any]:
    console = _console()
    console.print("[yellow]No CUDA GPU: running what can run without one. Timings below are not GPU times.[/yellow]")
    report: dict[str, Any] = {"mode": "cpu"}

    console.rule("[bold]1. resource inspector: the MLA decode config space, sm_90 vs sm_120 (no GPU needed)")
    report["inspect"] = _cpu_inspect(console, full_space)

    console.rule("[bold]2. throughput model: what a faster attention kernel buys end to end")
    from .model import ThroughputModel
    model = ThroughputModel(fixed_ms=18.0, per_request_ms=1.05, components={"attention": 0.79})
    rows = []
    for factor in (1.25, 1.8):
        for c in (60, 90):
            s = model.scenario("attention", factor, c)
            rows.append(s.to_dict() if hasattr(s, "to_dict") else dict(s.__dict__))
            console.print(f"attention {factor}x faster at C={c}: step {model.step_ms(c):.2f} -> "
                          f"{s.step_ms:.2f} ms, throughput {s.gain_pct:+.1f}%")
    report["model"] = rows

    console.rule("[bold]3. tuning and capture policy through the Triton interpreter (tiny sizes, untimed)")
    report["interpreter_flow"] = _cpu_flow(console)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "demo.json").write_text(report_json(report, indent=2, default=str))
    console.print(f"report: {out_dir / 'demo.json'}")
    return report


def _cpu_inspect(console, full_space: bool) -> dict[str, Any]:
    from rich.table import Table

    from .kernels.mla_decode import space
    from .resources import inspect
    from .kernels.mla_decode.interface import _tuned_kernel
    configs = list(space.CONFIGS)
    if not full_space:
        # a spread of the space that compiles in well under a minute on 2 cores; --full for all of it
        configs = configs[:: max(1, len(configs) // 6)][:6]
    from .kernels.mla_decode.interface import inspect_signature
    signature, constexprs = inspect_signature(heads=16, page_size=64, kv_format="fp8")
    out: dict[str, Any] = {}
    from .configs import config_to_dict, shared_and_varying
    shared, varying = shared_and_varying(config_to_dict(c) for c in configs)
    title = f"MLA decode split kernel, {len(configs)} of {len(space.CONFIGS)} configs"
    if shared:   # the same in every row: said once, so the config column shows only what differs
        title += "\nevery config: " + ", ".join(f"{k}={v}" for k, v in shared.items())
    t = Table(title=title)
    t.add_column("config", overflow="fold")
    for col in ("target", "regs", "spill B", "smem B", "occupancy"):
        t.add_column(col, no_wrap=True)
    t.add_column("fits", overflow="fold")
    for target in ("sm_90", "sm_120"):
        rows = inspect(_tuned_kernel(), target=target, signature=signature, constexprs=constexprs, configs=configs)
        out[target] = [r.to_dict() for r in rows]
        for r in rows:
            label = ",".join(f"{k}={r.config.get(k)}" for k in varying) or r.label
            t.add_row(label, target, str(r.registers), str(r.spill_bytes), str(r.shared_bytes),
                      f"{r.occupancy_pct:.0f}%", "yes" if r.fits else f"[red]no: {r.reason}[/red]")
    console.print(t)
    return out


def _cpu_flow(console) -> dict[str, Any]:
    import warnings

    import torch

    import graphtune
    from . import capture
    from .kernels.rmsnorm import fused_add_rmsnorm, fused_add_rmsnorm_reference, rmsnorm_kernel
    sizes = [1, 2, 4, 8]
    d = 64
    w = torch.randn(d)

    def step(b):
        x, r = torch.randn(b, d), torch.randn(b, d)
        out, _ = fused_add_rmsnorm(x, r, w)
        ref, _ = fused_add_rmsnorm_reference(x, r, w)
        return ((out - ref).norm() / ref.norm()).item()

    t0 = time.perf_counter()
    graphtune.warmup(step, sizes, lambda b: (b,))
    tune_s = time.perf_counter() - t0
    tuned = rmsnorm_kernel.tune_count
    capture.simulate_capture(True)       # simulate capture on CPU (no CUDA graphs here)
    errs = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for b in (1, 3, 8, 7):
                errs.append(step(b))
            # a size beyond every warmed bucket still maps to the largest bucket: no miss
        graphtune.set_policy("raise")
        try:
            step(12)          # bucket 12 was not warmed up
            raised = None
        except graphtune.UntunedError as exc:
            raised = str(exc)
    finally:
        capture.simulate_capture(None)
        graphtune.set_policy(None)
    console.print(f"warm-up tuned {tuned} buckets in {tune_s:.1f} s of interpreter time (not GPU time); "
                  f"simulated-capture launches: {len(errs)}, worst relative error vs fp32 reference "
                  f"{max(errs):.1e}, warnings {len(caught)}")
    console.print(f"with policy='raise', a capture-time miss (batch 12, not warmed up) says:\n  {raised}")
    return {"sizes": sizes, "buckets_tuned": tuned, "interpreter_tuning_s": tune_s,
            "worst_rel_err": max(errs), "untuned_error": raised, "timing": "interpreter wall clock, not GPU"}


def main(out_dir: str | Path = "graphtune-demo", *, force_cpu: bool = False, full_space: bool = False) -> int:
    from . import settings
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # the demo tunes into its own database, never the user's: a GRAPHTUNE_DB the user set is overridden too, for
    # the demo only (the CPU demo's fresh process below sets its own the same way)
    with settings.override(GRAPHTUNE_DB=str((out / "demo-tuning.sqlite").resolve())):
        return _run(out, force_cpu=force_cpu, full_space=full_space)


def _run(out: Path, *, force_cpu: bool, full_space: bool) -> int:
    """The GPU demo, or the CPU one (in a fresh process with the interpreter switched on, unless it already is)."""
    from . import settings
    try:
        import torch
        gpu = torch.cuda.is_available() and not force_cpu
    except ImportError:
        gpu = False
    if not gpu:
        if not settings.interpret():
            # the interpreter switch must be set before triton.language is imported (triton.jit reads it at
            # decoration), and `import graphtune` already imported it: run the CPU demo in a fresh process
            cmd = [sys.executable, "-m", "graphtune", "demo", "--cpu", "--out", str(out)] + (["--full"] if full_space else [])
            return subprocess.run(cmd, env={**os.environ, "TRITON_INTERPRET": "1"}).returncode
        run_cpu(out, full_space=full_space)
    else:
        run_gpu(out)
    return 0
