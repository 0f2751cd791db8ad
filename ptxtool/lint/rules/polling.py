"""PTX004: spin loops that poll memory without backing off."""

from __future__ import annotations

from collections.abc import Iterator

from ptxtool import isa
from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.linear import Op
from ptxtool.analysis.memory import dependent_branches
from ptxtool.lint.context import Context
from ptxtool.lint.registry import Hit, rule
from ptxtool.syntax import ast


def _polls(op: Op, written_in_loop: set[str]) -> bool:
    """A read that waits on other threads: an ordered/volatile load, `atom.exch`, or an `atom.cas` whose expected
    value does not come from inside the loop (a lock; a CAS retry loop feeds the last result back and is not)."""
    i = op.instruction
    if i.opcode == "ld":
        return bool(isa.caching.ORDERING.intersection(i.modifiers))
    if i.opcode != "atom":
        return False
    if "exch" in i.modifiers:
        return True
    if "cas" in i.modifiers and len(op.keys) > 2:
        return op.keys[2] is None or op.keys[2] not in written_in_loop
    return False


def _callees_back_off(ctx: Context, op: Op, backoff: set[str]) -> bool:
    """Whether a call in the loop goes to a function of this module that backs off (e.g. a __nanosleep wrapper)."""
    names = {n.text for operand in op.instruction.operands for n in isa.operand_names(operand)}
    return any(
        f.name in names and f.body is not None and any(i.opcode in backoff for i in _instructions(f))
        for f in ctx.module.functions
    )


def _instructions(function: ast.Function) -> Iterator[ast.Instruction]:
    return ast.instructions(function.body) if function.body is not None else iter(())


def _writes(op: Op, poll: Op) -> bool:
    info = isa.find(op.instruction)
    return op is not poll and info is not None and info.writes_memory


def _spin_region(cfg: CFG, blocks: frozenset[int], poll: Op) -> frozenset[int]:
    """The blocks of the cycle through the poll that writes no memory besides the poll itself (a consumer loop that
    stores what it read is work, not a spin); empty when there is no such cycle. Computed inside the natural loop,
    since loops sharing a header (a spin at the top of an outer loop) come merged from the analysis."""
    idle = {b for b in blocks if not any(_writes(op, poll) for op in cfg.ops(cfg.blocks[b]))}
    start = cfg.block_of[poll.index]
    if start not in idle:
        return frozenset()

    def reach(step) -> set[int]:
        seen: set[int] = set()
        stack = [n for n in step(start) if n in idle]
        while stack:
            b = stack.pop()
            if b not in seen:
                seen.add(b)
                stack.extend(n for n in step(b) if n in idle and n not in seen)
        return seen

    ahead = reach(lambda b: cfg.blocks[b].successors)
    if start not in ahead:
        return frozenset()
    return frozenset(ahead & reach(lambda b: cfg.blocks[b].predecessors))


def _backs_off(ctx: Context, op: Op, backoff: set[str]) -> bool:
    return op.instruction.opcode in backoff or (op.instruction.opcode == "call" and _callees_back_off(ctx, op, backoff))


def _loop_ops(cfg: CFG, blocks: frozenset[int]) -> list[Op]:
    return [op for b in sorted(blocks) for op in cfg.ops(cfg.blocks[b])]


@rule("PTX004", "polling-without-backoff", "warning", options={"backoff": ["nanosleep"]})
def polling_without_backoff(ctx: Context) -> Iterator[Hit]:
    """A loop that spins on a volatile/relaxed/acquire load or a lock (atom.exch/cas) with no back-off (nanosleep).

    A loop whose exit depends on a value another thread or the host writes (a flag, a ticket, a queue head) keeps
    issuing loads at full rate: the waiting warps steal issue slots and memory bandwidth from the very threads
    they wait for, and on the whole GPU the traffic can slow the writer by orders of magnitude. Put
    `nanosleep.u32 t;` in the loop (doubling t up to a limit is the usual back-off); `mbarrier.try_wait`, which
    suspends in hardware, is not reported. Option `backoff` lists the instructions that count as a back-off;
    a call in the loop to a function of the file that contains one counts too. A compare-and-swap retry loop
    (atomicMax on floats: the expected value is the last result) makes progress on every failure and is not
    reported; a CAS whose expected value is fixed (a spin lock) is. A loop that also writes memory (a consumer
    that processes what it polled) is work, not a spin, and is not reported either.

        WAIT:
        ld.acquire.gpu.global.u32 %r1, [%rd1];
        setp.eq.u32 %p1, %r1, 0;
        @%p1 bra WAIT;        // PTX004 at the load: add nanosleep.u32 before the branch
    """
    backoff = set(ctx.options["backoff"])
    for function in ctx.bodies():
        if not any(i.opcode in ("ld", "atom") for i in _instructions(function)):
            continue
        cfg = ctx.cfg(function)
        reported: set[int] = set()
        for loop in ctx.loops(function):
            ops = _loop_ops(cfg, loop.blocks)
            written = {d for op in ops for d in op.defs}
            for poll in (op for op in ops if _polls(op, written) and op.index not in reported):
                spin = _loop_ops(cfg, _spin_region(cfg, loop.blocks, poll))
                if not spin or any(_backs_off(ctx, op, backoff) for op in spin):
                    continue
                exits = dependent_branches(spin, poll)
                if exits:
                    reported.add(poll.index)
                    yield Hit(
                        poll.line,
                        poll.instruction.column,
                        f"loop polls with {poll.instruction.mnemonic} (branch at line {exits[0].line}) without "
                        f"back-off: add {sorted(backoff)[0]}",
                    )
