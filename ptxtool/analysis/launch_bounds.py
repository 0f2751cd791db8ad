"""What a kernel declares about the blocks it is launched with, read in one place for the memory analysis,
`inspect`'s occupancy and the setmaxnreg rule: `.reqntid` (the exact block) or `.maxntid` (the largest one)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod

from ptxtool.isa.targets import MAX_BLOCK
from ptxtool.syntax import ast

MAXNTID, REQNTID = ".maxntid", ".reqntid"  # the directives' words, spelled here alone


@dataclass(frozen=True, slots=True)
class BlockBounds:
    """Threads per block in x, y, z as declared (one to three numbers), exact (`.reqntid`) or at most (`.maxntid`)."""

    dims: tuple[int, ...]
    exact: bool

    @property
    def directive(self) -> str:
        return "reqntid" if self.exact else "maxntid"

    @property
    def threads(self) -> int:
        return prod(self.dims)

    @property
    def tid_limits(self) -> tuple[int, int, int]:
        """The most values %tid.x, .y, .z can take: `.reqntid`'s dimensions are exact, but `.maxntid` bounds only
        their product (PTX ISA, performance-tuning directives), so any one dimension may reach it."""
        dims = (*self.dims, 1, 1)[:3]
        if self.exact:
            return dims
        total = self.threads
        return (min(total, MAX_BLOCK[0]), min(total, MAX_BLOCK[1]), min(total, MAX_BLOCK[2]))


def block_bounds(function: ast.Function) -> BlockBounds | None:
    """`.reqntid` when the kernel declares it (it fixes the block), else `.maxntid`; None when it declares neither."""
    declared = {d.word: d for d in function.directives if d.word in (REQNTID, MAXNTID)}
    chosen = declared.get(REQNTID) or declared.get(MAXNTID)
    if chosen is None:
        return None
    return BlockBounds(tuple(int(v.value) for v in chosen.values), chosen.word == REQNTID)


def with_exact_block(function: ast.Function, dims: tuple[int, ...]) -> ast.Function:
    """The function declaring `.reqntid dims` in place of its `.maxntid`/`.reqntid` (a pass that grows the block)."""
    exact = ast.PerfDirective(REQNTID, tuple(ast.Immediate(str(n)) for n in dims))
    others = tuple(d for d in function.directives if d.word not in (REQNTID, MAXNTID))
    return replace(function, directives=(exact, *others))
