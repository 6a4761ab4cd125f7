"""Kernels, injected timers and the per-rank scenarios of tests/cpu/test_distributed.py.

Run by the test as one process per rank: ``python _dist_workers.py OUTDIR`` with torchrun's variables
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) set; each rank writes OUTDIR/rank<r>.json. Also imported by
the test process itself (single-process tuning, the CLI target). The Triton interpreter is switched on
before any kernel is defined: triton.jit reads it at decoration.
"""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import graphtune  # noqa: E402
from graphtune import Buckets  # noqa: E402
from graphtune.configs import config_label, config_to_dict  # noqa: E402


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, B, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * scale, mask=mask)


@triton.jit
def _scale_kernel_rebuilt(x_ptr, out_ptr, n, B, scale, BLOCK: tl.constexpr):
    # another build of _scale_kernel (the same result, another body): what a rank of a mixed deployment runs
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, scale * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in (16, 32, 64) for w in (1, 2)]
LABELS = [config_label(c) for c in CONFIGS]
BUCKETS = Buckets.explicit([1, 2, 4, 8, 16])
N = 37   # elements per launch: awkward on purpose, every BLOCK masks a tail


def _index_of(full: dict[str, Any]) -> int:
    for i, c in enumerate(CONFIGS):
        if c.kwargs["BLOCK"] == full["BLOCK"] and c.num_warps == full["num_warps"]:
            return i
    raise AssertionError(f"no config matches {full}")


def deterministic_ms(bucket: int, index: int) -> float:
    """The same on every rank: distinct per config, and the winner moves with the bucket."""
    return 1.0 + ((index * 7 + bucket) % 6) * 0.25 + index * 0.01


def rank_ms(rank: int) -> Callable[[int, int], float]:
    """Rank-specific times: rank r's own fastest is config (2r + b) % 6 (b = bucket position), a config that
    is second everywhere, (5 + b) % 6, wins the sum over three ranks, and rank 0's own fastest wins broadcast."""
    def table(bucket: int, index: int) -> float:
        b = BUCKETS.sizes.index(bucket)
        if index == (2 * rank + b) % 6:
            return 1.0
        if index == (5 + b) % 6:
            return 1.2
        return 3.0 + 0.1 * index
    return table


def local_best(rank: int, bucket: int) -> int:
    return (2 * rank + BUCKETS.sizes.index(bucket)) % 6


def merged_best(bucket: int) -> int:
    return (5 + BUCKETS.sizes.index(bucket)) % 6


class Timer:
    """Injected do_bench: runs the launch (through the interpreter) and returns the table's time for the
    config that just ran, which the kernel's pre_hook reported. Records what it timed."""

    def __init__(self) -> None:
        self.table: Callable[[int, int], float] = deterministic_ms
        self.current: dict[str, Any] | None = None
        self.timed: list[tuple[int, int]] = []

    def remember(self, full: dict[str, Any]) -> None:
        self.current = full

    def __call__(self, fn: Callable[[], Any]) -> float:
        fn()
        full = self.current
        assert full is not None, "the pre_hook did not run"
        bucket, index = BUCKETS(full["B"]), _index_of(full)
        self.timed.append((bucket, index))
        return self.table(bucket, index)


TIMER = Timer()


def make_kernel(name: str, prune: bool = False) -> graphtune.GraphtuneKernel:
    def drop_wide_blocks_for_small_batches(configs, nargs, **kwargs):
        return [c for c in configs if not (nargs["B"] <= 2 and c.kwargs["BLOCK"] == 64)]
    return graphtune.autotune(CONFIGS, key=["B"], name=name, buckets={"B": BUCKETS}, do_bench=TIMER,
                              pre_hook=TIMER.remember,
                              prune_configs_by={"early_config_prune": drop_wide_blocks_for_small_batches}
                              if prune else None)(_scale_kernel)


def launch(kernel: graphtune.GraphtuneKernel, batch: int) -> None:
    x = torch.randn(N)
    out = torch.full((N,), float("nan"))
    kernel[lambda meta: (triton.cdiv(N, meta["BLOCK"]),)](x, out, N, batch, 2.0)
    torch.testing.assert_close(out, x * 2.0)


def key_for(kernel: graphtune.GraphtuneKernel, batch: int) -> tuple:
    return kernel.key_of((torch.empty(N), torch.empty(N), N, batch, 2.0), {})


def chosen_label(kernel: graphtune.GraphtuneKernel, batch: int) -> str:
    return kernel._cache[key_for(kernel, batch)].label


