"""Which registers may differ between the threads of a CTA, post-dominators, and the blocks that only some threads
reach: the facts the divergent-barrier rule needs and ptxtool/analysis does not offer (yet). Local to lint."""

from __future__ import annotations

from ptxtool import isa
from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.linear import Linear, Op

# special registers whose value differs between the threads of one CTA
THREAD_SPECIAL = ("%tid", "%laneid", "%warpid", "%lanemask_")
# instruction families whose result differs between threads whatever their inputs
THREAD_FAMILIES = frozenset(("atom", "elect.sync", "activemask"))


def _reads_thread_special(op: Op) -> bool:
    return any(
        name.text.startswith(THREAD_SPECIAL)
        for operand in op.instruction.operands
        for name in isa.operand_names(operand)
    )


def guard(op: Op) -> str | None:
    """The register key of an op's guard predicate (the Linear form lists it last among the uses)."""
    return op.uses[-1] if op.guarded and op.uses else None


def thread_dependent(linear: Linear) -> set[str]:
    """Register keys whose value may differ between threads: defined from %tid/%laneid, a per-thread result
    (atom, elect.sync), or another such register (loads through such an address included). Flow-insensitive."""
    users: dict[str, list[Op]] = {}
    for op in linear.ops:
        for u in op.uses:
            users.setdefault(u, []).append(op)
    work = [
        op
        for op in linear.ops
        if op.defs and (_reads_thread_special(op) or isa.family(op.instruction) in THREAD_FAMILIES)
    ]
    tainted: set[str] = set()
    while work:
        op = work.pop()
        for d in op.defs:
            if d not in tainted:
                tainted.add(d)
                work.extend(users.get(d, ()))
    return tainted


def post_dominators(cfg: CFG) -> list[int]:
    """For each block, the bit set of blocks that lie on every path from it to the function's end."""
    n = len(cfg.blocks)
    everything = (1 << n) - 1
    pdom = [1 << b.index if not b.successors else everything for b in cfg.blocks]
    changed = True
    while changed:
        changed = False
        for b in reversed(cfg.reverse_postorder):
            block = cfg.blocks[b]
            if not block.successors:
                continue
            meet = everything
            for s in block.successors:
                meet &= pdom[s]
            new = meet | (1 << b)
            if new != pdom[b]:
                pdom[b] = new
                changed = True
    return pdom


def divergent_region(cfg: CFG, branch_block: int, pdom: list[int]) -> set[int]:
    """Blocks reached after a divergent branch before control joins again (at a block post-dominating it)."""
    joins = pdom[branch_block] & ~(1 << branch_block)
    seen: set[int] = set()
    stack = [s for s in cfg.blocks[branch_block].successors if not (joins >> s) & 1]
    while stack:
        b = stack.pop()
        if b in seen:
            continue
        seen.add(b)
        stack.extend(s for s in cfg.blocks[b].successors if s not in seen and not (joins >> s) & 1)
    return seen
