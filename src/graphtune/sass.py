"""Reading SASS (``cuobjdump --dump-sass`` text): the control flow of a kernel and three checks of its Hopper warpgroup
MMAs (their descriptors written on every path; their register operands left alone while they run; the shared stores
that write their operands storing registers that are written).

A Hopper ``wgmma`` (``HGMMA`` / ``QGMMA`` in SASS) takes its shared-memory operands by 64-bit descriptors that
ptxas keeps in uniform registers: ``gdesc[URx]`` reads A's from ``URx``, ``URx+1`` and B's from ``URx+2``, ``URx+3``
(A's pair unused when A comes from registers: ``QGMMA... R24, R160, gdesc[UR8], ...``). ptxas 12.8.93, the one
triton 3.6 ships, built one of graphtune's kernels with such a register written on one branch only: the MLA decode
kernel's P.V as fp8 wgmmas (branch ``pv8-wip``, session 25), whose second k-step on a segment's last, even tile read
the descriptor the other branch had set; on an H200 that was an illegal address, or the other buffer's data
(compute-sanitizer named that wgmma). ptxas 13.0.88 built the same PTX right. :func:`unset_wgmma_descriptors` finds
wgmmas whose descriptor registers are not written on every path from the kernel's entry into them (a
must-be-written data flow over the basic blocks); ``graphtune.inspect`` reports them per config
(``ResourceRow.hazards``).

A wgmma also reads its A operand from registers (``R160`` above) and writes its accumulator (``R24``...) while it
runs, until a ``WARPGROUP.DEPBAR`` (``wgmma.wait_group``) retires its group; ptxas does not always keep those
registers: in the same kernel's P.V (session 26), ptxas 12.8.93 and 13.0.88 alike gave the A registers of WG1's
first P.V (its P as e4m3 bytes) to the next tile's P while that wgmma was in flight (the wait that retired it came
later, past a branch), and the H200 computed with the new bytes: wrong outputs, NaN for long requests.
:func:`wgmma_operands_written_in_flight` finds an instruction that writes a wgmma's A or accumulator registers on some
path from the wgmma before a wait that retires its group (groups counted as ``gsb0`` commits them).

A wgmma's shared operand is only as right as the stores that wrote it. In session 43 a P tile that one warpgroup stores
and the other multiplies (the MLA kernel's P8, T8 with an e4m3 P) came out stale: ptxas 12.8.93 stored 8 of the 16-bit
pairs of each thread from registers that the same pair of tiles only writes later (they also built the storing
warpgroup's own P operand), so the multiplying warpgroup read the previous pair's P, and in a program's first segment
whatever the registers held (on an H100: NaN rows of its output). :func:`stores_of_unwritten_registers` finds a
shared-memory store whose source register is not written on every path from the kernel's entry into it (the same
must-be-written data flow): on the first pass such a store can only store what the register held before anything was
computed.

Only the text is read here (no tools run, no Triton or torch): resources.py runs cuobjdump.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# "/*0740*/  @!P0 LDS R241, [R10+0x38700] ;" -> address, predicate, opcode, operands
_INSTRUCTION = re.compile(r"/\*([0-9a-f]+)\*/\s+(@!?U?P\w+\s+)?([A-Z][\w.]*)\s*([^;]*);")
_TARGET = re.compile(r"0x([0-9a-f]+)")
_UNIFORM_DEST = re.compile(r"UR(\d+)\b")
_DESCRIPTOR = re.compile(r"gdesc\[UR(\d+)\]")
_REGISTER_A = re.compile(r"R\d+, R\d+\b")
_ENDS_BLOCK = ("BRA", "BRX", "JMP", "EXIT", "RET")
_WGMMA = ("HGMMA", "QGMMA")
# "QGMMA.64x256x32.F32.E4M3.E4M3 R24, R160, gdesc[UR8], R24, gsb0": N 256, fp32 accumulators (N / 2 registers)
_WGMMA_SHAPE = re.compile(r"GMMA\.64x(\d+)x\d+\.(F32|F16)")
_FIRST_REGISTER = re.compile(r"R(\d+)\b")
_WAIT = re.compile(r"gsb0, 0x([0-9a-f]+)")


@dataclass(frozen=True)
class Instruction:
    address: int
    predicated: bool
    opcode: str
    operands: str


@dataclass(frozen=True)
class UnsetDescriptor:
    """A wgmma whose descriptor registers are not all written on some path into it."""

    address: int
    opcode: str
    registers: tuple[int, ...]      # the uniform registers not written on that path

    def __str__(self) -> str:
        regs = ", ".join(f"UR{r}" for r in self.registers)
        return (f"{self.opcode} at +0x{self.address:x} reads its descriptor from {regs}, which no instruction writes "
                "on some path into it (a ptxas miscompile: wrong operands or an illegal shared address at run time)")


@dataclass(frozen=True)
class WrittenInFlight:
    """An instruction that writes registers a wgmma reads (A) or writes (its accumulator) while it may still run."""

    address: int
    opcode: str
    role: str                       # "A operand" or "accumulator"
    registers: tuple[int, ...]      # the wgmma's registers that the writer writes
    writer: int
    writer_opcode: str

    def __str__(self) -> str:
        regs = ", ".join(f"R{r}" for r in self.registers)
        return (f"{self.opcode} at +0x{self.address:x} uses {regs} ({self.role}) while it runs, and "
                f"{self.writer_opcode} at +0x{self.writer:x} writes {'it' if len(self.registers) == 1 else 'them'} "
                "before a wait retires the wgmma (ptxas reused the registers: wrong operands at run time)")


def parse(sass: str) -> list[Instruction]:
    """The instructions of a SASS listing (of one kernel), in address order."""
    found = []
    for line in sass.splitlines():
        m = _INSTRUCTION.search(line)
        if m:
            found.append(Instruction(int(m.group(1), 16), bool(m.group(2)), m.group(3), m.group(4).strip()))
    return found


def _uniform_writes(ins: Instruction) -> set[int]:
    """Uniform registers an instruction writes: its first operand when that is a uniform register (``UMOV``,
    ``UIADD3``, ``R2UR``, ``S2UR``, ``VOTEU``...; a memory operand is in brackets, a predicate is ``UPx``); a
    ``.64`` opcode writes the pair. Predicated writes count as writes (the check never reports a write as missing
    that some instruction may make)."""
    m = _UNIFORM_DEST.match(ins.operands)
    if not m:
        return set()
    first = int(m.group(1))
    return {first, first + 1} if ".64" in ins.opcode else {first}


def _blocks(code: list[Instruction]) -> tuple[list[tuple[int, int]], list[set[int]]]:
    """Basic blocks as [start, stop) index ranges and each block's successors."""
    index = {ins.address: i for i, ins in enumerate(code)}

    def targets(ins: Instruction) -> list[int]:
        if not ins.opcode.startswith("BRA"):
            return []
        return [index[a] for a in (int(t, 16) for t in _TARGET.findall(ins.operands)) if a in index]

    leaders = {0}
    for i, ins in enumerate(code):
        if ins.opcode.startswith(_ENDS_BLOCK):
            leaders.add(i + 1)
            leaders.update(targets(ins))
    starts = sorted(s for s in leaders if s < len(code))
    ranges = list(zip(starts, starts[1:] + [len(code)]))
    block_at = {start: b for b, (start, _) in enumerate(ranges)}
    successors = []
    for b, (start, stop) in enumerate(ranges):
        last = code[stop - 1]
        succ = {block_at[t] for t in targets(last)}
        # an unconditional branch or exit does not fall through; anything else (predicated ones included) does
        if not (last.opcode.startswith(_ENDS_BLOCK) and not last.predicated) and stop < len(code):
            succ.add(b + 1)
        successors.append(succ)
    return ranges, successors