class ScaleTarget:
    """A TuneTarget (graphtune.sharded) for sharded tuning of the scale kernel."""

    default_sizes = (1, 3, 4, 5, 16, 11)

    def __init__(self, name: str = "gt_sharded") -> None:
        self.kernel = make_kernel(name, prune=True)

    def make_args(self, size: int):
        x = torch.randn(N)
        out = torch.empty(N)
        return (x, out, N, size, 2.0), {}, (lambda meta: (triton.cdiv(N, meta["BLOCK"]),))


CLI_TARGET = ScaleTarget("gt_cli")
MODE_SIZES = (1, 3, 5, 16)   # buckets 1, 4, 8, 16


# ------------------------------------------------------------------------------------------ the scenarios


def _modes(rank: int) -> dict[str, Any]:
    from graphtune import agreement
    out: dict[str, Any] = {}
    TIMER.table = rank_ms(rank)
    for mode in ("merge", "broadcast", "off"):
        agreement.set_process_group(mode=mode)
        kernel = make_kernel(f"gt_{mode}")
        for size in MODE_SIZES:
            launch(kernel, size)
        out[mode] = {str(BUCKETS(s)): chosen_label(kernel, s) for s in MODE_SIZES}
        out[f"{mode}_current_mode"] = agreement.current_mode()
    agreement.set_process_group(mode="merge")
    return out


def _mismatch(rank: int) -> dict[str, Any]:
    kernel = make_kernel("gt_mismatch")
    try:
        launch(kernel, 8 if rank == 2 else 2)
    except graphtune.DistributedError as exc:
        return {"error": str(exc)}
    return {"error": None}


def _stored(rank: int) -> dict[str, Any]:
    """Each rank records its own database entries, then looks them up and agrees."""
    from graphtune import agreement
    from graphtune.tuner import Choice
    out: dict[str, Any] = {}
    kernel = make_kernel("gt_stored")
    all_key = key_for(kernel, 2)       # every rank holds an entry
    partial_key = key_for(kernel, 8)   # only rank 1 does
    medians = [0.5, 0.3, 0.9]

    def row(i: int, ms: float) -> dict[str, Any]:
        return {"config": config_to_dict(CONFIGS[i]), "median_ms": ms, "p20_ms": ms, "p80_ms": ms, "n": 3}
    kernel.install(all_key, CONFIGS[rank + 1], [row(rank + 1, medians[rank])])
    if rank == 1:
        kernel.install(partial_key, CONFIGS[4], [row(4, 0.1)])
    kernel.reset()   # forget memory; each rank's database keeps its entries
    for mode in ("broadcast", "merge"):
        agreement.set_process_group(mode=mode)
        stored = kernel._from_store(all_key)
        agreed = kernel._agreed_stored(all_key, stored)
        out[f"db_{mode}"] = agreed.label if agreed is not None else None
        stored = kernel._from_store(partial_key)
        out[f"db_partial_{mode}_had"] = stored is not None
        agreed = kernel._agreed_stored(partial_key, stored)
        out[f"db_partial_{mode}"] = agreed.label if agreed is not None else None
        # stored medians known (as the tuner passes them in Choice.median_ms): the lowest wins in merge
        mine = Choice(CONFIGS[rank + 1], "database", median_ms=medians[rank])
        agreed = kernel._agreed_stored(all_key, mine)
        out[f"medians_{mode}"] = agreed.label if agreed is not None else None
    agreement.set_process_group(mode="merge")
    return out


def _sharded(rank: int, outdir: Path) -> dict[str, Any]:
    from graphtune import sharded
    TIMER.table = deterministic_ms
    TIMER.timed.clear()
    target = ScaleTarget()
    results = sharded.tune_sharded(target, target.default_sizes, out=outdir / "sharded.json")
    installed = {str(k[0]): chosen_label(target.kernel, k[0]) for k in results}
    return {"labels": {str(k[0]): r.label for k, r in results.items()},
            "medians": {str(k[0]): r.median_ms for k, r in results.items()},
            "installed": installed, "timed": sorted(set(TIMER.timed)), "sizes": {str(k[0]): list(r.sizes)
                                                                               for k, r in results.items()}}


