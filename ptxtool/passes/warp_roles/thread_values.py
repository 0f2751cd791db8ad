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
