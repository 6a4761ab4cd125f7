"""The tuning database at scale: `graphtune db ls`, `db export` and `db import` on a database of N entries (CPU).

Builds a database of ``--entries`` entries (default 200,000: 50 kernels x 4 environments x 1,000 keys,
``--candidates`` (8) candidates each with timings and resources: about 4 KiB an entry) in a temporary directory, then
runs each command as a user would, in its own process (``python -m graphtune ...``), and records

* ``db ls`` (default ``--limit 100``): seconds until the first table row is on stdout, and until the command
  exits; ``db ls --limit 0`` (every entry, streamed to a pipe): seconds to the first row and to the end;
* ``db export``: seconds, and the size of the file;
* ``db import`` of that export into an empty database: seconds;
* the peak resident memory of each process (``os.wait4``'s ``ru_maxrss``), next to that of ``graphtune db
  path`` (the interpreter, torch and graphtune imported, no database work), so that what the command itself
  needs is the difference.

With ``--also N2`` (default 20,000) everything is measured again at N2 entries: memory that does not grow
from N2 to N is memory bounded independently of the database size. ``--src DIR`` runs the commands from
another source tree (e.g. an older graphtune) for comparison; ``--timeout`` bounds each command.

    PYTHONPATH=src python benchmarks/bench_db_scale.py [--entries 200000] [--also 20000] [--candidates 8] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_result  # noqa: E402

from graphtune import db as gdb  # noqa: E402
from graphtune.identity import EnvIdentity, KernelIdentity  # noqa: E402

ENVS = (
    EnvIdentity("NVIDIA H200", "9.0", "3.6.0", "2.11.0+cu130", "13.0"),
    EnvIdentity("NVIDIA H100 80GB HBM3", "9.0", "3.6.0", "2.11.0+cu130", "13.0"),
    EnvIdentity("NVIDIA H200", "9.0", "3.5.1", "2.10.0+cu128", "12.8"),
    EnvIdentity("NVIDIA B200", "10.0", "3.6.0", "2.11.0+cu130", "13.0"),
)
N_KERNELS = 50


def _entries(n: int, seed: int = 0, n_candidates: int = 8):
    """n entries, in batches, deterministic: kernel k, environment e, key (batch, dtype, 576, paged)."""
    rng = random.Random(seed)
    per_kernel_env = max(1, n // (N_KERNELS * len(ENVS)))
    made = 0
    batch = []
    for k in range(N_KERNELS):
        kernel = KernelIdentity(f"_kernel_{k:02d}", f"{rng.getrandbits(64):016x}", f"{rng.getrandbits(64):016x}")
        for env in ENVS:
            for b in range(per_kernel_env):
                if made == n:
                    break
                cands = []
                for c in range(n_candidates):
                    config = {"BLOCK_N": 16 << (c % 4), "BLOCK_H": 16, "num_warps": 4 << (c % 2), "num_stages": 2,
                              "num_ctas": 1}
                    ms = round(0.05 + rng.random() * 0.2, 6)
                    cands.append(gdb.CandidateResult(config, ms, ms * 0.98, ms * 1.03, 30 + c,
                                                     resources={"registers": 128 + 8 * c, "spills": 0,
                                                                "shared_bytes": 16384 * (1 + c % 4)}))
                best = min(cands, key=lambda x: x.median_ms)
                batch.append(gdb.Entry(kernel=kernel, env=env, key=(b + 1, "torch.bfloat16", 576, True),
                                       chosen=best.config, candidates=tuple(cands), tuned_at=1.79e9 + made,
                                       host="node-1", rank=0))
                made += 1
                if len(batch) == 10_000:
                    yield batch
                    batch = []
    if batch:
        yield batch


def build(path: Path, n: int, n_candidates: int = 8) -> float:
    t0 = time.perf_counter()
    db = gdb.TuningDB(path, readonly=False)
    stored = 0
    for batch in _entries(n, n_candidates=n_candidates):
        stored += db.record_all(batch)
    db.close()
    assert stored == n, (stored, n)
    return time.perf_counter() - t0


# Runs one command the way `python -m graphtune` does, and reports, in the file named by GT_BENCH_MEM, when the
# imports were done and how much memory the command itself added: /proc/self/clear_refs "5" resets the peak
# resident size (VmHWM) to the current one, so the peak after it is the command's, not that of importing torch.
_WRAPPER = r"""
import json, os, sys, time
from graphtune.cli import build_parser, main
build_parser()   # imports every command module, as any command does
def status():
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) / 1024
    return out
try:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
except OSError:
    pass
ready = time.time()
before = status()
rc = main(sys.argv[1:])
after = status()
with open(os.environ["GT_BENCH_MEM"], "w") as fh:
    json.dump({"ready": ready, "rss_before_mib": before["VmRSS"], "hwm_after_mib": after["VmHWM"]}, fh)
sys.stdout.flush()
sys.exit(rc)
"""


def run(argv: list[str], env: dict[str, str], timeout: float, first_row: str | None = None) -> dict[str, Any]:
    """Run a graphtune command; seconds to the first stdout line containing ``first_row`` (from the start of
    the process, and from the end of its imports), to the end, CPU seconds, peak RSS of the process and the
    peak growth over its RSS after the imports (MiB). stdout is read as it comes, counted, not kept."""
    import selectors

    mem_file = Path(tempfile.mkstemp(prefix="gt-bench-mem-")[1])
    start = time.time()
    proc = subprocess.Popen([sys.executable, "-c", _WRAPPER, *argv], env={**env, "GT_BENCH_MEM": str(mem_file)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    first = None
    lines = 0
    killed = False
    deadline = start + timeout
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    while True:
        left = deadline - time.time()
        if left <= 0:
            proc.kill()
            killed = True
            break
        if not sel.select(timeout=min(left, 1.0)):
            continue
        line = proc.stdout.readline()
        if not line:
            break
        lines += 1
        if first is None and first_row is not None and first_row in line:
            first = time.time()
    _, status, usage = os.wait4(proc.pid, 0)
    end = time.time()
    err = proc.stderr.read() if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code != 0 and not killed:
        print(f"  graphtune {' '.join(argv)} exited {code}: {err.strip()[-300:]}", file=sys.stderr)
    try:
        mem = json.loads(mem_file.read_text())
    except ValueError:
        mem = {}
    mem_file.unlink(missing_ok=True)
    ready = mem.get("ready")
    out = {"total_s": None if killed else round(end - start, 3), "timed_out": killed,
           "after_imports_s": round(end - ready, 3) if ready and not killed else None,
           "first_row_s": round(first - start, 3) if first else None,
           "first_row_after_imports_s": round(first - ready, 3) if first and ready else None,
           "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
           "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
           "command_peak_growth_mib": (round(mem["hwm_after_mib"] - mem["rss_before_mib"], 1) if mem else None),
           "stdout_lines": lines, "exit_code": None if killed else code}
    return out


def measure(n: int, workdir: Path, env: dict[str, str], timeout: float, n_candidates: int = 8) -> dict[str, Any]:
    path = workdir / f"db-{n}.sqlite"
    build_s = build(path, n, n_candidates)
    export = workdir / f"export-{n}.json"
    target = workdir / f"imported-{n}.sqlite"
    out: dict[str, Any] = {"entries": n, "candidates_per_entry": n_candidates, "build_s": round(build_s, 2), "db_mib": round(path.stat().st_size / 2**20, 1)}
    out["baseline"] = run(["db", "path", "--db", str(path)], env, timeout)
    out["ls"] = run(["db", "ls", "--db", str(path)], env, timeout, first_row="_kernel_")
    out["ls_all"] = run(["db", "ls", "--limit", "0", "--db", str(path)], env, timeout, first_row="_kernel_")
    out["ls_kernel_device"] = run(["db", "ls", "--kernel", "_kernel_33", "--device", "nvidia b200", "--db",
                                   str(path)], env, timeout, first_row="_kernel_33")
    out["export"] = run(["db", "export", "-o", str(export), "--db", str(path)], env, timeout)
    out["export"]["file_mib"] = round(export.stat().st_size / 2**20, 1) if export.exists() else None
    if export.exists():
        out["import"] = run(["db", "import", str(export), "--db", str(target)], env, timeout)
        check = gdb.TuningDB(target, readonly=True)
        out["import"]["entries_after"] = check.count()
        check.close()
    out["load_average"] = os.getloadavg()
    for f in workdir.iterdir():
        f.unlink()
    return out


def _pair(d: dict[str, Any], a: str, b: str) -> str:
    return f"{_fmt(d.get(a))} ({_fmt(d.get(b))})"


def _fmt(x: Any, unit: str = "") -> str:
    if x is None:
        return "-"
    return f"{x:.2f}{unit}" if isinstance(x, float) else f"{x}{unit}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=200_000)
    ap.add_argument("--also", type=int, default=20_000, help="a smaller size to compare memory with (0: none)")
    ap.add_argument("--candidates", type=int, default=8, help="candidates per entry (8: about 4 KiB an entry)")
    ap.add_argument("--src", default=None, help="source tree whose graphtune runs the commands (default: this one)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds before a command is stopped")
    ap.add_argument("--name", default="db_scale", help="results file name (without .json)")
    ap.add_argument("--out", default=None, help="directory for the JSON result (default benchmarks/results)")
    args = ap.parse_args()
    src = Path(args.src).resolve() if args.src else Path(gdb.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(src), "GRAPHTUNE_DB": "/nonexistent/unused.sqlite",
           "COLUMNS": "200"}
    env.pop("TRITON_INTERPRET", None)
    sizes = [n for n in (args.also, args.entries) if n > 0]
    results = []
    with tempfile.TemporaryDirectory(prefix="graphtune-db-scale-") as tmp:
        for n in sizes:
            print(f"building and measuring {n} entries ...", flush=True)
            results.append(measure(n, Path(tmp), env, args.timeout, args.candidates))

    rows = [("entries", lambda r: f"{r['entries']:,}"), ("candidates per entry", lambda r: str(args.candidates)),
            ("database MiB", lambda r: _fmt(r["db_mib"])),
            ("ls: first row s (after imports)", lambda r: _pair(r["ls"], "first_row_s", "first_row_after_imports_s")),
            ("ls: total s (after imports)", lambda r: _pair(r["ls"], "total_s", "after_imports_s")),
            ("ls --kernel --device: total s (after imports)",
             lambda r: _pair(r["ls_kernel_device"], "total_s", "after_imports_s")),
            ("ls --limit 0: first row s (after imports)",
             lambda r: _pair(r["ls_all"], "first_row_s", "first_row_after_imports_s")),
            ("ls --limit 0: total s (after imports)", lambda r: _pair(r["ls_all"], "total_s", "after_imports_s")),
            ("ls --limit 0: memory growth MiB", lambda r: _fmt(r["ls_all"]["command_peak_growth_mib"])),
            ("export: total s (after imports)", lambda r: _pair(r["export"], "total_s", "after_imports_s")),
            ("export: CPU s", lambda r: _fmt(r["export"]["cpu_s"])),
            ("export: file MiB", lambda r: _fmt(r["export"].get("file_mib"))),
            ("export: memory growth MiB", lambda r: _fmt(r["export"]["command_peak_growth_mib"])),
            ("import: total s (after imports)", lambda r: _pair(r.get("import", {}), "total_s", "after_imports_s")),
            ("import: CPU s", lambda r: _fmt(r.get("import", {}).get("cpu_s"))),
            ("import: memory growth MiB", lambda r: _fmt(r.get("import", {}).get("command_peak_growth_mib"))),
            ("peak RSS MiB, export / `db path`", lambda r: f"{_fmt(r['export']['peak_rss_mib'])} / "
                                                          f"{_fmt(r['baseline']['peak_rss_mib'])}")]
    width = max(len(name) for name, _ in rows)
    print(f"\ngraphtune db at scale (source: {src}; commands run as `python -m graphtune ...`)")
    for name, get in rows:
        print(f"{name:<{width}}  " + "  ".join(f"{get(r):>20}" for r in results))
    path = write_result(args.name, {"source": str(src), "cpus": os.cpu_count(), "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
                                    "results": results}, args.out)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
