"""One thread's integer arithmetic on values fixed for the thread (%tid.x, constants, a shared buffer's address):
what the staging proofs (copies.py, fills.py) evaluate, modelled exactly or not at all (None)."""

from __future__ import annotations

from collections.abc import Sequence

from ptxtool.syntax import ast

BITS = {"8": 8, "16": 16, "32": 32, "64": 64}
_EVALUATED = ("mov", "add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor", "div", "rem", "min", "max", "neg")
# the opcodes `arith` evaluates, each with the modifiers (besides one integer type) it models exactly
_MODELLED: dict[str, set[str]] = {o: set() for o in _EVALUATED} | {"mul": {"lo"}, "mad": {"lo"}}
_ADDEND = {"mov": 0, "add": None, "sub": 0, "mad": 2}  # the operand that may carry a buffer's address (None: any)
Value = tuple[str | None, int]  # a shared buffer's symbol (or None) plus an integer


def integer_word(i: ast.Instruction) -> tuple[bool, int] | None:
    """(signed, bits) of an instruction `arith` models exactly: one integer type and only the modifiers it
    models (no .sat, .hi, .wide, .cc, .relu, floating point); None otherwise."""
    words = [m for m in i.modifiers if m[1:] in BITS and m[0] in "sub"]
    others = [m for m in i.modifiers if m not in words]
    if len(words) != 1 or not set(others) <= _MODELLED.get(i.opcode, {"?"}):
        return None
    return words[0][0] == "s", BITS[words[0][1:]]


def carried_symbol(opcode: str, symbols: Sequence[str | None]) -> tuple[bool, str | None]:
    """(whether the result is known, the buffer whose address it carries): only a sum, a difference's first term
    or a mad's addend carries one buffer's address; anything else done to an address is not modelled."""
    named = [s for s in symbols if s is not None]
    if not named:
        return True, None
    addend = _ADDEND.get(opcode, -1)
    if len(named) > 1 or addend == -1 or (addend is not None and symbols[addend] is None):
        return False, None
    return True, named[0]


def arith(opcode: str, signed: bool, bits: int, args: list[int]) -> int | None:
    """One integer instruction's result on `bits`-bit operands (two's complement, C division), or None."""
    mask = (1 << bits) - 1

    def s(v: int) -> int:
        v &= mask
        return v - (1 << bits) if signed and v >> (bits - 1) else v

    a = [s(x) for x in args]
    if opcode == "mov":
        out = a[0]
    elif opcode == "add":
        out = a[0] + a[1]
    elif opcode == "sub":
        out = a[0] - a[1]
    elif opcode == "mul":
        out = a[0] * a[1]
    elif opcode == "mad":
        out = a[0] * a[1] + a[2]
    elif opcode == "shl":
        out = a[0] << min(args[1] & 0xFFFFFFFF, bits)
    elif opcode == "shr":
        out = a[0] >> min(args[1] & 0xFFFFFFFF, bits)
    elif opcode in ("and", "or", "xor"):
        out = a[0] & a[1] if opcode == "and" else a[0] | a[1] if opcode == "or" else a[0] ^ a[1]
    elif opcode in ("div", "rem"):
        if a[1] == 0:
            return None
        q = abs(a[0]) // abs(a[1]) * (1 if (a[0] < 0) == (a[1] < 0) else -1)
        out = q if opcode == "div" else a[0] - q * a[1]
    elif opcode in ("min", "max"):
        out = min(a) if opcode == "min" else max(a)
    else:  # neg
        out = -a[0]
    return out & mask


_COMPARE = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}
_UNSIGNED_COMPARE = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}


def compared(i: ast.Instruction, args: list[int]) -> bool | None:
    """`setp.CMP.TYPE p, a, b` on an integer type (no combining predicate), or None where it is not that."""
    if len(i.modifiers) != 2 or len(i.operands) != 3:
        return None
    compare, word = i.modifiers
    if word[1:] not in BITS or word[0] not in "sub":
        return None
    bits, signed = BITS[word[1:]], word[0] == "s"
    if compare in _UNSIGNED_COMPARE:
        compare, signed = _UNSIGNED_COMPARE[compare], False
    if compare not in _COMPARE:
        return None
    mask = (1 << bits) - 1
    a, b = (x & mask for x in args)
    if signed:
        a, b = (x - (1 << bits) if x >> (bits - 1) else x for x in (a, b))
    return _COMPARE[compare](a, b)
