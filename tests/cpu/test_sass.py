"""graphtune.sass: SASS control flow, the check of Hopper wgmma descriptors (a ptxas 12.8 miscompile found in
session 25), of wgmma registers written while the wgmma runs (session 26) and of shared stores of registers no path
has written (session 43), on listings written here, on the
miscompiled MLA kernel's own excerpts, and through graphtune.inspect on a Gluon wgmma kernel compiled for sm_90 (no
GPU)."""
from __future__ import annotations

import json

import pytest
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma

import graphtune
from graphtune import cli, resources, sass, search


def _listing(*lines: str) -> str:
    return "\n".join(f"        /*{addr:04x}*/                   {text} ;" for addr, text in lines)


# P.V of the MLA kernel's PV8 as ptxas 12.8.93 built it (commit 695c414; addresses as in its SASS): the branch of a
# segment's last, even tile (from 0xcaf0) sets the first k-step's descriptor (UR14 / UR15) but reads the second's
# (UR10 / UR11) as the other branch left them
MISCOMPILED = _listing(
    (0x6730, "@P0 BRA 0xcaf0"),
    (0xaaa0, "UMOV UR10, UR37"),
    (0xaac0, "UMOV UR11, 0x80000020"),
    (0xc690, "QGMMA.64x256x32.F32.E4M3.E4M3 R24, R156, gdesc[UR8], R24"),
    (0xc6a0, "UIADD3 UR10, UP0, UR37, 0x2, URZ"),
    (0xc6e0, "UIADD3.X UR11, UR9, -0x7fffffe0, URZ, UP0, !UPT"),
    (0xca60, "QGMMA.64x256x32.F32.E4M3.E4M3 R24, R152, gdesc[UR8], R24, gsb0"),
    (0xcae0, "BRA 0xd970"),
    (0xcaf0, "USHF.L.U32 UR9, UR36, 0x1f, URZ"),
    (0xcb40, "UMOV UR14, UR37"),
    (0xcb50, "UMOV UR15, 0x80000020"),
    (0xd940, "QGMMA.64x256x32.F32.E4M3.E4M3 R24, R160, gdesc[UR12], R24"),
    (0xd960, "QGMMA.64x256x32.F32.E4M3.E4M3 R24, R164, gdesc[UR8], R24, gsb0"),
    (0xd970, "@P1 BRA 0x6730"),
    (0xd980, "EXIT"))


def test_parse_reads_address_predicate_opcode_and_operands():
    (a, b) = sass.parse(_listing((0x740, "@!P0 LDS R241, [R10+0x38700]"), (0x750, "UIADD3.64 UR10, UR14, 0x4, URZ")))
    assert (a.address, a.predicated, a.opcode, a.operands) == (0x740, True, "LDS", "R241, [R10+0x38700]")
    assert (b.address, b.predicated, b.opcode) == (0x750, False, "UIADD3.64")


def test_the_miscompiled_branch_is_found_and_named():
    (found,) = sass.unset_wgmma_descriptors(MISCOMPILED)
    assert (found.address, found.registers) == (0xd960, (10, 11))
    assert "+0xd960" in str(found) and "UR10, UR11" in str(found)


def test_the_same_branch_with_its_descriptor_set_passes():
    # what ptxas 13.0.88 built from the same PTX: the branch writes UR10 / UR11 before its second k-step
    fixed = MISCOMPILED.replace(
        "        /*d960*/", "        /*d950*/                   UIADD3 UR10, UP0, UR37, 0x2, URZ ;\n"
        "        /*d954*/                   UIADD3.X UR11, UR9, -0x7fffffe0, URZ, UP0, !UPT ;\n        /*d960*/")
    assert sass.unset_wgmma_descriptors(fixed) == []


