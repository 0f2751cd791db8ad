"""Loads in flight per loop of a function's SASS: how many memory loads ptxas lets a loop trip issue before it
waits for one of them. A loop whose loads are batched (8 loads, then the arithmetic that reads them) keeps eight in
flight; restructuring it can leave ptxas interleaving each load with its use (1 or 3 in flight), and the loop then
waits out each load's latency on its own.

Definitions (docs/warp-roles.md, "Loads in flight"):

- A **loop** is a backward branch: a `BRA` (not `@!PT`) whose target label is at or before it; its body is the
  instructions from the target to the branch, in address order. Its **own body** leaves out the bodies of the loops
  nested in it (a loop whose range lies inside another's); loads there are the inner loop's.
- A **load** is an instruction of `LOADS`: a memory read into registers, whose result arrives after a latency the
  hardware waits for by register scoreboard. Its destination covers 1, 2, 4 or 8 registers (`.64`, `.128`, `.256`;
  `LDSM` `.2`, `.4`), split evenly over its destination operands.
- A load is **in flight** from its issue until the first later instruction that names a register it writes: reading
  it needs the value, and writing it must wait for the load (else the load would overwrite the newer value).
  A later instruction names the registers of its operands, `Rn.64` and the operands of 64-bit arithmetic (`D*`,
  `.WIDE`) as register pairs, a memory instruction's data operand at its access width, tensor-core operands as 4
  registers each (their widths depend on the shape: the most any takes).
- **Loads in flight** of a loop: the most loads in flight at once while its own body runs in straight-line order,
  counted on the second of two trips through it, so loads a trip issues for the next one (ptxas's software
  pipelining) count, and a load whose register the next trip's copy writes ends there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from ptxtool.toolchain.sass import ListingLine, SassOp, parse_op

# Memory reads whose result lands in general registers through the scoreboard: global, shared (and ldmatrix's
# LDSM), local and generic. Not counted: constant-bank reads (LDC, ULDC: kernel parameters and constants ptxas
# reloads instead of keeping a register, served by the constant cache), texture and surface fetches (their
# destination lists are masks the listing does not spell out), and async copies (LDGSTS, UBLKCP, UTMALDG: they write
# shared memory, not registers, and are waited on through DEPBAR or mbarriers).
LOADS = frozenset(("LDG", "LDS", "LDSM", "LDL", "LD"))
STORES = frozenset(("STG", "STS", "STL", "ST", "STSM", "RED", "REDG", "ATOM", "ATOMG", "ATOMS"))
PAIRED = frozenset(("DADD", "DMUL", "DFMA", "DSETP", "DMNMX", "DSET", "DMMA"))  # 64-bit arithmetic: pairs
TENSOR = frozenset(("HMMA", "IMMA", "BMMA", "QMMA", "OMMA"))  # register operands of up to 4 registers each
_BITS = {"64": 64, "128": 128, "256": 256}
_LDSM_COUNT = {"2": 2, "4": 4}
_REGISTER = re.compile(r"(?<![A-Za-z0-9_])R(\d+)(\.64)?(?![0-9])")
_TARGET = re.compile(r"`\((\.L_\w+)\)")
_JUMPS = frozenset(("BRA", "JMP", "BRX", "BRXU", "JMX", "JMXU"))
_ENDS_BLOCK = _JUMPS | {"EXIT", "RET", "KILL"}


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


def _registers(operand: str, width: int) -> set[int]:
    """The registers an operand names: `R4` with `width` 2 is R4, R5; `R4.64` is a pair whatever `width` says."""
    out: set[int] = set()
    for match in _REGISTER.finditer(operand):
        first = int(match.group(1))
        out.update(range(first, first + (2 if match.group(2) else width)))
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


def _access_width(op: SassOp) -> int:
    """Registers a load's or store's data covers: `.64` 2, `.128` 4, `.256` 8; `LDSM.16.M88.4` 4."""
    if op.mnemonic in ("LDSM", "STSM"):
        return next((_LDSM_COUNT[m] for m in op.modifiers if m in _LDSM_COUNT), 1)
    return max((_BITS[m] // 32 for m in op.modifiers if m in _BITS), default=1)


def written(op: SassOp) -> set[int]:
    """The registers a load writes: its data width, split over the register operands before its address."""
    operands = _operands(op)
    address = next((n for n, o in enumerate(operands) if "[" in o), len(operands))
    data = [o for o in operands[:address] if _REGISTER.match(o)]
    width = max(1, _access_width(op) // max(1, len(data)))
    return set().union(set(), *(_registers(o, width) for o in data))


def named(op: SassOp) -> set[int]:
    """Every general register an instruction names, read or written (`RZ` is none), at the widths it uses them."""
    operands = _operands(op)
    if op.mnemonic in LOADS | STORES:
        width = _access_width(op)
        return set().union(set(), *(_registers(o, 1 if "[" in o else width) for o in operands))
    if op.mnemonic in TENSOR:
        return set().union(set(), *(_registers(o, 4) for o in operands))
    if op.mnemonic in PAIRED:
        return set().union(set(), *(_registers(o, 2) for o in operands))
    if "WIDE" in op.modifiers:  # IMAD.WIDE d, a, b, c: d and c are pairs
        regs = [n for n, o in enumerate(operands) if _REGISTER.search(o)]
        pairs = {regs[0], regs[-1]} if regs else set()
        return set().union(set(), *(_registers(o, 2 if n in pairs else 1) for n, o in enumerate(operands)))
    return set().union(set(), *(_registers(o, 1) for o in operands))


def in_flight(ops: Sequence[SassOp], counted: Callable[[SassOp], bool] = lambda op: True) -> int:
    """The most counted loads in flight at once over the second of two straight-line runs through `ops` (module
    docstring); loads `counted` rejects are not counted, though instructions naming their registers still wait."""
    pending: dict[int, int] = {}  # register -> the counted load in flight that writes it
    best = 0
    for trip in (0, 1):
        for n, op in enumerate(ops):
            landed = {pending[r] for r in named(op) if r in pending}
            pending = {r: load for r, load in pending.items() if load not in landed}
            if op.mnemonic in LOADS and counted(op):
                pending.update(dict.fromkeys(written(op), n))
            if trip:
                best = max(best, len(set(pending.values())))
    return best


def _blocks(ops: Sequence[SassOp], labels: dict[str, int]) -> tuple[list[int], list[set[int]]]:
    """Basic-block starts and each block's successors: a block ends at a label or after a branch or exit; a branch
    whose target the listing does not name (`BRX`, `JMX`) may go to any label."""
    leaders = {0, *labels.values()} | {n + 1 for n, op in enumerate(ops) if op.mnemonic in _ENDS_BLOCK}
    starts = sorted(n for n in leaders if n < len(ops))
    block_at = {start: b for b, start in enumerate(starts)}
    successors: list[set[int]] = []
    ends = [*starts[1:], len(ops)]
    for b, end in enumerate(ends):
        last = ops[end - 1]
        out: set[int] = set()
        if last.predicate == "@!PT" or last.mnemonic not in _ENDS_BLOCK or last.predicate not in ("", "@PT"):
            out |= {b + 1} if b + 1 < len(starts) else set()
        if last.predicate != "@!PT" and last.mnemonic in _JUMPS:
            target = _TARGET.search(last.operands)
            known = labels.get(target.group(1)) if target and last.mnemonic in ("BRA", "JMP") else None
            heads = [known] if known is not None else list(labels.values())
            out |= {block_at[h] for h in heads if h in block_at}
        successors.append(out)
    return starts, successors


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
    ops: list[SassOp] = []
    labels: dict[str, int] = {}
    for entry in lines:
        if entry.text.endswith(":"):
            labels[entry.text[:-1]] = len(ops)
        else:
            ops.append(parse_op(entry.text, entry.ptx_line))
    if not ops:
        return ()
    starts, successors = _blocks(ops, labels)
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
