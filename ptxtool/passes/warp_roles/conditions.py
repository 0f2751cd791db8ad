"""The condition under which a staging word is loaded rather than zero-filled (nvcc's bounds checks, `g >= 0 && g < n
? x[g] : 0`), as sources.py follows it: a formula of integer compares of exact polynomials, negations pushed into
the compares (an integer compare's negation is a compare: lt and ge, ...), and/or of them, joined paths as
`c and first or not c and second`. None: not followed."""

from __future__ import annotations

from ptxtool.isa.integer import compare_values

Cond = tuple  # ("T",) | ("F",) | ("cmp", op, signed, bits, a, b) | ("and", x, y) | ("or", x, y)
TRUE: Cond = ("T",)
FALSE: Cond = ("F",)
MAX_NODES = 64  # a condition past this many nodes is not followed (None)
_NEGATED = {"lt": "ge", "ge": "lt", "le": "gt", "gt": "le", "eq": "ne", "ne": "eq"}


def _size(c: Cond) -> int:
    return 1 + sum(_size(x) for x in c[1:]) if c[0] in ("and", "or") else 1


def _bounded(c: Cond) -> Cond | None:
    return c if _size(c) <= MAX_NODES else None


def compare(op: str, is_signed: bool, bits: int, a: tuple, b: tuple) -> Cond:
    """`setp.op` of two `bits`-bit polynomials (sources.Poly; folded where both are constants)."""
    if all(m == () for m, _ in a) and all(m == () for m, _ in b):
        x, y = (dict(v).get((), 0) for v in (a, b))
        return TRUE if compare_values(op, is_signed, bits, x, y) else FALSE
    return ("cmp", op, is_signed, bits, a, b)


def negate(c: Cond | None) -> Cond | None:
    if c is None:
        return None
    if c[0] in ("T", "F"):
        return FALSE if c == TRUE else TRUE
    if c[0] == "cmp":
        return ("cmp", _NEGATED[c[1]], *c[2:])
    return ("or" if c[0] == "and" else "and", negate(c[1]), negate(c[2]))


def conj(a: Cond | None, b: Cond | None) -> Cond | None:
    """a and b (None: unknown, but false and anything is false)."""
    if a == FALSE or b == FALSE:
        return FALSE
    if a is None or b is None:
        return None
    if a == TRUE or a == b:
        return b
    if b == negate(a):
        return FALSE
    return a if b == TRUE else _bounded(("and", a, b))


def disj(a: Cond | None, b: Cond | None) -> Cond | None:
    """a or b (None: unknown, but true or anything is true)."""
    if a == TRUE or b == TRUE:
        return TRUE
    if a is None or b is None:
        return None
    if a == FALSE or a == b:
        return b
    if b == negate(a):
        return TRUE
    return a if b == FALSE else _bounded(("or", a, b))


def choose(c: Cond | None, first: Cond | None, second: Cond | None) -> Cond | None:
    """`first` where c holds, else `second` (a join of two paths)."""
    if first == second:
        return first
    return disj(conj(c, first), conj(negate(c), second))
