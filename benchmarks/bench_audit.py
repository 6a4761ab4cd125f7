"""graphtune audit on real code: recall, hazards before/after, in-place precision, time (issue 16).

The code is not part of the repository: unpack wheels from the package index first, e.g.

    pip download --no-deps --only-binary=:all: vllm==0.34.0 sglang==0.5.23 flash-linear-attention fla-core \\
        lightllm -d /tmp/wheels
    unzip -q /tmp/wheels/sglang-*.whl '*.py' -d /tmp/realcode/sglang      # and so on, one folder per wheel

then run (``--before`` is the src folder of the audit to compare with, e.g. an older checkout's):

    PYTHONPATH=src python benchmarks/bench_audit.py /tmp/realcode/sglang /tmp/realcode/vllm \\
        /tmp/realcode/fla-core /tmp/realcode/lightllm --before /tmp/baseline/src --repeat 3

Recall is measured against a grep: every ``@...autotune...`` decorator line (any case) at the start of a
line, followed to its ``def``; kernels the audit finds that the grep does not (applied by call) are listed
for a reading by hand. In-place findings are scored against benchmarks/audit_judged.json (judged by
reading each kernel). Each audit runs in a subprocess (``python -m graphtune audit TREE --json``); the
wall time and CPU time (user + sys of the child) are reported, with the load average of the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result  # noqa: E402

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
DECORATOR = re.compile(r"^\s*@\s*[\w.]*autotun\w*", re.I)
DEF = re.compile(r"^\s*(async\s+)?def\s+(\w+)")


def wheel_version(tree: Path) -> str | None:
    for metadata in sorted(tree.glob("*.dist-info/METADATA")):
        fields = dict(line.split(": ", 1) for line in metadata.read_text(errors="replace").splitlines()[:10]
                      if ": " in line)
        return f"{fields.get('Name')} {fields.get('Version')}"
    return None


def grep_kernels(tree: Path) -> set[tuple[str, int]]:
    """(file, line of the def) of every function under a decorator named like an autotuner."""
    found: set[tuple[str, int]] = set()
    for path in tree.rglob("*.py"):
        lines = path.read_text(errors="replace").splitlines()
        for i, text in enumerate(lines):
            if DECORATOR.match(text):
                for j in range(i + 1, len(lines)):  # decorator arguments can run for hundreds of lines
                    match = DEF.match(lines[j])
                    if match:
                        found.add((str(path), j + 1))
                        break
    return found


# What `graphtune audit TREE --json` does, with the import of graphtune (which imports torch) and the audit
# itself timed apart: the first is the CLI's start-up, the same for any tree.
_CHILD = """
import json, sys, time
t0 = time.perf_counter(); c0 = time.process_time()
from graphtune.audit import audit_paths
t1 = time.perf_counter(); c1 = time.process_time()
report = audit_paths([sys.argv[1]])
t2 = time.perf_counter(); c2 = time.process_time()
print(json.dumps({"report": report.to_dict(), "import_s": t1 - t0, "import_cpu_s": c1 - c0,
                  "audit_s": t2 - t1, "audit_cpu_s": c2 - c1}, default=str))
"""


def run_audit(src: Path, tree: Path) -> tuple[dict[str, Any], dict[str, float]]:
    env = dict(os.environ, PYTHONPATH=str(src))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _CHILD, str(tree)], env=env, capture_output=True, text=True,
                          timeout=1200)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"audit of {tree} with {src} failed: {done.stderr[-2000:]}")
    out = json.loads(done.stdout)
    times = {"process_wall_s": wall,
             "process_cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
             **{k: out[k] for k in ("import_s", "import_cpu_s", "audit_s", "audit_cpu_s")}}
    return out["report"], {k: round(v, 2) for k, v in times.items()}


def in_place_params(kernel: dict[str, Any]) -> list[str]:
    """Parameters reported in place (as a hazard, or covered by restore_value): the structured field when
    there is one, else the parameter list at the start of the hazard's message (older versions)."""
    if "in_place" in kernel:
        return [f["param"] for f in kernel["in_place"]]
    for hazard in kernel["hazards"]:
        if hazard["code"] == "in-place-without-restore":
            return re.findall(r"'([^']+)'", hazard["message"].split("]", 1)[0])
    return []


def score_in_place(data: dict[str, Any], tree: Path, judged: dict[tuple[str, str, str, str], bool],
                   hazards_only: bool) -> dict[str, Any]:
    right = wrong = 0
    unjudged: list[str] = []
    for kernel in data["kernels"]:
        if hazards_only and not any(h["code"] == "in-place-without-restore" for h in kernel["hazards"]):
            continue
        rel = str(Path(kernel["file"]).resolve().relative_to(tree.resolve()))
        for param in in_place_params(kernel):
            if hazards_only and "in_place" in kernel and param in (kernel.get("restore_value") or []) + (
                    kernel.get("reset_to_zero") or []):
                continue
            verdict = judged.get((tree.name, rel, kernel["name"], param))
            if verdict is None:
                unjudged.append(f"{rel}:{kernel['line']} {kernel['name']} {param}")
            elif verdict:
                right += 1
            else:
                wrong += 1
    return {"right": right, "wrong": wrong, "unjudged": unjudged}


