"""Liveness per register and def-use chains (reaching definitions), over a function's CFG.

A guarded definition (`@%p mov %r1, 0`) may leave the old value in place, so it kills nothing: the register stays
live above it and earlier definitions still reach past it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import overload

from ptxtool.analysis.cfg import CFG

ENTRY = -1  # the "definition" of a register used before any write (a .func .reg parameter, or garbage)


def bits(mask: int) -> Iterator[int]:
    """The positions of a mask's set bits, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


@dataclass(frozen=True)
class Liveness:
    """The registers live just before (`mask_in`) and just after (`mask_out`) each op, by op index, as bit masks over
    `keys` (bit i is `keys[i]`): one int per op; sets of names only for the ops looked at (`live_in[i]`)."""

    keys: tuple[str, ...]
    mask_in: tuple[int, ...]
    mask_out: tuple[int, ...]

    @cached_property
    def bit(self) -> dict[str, int]:
        """Each register key's one-bit mask."""
        return {k: 1 << i for i, k in enumerate(self.keys)}

    def names(self, mask: int) -> frozenset[str]:
        """The register keys of a mask."""
        return frozenset(self.keys[j] for j in bits(mask))

    def mask(self, keys: Iterable[str]) -> int:
        """The mask of some register keys (keys the function never mentions have no bit and are left out)."""
        bit = self.bit
        return sum(bit[k] for k in set(keys) if k in bit)

    @property
    def live_in(self) -> Names:
        return Names(self, self.mask_in)

    @property
    def live_out(self) -> Names:
        return Names(self, self.mask_out)


@dataclass(frozen=True)
class Names(Sequence[frozenset[str]]):
    """Per-op masks read as sets of register keys, each set built when it is asked for."""

    liveness: Liveness
    masks: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.masks)

    @overload
    def __getitem__(self, i: int) -> frozenset[str]: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[frozenset[str], ...]: ...
    def __getitem__(self, i: int | slice) -> frozenset[str] | tuple[frozenset[str], ...]:
        if isinstance(i, slice):
            return tuple(self.liveness.names(m) for m in self.masks[i])
        return self.liveness.names(self.masks[i])


def liveness(cfg: CFG) -> Liveness:
    """Backward may-analysis to a fixed point over the blocks, then one backward walk per block; registers are
    numbered once and every set is an int."""
    ops = cfg.linear.ops
    keys = tuple(sorted({k for op in ops for k in (*op.defs, *op.uses)}))
    bit = {k: 1 << i for i, k in enumerate(keys)}
    uses = [sum(bit[u] for u in set(op.uses)) for op in ops]
    kills = [0 if op.guarded else sum(bit[d] for d in set(op.defs)) for op in ops]
    gen, kill = [], []
    for block in cfg.blocks:
        g = k = 0
        for i in range(block.end - 1, block.start - 1, -1):
            g = (g & ~kills[i]) | uses[i]
            k |= kills[i]
        gen.append(g)
        kill.append(k)
    live_in_block = [0] * len(cfg.blocks)
    order = list(reversed(cfg.reverse_postorder)) + [b.index for b in cfg.blocks if b.index not in cfg.idom]
    changed = True
    while changed:
        changed = False
        for b in order:
            out = 0
            for s in cfg.blocks[b].successors:
                out |= live_in_block[s]
            new = gen[b] | (out & ~kill[b])
            if new != live_in_block[b]:
                live_in_block[b] = new
                changed = True
    live_in = [0] * len(ops)
    live_out = [0] * len(ops)
    for block in cfg.blocks:
        live = 0
        for s in block.successors:
            live |= live_in_block[s]
        for i in range(block.end - 1, block.start - 1, -1):
            live_out[i] = live
            live = (live & ~kills[i]) | uses[i]
            live_in[i] = live
    return Liveness(keys, tuple(live_in), tuple(live_out))


@dataclass(frozen=True)
class DefUse:
    """Def-use chains: `defs_of[(op, reg)]` are the ops whose write of `reg` may reach that use (ENTRY when none
    may), `uses_of[(op, reg)]` the ops that may read that write."""

    defs_of: dict[tuple[int, str], tuple[int, ...]]
    uses_of: dict[tuple[int, str], tuple[int, ...]]


def def_use(cfg: CFG) -> DefUse:
    """Forward reaching-definitions to a fixed point, then chains read off each use."""
    ops = cfg.linear.ops
    sites = [(op.index, d) for op in ops for d in dict.fromkeys(op.defs)]
    site_bit = {s: 1 << i for i, s in enumerate(sites)}
    of_reg: dict[str, int] = {}
    for (_, reg), b in site_bit.items():
        of_reg[reg] = of_reg.get(reg, 0) | b

    # an op's definitions as one transfer `(reach & ~kill) | gen` (a register's sites are its own bits), and a
    # block's as the composition of its ops': the fixed point iterates over blocks, not ops
    kill, gen = [0] * len(ops), [0] * len(ops)
    for op in ops:
        for d in dict.fromkeys(op.defs):
            kill[op.index] |= 0 if op.guarded else of_reg[d]
            gen[op.index] |= site_bit[(op.index, d)]
    block_kill, block_gen = [], []
    for block in cfg.blocks:
        k = g = 0
        for i in range(block.start, block.end):
            k, g = k | kill[i], (g & ~kill[i]) | gen[i]
        block_kill.append(k)
        block_gen.append(g)
    out_block = [0] * len(cfg.blocks)
    changed = True
    while changed:
        changed = False
        for b in cfg.reverse_postorder:
            reach = 0
            for p in cfg.blocks[b].predecessors:
                reach |= out_block[p]
            reach = (reach & ~block_kill[b]) | block_gen[b]
            if reach != out_block[b]:
                out_block[b] = reach
                changed = True
    defs_of: dict[tuple[int, str], tuple[int, ...]] = {}
    uses_of: dict[tuple[int, str], list[int]] = {}
    for b in cfg.reverse_postorder:
        block = cfg.blocks[b]
        reach = 0
        for p in block.predecessors:
            reach |= out_block[p]
        for i in range(block.start, block.end):
            for u in dict.fromkeys(ops[i].uses):
                found = tuple(sites[j][0] for j in bits(reach & of_reg.get(u, 0)))
                defs_of[(i, u)] = found or (ENTRY,)
                for d in found:
                    uses_of.setdefault((d, u), []).append(i)
            reach = (reach & ~kill[i]) | gen[i]
    return DefUse(defs_of, {k: tuple(v) for k, v in uses_of.items()})