def unset_wgmma_descriptors(sass: str) -> list[UnsetDescriptor]:
    """Every wgmma (``HGMMA`` / ``QGMMA``) of a SASS listing whose descriptor registers are not written on every
    path from the entry into it. Unreachable code is not checked."""
    code = parse(sass)
    if not any(ins.opcode.startswith(_WGMMA) for ins in code):
        return []
    found = []
    for ins, written in _written_before(code, _uniform_writes):
        if ins.opcode.startswith(_WGMMA):
            m = _DESCRIPTOR.search(ins.operands)
            if m:
                x = int(m.group(1))
                needed = (x + 2, x + 3) if _REGISTER_A.match(ins.operands) else (x, x + 1, x + 2, x + 3)
                missing = tuple(r for r in needed if r not in written)
                if missing:
                    found.append(UnsetDescriptor(ins.address, ins.opcode, missing))
    return found


def _register_writes(ins: Instruction) -> set[int]:
    """General registers a (non-wgmma) instruction writes: its first operand when that is a register (a store's first
    operand is its address in brackets; a compare's is a predicate), the second for ``SHFL`` (after its predicate),
    widened for the pairs and quads that ``.64`` / ``.WIDE`` / ``.128``, ``LDSM``'s ``.2`` / ``.4`` (``M88``,
    ``MT88``), fp64 results and ``CS2R`` write. Predicated writes count (the check never misses a write that may
    happen)."""
    operands = ins.operands.split(", ", 1)[1] if ins.opcode.startswith("SHFL") and ", " in ins.operands \
        else ins.operands
    m = _FIRST_REGISTER.match(operands)
    if not m or ins.opcode.startswith(_WGMMA):
        return set()
    first = int(m.group(1))
    op = ins.opcode
    pair = (".64" in op or ".WIDE" in op or "88.2" in op or op.startswith(("DADD", "DMUL", "DFMA", "DMNMX"))
            or op.split(".")[:2] in (["F2F", "F64"], ["I2F", "F64"]) or (op.startswith("CS2R") and ".32" not in op))
    width = 4 if (".128" in op or "88.4" in op) else 2 if pair else 1
    return set(range(first, first + width))


