"""PTX002: CTA barriers that only some threads may reach (a branch on a thread-dependent predicate before them)."""

from __future__ import annotations

from collections.abc import Iterator

from ptxtool import isa
from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.divergence import ThreadDependence, ThreadOffsets, divergent_region, post_dominators
from ptxtool.lint.context import Context
from ptxtool.lint.registry import Hit, rule
from ptxtool.syntax import ast

# barrier form -> operands it has without the optional thread count (a count makes partial participation legal)
_BARRIERS = {("bar", "sync"): 1, ("barrier", "sync"): 1, ("bar", "red"): 3, ("barrier", "red"): 3}


def _full_barrier(i: ast.Instruction) -> bool:
    """A CTA-wide wait that every thread must reach at this very instruction: an aligned barrier (`bar.sync`,
    `bar.red`, `barrier.sync.aligned`, ...) without a thread count. A `barrier.sync` without `.aligned` may be reached
    from different instructions: it waits for the non-exited threads of the CTA to arrive at that barrier anywhere."""
    if i.opcode not in ("bar", "barrier") or (i.opcode == "barrier" and "aligned" not in i.modifiers):
        return False
    words = i.modifiers[1:] if i.modifiers[:1] == ("cta",) else i.modifiers  # bar.cta.sync, barrier.cta.red
    form = (i.opcode, words[0] if words else "sync")
    plain = _BARRIERS.get(form)
    return plain is not None and len(i.operands) <= plain


def _barrier_id(i: ast.Instruction) -> str:
    """The barrier a full barrier waits at, as written (`0`, `1`, or a register): same text, same barrier."""
    return i.operands[0].text if i.operands else "0"


def _each_side_arrives(cfg: CFG, branch_block: int, joins: int, barrier: str, at_block: dict[int, list]) -> bool:
    """Whether each side of the branch holds a full barrier `barrier` before the sides join: the warp-specialized
    idiom, each warpgroup reaching `bar.sync 1` on its own branch (in its own loop of a uniform trip count)."""
    for side in cfg.blocks[branch_block].successors:
        stack, seen, found = [side], set(), False
        while stack and not found:
            b = stack.pop()
            if b in seen or (joins >> b) & 1:
                continue
            seen.add(b)
            found = any(_barrier_id(op.instruction) == barrier and not op.guarded for op in at_block.get(b, ()))
            stack.extend(cfg.blocks[b].successors)
        if not found:
            return False
    return True


@rule("PTX002", "divergent-barrier", "error")
def divergent_barrier(ctx: Context) -> Iterator[Hit]:
    """An aligned CTA barrier (bar.sync, bar.red, barrier.sync.aligned) that only some threads of the CTA may reach.

    Every thread of the CTA must arrive at an aligned barrier without a thread count, at the same instruction (the
    ISA: in conditional code only if all threads evaluate the condition identically); if a branch on a thread-dependent
    predicate (one computed from %tid, %laneid, %warpid, an atomic's result, elect.sync, or a load through such an
    address; not the result of a CTA-wide bar.red) lets some threads go around it, the others wait forever or the
    behaviour is undefined (CUDA: `__syncthreads()` in conditional code only if the condition is the same for the
    whole block). The barrier is
    reported when it lies between such a branch and the point where both paths join again (its post-dominator),
    or when its own guard is thread-dependent. An early `ret` of some threads before the barrier counts too.
    Not reported: `bra.uni`, branches on uniform values (%ctaid, parameters), and barriers with an explicit thread
    count (`bar.sync 1, 128`), the named-barrier idiom of warp-specialized kernels; a branch each of whose sides
    holds a barrier of the same id before the sides join (each warpgroup calls `bar.sync 1` on its own branch, in
    loops of the same uniform trip count: all threads still arrive), unless a side loops back to the branch; and
    a comparison of two thread-dependent values that differ by a CTA-uniform amount (`i < tid + n` for `i`
    stepping from `tid`: the trip count is the same in every thread); and `barrier.sync` without `.aligned`, which
    the ISA lets threads reach from different instructions (it waits for the non-exited threads to arrive at that
    barrier wherever they do: Triton's warp-specialized kernels dispatch each role to its own `barrier.sync 1`).

        setp.lt.u32 %p1, %r_tid, 32;
        @%p1 bra DONE;
        bar.sync 0;          // PTX002: threads with %tid.x < 32 skip it
        DONE:
    """
    for function in ctx.bodies():
        cfg = ctx.cfg(function)
        ops = cfg.linear.ops
        barriers = [op for op in ops if _full_barrier(op.instruction)]
        if not barriers:
            continue
        varying = ThreadDependence(cfg)
        offsets = ThreadOffsets(cfg, varying)
        divergent = offsets.divergent_guard
        reported: set[int] = set()
        for op in barriers:
            if divergent(op):
                reported.add(op.index)
                predicate = op.instruction.guard.predicate.text
                yield Hit(
                    op.line, op.instruction.column, f"{op.instruction.mnemonic} guarded by thread-dependent {predicate}"
                )
        branches = [
            op
            for op in ops
            if isa.family(op.instruction) in ("bra", "brx.idx")
            and "uni" not in op.instruction.modifiers
            and (divergent(op) or (op.instruction.opcode == "brx" and varying.any_used(op)))
        ]
        if not branches:
            continue
        pdom = post_dominators(cfg)
        at_block: dict[int, list] = {}
        for op in barriers:
            at_block.setdefault(cfg.block_of[op.index], []).append(op)
        for branch in branches:
            start = cfg.block_of[branch.index]
            region = divergent_region(cfg, start, pdom)
            joins = pdom[start] & ~(1 << start)
            for block in sorted(region):
                for op in at_block.get(block, ()):
                    if op.index in reported:
                        continue
                    barrier = _barrier_id(op.instruction)
                    if start not in region and _each_side_arrives(cfg, start, joins, barrier, at_block):
                        continue
                    reported.add(op.index)
                    i = branch.instruction
                    what = i.guard.predicate.text if divergent(branch) else f"index {i.operands[0].text}"
                    yield Hit(
                        op.line,
                        op.instruction.column,
                        f"{op.instruction.mnemonic} reachable by only some threads: branch on thread-dependent "
                        f"{what} at line {branch.line}",
                    )
