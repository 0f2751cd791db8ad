"""One thread's integer arithmetic on values fixed for the thread (%tid.x, constants, a shared buffer's address):
what the staging proofs (copies.py, fills.py) evaluate, with each opcode's meaning from isa.integer, exactly or
not at all (None)."""

from __future__ import annotations

from collections.abc import Sequence

from ptxtool.isa.integer import IntegerForm, integer_form
from ptxtool.syntax import ast

Value = tuple[str | None, int]  # a shared buffer's symbol (or None) plus an integer


def carried_symbol(form: IntegerForm, symbols: Sequence[str | None]) -> tuple[bool, str | None]:
    """(whether the result is known, the buffer whose address it carries): only an operand the row names as an
    addend (a sum's term, a difference's first, a mad's addend) carries one buffer's address; anything else done
    to an address is not modelled."""
    named = [k for k, s in enumerate(symbols) if s is not None]
    if not named:
        return True, None
    if len(named) > 1 or named[0] not in form.op.addends:
        return False, None
    return True, symbols[named[0]]


def computed(i: ast.Instruction, args: Sequence[Value]) -> Value | None:
    """The value an unguarded integer instruction gives from its operands' values (None: not known exactly)."""
    form = integer_form(i)
    if form is None or len(args) != form.op.sources:
        return None
    return evaluated(form, args)


def evaluated(form: IntegerForm, args: Sequence[Value]) -> Value | None:
    """`form`'s result on its operands' values (None: an address it does not carry, or undefined)."""
    known, symbol = carried_symbol(form, [a[0] for a in args])
    value = form.result([a[1] for a in args]) if known else None
    return None if value is None else (symbol, value)


_COMPARE = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}
_UNSIGNED_COMPARE = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
_WIDTHS = {"8": 8, "16": 16, "32": 32, "64": 64}


def compared(i: ast.Instruction, args: list[int]) -> bool | None:
    """`setp.CMP.TYPE p, a, b` on an integer type (no combining predicate), or None where it is not that."""
    if len(i.modifiers) != 2 or len(i.operands) != 3 or len(args) != 2:
        return None
    compare, word = i.modifiers
    if word[1:] not in _WIDTHS or word[0] not in "sub":
        return None
    bits, signed = _WIDTHS[word[1:]], word[0] == "s"
    if compare in _UNSIGNED_COMPARE:
        compare, signed = _UNSIGNED_COMPARE[compare], False
    if compare not in _COMPARE:
        return None
    mask = (1 << bits) - 1
    a, b = (x & mask for x in args)
    if signed:
        a, b = (x - (1 << bits) if x >> (bits - 1) else x for x in (a, b))
    return _COMPARE[compare](a, b)