def _wgmma_registers(ins: Instruction) -> tuple[set[int], set[int]]:
    """A wgmma's A registers (four, when A comes from registers) and its accumulator's."""
    regs = _FIRST_REGISTER.findall(ins.operands.split("gdesc")[0])
    shape = _WGMMA_SHAPE.search(ins.opcode)
    acc: set[int] = set()
    if regs and shape:
        n = int(shape.group(1))
        acc = set(range(int(regs[0]), int(regs[0]) + (n // 2 if shape.group(2) == "F32" else n // 4)))
    a = set(range(int(regs[1]), int(regs[1]) + 4)) if len(regs) > 1 else set()
    return a, acc


@dataclass(frozen=True)
class UnwrittenStore:
    """A shared-memory store whose source register is not written on some path into it."""

    address: int
    opcode: str
    register: int

    def __str__(self) -> str:
        return (f"{self.opcode} at +0x{self.address:x} stores R{self.register}, which no instruction writes on some "
                "path into it (a miscompile: stale data in shared memory, e.g. a wgmma operand)")


def stores_of_unwritten_registers(sass: str) -> list[UnwrittenStore]:
    """Every unpredicated shared-memory store (``STS``) whose (first) source register is not written on every path from
    the entry into it; predicated writes count as writes, unreachable code is not checked."""
    return _unwritten_reads(sass)[0]


def _written_before(code: list[Instruction], writes_of) -> Iterator[tuple[Instruction, set[int]]]:
    """Each reachable instruction with the registers (``writes_of`` an instruction: :func:`_uniform_writes` or
    :func:`_register_writes`) written on every path from the entry to it: a must-be-written data flow over the basic
    blocks, iterated to its fixed point (unreachable blocks are skipped)."""
    ranges, successors = _blocks(code)
    predecessors: list[set[int]] = [set() for _ in ranges]
    for b, succ in enumerate(successors):
        for t in succ:
            predecessors[t].add(b)
    writes = [set().union(*(writes_of(ins) for ins in code[start:stop])) for start, stop in ranges]
    # written on every path to the end of each block (None: no path reaches it yet); the entry starts with none
    out: list[set[int] | None] = [None] * len(ranges)

    def into(b: int) -> set[int] | None:
        if b == 0:
            return set()
        arriving = [out[p] for p in predecessors[b] if out[p] is not None]
        return set.intersection(*arriving) if arriving else None

    changed = True
    while changed:
        changed = False
        for b in range(len(ranges)):
            written = into(b)
            if written is not None and written | writes[b] != out[b]:
                out[b] = written | writes[b]
                changed = True
    for b, (start, stop) in enumerate(ranges):
        written = into(b)
        if written is None:
            continue
        for ins in code[start:stop]:
            yield ins, written
            written = written | writes_of(ins)


def wgmma_operands_written_in_flight(sass: str) -> list[WrittenInFlight]:
    """For every wgmma, the first instruction found (paths followed block by block, lower addresses first) that
    writes its A or accumulator registers on some path from it before a ``WARPGROUP.DEPBAR.LE gsb0, N`` that retires
    its group: at most N groups committed after its own (a ``gsb0`` wgmma commits a group). Other wgmmas writing the
    same accumulator (a chain) are not writers; paths follow :func:`_blocks` (a ``BRX``'s unknown targets end one)."""
    code = parse(sass)
    if not any(ins.opcode.startswith(_WGMMA) for ins in code):
        return []
    ranges, successors = _blocks(code)
    block_of = [b for b, (start, stop) in enumerate(ranges) for _ in range(start, stop)]
    found = []
    for i, ins in enumerate(code):
        if not ins.opcode.startswith(_WGMMA):
            continue
        a_regs, acc_regs = _wgmma_registers(ins)
        # (block, first instruction, own group committed, groups committed after it, capped)
        stack = [(block_of[i], i + 1, "gsb0" in ins.operands, 0)]
        seen: set[tuple[int, bool, int]] = set()
        hit = None
        while stack and hit is None:
            b, k, committed, after = stack.pop()
            retired = False
            for cur in code[k:ranges[b][1]]:
                wait = _WAIT.search(cur.operands) if cur.opcode.startswith("WARPGROUP.DEPBAR") else None
                if wait and committed and after >= int(wait.group(1), 16):
                    retired = True
                    break
                if cur.opcode.startswith(_WGMMA) and "gsb0" in cur.operands:
                    committed, after = True, min(after + (1 if committed else 0), 16)
                written = _register_writes(cur)
                role, regs = ("A operand", written & a_regs) if written & a_regs else ("accumulator", written & acc_regs)
                if regs:
                    hit = WrittenInFlight(ins.address, ins.opcode, role, tuple(sorted(regs)), cur.address, cur.opcode)
                    break
            if hit is None and not retired:
                for nxt in sorted(successors[b], reverse=True):
                    if (nxt, committed, after) not in seen:
                        seen.add((nxt, committed, after))
                        stack.append((nxt, ranges[nxt][0], committed, after))
        if hit is not None:
            found.append(hit)
    return found


@dataclass(frozen=True)
class UnwrittenConversion:
    """A conversion or half-precision operation that reads a register no instruction writes on some path into it."""

    address: int
    opcode: str
    register: int

    def __str__(self) -> str:
        return (f"{self.opcode} at +0x{self.address:x} reads R{self.register}, which no instruction writes on some path "
                "into it (a miscompile: a value read before the instruction that makes it)")


# the 8- and 16-bit conversions and half-precision arithmetic (where ptxas keeps 16-bit values in register halves)
_HALF_OPS = ("F2FP", "HADD2", "HMUL2", "HFMA2")


def conversions_of_unwritten_registers(sass: str) -> list[UnwrittenConversion]:
    """Every unpredicated conversion or half-precision operation (``F2FP``, ``HADD2``, ``HMUL2``, ``HFMA2``) with a source
    register not written on every path from the entry into it. Found in kernel_hopper_pp8's PL (session 47): inline PTX
    that rounded to e4m3 into a 16-bit register and read it back (``cvt.rn.satfinite.e4m3x2.f16x2 a0, ..;
    cvt.rn.f16x2.e4m3x2 h0, a0``) compiled, with ptxas 12.8, to an ``F2FP.F16.E4M3.UNPACK_B`` of a register the ``PRMT``
    that puts the rounded bytes there writes only after it: NaN outputs on the GPU."""
    return _unwritten_reads(sass)[1]


def _unwritten_reads(sass: str) -> tuple[list[UnwrittenStore], list[UnwrittenConversion]]:
    """:func:`stores_of_unwritten_registers` and :func:`conversions_of_unwritten_registers` in one pass of the
    must-be-written data flow."""
    code = parse(sass)
    stores: list[UnwrittenStore] = []
    conversions: list[UnwrittenConversion] = []
    if not any(ins.opcode.startswith(("STS", *_HALF_OPS)) for ins in code):
        return stores, conversions
    for ins, written in _written_before(code, _register_writes):
        if ins.predicated:
            continue
        if ins.opcode.startswith("STS"):
            m = _FIRST_REGISTER.search(ins.operands.split("]")[-1])
            if m and int(m.group(1)) not in written:
                stores.append(UnwrittenStore(ins.address, ins.opcode, int(m.group(1))))
        elif ins.opcode.startswith(_HALF_OPS):
            for src in ins.operands.split(", ")[1:]:
                m = re.match(r"-?\|?R(\d+)\b", src.strip())
                if m and int(m.group(1)) not in written:
                    conversions.append(UnwrittenConversion(ins.address, ins.opcode, int(m.group(1))))
                    break
    return stores, conversions


Finding = UnsetDescriptor | WrittenInFlight | UnwrittenStore | UnwrittenConversion


def wgmma_findings(sass: str) -> list[Finding]:
    """The four checks' findings in address order: descriptors not written on some path, operands written in flight,
    shared stores of registers not written on some path, conversions reading registers not written on some path."""
    stores, conversions = _unwritten_reads(sass)
    found: list[Finding] = [*unset_wgmma_descriptors(sass), *wgmma_operands_written_in_flight(sass), *stores,
                            *conversions]
    return sorted(found, key=lambda x: x.address)
