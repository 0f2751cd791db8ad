"""Basic blocks and the control-flow graph of one function, and its dominator tree.

Blocks end at branches (`bra`, `brx.idx` through its `.branchtargets` list), `ret`, `exit` and `trap`, and start
at labels. A guarded terminator also falls through. Calls stay inside blocks (they return) and are listed per block.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from ptxtool import isa
from ptxtool.analysis.linear import Linear, Op, linearize
from ptxtool.isa import Effect
from ptxtool.syntax import ast

if TYPE_CHECKING:
    from ptxtool.analysis.dataflow.liveness import DefUse
    from ptxtool.analysis.loops import Loop

_ENDS = Effect.BRANCH | Effect.RETURN | Effect.TRAP


@dataclass(frozen=True, slots=True)
class BasicBlock:
    """Operations `start`..`end-1` of the function's Linear form; `label` is the label key it starts at."""

    index: int
    start: int
    end: int
    label: str | None
    successors: tuple[int, ...]
    predecessors: tuple[int, ...]
    calls: tuple[int, ...] = ()  # op indices of the calls in this block


@dataclass(frozen=True)
class CFG:
    """The blocks of one function (block 0 is the entry), with dominators computed on demand."""

    linear: Linear
    blocks: tuple[BasicBlock, ...]
    block_of: tuple[int, ...]  # op index -> block index

    @property
    def function(self) -> ast.Function:
        return self.linear.function

    def ops(self, block: BasicBlock) -> tuple[Op, ...]:
        return self.linear.ops[block.start : block.end]

    @cached_property
    def reverse_postorder(self) -> tuple[int, ...]:
        """Blocks reachable from the entry, each before its successors except along back edges."""
        seen: set[int] = set()
        order: list[int] = []
        stack: list[tuple[int, int]] = [(0, 0)] if self.blocks else []
        if self.blocks:
            seen.add(0)
        while stack:
            block, i = stack.pop()
            succ = self.blocks[block].successors
            if i < len(succ):
                stack.append((block, i + 1))
                nxt = succ[i]
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, 0))
            else:
                order.append(block)
        return tuple(reversed(order))

    @cached_property
    def chains(self) -> DefUse:
        """The def-use chains (`def_use`), made once per graph: loops, memory facts and divergence all read them."""
        from ptxtool.analysis.dataflow.liveness import def_use

        return def_use(self)

    @cached_property
    def loops(self) -> tuple[Loop, ...]:
        """The natural loops (`find_loops`), found once per graph."""
        from ptxtool.analysis.loops import find_loops

        return find_loops(self)

    @cached_property
    def idom(self) -> dict[int, int]:
        """Immediate dominator of each reachable block (the entry maps to itself), by Cooper-Harvey-Kennedy."""
        order = self.reverse_postorder
        rank = {b: i for i, b in enumerate(order)}
        idom: dict[int, int] = {order[0]: order[0]} if order else {}

        def meet(a: int, b: int) -> int:
            while a != b:
                while rank[a] > rank[b]:
                    a = idom[a]
                while rank[b] > rank[a]:
                    b = idom[b]
            return a

        changed = True
        while changed:
            changed = False
            for b in order[1:]:
                done = [p for p in self.blocks[b].predecessors if p in idom]
                new = done[0]
                for p in done[1:]:
                    new = meet(p, new)
                if idom.get(b) != new:
                    idom[b] = new
                    changed = True
        return idom

    def dominates(self, a: int, b: int) -> bool:
        """Whether every path from the entry to block b passes through block a (False for unreachable b)."""
        idom = self.idom
        if b not in idom:
            return False
        while True:
            if a == b:
                return True
            if idom[b] == b:
                return False
            b = idom[b]


def _leaders(linear: Linear) -> list[int]:
    starts = {0, *linear.labels.values()}
    for op in linear.ops:
        if isa.effects(op.instruction) & _ENDS:
            starts.add(op.index + 1)
    return sorted(s for s in starts if s < len(linear.ops) or s in linear.labels.values())


def _successor_starts(linear: Linear, op: Op) -> list[int]:
    """Where control may go after the last op of a block, as op indices (len(ops) = the end of the body)."""
    effects = isa.effects(op.instruction)
    after = [op.index + 1] if op.index + 1 <= len(linear.ops) else []
    if effects & Effect.BRANCH:
        labels = [t for name in op.targets for t in linear.target_lists.get(name, (name,))]
        jumps = [linear.labels[t] for t in labels if t in linear.labels]
        return jumps + (after if op.guarded else [])
    if effects & (Effect.RETURN | Effect.TRAP):
        return after if op.guarded else []
    return after


def build_cfg(function: ast.Function) -> CFG:
    """The control-flow graph of a function with a body."""
    linear = linearize(function)
    starts = _leaders(linear)
    index_of = {s: i for i, s in enumerate(starts)}
    ends = starts[1:] + [len(linear.ops)]
    label_at = {}
    for key, at in linear.labels.items():
        label_at.setdefault(at, key)
    successors: list[list[int]] = []
    for start, end in zip(starts, ends, strict=True):
        if end > start:
            targets = _successor_starts(linear, linear.ops[end - 1])
        else:
            targets = []  # an empty block: a label at the very end of the body
        succ: list[int] = []
        for t in targets:
            if t in index_of and index_of[t] not in succ:
                succ.append(index_of[t])
        successors.append(succ)
    predecessors: list[list[int]] = [[] for _ in starts]
    for b, succ in enumerate(successors):
        for s in succ:
            predecessors[s].append(b)
    block_of = [0] * len(linear.ops)
    blocks = []
    for b, (start, end) in enumerate(zip(starts, ends, strict=True)):
        block_of[start:end] = [b] * (end - start)
        calls = tuple(op.index for op in linear.ops[start:end] if isa.effects(op.instruction) & Effect.CALL)
        blocks.append(
            BasicBlock(b, start, end, label_at.get(start), tuple(successors[b]), tuple(predecessors[b]), calls)
        )
    return CFG(linear, tuple(blocks), tuple(block_of))
