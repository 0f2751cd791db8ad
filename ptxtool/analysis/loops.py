"""Natural loops (from back edges to a dominating header), their nesting, and their induction variables.

An induction variable is a register written once inside the loop, by an op that runs on every trip (its block
dominates every latch), whose new value is its value at the header plus a step: `add r, r, 4`, or a chain such as
`add t, r, s; add u, t, s; add r, u, s` (step `3*s`). The step is a constant or a sum of registers the loop never
writes, and the register must also come into the loop from outside.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.dataflow.liveness import DefUse
from ptxtool.syntax import ast


@dataclass(frozen=True, slots=True)
class InductionVariable:
    """`register` advances by `step` per trip at op `update`: an int, or an expression over loop-invariant
    registers such as `%rd15` or `3*%rd27 + 8`."""

    register: str
    step: int | str
    update: int


@dataclass(frozen=True, slots=True)
class Loop:
    """A natural loop: its header block, all its blocks, the blocks whose edges return to the header (latches),
    the loop it is nested in (index into the loop list, or None) and its depth (1 = outermost)."""

    index: int
    header: int
    blocks: frozenset[int]
    latches: tuple[int, ...]
    parent: int | None
    depth: int
    induction: tuple[InductionVariable, ...]


def _body(cfg: CFG, header: int, latches: list[int]) -> frozenset[int]:
    body = {header}
    stack = [latch for latch in latches if latch != header]
    body.update(stack)
    while stack:
        for p in cfg.blocks[stack.pop()].predecessors:
            if p not in body and p in cfg.idom:
                body.add(p)
                stack.append(p)
    return frozenset(body)


Step = tuple[int, Counter]  # constant part, invariant register keys with their multiplicity


class _Steps:
    """How far a value written in the loop is from one register's value at the header (None: not so related)."""

    _ADD = {"add": 1, "sub": -1}

    def __init__(self, cfg: CFG, du: DefUse, loop: frozenset[int], written: set[str]) -> None:
        self.cfg, self.du, self.loop, self.written = cfg, du, loop, written

    def inside(self, op: int) -> bool:
        return self.cfg.block_of[op] in self.loop

    def use(self, op: int, index: int, target: str, seen: frozenset[int]) -> Step | None:
        """The distance of operand `index` of op from the target's header value."""
        key = self.cfg.linear.ops[op].keys[index] if index < len(self.cfg.linear.ops[op].keys) else None
        if key is None:
            return None
        defs = self.du.defs_of.get((op, key), ())
        if key == target and any(not self.inside(d) for d in defs):
            return (0, Counter())  # the value that came round the loop or in from outside: the header's
        if len(defs) == 1 and defs[0] >= 0 and self.inside(defs[0]) and defs[0] not in seen:
            return self.written_value(defs[0], key, target, seen | {defs[0]})
        return None

    def invariant(self, op: int, index: int) -> Step | None:
        operand = self.cfg.linear.ops[op].instruction.operands[index]
        if isinstance(operand, ast.Immediate):
            value = operand.value
            return (value, Counter()) if isinstance(value, int) else None
        key = self.cfg.linear.ops[op].keys[index]
        return (0, Counter({key: 1})) if key is not None and key not in self.written else None

    def written_value(self, op: int, key: str, target: str, seen: frozenset[int]) -> Step | None:
        o = self.cfg.linear.ops[op]
        i = o.instruction
        if o.guarded or o.defs != (key,):
            return None
        if i.opcode in ("mov", "cvt") and len(i.operands) == 2:
            return self.use(op, 1, target, seen)
        sign = self._ADD.get(i.opcode)
        if sign is None or len(i.operands) != 3:
            return None
        for mine, other in ((1, 2), (2, 1)):
            base = self.use(op, mine, target, seen)
            step = self.invariant(op, other)
            if base is None or step is None or (sign < 0 and mine == 2):
                continue
            counts = Counter(base[1])
            for k, n in step[1].items():
                counts[k] += sign * n
            return base[0] + sign * step[0], Counter({k: n for k, n in counts.items() if n})
        return None


def _render(step: Step) -> int | str:
    const, regs = step
    if not regs:
        return const
    parts = [f"{n}*{k}" if n != 1 else k for k, n in sorted(regs.items())]
    return " + ".join(parts + ([str(const)] if const else []))


def _induction(cfg: CFG, du: DefUse, blocks: frozenset[int], latches: list[int]) -> tuple[InductionVariable, ...]:
    defs: dict[str, list[int]] = {}
    for b in blocks:
        for op in cfg.ops(cfg.blocks[b]):
            for d in op.defs:
                defs.setdefault(d, []).append(op.index)
    steps = _Steps(cfg, du, blocks, set(defs))
    out = []
    for key, where in sorted(defs.items()):
        if len(where) != 1 or not all(cfg.dominates(cfg.block_of[where[0]], latch) for latch in latches):
            continue
        step = steps.written_value(where[0], key, key, frozenset(where))
        if step is not None and (step[0] or step[1]):
            out.append(InductionVariable(key, _render(step), where[0]))
    return tuple(out)


def find_loops(cfg: CFG, du: DefUse | None = None) -> tuple[Loop, ...]:
    """The natural loops of a CFG, outermost first; loops sharing a header are merged into one."""
    latches: dict[int, list[int]] = {}
    for b in cfg.reverse_postorder:
        for s in cfg.blocks[b].successors:
            if cfg.dominates(s, b):
                latches.setdefault(s, []).append(b)
    if not latches:
        return ()
    du = du or cfg.chains
    bodies = {h: _body(cfg, h, ls) for h, ls in latches.items()}
    headers = sorted(bodies, key=lambda h: (-len(bodies[h]), h))
    index = {h: i for i, h in enumerate(headers)}
    loops: list[Loop] = []
    for h in headers:
        enclosing = [o for o in headers[: index[h]] if h in bodies[o] and bodies[h] <= bodies[o]]
        parent = index[min(enclosing, key=lambda o: len(bodies[o]))] if enclosing else None
        depth = loops[parent].depth + 1 if parent is not None else 1
        ivs = _induction(cfg, du, bodies[h], latches[h])
        loops.append(Loop(index[h], h, bodies[h], tuple(latches[h]), parent, depth, ivs))
    return tuple(loops)


def innermost(loops: tuple[Loop, ...], block: int) -> Loop | None:
    """The deepest loop that contains a block, or None."""
    inside = [loop for loop in loops if block in loop.blocks]
    return max(inside, key=lambda loop: loop.depth) if inside else None
