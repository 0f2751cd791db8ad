"""Integer instructions whose result is known exactly from their operands: per opcode, how many operands it reads,
the modifiers (besides one s/u/b type) that keep that meaning, which operand may carry an address, and the result
on w-bit operands, wrapped modulo 2^w (PTX ISA, "Integer Arithmetic Instructions", "Logic and Shift Instructions").
An instruction not described here exactly (`.cc` or addc/subc/madc: the carry flag no operand names; .sat, .hi,
.wide; activemask; any other opcode or operand count) has no known result: an analysis takes it as unknown."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from ptxtool.syntax import ast

_Args = tuple[int, ...]


@dataclass(frozen=True)
class IntegerOp:
    """One opcode's exact meaning: `sources` operands read after the one it defines, `modes` modifiers taken besides
    the type, `addends` the operands whose value may be an address plus an integer (the result is then that
    address plus the computed integer), and `result` on the operands as the type reads them (signed or not) and
    the width, before wrapping (None: the ISA leaves it undefined)."""

    sources: int
    result: Callable[[_Args, int], int | None]
    modes: frozenset[str] = frozenset()
    addends: frozenset[int] = frozenset()


def _shift(a: _Args, bits: int) -> int:
    """The shift amount: an unsigned 32-bit operand, clamped to the width (PTX ISA, shl/shr)."""
    return min(a[1] & 0xFFFFFFFF, bits)


def _divided(a: _Args, bits: int, remainder: bool) -> int | None:
    """C division (truncating), undefined for a zero divisor and for the one signed quotient that overflows."""
    if a[1] == 0 or (a[0] == -(1 << (bits - 1)) and a[1] == -1):
        return None
    q = abs(a[0]) // abs(a[1]) * (1 if (a[0] < 0) == (a[1] < 0) else -1)
    return a[0] - q * a[1] if remainder else q


_LO = frozenset(("lo",))
INTEGER_OPS: dict[str, IntegerOp] = {
    "mov": IntegerOp(1, lambda a, w: a[0], addends=frozenset((0,))),
    "add": IntegerOp(2, lambda a, w: a[0] + a[1], addends=frozenset((0, 1))),
    "sub": IntegerOp(2, lambda a, w: a[0] - a[1], addends=frozenset((0,))),
    "mul": IntegerOp(2, lambda a, w: a[0] * a[1], _LO),
    "mad": IntegerOp(3, lambda a, w: a[0] * a[1] + a[2], _LO, frozenset((2,))),
    "neg": IntegerOp(1, lambda a, w: -a[0]),
    "abs": IntegerOp(1, lambda a, w: abs(a[0])),
    "min": IntegerOp(2, lambda a, w: min(a)),
    "max": IntegerOp(2, lambda a, w: max(a)),
    "div": IntegerOp(2, lambda a, w: _divided(a, w, False)),
    "rem": IntegerOp(2, lambda a, w: _divided(a, w, True)),
    "shl": IntegerOp(2, lambda a, w: a[0] << _shift(a, w)),
    "shr": IntegerOp(2, lambda a, w: a[0] >> _shift(a, w)),  # arithmetic on a signed type, logical otherwise
    "and": IntegerOp(2, lambda a, w: a[0] & a[1]),
    "or": IntegerOp(2, lambda a, w: a[0] | a[1]),
    "xor": IntegerOp(2, lambda a, w: a[0] ^ a[1]),
    "not": IntegerOp(1, lambda a, w: ~a[0]),
}
_WIDTHS = {"8": 8, "16": 16, "32": 32, "64": 64}


def _typed(x: int, bits: int, signed: bool) -> int:
    """`x`'s low `bits` bits as the type reads them: two's complement where it is signed."""
    x &= (1 << bits) - 1
    return x - ((x & (1 << (bits - 1))) << 1) if signed else x


@dataclass(frozen=True)
class IntegerForm:
    """An instruction INTEGER_OPS describes exactly: its row, whether its type is signed, and its width."""

    op: IntegerOp
    signed: bool
    bits: int

    def result(self, args: list[int]) -> int | None:
        """The result wrapped to the width from operands' bits (each read at the width, signed where the type is)."""
        out = self.op.result(tuple(_typed(x, self.bits, self.signed) for x in args), self.bits)
        return None if out is None else out & (1 << self.bits) - 1


@lru_cache(maxsize=4096)
def integer_form(i: ast.Instruction) -> IntegerForm | None:
    """The exact meaning of `i` (unguarded): a row of INTEGER_OPS, one integer type, only the row's modes, a
    register defined and the row's count of operands read; None for anything else (the carry flag's `.cc`,
    addc/subc/madc, activemask, .sat/.hi/.wide, floating point, a predicate, an unexpected operand count)."""
    op = INTEGER_OPS.get(i.opcode)
    if op is None or len(i.operands) != 1 + op.sources or not isinstance(i.operands[0], ast.Name):
        return None
    words = [m for m in i.modifiers if m[:1] in ("s", "u", "b") and m[1:] in _WIDTHS]
    if len(words) != 1 or not set(i.modifiers) - {words[0]} <= op.modes:
        return None
    return IntegerForm(op, words[0][0] == "s", _WIDTHS[words[0][1:]])


_COMPARE = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}
_UNSIGNED_COMPARE = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}


def compare_form(i: ast.Instruction) -> tuple[str, bool, int] | None:
    """(eq/ne/lt/le/gt/ge, signed, bits) of `setp.CMP.TYPE p, a, b` on an integer type (no combining predicate; lo,
    ls, hi, hs as the unsigned lt, le, gt, ge), or None where it is not that."""
    if len(i.modifiers) != 2 or len(i.operands) != 3:
        return None
    compare, word = i.modifiers
    if word[1:] not in _WIDTHS or word[0] not in "sub":
        return None
    bits, signed = _WIDTHS[word[1:]], word[0] == "s"
    if compare in _UNSIGNED_COMPARE:
        compare, signed = _UNSIGNED_COMPARE[compare], False
    return (compare, signed, bits) if compare in _COMPARE else None


def compare_values(compare: str, signed: bool, bits: int, a: int, b: int) -> bool:
    """The compare of two values' low `bits` bits as the type reads them."""
    return _COMPARE[compare](_typed(a, bits, signed), _typed(b, bits, signed))


def compared(i: ast.Instruction, args: list[int]) -> bool | None:
    """`setp.CMP.TYPE p, a, b` on an integer type (no combining predicate) for operands' bits `args`, or None where
    it is not that."""
    form = compare_form(i)
    return None if form is None or len(args) != 2 else compare_values(*form, *args)


def wrapped(offset: int, bits: int | None, size: int) -> int | None:
    """An address's offset from its variable modulo 2^bits (the address register's width; None: the variable's
    symbol itself, no register), where its `size` bytes do not straddle 2^bits (there two offsets' order is not
    their bytes' order); else None."""
    if bits is None:
        return offset
    offset &= (1 << bits) - 1
    return offset if offset + size <= 1 << bits else None
