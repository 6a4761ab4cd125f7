"""benchmarks/probes/ncu_stalls.py and ncu_kernels.py read Nsight Compute's CSV pages on this CPU machine: the
stall view on a recorded report (session 40, call A, T8 at fp8 H = 128 batch 64 on an H100), the kernel-level
figures on a raw page written here in ncu's layout (a header, a units row, a row a launch)."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBES = ROOT / "benchmarks" / "probes"


def _run(script: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(PROBES / script), *argv], capture_output=True, text=True, timeout=120)


def test_stalls_of_the_recorded_t8_report_are_the_ones_docs_quote():
    """docs/mla_decode.md (session 40): T8's largest wait by line is WG0's for its own tile to land, 9.0% of all
    samples, then a wgmma retirement (4.7%) and the widening's conversion waiting on shared memory (3.5%)."""
    run = _run("ncu_stalls.py", str(ROOT / "benchmarks/results/ncu/ncu_h100_session40_callA_t8_sass.csv.gz"),
               "--top", "3")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("8056 SASS lines, 15424 samples")
    top = [line.split() for line in lines[2:5]]
    assert [t[1] for t in top] == ["9.0%", "4.7%", "3.5%"]
    assert top[0][2:4] == ["@!P2", "BRA"] and top[1][2] == "WARPGROUP.DEPBAR.LE" and "F2FP" in top[2][2]


def _raw_page(path: Path, launches: list[dict[str, str]], units: dict[str, str]) -> None:
    header = ["ID", "Process ID", "Kernel Name", "Grid Size", *units]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL)
        w.writerow(header)
        w.writerow(["", "", "", "", *units.values()])
        for i, launch in enumerate(launches):
            w.writerow([str(i), "1168", launch["name"], "(2, 66, 1)", *(launch.get(k, "") for k in units)])


def test_kernel_figures_side_by_side_from_raw_pages(tmp_path):
    """One row a launch from every page given, the duration in us whatever base unit the page holds, thousands
    separators read, a metric a page lacks shown as '-', JSON written."""
    units = {"gpu__time_duration.sum": "nsecond", "l1tex__throughput.avg.pct_of_peak_sustained_active": "%",
             "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum": "", "launch__registers_per_thread": "register/thread",
             "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed": "%"}
    ours = {"name": "_mla_decode_hopper_pp8_kernel", "gpu__time_duration.sum": "182,016",
            "l1tex__throughput.avg.pct_of_peak_sustained_active": "73.1",
            "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum": "12,345,678", "launch__registers_per_thread": "168",
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed": "51.2"}
    peer = {"name": "void flash::flash_fwd_splitkv_mla_kernel<Traits>(Params)", "gpu__time_duration.sum": "140,500",
            "l1tex__throughput.avg.pct_of_peak_sustained_active": "55.0", "launch__registers_per_thread": "168"}
    _raw_page(tmp_path / "fp8_raw.csv", [ours, peer], units)
    _raw_page(tmp_path / "us_raw.csv", [{"name": "combine", "gpu__time_duration.sum": "3.5"}],
              {"gpu__time_duration.sum": "usecond"})
    out = tmp_path / "kernels.json"
    run = _run("ncu_kernels.py", str(tmp_path / "fp8_raw.csv"), str(tmp_path / "us_raw.csv"), "--out", str(out))
    assert run.returncode == 0, run.stderr
    rows = json.loads(out.read_text())
    assert [r["kernel"] for r in rows] == ["_mla_decode_hopper_pp8_kernel", "void flash::flash_fwd_splitkv_mla_kernel",
                                           "combine"]
    assert [r["us"] for r in rows] == [pytest.approx(182.016), pytest.approx(140.5), pytest.approx(3.5)]
    assert rows[0]["smem_wavefronts"] == 12345678 and rows[0]["l1_%"] == 73.1
    assert rows[0]["tensor_%"] == 51.2
    assert rows[1]["smem_wavefronts"] is None and "smem_wavefronts" not in rows[2]
    table = [line for line in run.stdout.splitlines() if line.startswith("| fp8_raw.csv")]
    assert len(table) == 2 and "| 182.0 | - | 73.1 | - | - | 51.2 | - | 12,345,678 | - | 168 |" in table[0]


def test_kernel_figures_of_the_recorded_h128_reports_are_the_ones_docs_quote():
    """Session 41, call B (H100, H = 128, batch 64, a step's plan; Nsight Compute's locked clocks): the figures
    docs/mla_decode.md and docs/benchmarks.md quote, read from the recorded raw pages: the same tensor work in the bf16
    kernels (their busy tensor time within 3%), FlashMLA's fp8 kernel about half of T8's."""
    pages = [ROOT / f"benchmarks/results/ncu/ncu_h100_session41_callB_{name}_raw.csv.gz" for name in ("fp8", "bf16")]
    run = _run("ncu_kernels.py", *map(str, pages))
    assert run.returncode == 0, run.stderr
    from test_mla_decode import probe_module
    ncu_kernels = probe_module("ncu_kernels")
    fp8, bf16 = ({r["kernel"]: r for r in ncu_kernels.summarise(page)} for page in pages)
    t8, fm8 = fp8["_mla_decode_hopper_pp8_kernel"], fp8["void flash::flash_fwd_splitkv_mla_kernel"]
    assert (round(t8["us"], 1), round(fm8["us"], 1)) == (176.7, 135.2)
    assert (t8["tensor_%"], fm8["tensor_%"], t8["l1_%"]) == (54.32, 35.33, 74.12)
    assert 0.45 < fm8["us"] * fm8["tensor_%"] / (t8["us"] * t8["tensor_%"]) < 0.55
    pp, fm16 = bf16["_mla_decode_hopper_pp_kernel"], bf16["void sm90::flash_fwd_splitkv_mla_kernel"]
    assert (round(pp["us"], 1), round(fm16["us"], 1), pp["tensor_%"], fm16["tensor_%"]) == (170.2, 148.4, 57.02, 67.13)
    assert abs(pp["us"] * pp["tensor_%"] / (fm16["us"] * fm16["tensor_%"]) - 1) < 0.03


@pytest.mark.parametrize("content,needle", [
    ("not,a,report\n1,2,3\n", "no 'ID' / 'Kernel Name' header"),
    ('"ID","Kernel Name","gpu__time_duration.sum"\n"","","msecond"\n', "no launches in"),
    ('"ID","Kernel Name","gpu__time_duration.sum"\n"","","cycle"\n"0","k","5"\n', "duration in 'cycle'")])
def test_kernel_figures_say_what_is_wrong_in_one_line(tmp_path, content, needle):
    path = tmp_path / "raw.csv"
    path.write_text(content)
    run = _run("ncu_kernels.py", str(path))
    assert run.returncode != 0 and needle in run.stderr.strip().splitlines()[-1], run.stderr


def test_kernel_figures_name_a_missing_report():
    run = _run("ncu_kernels.py", "/nonexistent/raw.csv")
    assert run.returncode != 0 and "ncu_kernels: /nonexistent/raw.csv: No such file or directory" in run.stderr
