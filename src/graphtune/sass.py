"""Reading SASS (``cuobjdump --dump-sass`` text): the control flow of a kernel and the check of its Hopper warpgroup
MMAs' descriptors.

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

Only the text is read here (no tools run, no Triton or torch): resources.py runs cuobjdump.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# "/*0740*/  @!P0 LDS R241, [R10+0x38700] ;" -> address, predicate, opcode, operands
_INSTRUCTION = re.compile(r"/\*([0-9a-f]+)\*/\s+(@!?U?P\w+\s+)?([A-Z][\w.]*)\s*([^;]*);")
_TARGET = re.compile(r"0x([0-9a-f]+)")
_UNIFORM_DEST = re.compile(r"UR(\d+)\b")
_DESCRIPTOR = re.compile(r"gdesc\[UR(\d+)\]")
_REGISTER_A = re.compile(r"R\d+, R\d+\b")
_ENDS_BLOCK = ("BRA", "BRX", "JMP", "EXIT", "RET")


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
    if not any(ins.opcode.startswith(("HGMMA", "QGMMA")) for ins in code):
        return []
    ranges, successors = _blocks(code)
    predecessors: list[set[int]] = [set() for _ in ranges]
    for b, succ in enumerate(successors):
        for s in succ:
            predecessors[s].add(b)
    writes = [set().union(*(_uniform_writes(ins) for ins in code[start:stop])) for start, stop in ranges]
    # written on every path to the end of each block (None: no path reaches it yet); the entry starts with none
    out: list[set[int] | None] = [None] * len(ranges)

    def written_into(b: int) -> set[int] | None:
        """Registers written on every path into block b (None: no path reaches it yet)."""
        if b == 0:
            return set()
        arriving = [out[p] for p in predecessors[b] if out[p] is not None]
        return set.intersection(*arriving) if arriving else None

    changed = True
    while changed:
        changed = False
        for b in range(len(ranges)):
            written = written_into(b)
            if written is not None and written | writes[b] != out[b]:
                out[b] = written | writes[b]
                changed = True
    found = []
    for b, (start, stop) in enumerate(ranges):
        written = written_into(b)
        if written is None:
            continue
        for ins in code[start:stop]:
            if ins.opcode.startswith(("HGMMA", "QGMMA")):
                m = _DESCRIPTOR.search(ins.operands)
                if m:
                    x = int(m.group(1))
                    needed = (x + 2, x + 3) if _REGISTER_A.match(ins.operands) else (x, x + 1, x + 2, x + 3)
                    missing = tuple(r for r in needed if r not in written)
                    if missing:
                        found.append(UnsetDescriptor(ins.address, ins.opcode, missing))
            written = written | _uniform_writes(ins)
    return found
