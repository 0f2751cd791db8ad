"""Which registers may differ between the threads of a CTA, post-dominators, and the blocks that only some threads
reach: the facts the divergent-barrier rule needs and ptxtool/analysis does not offer (yet). Local to lint."""

from __future__ import annotations

from ptxtool import isa
from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.linear import Op
from ptxtool.syntax import ast

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
        ops = cfg.linear.ops
        self.chains = cfg.chains
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


_UNIFORM = "uniform"  # an operand the same in every thread of the CTA
_PENDING = "pending"  # a base not known yet in the optimistic iteration: agrees with any other
_INTEGER = frozenset(("u16", "s16", "b16", "u32", "s32", "b32", "u64", "s64", "b64"))


class ThreadOffsets:
    """Per thread-dependent definition, the thread-dependent value it equals up to a CTA-uniform offset (its
    'base'): `%tid.x + n` and `%tid.x + 32*k` (a loop's `i += 32` from `i = %tid.x`) share the base %tid.x, so
    comparing them gives every thread the same answer: the trip count of `for (i = tid; i < tid + n; i += 32)`.
    Bases are found optimistically to a fixed point through loops; a definition of any other kind is its own base.
    Wrap-around is not modelled (`x + u < y + u` may differ from `x < y` where a sum overflows)."""

    def __init__(self, cfg: CFG, varying: ThreadDependence) -> None:
        self.ops = cfg.linear.ops
        self.varying = varying
        self.base: dict[tuple[int, str], object] = dict.fromkeys(varying.varying, _PENDING)
        for _ in range(2 * len(self.base) + 2):  # each base changes at most twice: pending -> a base -> unknown
            changed = False
            for at, reg in sorted(self.base):
                value = self._define(self.ops[at], reg)
                if self.base[(at, reg)] != value:
                    self.base[(at, reg)] = value
                    changed = True
            if not changed:
                break

    def _operand(self, op: Op, position: int) -> object:
        """The base of a source operand: _UNIFORM, a thread special register, a definition's base, or None."""
        operand = op.instruction.operands[position]
        if isinstance(operand, ast.Immediate):
            return _UNIFORM
        key = op.keys[position] if position < len(op.keys) else None
        if key is None:
            names = list(isa.operand_names(operand))
            if len(names) != 1:
                return None
            return ("special", names[0].text) if names[0].text.startswith(THREAD_SPECIAL) else _UNIFORM
        if not self.varying.used(op, key):
            return _UNIFORM
        found = {self.base.get((d, key), _UNIFORM) for d in self.varying.chains.defs_of.get((op.index, key), ())}
        found.discard(_PENDING)
        if not found:
            return _PENDING
        return found.pop() if len(found) == 1 else None

    def _define(self, op: Op, reg: str) -> object:
        i = op.instruction
        own = ("def", op.index, reg)
        if op.guarded or len(i.operands) < 2 or op.keys[:1] != (reg,) or (i.modifiers or ("",))[-1] not in _INTEGER:
            return own
        sources = [self._operand(op, n) for n in range(1, len(i.operands))]
        if i.opcode == "mov" and len(sources) == 1:
            found = sources[0]
        elif i.opcode == "add" and len(sources) == 2 and _UNIFORM in sources:
            found = sources[1] if sources[0] == _UNIFORM else sources[0]
        elif i.opcode == "sub" and len(sources) == 2 and sources[1] == _UNIFORM:
            found = sources[0]
        else:
            return own
        return own if found in (None, _UNIFORM) else found

    def divergent_guard(self, op: Op) -> bool:
        """Whether an op's guard predicate may differ between threads: thread-dependent, and not set by comparisons
        of values with the same base."""
        key = guard(op)
        if not self.varying.used(op, key):
            return False
        defs = [d for d in self.varying.chains.defs_of.get((op.index, key), ()) if (d, key) in self.varying.varying]
        return not all(self.same_for_all(self.ops[d]) for d in defs)

    def same_for_all(self, setp: Op) -> bool:
        """Whether a `setp` compares two thread-dependent values of the same base: a CTA-uniform answer."""
        i = setp.instruction
        if i.opcode != "setp" or len(i.operands) != 3 or setp.guarded:
            return False
        a, b = self._operand(setp, 1), self._operand(setp, 2)
        return a == b and a not in (None, _UNIFORM, _PENDING)


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