def test_descriptors_written_before_a_loop_hold_in_it():
    # loop-invariant descriptors (set once, read on every trip, the back edge included) and a 64-bit write of a pair
    listing = _listing(
        (0x00, "UMOV UR4, UR20"),
        (0x08, "UMOV UR5, UR21"),
        (0x10, "UIADD3.64 UR6, UR22, 0x2, URZ"),
        (0x20, "HGMMA.64x64x16.F32 R24, gdesc[UR4], R24"),
        (0x30, "@P0 BRA 0x20"),
        (0x40, "EXIT"))
    assert sass.unset_wgmma_descriptors(listing) == []


def test_a_descriptor_written_on_one_path_only_is_found_with_both_operands():
    # shared-memory A and B (SS form): four registers; the write of UR6 is skipped when P0 branches past it
    listing = _listing(
        (0x00, "UMOV UR4, UR20"),
        (0x10, "UMOV UR5, UR21"),
        (0x20, "UMOV UR7, UR23"),
        (0x30, "@P0 BRA 0x50"),
        (0x40, "UMOV UR6, UR22"),
        (0x50, "HGMMA.64x64x16.F32 R24, gdesc[UR4], R24, gsb0"),
        (0x60, "EXIT"))
    (found,) = sass.unset_wgmma_descriptors(listing)
    assert found.registers == (6, )


def test_unreachable_code_and_listings_without_wgmma_report_nothing():
    assert sass.unset_wgmma_descriptors(_listing((0x0, "MOV R1, R2"), (0x10, "EXIT"))) == []
    after_exit = _listing((0x0, "EXIT"), (0x10, "HGMMA.64x64x16.F32 R24, gdesc[UR4], R24"))
    assert sass.unset_wgmma_descriptors(after_exit) == []


# WG1's P.V in the MLA kernel's PV8 before session 26's fix (branch pv8-wip commit a1900fd, ptxas 12.8.93; addresses
# as in its SASS): P(r) V_R(r)'s hi and lo wgmmas (A from registers: P's e4m3 bytes) are issued, then on the path
# that goes on to WG1's own tile the next P's bytes are packed into R152 and R156 before any wait: the H200 computed
# P(r) V_R(r) with them (session 25 calls 5-7: wrong outputs, NaN for long requests)
IN_FLIGHT = _listing(
    (0xd4f0, "WARPGROUP.ARRIVE"),
    (0xd550, "QGMMA.64x256x32.F32.E4M3.E4M3 R24, R164, gdesc[UR12], R24"),
    (0xd650, "QGMMA.64x256x32.F32.E4M3.E4M3 R24, R160, gdesc[UR8], R24, gsb0"),
    (0xd660, "WARPGROUP.ARRIVE"),
    (0xd680, "QGMMA.64x256x32.F32.E4M3.E4M3 R24, R156, gdesc[UR12], R24"),
    (0xd6a0, "QGMMA.64x256x32.F32.E4M3.E4M3 R24, R152, gdesc[UR8], R24, gsb0"),
    (0xd6b0, "@P0 BRA 0xe330"),
    (0xd6c0, "BAR.SYNC.DEFER_BLOCKING 0x2, 0x80"),
    (0xd750, "F2FP.F16.F32.PACK_AB R152, R200, R201"),
    (0xd7d0, "F2FP.F16.F32.PACK_AB R156, R196, R197"),
    (0xe300, "QGMMA.64x256x32.F32.E4M3.E4M3 R24, R156, gdesc[UR12], R24"),
    (0xe320, "QGMMA.64x256x32.F32.E4M3.E4M3 R24, R152, gdesc[UR8], R24, gsb0"),
    (0xe330, "UIADD3 UR37, UR37, -0x1, URZ"),
    (0xe390, "@P0 BRA 0x3710"),
    (0xe3a0, "WARPGROUP.DEPBAR.LE gsb0, 0x0"),
    (0xe3b0, "EXIT"))


# the same with its descriptors' uniform registers written first: only the in-flight writes are findings
IN_FLIGHT_DESCRIPTORS_SET = _listing(*((0x0 + 4 * (r - 8), f"UMOV UR{r}, 0x0") for r in range(8, 16))) + "\n" + IN_FLIGHT