def _search_fails(rank: int) -> dict[str, Any]:
    """Rank 0's search raises (its timer fails); the others' searches run. Every rank must raise for that key now
    (rank 0 its own error, the others a TuningError naming rank 0) and then agree on the next kernel as before:
    the group stays in step (until session 31 rank 0 skipped the key's agreement and every later one paired
    with the wrong collective)."""
    def failing_timer(fn: Callable[[], Any]) -> float:
        if rank == 0:
            raise RuntimeError("the timer failed on this rank")
        return TIMER(fn)
    TIMER.table = deterministic_ms
    broken = graphtune.autotune(CONFIGS, key=["B"], name="gt_search_fails", buckets={"B": BUCKETS},
                                do_bench=failing_timer, pre_hook=TIMER.remember)(_scale_kernel)
    out: dict[str, Any] = {}
    try:
        launch(broken, 4)
        out["first"] = None
    except Exception as exc:  # noqa: BLE001 - reported to the test
        out["first"] = f"{type(exc).__name__}: {exc}"
    healthy = make_kernel("gt_after_failure")
    try:
        launch(healthy, 4)
        out["next"] = chosen_label(healthy, 4)
    except Exception as exc:  # noqa: BLE001 - reported to the test
        out["next"] = f"{type(exc).__name__}: {exc}"
    return out


def _source_mismatch(rank: int) -> dict[str, Any]:
    """Rank 1 runs another build of the kernel (same name, configs and key): every rank raises, naming each rank's
    source hash (until session 31 the ranks agreed and summed medians of different kernels)."""
    TIMER.table = deterministic_ms
    fn = _scale_kernel_rebuilt if rank == 1 else _scale_kernel
    kernel = graphtune.autotune(CONFIGS, key=["B"], name="gt_source", buckets={"B": BUCKETS}, do_bench=TIMER,
                                pre_hook=TIMER.remember)(fn)
    try:
        launch(kernel, 4)
    except graphtune.DistributedError as exc:
        return {"error": str(exc), "source": kernel.identity().source_hash}
    return {"error": None, "source": kernel.identity().source_hash}


def _sharded_fails(rank: int, outdir: Path) -> dict[str, Any]:
    """tune_sharded where rank 1's make_args raises at its second size: rank 1 raises its own error, the others a
    DistributedError naming rank 1's failure now (until session 31 they waited for it until the timeout)."""
    from graphtune import sharded

    class Failing(ScaleTarget):
        def make_args(self, size: int):
            if rank == 1 and size == 3:
                raise RuntimeError("make_args failed on this rank")
            return super().make_args(size)
    TIMER.table = deterministic_ms
    target = Failing("gt_sharded_fails")
    t0 = time.monotonic()
    try:
        sharded.tune_sharded(target, target.default_sizes, out=outdir / f"fails{rank}.json")
        error = None
    except Exception as exc:  # noqa: BLE001 - reported to the test
        error = f"{type(exc).__name__}: {exc}"
    return {"error": error, "waited_s": time.monotonic() - t0}


def _timeout(rank: int, outdir: Path) -> dict[str, Any]:
    """Rank 1 never enters the agreement; the others must give up after GRAPHTUNE_DIST_TIMEOUT_S."""
    os.environ["GRAPHTUNE_DIST_TIMEOUT_S"] = "1.0"
    TIMER.table = rank_ms(rank)
    kernel = make_kernel("gt_timeout")
    if rank == 1:
        return {"error": None, "skipped": True}
    t0 = time.monotonic()
    try:
        launch(kernel, 4)
    except graphtune.DistributedError as exc:
        return {"error": str(exc), "waited_s": time.monotonic() - t0}
    return {"error": None, "waited_s": time.monotonic() - t0}


def main(outdir: Path) -> None:
    import torch.distributed as dist
    from graphtune import agreement
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    result: dict[str, Any] = {"rank": rank}
    try:
        assert agreement.init_from_env()
        assert agreement.current_rank() == rank and dist.get_world_size() == world
        result["default_mode"] = agreement.current_mode()
        result["modes"] = _modes(rank)
        result["mismatch"] = _mismatch(rank)
        result["stored"] = _stored(rank)
        result["sharded"] = _sharded(rank, outdir)
        result["search_fails"] = _search_fails(rank)
        result["sharded_fails"] = _sharded_fails(rank, outdir)
        result["source_mismatch"] = _source_mismatch(rank)
        result["timeout"] = _timeout(rank, outdir)   # last: it leaves a collective in flight
    except BaseException:  # noqa: BLE001 - reported to the test, which prints it
        result["crash"] = traceback.format_exc()
    (outdir / f"rank{rank}.json.tmp").write_text(json.dumps(result))
    os.replace(outdir / f"rank{rank}.json.tmp", outdir / f"rank{rank}.json")
    # Stay until every rank has reported: an early exit would break the others' connections (rank 1 must not
    # turn their timeout into a connection error) and take down the store rank 0 hosts, which the timed-out
    # ranks read to name the missing rank.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all((outdir / f"rank{r}.json").exists() for r in range(world)):
        time.sleep(0.05)
    sys.stdout.flush()
    # a collective is still in flight on the ranks that timed out: skip the process group's teardown
    os._exit(0)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
