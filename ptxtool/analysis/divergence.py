"""Which registers may differ between the threads of a CTA, post-dominators, and the blocks that only some threads
reach: the facts the divergent-barrier rule needs and ptxtool/analysis does not offer (yet). Local to lint."""

from __future__ import annotations

from ptxtool import isa
from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.linear import Op

# special registers whose value differs between the threads of one CTA
THREAD_SPECIAL = ("%tid", "%laneid", "%warpid", "%lanemask_")
# instruction families whose result differs between threads whatever their inputs
THREAD_FAMILIES = frozenset(("atom", "elect.sync", "activemask"))


def _cta_uniform(op: Op) -> bool:
    """A CTA-wide reduction (bar.red, barrier.cta.red): every thread gets the same result, whatever its inputs."""
    return op.instruction.opcode in ("bar", "barrier") and "red" in op.instruction.modifiers


def _reads_thread_special(op: Op) -> bool:
    return any(
        name.text.startswith(THREAD_SPECIAL)
        for operand in op.instruction.operands
        for name in isa.operand_names(operand)
    )


def guard(op: Op) -> str | None:
    """The register key of an op's guard predicate (the Linear form lists it last among the uses)."""
    return op.uses[-1] if op.guarded and op.uses else None


class ThreadDependence:
    """Which values may differ between the threads of a CTA, per definition (flow-sensitive through def-use chains):
    those computed from %tid/%laneid/%warpid, a per-thread result (atom, elect.sync), or another such value (a load
    through such an address included), except the result of a CTA-wide reduction. A .func's incoming registers
    count as uniform."""

    def __init__(self, cfg: CFG) -> None:
        from ptxtool.analysis.dataflow.liveness import def_use

        ops = cfg.linear.ops
        self.chains = def_use(cfg)
        work = [
            op.index
            for op in ops
            if op.defs
            and not _cta_uniform(op)
            and (_reads_thread_special(op) or isa.family(op.instruction) in THREAD_FAMILIES)
        ]
        self.varying: set[tuple[int, str]] = set()
        while work:
            at = work.pop()
            for d in ops[at].defs:
                if (at, d) in self.varying:
                    continue
                self.varying.add((at, d))
                work.extend(u for u in self.chains.uses_of.get((at, d), ()) if not _cta_uniform(ops[u]))

    def used(self, op: Op, key: str | None) -> bool:
        """Whether register `key`, as `op` reads it, may differ between threads."""
        return key is not None and any((d, key) in self.varying for d in self.chains.defs_of.get((op.index, key), ()))

    def any_used(self, op: Op) -> bool:
        return any(self.used(op, key) for key in op.uses)


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