def test_a_registers_written_while_the_wgmma_runs_are_found_and_named():
    found = sass.wgmma_operands_written_in_flight(IN_FLIGHT)
    assert [(f.address, f.role, f.registers, f.writer) for f in found] == [
        (0xd680, "A operand", (156, ), 0xd7d0), (0xd6a0, "A operand", (152, ), 0xd750)]
    assert "+0xd6a0 uses R152 (A operand)" in str(found[1]) and "+0xd750 writes it" in str(found[1])
    # both checks in address order (the excerpt leaves the descriptors unwritten: those are found too)
    both = sass.wgmma_findings(IN_FLIGHT)
    assert [f for f in both if isinstance(f, sass.WrittenInFlight)] == found
    assert [f.address for f in both] == sorted(f.address for f in both)


def test_a_wait_before_the_writes_retires_the_wgmmas():
    waited = IN_FLIGHT.replace("        /*d6c0*/", "        /*d6b8*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;\n"
                                                   "        /*d6c0*/")
    assert sass.wgmma_operands_written_in_flight(waited) == []


def test_a_partial_wait_retires_the_older_groups_only():
    listing = _listing(
        (0x00, "HGMMA.64x64x16.F32 R24, R8, gdesc[UR4], R24, gsb0"),     # group 1
        (0x10, "HGMMA.64x64x16.F32 R56, R12, gdesc[UR8], R56, gsb0"),    # group 2
        (0x20, "WARPGROUP.DEPBAR.LE gsb0, 0x1"),                         # group 1 retired, group 2 may run
        (0x30, "MOV R8, R2"),
        (0x40, "FMUL R60, R60, R3"),                                     # group 2's accumulator
        (0x50, "WARPGROUP.DEPBAR.LE gsb0, 0x0"),
        (0x60, "EXIT"))
    (found,) = sass.wgmma_operands_written_in_flight(listing)
    assert (found.address, found.role, found.registers, found.writer) == (0x10, "accumulator", (60, ), 0x40)


def test_writes_around_a_loops_back_edge_and_the_chain_itself_are_read_right():
    # a chain (two wgmmas into one accumulator) is no writer; the loop's next trip rewrites A before its wait when the
    # wait sits after the loop: found on the back edge's path
    listing = _listing(
        (0x00, "F2FP.F16.F32.PACK_AB R8, R2, R3"),
        (0x10, "HGMMA.64x64x16.F32 R24, R8, gdesc[UR4], R24"),
        (0x20, "HGMMA.64x64x16.F32 R24, R12, gdesc[UR8], R24, gsb0"),
        (0x30, "@P0 BRA 0x0"),
        (0x40, "WARPGROUP.DEPBAR.LE gsb0, 0x0"),
        (0x50, "EXIT"))
    found = sass.wgmma_operands_written_in_flight(listing)
    assert [(f.address, f.writer) for f in found] == [(0x10, 0x0)]
    waited = listing.replace("@P0 BRA 0x0", "WARPGROUP.DEPBAR.LE gsb0, 0x0 ;\n        /*0038*/  @P0 BRA 0x0")
    assert sass.wgmma_operands_written_in_flight(waited) == []


@pytest.mark.parametrize("line,written", [
    ("MOV R24, R2", {24}), ("LDS.128 R24, [R2]", {24, 25, 26, 27}), ("LDSM.16.MT88.4 R24, [R2]", {24, 25, 26, 27}),
    ("LDSM.16.M88.2 R24, [R2]", {24, 25}), ("IMAD.WIDE.U32 R24, R2, R3, RZ", {24, 25}), ("CS2R R24, SRZ", {24, 25}),
    ("CS2R.32 R24, SR_CLOCKLO", {24}), ("DADD R24, R2, R4", {24, 25}), ("F2F.F64.F32 R24, R2", {24, 25}),
    ("SHFL.BFLY PT, R24, R2, 0x1, 0x1f", {24}), ("STS.128 [R24], R4", set()), ("ISETP.GE.AND P0, PT, R24, R2, PT", set()),
    ("HGMMA.64x64x16.F32 R24, gdesc[UR4], R24", set())])