def summarize(data: dict[str, Any], tree: Path, judged: dict[tuple[str, str, str, str], bool],
              hand: set[tuple[str, int]]) -> dict[str, Any]:
    kernels = data["kernels"]
    found = {(k["file"], k["line"]) for k in kernels}
    tunes = [h for k in kernels for h in k["hazards"] if h["code"] == "tunes-at-runtime"]
    hazard_counts: dict[str, int] = {}
    for kernel in kernels:
        for h in kernel["hazards"]:
            if h["severity"] == "hazard":
                hazard_counts[h["code"]] = hazard_counts.get(h["code"], 0) + 1
    bindings: dict[str, int] = {}
    for kernel in kernels:
        for binding in kernel.get("keys", []):
            bindings[binding["binding"]] = bindings.get(binding["binding"], 0) + 1
    return {
        "kernels": len(kernels), "files_scanned": data["summary"]["files_scanned"],
        "files_parsed": data["summary"].get("files_parsed"), "files_failed": len(data["summary"]["files_failed"]),
        "recall_vs_grep": f"{len(hand & found)}/{len(hand)}",
        "grep_not_found": sorted(f"{f}:{n}" for f, n in hand - found),
        "found_not_in_grep": sorted(f"{k['file']}:{k['line']} {k['name']}" for k in kernels
                                    if (k["file"], k["line"]) not in hand),
        "hazards": data["summary"]["hazards"], "hazards_by_code": dict(sorted(hazard_counts.items())),
        "tunes_at_runtime": {"hazard": sum(h["severity"] == "hazard" for h in tunes),
                             "info": sum(h["severity"] == "info" for h in tunes)},
        "key_bindings": bindings,
        "wrappers": sorted({k.get("wrapper_name") or k["wrapper"] for k in kernels}),
        "in_place_findings": score_in_place(data, tree, judged, hazards_only=False),
        "in_place_hazards": score_in_place(data, tree, judged, hazards_only=True),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--before", type=Path, help="src folder of the audit to compare with")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of the new audit per tree")
    parser.add_argument("--judged", type=Path, default=HERE / "audit_judged.json")
    parser.add_argument("--out", default="audit_real_code")
    args = parser.parse_args()
    judged = {(j["tree"], j["file"], j["kernel"], j["param"]): j["in_place"]
              for j in json.loads(args.judged.read_text())["judged"]}

    results: dict[str, Any] = {"load_average_start": os.getloadavg(), "cpus": os.cpu_count(), "trees": {}}
    for tree in args.trees:
        hand = grep_kernels(tree)
        entry: dict[str, Any] = {"wheel": wheel_version(tree), "grep_kernels": len(hand)}
        if args.before is not None:
            load = os.getloadavg()[0]
            data, times = run_audit(args.before, tree)
            entry["before"] = {**summarize(data, tree, judged, hand), "runs": [{**times, "load_1min": load}]}
        timings = []
        for _ in range(max(1, args.repeat)):
            load = os.getloadavg()[0]
            data, times = run_audit(SRC, tree)
            timings.append({**times, "load_1min": round(load, 2)})
        entry["after"] = {**summarize(data, tree, judged, hand), "runs": timings}
        results["trees"][tree.name] = entry

    print(f"{'tree':<10} {'wheel':<28} {'files':>6} {'grep':>5} {'found before':>12} {'found after':>11} "
          f"{'hazards before':>14} {'hazards after':>13} {'TAR haz/info':>12}  audit s wall (cpu), each run")
    for name, entry in results["trees"].items():
        after = entry["after"]
        before = entry.get("before", {})
        runs = ", ".join(f"{r['audit_s']} ({r['audit_cpu_s']})" for r in after["runs"])
        print(f"{name:<10} {str(entry['wheel']):<28} {after['files_scanned']:>6} {entry['grep_kernels']:>5} "
              f"{before.get('recall_vs_grep', '-'):>12} {after['recall_vs_grep']:>11} "
              f"{before.get('hazards', '-'):>14} {after['hazards']:>13} "
              f"{after['tunes_at_runtime']['hazard']:>5}/{after['tunes_at_runtime']['info']:<6}  {runs}")
        if before:
            b = before["runs"][0]
            print(f"    before: audit {b['audit_s']} s ({b['audit_cpu_s']} s cpu), load {b['load_1min']:.1f}")
        for r in after["runs"]:
            print(f"    after run: audit {r['audit_s']} s ({r['audit_cpu_s']} s cpu); import of graphtune "
                  f"{r['import_s']} s ({r['import_cpu_s']} s cpu); whole process {r['process_wall_s']} s "
                  f"({r['process_cpu_s']} s cpu); load {r['load_1min']}")
        for label, part in (("before", before), ("after", after)):
            if part:
                print(f"    {label}: hazards by code {part['hazards_by_code']}; in-place hazards judged "
                      f"{part['in_place_hazards']['right']} right / {part['in_place_hazards']['wrong']} wrong "
                      f"(unjudged {len(part['in_place_hazards']['unjudged'])}); all in-place findings "
                      f"{part['in_place_findings']['right']} right / {part['in_place_findings']['wrong']} wrong")
        if after["found_not_in_grep"]:
            print(f"    found, not in the grep (read by hand): {after['found_not_in_grep']}")
        if after["grep_not_found"]:
            print(f"    in the grep, not found: {after['grep_not_found']}")
    path = write_result(args.out, results)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
