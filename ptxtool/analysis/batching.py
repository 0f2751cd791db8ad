"""Loads in flight per loop of a function's SASS: how many memory loads ptxas lets a loop trip issue before it
waits for one of them. A loop whose loads are batched (8 loads, then the arithmetic that reads them) keeps eight in
flight; restructuring it can leave ptxas interleaving each load with its use (1 or 3 in flight), and the loop then
waits out each load's latency on its own.

Definitions (docs/warp-roles.md, "Loads in flight"):

- A **loop** is a natural loop of the listing's control flow: a branch to a block that dominates it (a back edge),
  with the blocks that reach the branch without passing that block. The out-of-line retry of an mbarrier wait, which
  jumps back into its loop, is part of the loop and no loop itself. A loop's **own body** is its blocks less those
  of the loops nested in it, in address order.
- A **load** is an instruction of `LOADS`: a memory read into registers, whose result arrives after a latency the
  hardware waits for by register scoreboard. Its destination covers 1, 2, 4 or 8 registers (`.64`, `.128`, `.256`;
  `LDSM` `.2`, `.4`), split evenly over its destination operands.
- A load is **in flight** from its issue until the first later instruction that names a register it writes: reading
  it needs the value, and writing it must wait for the load (else the load would overwrite the newer value).
  `named` says which registers an instruction names, at the widths its modifiers, types, address form and MMA shape
  give them (checked against nvdisasm's own life ranges in the tests); a call names every register. A waiting CTA
  barrier (`BAR.SYNC`, not `BAR.ARV`) also completes the shared loads before it (`SHARED_LOADS`).
- **Loads in flight** of a loop: the most loads in flight at once while its own body runs in straight-line order,
  counted on the second of two trips through it, so loads a trip issues for the next one (ptxas's software
  pipelining) count, and a load whose register the next trip's copy writes ends there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from ptxtool.toolchain.sass import (
    CLASSES,
    TENSOR_CORE,
    ListingLine,
    SassOp,
    basic_blocks,
    instructions_and_labels,
)

# Memory reads whose result lands in general registers through the scoreboard: global, shared (and ldmatrix's
# LDSM), local and generic. Not counted: constant-bank reads (LDC, ULDC: kernel parameters and constants ptxas
# reloads instead of keeping a register, served by the constant cache), texture and surface fetches (their
# destination lists are masks the listing does not spell out), and async copies (LDGSTS, UBLKCP, UTMALDG: they write
# shared memory, not registers, and are waited on through DEPBAR or mbarriers).
LOADS = frozenset(("LDG", "LDS", "LDSM", "LDL", "LD"))
# Shared loads a waiting CTA barrier (`BAR.SYNC`, `BAR.RED`) completes: ptxas gives a shared load whose value is
# read only after such a barrier no scoreboard at all (its control bits), while a global load keeps its scoreboard
# across barriers.
SHARED_LOADS = frozenset(("LDS", "LDSM"))
PAIRED = frozenset(("DADD", "DMUL", "DFMA", "DSETP", "DMNMX", "DSET", "RET", "CS2R", "BRX", "LEPC"))  # 64-bit: pairs
EVERY_REGISTER = frozenset(range(255))  # what a call names: the callee may read or write any register (R0..R254)
_BITS = {"64": 64, "128": 128, "256": 256}
_LDSM_COUNT = {"2": 2, "4": 4}
_REGISTER = re.compile(r"(?<![A-Za-z0-9_])R(\d+)(\.64|\.U32)?(?![0-9])")
_VECTOR = re.compile(r"(?:[A-Z]+(\d+))?x(\d+)")
_PREDICATE = re.compile(r"!?U?P(\d+|T)")
_WARP_REGISTER_BITS = 32 * 32  # one register across a warp: 32 lanes of 32 bits holds that many bits of a fragment
_MMA = frozenset(("HMMA", "IMMA"))
_ELEMENT_BITS = {"F16": 16, "BF16": 16, "TF32": 32, "S8": 8, "U8": 8, "E4M3": 8, "E5M2": 8, "S4": 4, "U4": 4}
_WIDE_ADDRESSES = frozenset(("E", "BA"))  # an access with 64-bit addresses: `LDG.E R4, [R2]` reads R2, R3
_CONVERSIONS = frozenset(("F2F", "F2I", "I2F", "I2I", "F2FP", "I2FP"))


@dataclass(frozen=True, slots=True)
class SassLoop:
    """One loop of a function's SASS: op indices of its header (the back edge's target) and of its own body (address
    order), how many counted loads its own body issues, the most of them in flight at once, the PTX lines its own
    body came from, and whether no loop is nested in it."""

    head: int
    body: tuple[int, ...]
    loads: int
    in_flight: int
    lines: frozenset[int]
    inner: bool


def _registers(operand: str, width: int, pairs: bool = False) -> set[int]:
    """The registers an operand names: `R4` with `width` 2 is R4, R5; `R4.64` (or any `R4` where `pairs`, but
    `R4.U32`) is a pair whatever `width` says."""
    out: set[int] = set()
    for match in _REGISTER.finditer(operand):
        first, suffix = int(match.group(1)), match.group(2) or ""
        count = 2 if suffix == ".64" or (pairs and suffix != ".U32") else width
        out.update(range(first, first + count))
    return out


def _operands(op: SassOp) -> list[str]:
    """Operands split at top-level commas (`desc[UR4][R2.64+0x10]` stays one)."""
    parts, depth, current = [], 0, []
    for ch in op.operands:
        depth += ch in "[(" or -(ch in "])")
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def _widths(op: SassOp, operands: list[str]) -> list[int]:
    """Registers each operand covers (an address counts alone: `_registers` reads its `.64`)."""
    kinds = [m for m in op.modifiers if m[:1] in "FSU" and m[1:] in ("16", "32", "64")]
    regs = [n for n, o in enumerate(operands) if _REGISTER.search(o)]
    if op.mnemonic in _CONVERSIONS:  # the destination's type, then the source's (each 32-bit unless given)
        out_type, in_type = _conversion_types(op.mnemonic, kinds)
        return [2 if (out_type if regs and n == regs[0] else in_type) == "64" else 1 for n in range(len(operands))]
    if "WIDE" in op.modifiers:  # IMAD.WIDE d, [carry-out,] a, b, c[, carry-in]: d and c are pairs
        addend = 4 if len(operands) > 1 and _PREDICATE.fullmatch(operands[1]) else 3
        return [2 if n in (0, addend) else 1 for n in range(len(operands))]
    if op.mnemonic in _MMA and (mma := _mma_widths(op)):
        return [mma[min(n, 3)] for n in range(len(operands))]
    if op.mnemonic == "IMAD" and "HI" in op.modifiers and len(operands) > 4:  # d, carry-out, a, b, c: c is 64-bit
        return [2 if regs and n == regs[-1] else 1 for n in range(len(operands))]
    if shape := next((m for m in op.modifiers if re.fullmatch(r"64x\d+x\d+", m)), None):  # warpgroup MMA
        accumulators = int(shape.split("x")[1]) // (4 if "F16" in op.modifiers[1:2] else 2)
        return [accumulators if regs and n in (regs[0], regs[-1]) else 4 for n in range(len(operands))]
    if op.mnemonic in ("LDSM", "STSM"):
        width = next((_LDSM_COUNT[m] for m in op.modifiers if m in _LDSM_COUNT), 1)
    elif op.mnemonic in TENSOR_CORE:  # a shape this does not read: the most an operand of any takes
        width = 4
    elif op.mnemonic in CLASSES["texture"]:  # coordinates and results in register pairs
        width = 2
    elif op.mnemonic in PAIRED and "32" not in op.modifiers:
        width = 2
    elif op.mnemonic != "SHF" and any(k.endswith("64") for k in kinds):  # SHF.L.U64 takes two 32-bit halves
        width = 2
    else:
        counts = [_BITS[m] // 32 for m in op.modifiers if m in _BITS]  # `.128`; vectors: `.F16x4` 2, `.x4` 4
        counts += [int(v[1] or 32) * int(v[2]) // 32 for m in op.modifiers if (v := _VECTOR.fullmatch(m))]
        width = max(counts, default=1)
    return [1 if "[" in o else width for o in operands]


def _mma_widths(op: SassOp) -> tuple[int, int, int, int] | None:
    """Registers of D, A, B, C of a warp-level MMA (`HMMA.16816.F32.BF16`: m16 n8 k16, F32 accumulators, 16-bit
    inputs: 4, 4, 2, 4), from its shape and types; None for a shape this does not read (`DMMA.884`)."""
    shape = next((m for m in op.modifiers if m.isdigit()), "")
    m = 16 if shape.startswith("16") else 8 if shape.startswith("8") else 0
    n = 8 if shape[len(str(m)) :].startswith("8") else 0
    k = int(shape[len(str(m)) + 1 :] or 0)
    types = [t for t in op.modifiers[1:] if not t.isdigit() and t not in ("SAT", "ROW", "COL")]
    if not (m and n and k) or op.mnemonic not in ("HMMA", "IMMA"):
        return None
    accumulator = 32 if op.mnemonic == "IMMA" or types[:1] != ["F16"] else 16
    inputs = types[0] if op.mnemonic == "IMMA" else types[1] if len(types) > 1 else "F16"
    bits = _ELEMENT_BITS.get(inputs)
    if bits is None:
        return None
    d = m * n * accumulator // _WARP_REGISTER_BITS
    return d, m * k * bits // _WARP_REGISTER_BITS, n * k * bits // _WARP_REGISTER_BITS, d


def _conversion_types(mnemonic: str, kinds: list[str]) -> tuple[str, str]:
    """The bit widths of a conversion's destination and source: `F2F.F64.F32` is (64, 32); a lone type names the
    side of its kind (`I2F.F64`: the float destination; `F2I.F64`: the float source)."""
    if len(kinds) >= 2:
        return kinds[0][1:], kinds[1][1:]
    if not kinds:
        return "32", "32"
    out_kind = "F" if mnemonic in ("I2F", "F2F") else "SU"
    return (kinds[0][1:], "32") if kinds[0][0] in out_kind else ("32", kinds[0][1:])


def written(op: SassOp) -> set[int]:
    """The registers a load writes: its data width, split over the register operands before its address."""
    operands = _operands(op)
    address = next((n for n, o in enumerate(operands) if "[" in o), len(operands))
    data = [n for n, o in enumerate(operands[:address]) if _REGISTER.match(o)]
    if not data:
        return set()
    width = max(1, _widths(op, operands)[data[0]] // len(data))  # `.256` over two destinations: 4 each
    return set().union(*(_registers(operands[n], width) for n in data))


def named(op: SassOp) -> set[int]:
    """Every general register an instruction names, read or written (`RZ` is none), at the widths it uses them:
    modifiers give them (`.64`, `.128`, `.F64`, `.U64`, `LDSM`'s `.4`), 64-bit arithmetic uses pairs, an address
    is a pair where written `R2.64` or where the access has 64-bit addresses (`.E`), a call names every register."""
    if op.mnemonic == "CALL":
        return set(EVERY_REGISTER)
    operands = _operands(op)
    addresses = [n for n, o in enumerate(operands) if "[" in o]
    wide = addresses[-1] if addresses and not _WIDE_ADDRESSES.isdisjoint(op.modifiers) else None  # the global one
    widths = _widths(op, operands)
    return set().union(set(), *(_registers(o, widths[n], n == wide) for n, o in enumerate(operands)))


def in_flight(ops: Sequence[SassOp], counted: Callable[[SassOp], bool] = lambda op: True) -> int:
    """The most counted loads in flight at once over the second of two straight-line runs through `ops` (module
    docstring); loads `counted` rejects are not counted, though instructions naming their registers still wait."""
    pending: dict[int, tuple[int, int]] = {}  # register -> the counted load in flight that writes it (trip, index)
    best = 0
    for trip in (0, 1):
        for n, op in enumerate(ops):
            landed = {pending[r] for r in named(op) if r in pending}
            if op.mnemonic == "BAR" and "ARV" not in op.modifiers:  # a CTA barrier completes the shared loads
                landed |= {load for r, load in pending.items() if ops[load[1]].mnemonic in SHARED_LOADS}
            pending = {r: load for r, load in pending.items() if load not in landed}
            if op.mnemonic in LOADS and counted(op):
                pending.update(dict.fromkeys(written(op), (trip, n)))
            if trip:
                best = max(best, len(set(pending.values())))
    return best


def _dominators(successors: list[set[int]]) -> list[int]:
    """Each block's dominators as a bit set (block 0 the entry; unreachable blocks dominated by every block)."""
    count = len(successors)
    predecessors: list[list[int]] = [[] for _ in range(count)]
    for b, out in enumerate(successors):
        for s in out:
            predecessors[s].append(b)
    every = (1 << count) - 1
    dom = [1] + [every] * (count - 1)
    changed = True
    while changed:
        changed = False
        for b in range(1, count):
            meet = every
            for p in predecessors[b]:
                meet &= dom[p]
            new = meet | (1 << b)
            if new != dom[b]:
                dom[b], changed = new, True
    return dom


def sass_loops(lines: Sequence[ListingLine], counted_lines: Collection[int] | None = None) -> tuple[SassLoop, ...]:
    """Every loop of one function's listing (labels and instructions, as `toolchain.sass.listing` gives them), by
    header address. `counted_lines`: count only the loads made from these PTX lines (None: every load)."""
    ops, labels = instructions_and_labels(lines)
    if not ops:
        return ()
    starts, successors = basic_blocks(ops, labels)
    dom = _dominators(successors)
    predecessors: list[set[int]] = [set() for _ in starts]
    for b, out in enumerate(successors):
        for s in out:
            predecessors[s].add(b)
    reachable, stack = {0}, [0]
    while stack:
        for s in successors[stack.pop()] - reachable:
            reachable.add(s)
            stack.append(s)
    bodies: dict[int, set[int]] = {}
    for b in sorted(reachable):
        for h in successors[b]:
            if dom[b] >> h & 1:  # a back edge b -> h: h dominates b
                body = bodies.setdefault(h, {h})
                stack = [b] if b not in body else []
                body.add(b)
                while stack:
                    for p in predecessors[stack.pop()] - body:
                        body.add(p)
                        stack.append(p)
    ends = [*starts[1:], len(ops)]
    wanted = None if counted_lines is None else frozenset(counted_lines)

    def counted(op: SassOp) -> bool:
        return wanted is None or op.ptx_line in wanted

    out_loops = []
    for h, body in sorted(bodies.items()):
        nested = set().union(set(), *(b for other, b in bodies.items() if other != h and other in body))
        own = [n for b in sorted(body - nested) for n in range(starts[b], ends[b])]
        own_ops = [ops[n] for n in own]
        out_loops.append(
            SassLoop(
                starts[h],
                tuple(own),
                sum(op.mnemonic in LOADS and counted(op) for op in own_ops),
                in_flight(own_ops, counted),
                frozenset(op.ptx_line for op in own_ops if op.ptx_line > 0),
                not nested,
            )
        )
    return tuple(out_loops)


def listing_of(text: str) -> list[ListingLine]:
    """A listing from SASS text as nvdisasm prints it or as written by hand: one instruction or label a line
    (`/*0040*/` addresses, trailing `;` and `//` comments are dropped)."""
    out = []
    for raw in text.splitlines():
        line = re.sub(r"/\*[0-9a-fA-F]*\*/|//.*$", "", raw).strip().rstrip(";").strip()
        if line:
            out.append(ListingLine(line))
    return out