def test_the_registers_an_instruction_writes(line, written):
    (ins, ) = sass.parse(_listing((0x0, line)))
    assert sass._register_writes(ins) == written


@gluon.jit
def _wgmma_kernel(out_ptr, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr):
    """One wgmma over two shared tiles built from registers, its result stored."""
    blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, BN, 16])
    a = gl.full([BM, BK], 1.0, gl.float16, layout=blocked)
    b = gl.full([BK, BN], 2.0, gl.float16, layout=blocked)
    a_smem = gl.allocate_shared_memory(gl.float16, [BM, BK], gl.NVMMASharedLayout.get_default_for([BM, BK],
                                                                                                   gl.float16), a)
    b_smem = gl.allocate_shared_memory(gl.float16, [BK, BN], gl.NVMMASharedLayout.get_default_for([BK, BN],
                                                                                                   gl.float16), b)
    acc = warpgroup_mma(a_smem, b_smem, gl.zeros([BM, BN], gl.float32, layout=acc_layout))
    rows = gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))
    cols = gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
    gl.store(out_ptr + rows[:, None] * BN + cols[None, :], acc)


_CONFIGS = [triton.Config({"BM": 64, "BN": 64, "BK": 32}, num_warps=4)]


def test_inspect_reads_a_wgmma_kernels_sass_and_reports_no_hazard():
    (row,) = resources.inspect(_wgmma_kernel, target="sm_90", signature={"out_ptr": "*fp32"}, configs=_CONFIGS)
    assert row.fits and row.hazards == ()


def test_inspect_reports_a_hazard_per_config_and_the_cli_prints_it(monkeypatch, capsys):
    """The check's findings reach ResourceRow.hazards, the JSON and the table's footer (the check replaced by one that
    finds the miscompiled listing's wgmma, on the real kernel's compile)."""
    seen = []

    def found(text: str):
        seen.append("HGMMA" in text)
        return sass.wgmma_findings(MISCOMPILED)
    monkeypatch.setattr(resources, "wgmma_findings", found)
    monkeypatch.setattr(resources, "_compile_cache", {})
    (row,) = resources.inspect(_wgmma_kernel, target="sm_90", signature={"out_ptr": "*fp32"}, configs=_CONFIGS)
    assert seen == [True]
    assert len(row.hazards) == 1 and "+0xd960" in row.hazards[0]
    assert json.loads(json.dumps(row.to_dict()))["hazards"] == list(row.hazards)
    code = cli.main(["inspect", f"{__file__}:_wgmma_kernel", "--signature", "out_ptr=*fp32", "--constexpr",
                     "BM=64,BN=64,BK=32"])
    out = capsys.readouterr().out
    assert code == 0
    assert "1 miscompiled (below)" in out and "+0xd960 reads its descriptor from UR10, UR11" in out


