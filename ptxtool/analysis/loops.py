"""Natural loops (from back edges to a dominating header), their nesting, and their basic induction variables.

An induction variable is a register whose only definition inside the loop is `add r, r, step` (or `sub`), with
`step` a constant or a register the loop never writes; its stride is `step` per trip around the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from ptxtool.analysis.cfg import CFG
from ptxtool.syntax import ast


@dataclass(frozen=True, slots=True)
class InductionVariable:
    """`register` advances by `step` (an int, or the key of a loop-invariant register) at op `update`."""

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

    def contains_op(self, cfg: CFG, op: int) -> bool:
        return cfg.block_of[op] in self.blocks


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


def _step(op_instruction: ast.Instruction, register_name: str, keys: tuple[str, ...]) -> int | str | None:
    """The step of `add r, r, step` / `add r, step, r` / `sub r, r, step` written for register r, else None."""
    ops = op_instruction.operands
    if op_instruction.opcode not in ("add", "sub") or len(ops) != 3 or len(keys) < 1:
        return None
    a, b = ops[1], ops[2]
    if isinstance(a, ast.Name) and a.text == register_name:
        other = b
    elif op_instruction.opcode == "add" and isinstance(b, ast.Name) and b.text == register_name:
        other = a
    else:
        return None
    sign = -1 if op_instruction.opcode == "sub" else 1
    if isinstance(other, ast.Immediate):
        value = other.value
        return sign * value if isinstance(value, int) else None
    if isinstance(other, ast.Name) and sign == 1 and len(keys) == 2:
        return keys[1]
    return None


def _induction(cfg: CFG, blocks: frozenset[int]) -> tuple[InductionVariable, ...]:
    defs: dict[str, list[int]] = {}
    written: set[str] = set()
    for b in blocks:
        for op in cfg.ops(cfg.blocks[b]):
            for d in op.defs:
                defs.setdefault(d, []).append(op.index)
                written.add(d)
    out = []
    for key, where in sorted(defs.items()):
        if len(where) != 1:
            continue
        op = cfg.linear.ops[where[0]]
        if op.guarded or op.defs != (key,):
            continue
        others = tuple(u for u in op.uses if u != key)
        if key not in op.uses:
            continue
        step = _step(op.instruction, cfg.linear.registers[key].name, (key, *others))
        if step is None or (isinstance(step, str) and step in written):
            continue
        out.append(InductionVariable(key, step, op.index))
    return tuple(out)


def find_loops(cfg: CFG) -> tuple[Loop, ...]:
    """The natural loops of a CFG, outermost first; loops sharing a header are merged into one."""
    latches: dict[int, list[int]] = {}
    for b in cfg.reverse_postorder:
        for s in cfg.blocks[b].successors:
            if cfg.dominates(s, b):
                latches.setdefault(s, []).append(b)
    bodies = {h: _body(cfg, h, ls) for h, ls in latches.items()}
    headers = sorted(bodies, key=lambda h: (-len(bodies[h]), h))
    index = {h: i for i, h in enumerate(headers)}
    loops: list[Loop] = []
    for h in headers:
        enclosing = [o for o in headers[: index[h]] if h in bodies[o] and bodies[h] <= bodies[o]]
        parent = index[min(enclosing, key=lambda o: len(bodies[o]))] if enclosing else None
        depth = loops[parent].depth + 1 if parent is not None else 1
        loops.append(Loop(index[h], h, bodies[h], tuple(latches[h]), parent, depth, _induction(cfg, bodies[h])))
    return tuple(loops)


def innermost(loops: tuple[Loop, ...], block: int) -> Loop | None:
    """The deepest loop that contains a block, or None."""
    inside = [loop for loop in loops if block in loop.blocks]
    return max(inside, key=lambda loop: loop.depth) if inside else None
