"""The static inspector against the GPU: registers, spills, shared memory and occupancy of every config of a
bf16 dot kernel, compared with the kernel Triton compiles and loads on this device.

The kernel, its configs and the comparison live in benchmarks/check_resources.py (the same check as a
script that writes JSON); these tests assert on it.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import triton

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "check_resources.py"
_spec = importlib.util.spec_from_file_location("_graphtune_check_resources", _SCRIPT)
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)

from graphtune.resources import aligned_args, check_configs_for_device, inspect, signature_from_args  # noqa: E402

_IDS = [check.config_label(c) for c in check.DOT_CONFIGS]


@pytest.fixture(scope="module")
def records():
    return check.compare(check.dot_kernel, check.DOT_SIGNATURE, {}, check.DOT_CONFIGS)


@pytest.mark.parametrize("index", range(len(check.DOT_CONFIGS)), ids=_IDS)
def test_registers_spills_shared_match_the_loaded_kernel(records, index):
    record = records[index]
    static, gpu = record["static"], record["gpu"]
    if not gpu["ok"]:
        assert not static["fits"], f"GPU could not compile/load it ({gpu['error']}) but the inspector says it fits"
        return
    assert static["fits"], f"the GPU loaded it but the inspector says: {static['reason']}"
    assert static["registers"] == gpu["n_regs"]
    assert static["spill_bytes"] == gpu["local_bytes"], (static["stack_bytes"], static["local_bytes"], gpu)
    assert static["shared_dynamic"] == gpu["shared"]


@pytest.mark.parametrize("index", range(len(check.DOT_CONFIGS)), ids=_IDS)
def test_occupancy_matches_the_driver(records, index):
    static, gpu = records[index]["static"], records[index]["gpu"]
    if not gpu["ok"] or gpu["driver_blocks_per_sm"] is None:
        pytest.skip("not loaded, or libcuda's occupancy call is unavailable")
    assert static["resident_blocks"] == gpu["driver_blocks_per_sm"], static


_RESERVE_IDS = [check.config_label(c) for c in check.SHARED_RESERVE_CONFIGS]


@pytest.fixture(scope="module")
def reserve_records():
    return check.compare(check.dot_kernel, check.DOT_SIGNATURE, {}, check.SHARED_RESERVE_CONFIGS)


@pytest.mark.parametrize("index", range(len(check.SHARED_RESERVE_CONFIGS)), ids=_RESERVE_IDS)
def test_sm90_static_1kb_against_the_driver_reserve(reserve_records, index):
    """docs/design.md's question, decided on an H200 in session 33: on sm_90+ cuobjdump reports 1,024 B of static
    shared memory (``.nv.shared.reserved.0``) for every kernel that uses shared memory, and that 1 KB is the
    driver's per-block reserve (the driver's static size for the kernel is 0; its occupancy 9 blocks at 24,576 B
    dynamic and 4 at 57,344 B, 128 threads, on 233,472 B per SM), so resources.py takes it off the static size and
    counts the reserve once. These configs are bound by shared memory at sizes where counting it twice would give
    one block fewer (8 and 3), so a regression to the double count fails here."""
    record = reserve_records[index]
    static, gpu = record["static"], record["gpu"]
    major, _ = torch.cuda.get_device_capability()
    if major < 9:
        pytest.skip("the reserved 1 KB section (.nv.shared.reserved.0) exists on sm_90 and later only")
    if not gpu["ok"] or gpu["driver_blocks_per_sm"] is None:
        pytest.skip("not loaded, or libcuda's occupancy call is unavailable")
    dynamic, twice, once = check.SHARED_RESERVE_SM90[index]
    assert static["fits"], static["reason"]
    # Same kernel on both sides, and the size meant: otherwise the block counts below decide nothing.
    assert static["shared_dynamic"] == gpu["shared"], (static["shared_dynamic"], gpu["shared"])
    assert static["shared_static"] == (gpu["driver_static_shared"] or 0), (static, gpu["driver_static_shared"])
    if major == 9:
        assert (static["shared_dynamic"], static["resident_blocks"], static["limiter"]) == \
            (dynamic, once, "shared_memory"), f"{record['label']} no longer decides the question: {static}"
    driver = gpu["driver_blocks_per_sm"]
    meaning = {once: "the reserve counted once, as resources.py does",
               twice: "the driver counts the 1 KB section besides its reserve after all: resources.py counts it once "
                      "too few"}
    assert static["resident_blocks"] == driver, (
        f"{record['label']}: {static['shared_dynamic']} B dynamic + {static['shared_static']} B static "
        f"(driver's static size: {gpu['driver_static_shared']} B), {static['registers']} registers, "
        f"{static['threads_per_block']} threads: graphtune says {static['resident_blocks']} blocks per SM, "
        f"the driver {driver} -> {meaning.get(driver, 'neither reading: look again at the occupancy rules')}")


def test_spill_config_really_spills(records):
    spilling = [r for r in records if r["config"].get("maxnreg")]
    assert spilling and all(r["gpu"]["ok"] and r["gpu"]["n_spills"] > 0 for r in spilling), spilling


def test_real_launch_matches_static_numbers():
    m, n, k = 512, 512, 256
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    reference = (a.float() @ b.float()).to(torch.bfloat16).float()
    args = {"a_ptr": a, "b_ptr": b, "c_ptr": None, "M": m, "N": n, "K": k,
            "stride_am": a.stride(0), "stride_bk": b.stride(0), "stride_cm": n}
    for config in check.DOT_CONFIGS:
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        args["c_ptr"] = c
        signature, constexprs = signature_from_args(check.dot_kernel, args)
        (row,) = inspect(check.dot_kernel, target="device", signature=signature, constexprs=constexprs,
                         configs=[config], specialize=aligned_args(check.dot_kernel, args))
        grid = (triton.cdiv(m, config.kwargs["BLOCK_M"]), triton.cdiv(n, config.kwargs["BLOCK_N"]))
        try:
            compiled = check.dot_kernel[grid](*args.values(), **config.all_kwargs())
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - OutOfResources and friends
            assert not row.fits, f"{row.label}: launch failed ({exc!r}) but the inspector says it fits"
            continue
        assert row.fits, f"{row.label}: launched, but the inspector says {row.reason}"
        assert (row.registers, row.spill_bytes, row.shared_dynamic) == \
            (compiled.n_regs, compiled.n_spills * 4, compiled.metadata.shared), row.label
        torch.testing.assert_close(c.float(), reference, rtol=2e-2, atol=2e-1)


def test_check_configs_for_device_flags_what_cannot_launch():
    bad = check_configs_for_device(check.dot_kernel, check.DOT_CONFIGS, check.DOT_SIGNATURE)
    oversized = len(check.DOT_CONFIGS) - 1   # 256x256x64, 4 stages: 262144 B
    assert oversized in bad and "shared memory" in bad[oversized]