@triton.jit
def _copy_kernel(x_ptr, out_ptr, n, B, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class _Compiled:
    """What the tuner's device check reads from a compiled kernel, with a wgmma in its PTX."""

    def __init__(self, ptx: str):
        self.metadata = type("M", (), {"shared": 1024, "num_warps": 4})()
        self.asm = {"ptx": ptx, "cubin": b"cubin"}
        self.n_regs, self.n_spills, self.loaded = 64, 0, False

    def _init_handles(self):
        self.loaded = True


# WG1's P hand-off in the MLA kernel's P8 as ptxas 12.8.93 built it (docs/gpu_calls/session43/p8.patch before call M's
# fix; addresses as in its SASS): in the pair loop the 16-bit store of P's rows h % 16 < 8 reads R231, which only a
# later PRMT of the same trip writes (it also builds WG1's own P operand); the rows h % 16 >= 8 come from R19, packed
# just before. On an H100 the other warpgroup multiplied the previous pair's P, NaN in a program's first segment.
STALE_STORE = _listing(
    (0xb7e0, "FMUL R19, R19, 256"),
    (0xb830, "F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C R19, R18, R19, RZ"),
    (0xc680, "STS.U16 [R12+0x2e000], R231"),
    (0xc700, "STS.U16 [R12+0x2e200], R19"),
    (0xc910, "PRMT R231, R157, 0x7610, R231"),
    (0xca80, "STS [R15+0x30500], R153"),
    (0xcb00, "@P1 BRA 0xb7e0"),
    (0xcb10, "EXIT"))


def test_a_store_of_a_register_written_only_later_is_found_and_named():
    (found,) = [f for f in sass.stores_of_unwritten_registers(STALE_STORE) if f.register == 231]
    assert (found.address, found.opcode) == (0xc680, "STS.U16")
    assert "stores R231" in str(found) and "+0xc680" in str(found)
    assert [f.register for f in sass.stores_of_unwritten_registers(STALE_STORE)] == [231, 153]
    # (the listing's fragment reads R18 unwritten too: its F2FP is a conversion finding of its own)
    assert [type(f).__name__ for f in sass.wgmma_findings(STALE_STORE)] == ["UnwrittenConversion", "UnwrittenStore",
                                                                            "UnwrittenStore"]


def test_stores_of_registers_written_on_every_path_or_predicated_report_nothing():
    fixed = _listing(
        (0x00, "MOV R153, RZ"),
        (0x10, "PRMT R231, R157, 0x7610, R231"),
        (0x20, "STS.U16 [R12+0x2e000], R231"),
        (0x30, "@P0 STS [R15+0x30500], R9"),        # predicated: not checked
        (0x40, "STS [R15+0x30500], R153"),
        (0x50, "STS.U16 [R12+0x2e008], RZ"),
        (0x60, "@P1 BRA 0x10"),
        (0x70, "EXIT"))
    assert sass.stores_of_unwritten_registers(fixed) == []
    one_path = _listing((0x00, "@P0 BRA 0x20"), (0x10, "MOV R5, RZ"), (0x20, "STS [R1], R5"), (0x30, "EXIT"))
    assert [f.register for f in sass.stores_of_unwritten_registers(one_path)] == [5]


# WG1's P pair in the MLA kernel's PL as ptxas 12.8 built it (session 47, before call C; addresses as in its SASS): the
# inline PTX rounds P' to e4m3 into a 16-bit register and widens it again for the remainder; the widening reads R213,
# whose low half only the PRMT after it fills with the rounded bytes. On an H100 every output of the first GPU run was
# NaN-ridden.
STALE_HALF = _listing(
    (0x8f70, "MOV R19, RZ"),
    (0x8f80, "MOV R156, RZ"),
    (0x8f90, "F2FP.SATFINITE.E4M3.F16.UNPACK_B_MERGE_C R173, R19, RZ"),
    (0x8fb0, "F2FP.F16.E4M3.UNPACK_B R213, R213"),
    (0x8fd0, "F2FP.SATFINITE.E4M3.F16.UNPACK_B_MERGE_C R164, R156, R173"),
    (0x91e0, "HADD2 R156, R156, -R213"),
    (0x94c0, "PRMT R213, R164, 0x7610, R213"),
    (0x95a0, "@P2 BRA 0x8f90"),
    (0x95b0, "EXIT"))


def test_a_conversion_of_a_register_written_only_later_is_found_and_named():
    found = sass.conversions_of_unwritten_registers(STALE_HALF)
    assert [(f.address, f.opcode, f.register) for f in found] == [(0x8fb0, "F2FP.F16.E4M3.UNPACK_B", 213)]
    assert "reads R213" in str(found[0]) and "+0x8fb0" in str(found[0])
    assert "UnwrittenConversion" in [type(f).__name__ for f in sass.wgmma_findings(STALE_HALF)]
    # the rounded bytes packed (PRMT) before they are widened: nothing found
    fixed = _listing((0x8f70, "MOV R19, RZ"), (0x8f80, "MOV R156, RZ"),
                     (0x8f90, "F2FP.SATFINITE.E4M3.F16.UNPACK_B_MERGE_C R173, R19, RZ"),
                     (0x8fa0, "F2FP.SATFINITE.E4M3.F16.UNPACK_B_MERGE_C R164, R156, R173"),
                     (0x8fb0, "PRMT R213, R164, 0x7610, RZ"), (0x8fc0, "F2FP.F16.E4M3.UNPACK_B R213, R213"),
                     (0x91e0, "HADD2 R156, R156, -R213"), (0x95a0, "@P2 BRA 0x8f90"), (0x95b0, "EXIT"))
    assert sass.conversions_of_unwritten_registers(fixed) == []


@pytest.mark.parametrize("ptx,listing,expect", [
    ("wgmma.mma_async.sync.aligned.m64n256k32", MISCOMPILED, "miscompiled: QGMMA.64x256x32.F32.E4M3.E4M3 at +0xd960"),
    ("wgmma.mma_async.sync.aligned.m64n256k32", IN_FLIGHT_DESCRIPTORS_SET,
     "miscompiled: QGMMA.64x256x32.F32.E4M3.E4M3 at +0xd680 uses R156 (A operand)"),
    ("wgmma.mma_async.sync.aligned.m64n256k32", "", None),
    ("ld.global.b32", MISCOMPILED, None)], ids=["miscompiled", "operand-in-flight", "clean", "no-wgmma"])
def test_the_tuner_never_launches_a_config_with_a_miscompiled_wgmma(monkeypatch, ptx, listing, expect):
    """The device check before a candidate's first launch: a wgmma whose descriptor is unset on some path, or whose
    A registers are overwritten while it runs, excludes the config with the finding as its reason (its launch would end the CUDA context), before the kernel is loaded;
    a kernel whose SASS has none, or whose PTX has no wgmma (SASS not read), goes on."""
    read = []

    def dump(cubin: bytes, flag: str) -> str:
        read.append(flag)
        return listing
    monkeypatch.setattr(resources, "_cuobjdump_text", dump)
    k = graphtune.autotune([triton.Config({"BLOCK": 32}, num_warps=4)], key=["B"], name="t_wgmma_check")(_copy_kernel)
    stub = _Compiled(ptx)
    monkeypatch.setattr(k.fn, "warmup", lambda *a, **kw: stub)
    why = search._check_compiled(k.space, triton.Config({"BLOCK": 32}, num_warps=4), (), {}, (1,),
                                 resources.get_target("sm_90"), {}, 0)
    assert read == (["--dump-sass"] if "wgmma" in ptx else [])
    if expect is None:
        assert why is None and stub.loaded
    else:
        assert why.startswith(expect) and not stub.loaded


def test_without_cuobjdump_the_check_is_skipped_not_the_config(monkeypatch):
    def fail(cubin: bytes, flag: str) -> str:
        raise resources.GraphtuneError("cuobjdump not found")
    monkeypatch.setattr(resources, "_cuobjdump_text", fail)
    k = graphtune.autotune([triton.Config({"BLOCK": 32}, num_warps=4)], key=["B"], name="t_wgmma_nodump")(_copy_kernel)
    stub = _Compiled("wgmma.mma_async")
    monkeypatch.setattr(k.fn, "warmup", lambda *a, **kw: stub)
    assert search._check_compiled(k.space, triton.Config({"BLOCK": 32}, num_warps=4), (), {}, (1,),
                                  resources.get_target("sm_90"), {}, 0) is None


if __name__ == "__main__":
    pytest.main([__file__])
