"""Values a loop keeps live only to read them: where each could be recomputed at its reads instead, from values
that are there anyway (rematerialization candidates).

A candidate is a register written once in the function, by an unguarded op outside the loop that dominates every
read, and live throughout the loop; it is recomputed at every read control reaches from the loop without passing
its definition again: inside the loop, and after it (Triton keeps its epilogue's 32 store pointers across the
whole loop). Its recomputation is a tree of such ops (isa.values.PURE_INTEGER with integer types, and loads of
memory nothing can write while the kernel runs: a kernel's own `.param`, `.const`, and global loads `readonly`
vouches for) whose leaves are immediates, symbols, launch-invariant special registers, or registers live
throughout the loop anyway. Every register in the tree is written once and its write dominates its reader, so no
value in it can change between the original computation and the recomputation: a write in between would be a path
around the reader's dominator. Never floating point, predicates, guarded or doubly written values, or loads of
memory that may change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ptxtool import isa
from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.dataflow.liveness import Liveness, bits, liveness
from ptxtool.analysis.linear import Op
from ptxtool.analysis.loops import Loop
from ptxtool.analysis.memory import memory_facts, non_coherent
from ptxtool.analysis.pressure import pressure
from ptxtool.isa.caching import coherent
from ptxtool.isa.values import INVARIANT_SPECIAL_REGISTERS, PURE_INTEGER, STATEFUL, integer_type
from ptxtool.syntax import ast

MAX_DEPTH = 12  # ops in a chain from a leaf to the candidate
MAX_OPS = 24  # ops recomputed for one candidate at one use

ReadOnly = Callable[[Op], bool]


@dataclass(frozen=True, slots=True)
class Node:
    """One op to recompute, and for some of its operand positions the node that recomputes that register (the
    address's base register for an address operand); every other operand is read as written."""

    op: int
    inputs: tuple[tuple[int, Node], ...] = ()

    def ops(self) -> tuple[int, ...]:
        """The ops of the tree, each once, every op after the ops it reads (shared subtrees walked once)."""
        out: dict[int, None] = {}
        seen: set[int] = set()

        def walk(node: Node) -> None:
            if id(node) not in seen:
                seen.add(id(node))
                for _, child in node.inputs:
                    walk(child)
                out[node.op] = None

        walk(self)
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A register (its key) a loop (index) keeps live, the tree that recomputes it, the ops inside the loop that
    read it, and the 32-bit units it takes."""

    register: str
    loop: int
    tree: Node
    uses: tuple[int, ...]
    units: int
    reloads: bool  # the tree reads global memory again: a load ptxas keeps in the loop


def _reloads(cfg: CFG, tree: Node) -> bool:
    """Whether a tree holds a global (or generic) load, which ptxas cannot hoist back out of the loop."""
    return any(
        cfg.linear.ops[o].instruction.opcode == "ld"
        and isa.state_spaces(cfg.linear.ops[o].instruction) in (("global",), ())
        for o in tree.ops()
    )


def readonly_loads(module: ast.Module, function: ast.Function, cfg: CFG) -> ReadOnly:
    """The global loads whose memory nothing can write while the kernel runs, by the cache-operator analysis's
    `.nc` verdict; a load already `.nc` carries the author's no-alias promise (its memory must be read-only for the
    kernel's lifetime), so only that verdict's aliasing doubts are lifted for it."""
    safe: list[frozenset[int]] = []

    def readonly(op: Op) -> bool:
        if not safe:  # the memory facts cost a walk of every callee: only for a function that asks
            facts = memory_facts(module, function, cfg)
            ops = cfg.linear.ops
            safe.append(
                frozenset(
                    a.op
                    for a in facts.accesses
                    if non_coherent(facts, a, ops[a.op].instruction).allowed("nc" in ops[a.op].instruction.modifiers)
                )
            )
        return op.index in safe[0]

    return readonly


def nested_instructions(function: ast.Function) -> frozenset[int]:
    """The ids of instructions inside nested `{ }` blocks, where a name may mean another register."""
    out: set[int] = set()

    def walk(block: ast.Block, nested: bool) -> None:
        for s in block.statements:
            if isinstance(s, ast.Block):
                walk(s, True)
            elif nested and isinstance(s, ast.Instruction):
                out.add(id(s))

    if function.body is not None:
        walk(function.body, False)
    return frozenset(out)


class _Trees:
    """Recomputation trees for the registers of one function."""

    def __init__(self, cfg: CFG, live: Liveness, readonly: ReadOnly | None) -> None:
        self.cfg, self.live, self.readonly = cfg, live, readonly
        ops = cfg.linear.ops
        self.writers: dict[str, list[int]] = {}
        for op in ops:
            for d in op.defs:
                self.writers.setdefault(d, []).append(op.index)
        self.nested = nested_instructions(cfg.function)
        self.entry = cfg.function.kind == ".entry"
        self.params = {p.name for p in cfg.function.params or ()}

    def single_writer(self, key: str) -> int | None:
        """The one op that writes `key`, when there is exactly one, unguarded, at the top level of the body."""
        where = self.writers.get(key, ())
        if len(where) != 1:
            return None
        op = self.cfg.linear.ops[where[0]]
        if op.guarded or id(op.instruction) in self.nested or len(op.defs) != 1:
            return None
        return where[0]

    def before(self, a: int, b: int) -> bool:
        """Whether op `a` dominates op `b` (runs before it on every path), a != b."""
        ba, bb = self.cfg.block_of[a], self.cfg.block_of[b]
        return a < b if ba == bb else self.cfg.dominates(ba, bb)

    def tree(self, op: int, anyway: int) -> Node | None:
        """The tree recomputing op's result from leaves and registers in `anyway` (a mask), or None. Each op is
        built once per depth, so a chain that reads one value several times costs its length, not 3^depth."""
        built: dict[tuple[int, int], Node | None] = {}

        def build(op: int, depth: int) -> Node | None:
            if (op, depth) not in built:
                built[(op, depth)] = self._node(op, depth, anyway, build)
            return built[(op, depth)]

        return build(op, 0)

    def _node(self, op: int, depth: int, anyway: int, build: Callable[[int, int], Node | None]) -> Node | None:
        if depth >= MAX_DEPTH or not self.recomputable(self.cfg.linear.ops[op]):
            return None
        o = self.cfg.linear.ops[op]
        inputs = []
        for position, operand in enumerate(o.instruction.operands[1:], start=1):
            name = operand.base if isinstance(operand, ast.Address) else operand
            if isinstance(name, ast.Immediate) or not isinstance(name, ast.Name):
                continue
            key = name.text if name.text in self.cfg.linear.registers else None
            if key is None:
                continue  # a symbol or an invariant special register (recomputable() checked which)
            writer = self.single_writer(key)
            if writer is None or not self.before(writer, op):
                return None
            if self.live.bit[key] & anyway:
                continue
            node = build(writer, depth + 1)
            if node is None:
                return None
            inputs.append((position, node))
        node = Node(op, tuple(inputs))
        return node if len(node.ops()) <= MAX_OPS else None

    def recomputable(self, op: Op) -> bool:
        """Whether one op computes its result from its operands alone (and memory that cannot change)."""
        i = op.instruction
        if op.guarded or STATEFUL.intersection(i.modifiers) or not i.operands:
            return False
        target = i.operands[0]
        if not isinstance(target, ast.Name) or target.text not in self.cfg.linear.registers:
            return False
        if self.cfg.linear.registers[target.text].vector != 1:
            return False
        types = [m for m in i.modifiers if isa.caching.type_bits(m)]
        if not types or not all(integer_type(t) for t in types):
            return False
        for operand in i.operands[1:]:
            if isinstance(operand, ast.Address):
                if operand.rest or not (operand.offset is None or isinstance(operand.offset, ast.Immediate)):
                    return False
                operand = operand.base
            if isinstance(operand, ast.Immediate):
                continue
            if not isinstance(operand, ast.Name):
                return False
            text = operand.text
            if text in self.cfg.linear.registers:
                continue
            if text.startswith("%") and text not in INVARIANT_SPECIAL_REGISTERS:
                return False  # %clock, %smid, %warpid: may differ when read again
        if i.opcode == "ld":
            return self.stable_load(op)
        return i.opcode in PURE_INTEGER

    def stable_load(self, op: Op) -> bool:
        """A load of memory no one can write while the kernel runs."""
        i = op.instruction
        if coherent(i) or len(i.operands) != 2 or not isinstance(i.operands[1], ast.Address):
            return False
        spaces = isa.state_spaces(i)
        base = i.operands[1].base
        if spaces in (("param",), ("param::entry",)):
            return self.entry and isinstance(base, ast.Name) and base.text in self.params
        if spaces == ("const",):
            return True
        return spaces in (("global",), ()) and self.readonly is not None and self.readonly(op)


def reached(cfg: CFG, loop: Loop, stop: int) -> frozenset[int]:
    """The blocks control can reach from a loop's header without entering block `stop` (where the value is
    written again): those whose reads of it keep it live across the loop."""
    seen, stack = {loop.header}, [loop.header]
    while stack:
        for s in cfg.blocks[stack.pop()].successors:
            if s not in seen and s != stop:
                seen.add(s)
                stack.append(s)
    return frozenset(seen)


def candidates(
    cfg: CFG,
    loops: tuple[Loop, ...],
    *,
    readonly: ReadOnly | None = None,
    pure: bool = False,
    live: Liveness | None = None,
) -> tuple[Candidate, ...]:
    """The registers live throughout each loop's pressure peak that can be recomputed at every read control reaches
    from the loop (inside it, or after it: a value kept across the loop only for the code after it), outermost
    loops first, each register once, the widest first within a loop. A value read inside the loop only when its
    recomputation reloads global memory, unless `pure`: ptxas hoists loop-invariant arithmetic (and
    `.param`/`.const` reads) back out of the loop by itself; one read only after the loop is recomputed there."""
    live = live or liveness(cfg)
    curve = pressure(cfg, live)
    trees = _Trees(cfg, live, readonly)
    ops = cfg.linear.ops
    registers = cfg.linear.registers
    readers: dict[str, list[int]] = {}
    for op in ops:
        for u in dict.fromkeys(op.uses):
            readers.setdefault(u, []).append(op.index)
    out: list[Candidate] = []
    taken: set[str] = set()
    for loop in loops:
        inside = [op.index for b in sorted(loop.blocks) for op in cfg.ops(cfg.blocks[b])]
        if not inside:
            continue
        peak = max(inside, key=lambda i: curve.points[i].units)
        header = cfg.blocks[loop.header]
        through = live.mask_in[header.start] if header.start < header.end else 0  # live throughout the loop
        after = reached(cfg, loop, -1)
        eligible: dict[str, tuple[int, tuple[int, ...]]] = {}
        for j in bits(curve.live.masks[peak] & through):
            key = live.keys[j]
            writer = trees.single_writer(key)
            if key in taken or writer is None or cfg.block_of[writer] in loop.blocks:
                continue
            home = cfg.block_of[writer]
            region = reached(cfg, loop, home) if home in after else after
            uses = tuple(u for u in readers.get(key, ()) if cfg.block_of[u] in region)
            if uses and all(id(ops[u].instruction) not in trees.nested and trees.before(writer, u) for u in uses):
                eligible[key] = (writer, uses)
        # a tree reads as they are only registers that stay live through the loop: none that may be recomputed
        found: list[Candidate] = []
        while eligible:
            anyway = through & ~live.mask(eligible)
            found = []
            for key, (writer, uses) in eligible.items():
                tree = trees.tree(writer, anyway)
                if tree is None:
                    continue
                read_inside = any(cfg.block_of[u] in loop.blocks for u in uses)
                if pure or not read_inside or _reloads(cfg, tree):
                    found.append(Candidate(key, loop.index, tree, uses, registers[key].units, _reloads(cfg, tree)))
            if len(found) == len(eligible):
                break
            eligible = {c.register: eligible[c.register] for c in found}
        found.sort(key=lambda c: (-c.units, ops[c.tree.op].line))
        taken.update(c.register for c in found)
        out.extend(found)
    return tuple(out)
