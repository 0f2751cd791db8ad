"""An estimated register-pressure curve: 32-bit registers live at each instruction of a function.

At each op the estimate is the larger of what is live before it and what is live after it plus what it writes
(a result needs a register even when nothing reads it). Predicates are counted apart. This is an estimate from
the PTX's virtual registers: ptxas's real count (`-v`) is the truth; the curve says where the pressure is.
"""

from __future__ import annotations

from dataclasses import dataclass

from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.dataflow.liveness import Liveness, Names, liveness


@dataclass(frozen=True, slots=True)
class PressurePoint:
    """Pressure at one op: its index, PTX line and 32-bit units live."""

    op: int
    line: int
    units: int


@dataclass(frozen=True)
class PressureCurve:
    """The curve for one function, in op order, and the registers live at each op (for explaining the peak):
    `live[i]` is a set of register keys, built from `liveness`'s masks when asked for."""

    function: str
    points: tuple[PressurePoint, ...]
    live: Names

    def by_line(self) -> dict[int, int]:
        """The highest pressure at each PTX line (several ops can share a line), to set beside per-line counts
        such as nvdisasm's live registers mapped back through line info."""
        out: dict[int, int] = {}
        for p in self.points:
            if p.line:
                out[p.line] = max(out.get(p.line, 0), p.units)
        return out

    @property
    def peak(self) -> PressurePoint | None:
        """The first op where the pressure is highest (None for an empty body)."""
        return max(self.points, key=lambda p: p.units, default=None)


def unit_classes(cfg: CFG, live: Liveness) -> tuple[tuple[int, int], ...]:
    """(units, mask of the registers that take that many 32-bit units), so a mask's size is a few popcounts."""
    registers = cfg.linear.registers
    by_units: dict[int, int] = {}
    for key, b in live.bit.items():
        units = registers[key].units
        if units:
            by_units[units] = by_units.get(units, 0) | b
    return tuple(by_units.items())


def pressure(cfg: CFG, live: Liveness | None = None) -> PressureCurve:
    """The pressure curve of a function from its liveness (computed here when not given)."""
    live = live or liveness(cfg)
    classes = unit_classes(cfg, live)

    def units(mask: int) -> int:
        return sum(n * (mask & m).bit_count() for n, m in classes)

    bit = live.bit
    points = []
    at = []
    for op in cfg.linear.ops:
        defined = 0
        for key in op.defs:  # live.mask(op.defs), inline: this loop runs once per instruction of the file
            defined |= bit.get(key, 0)
        after = live.mask_out[op.index] | defined
        before = live.mask_in[op.index]
        ub, ua = units(before), units(after)
        here, n = (after, ua) if ua > ub else (before, ub)
        points.append(PressurePoint(op.index, op.line, n))
        at.append(here)
    return PressureCurve(cfg.function.name, tuple(points), Names(live, tuple(at)))
