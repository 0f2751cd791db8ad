"""A run's words all loaded rather than zero-filled, as one check per run instead of a replay of every consumer
thread's staging. Over a run's words (their load conditions: conditions.py), a compare `op(P + k, Q)` whose one side
differs from word to word only in its constant k (k in [low, high]) and whose other side is the same in every word
is monotone in k where P + k does not wrap over [low, high] (in the compare's signedness): it holds for every word
if it holds at both ends. So the run's words are all loaded where each `Bound` holds: a no-wrap check and the
compare at k = low and k = high, once per run. A disjunction `a or b` is proven for every word by `a` for every
word or `b` for every word (sufficient only: a trip it misses falls back); eq and ne with a varying k, a 64-bit
compare with a varying k, or both sides varying are not proven (None: the check pass stays)."""

from __future__ import annotations

from dataclasses import dataclass

from ptxtool.passes.warp_roles.conditions import TRUE, Cond
from ptxtool.passes.warp_roles.sources import Poly, constant, plus, signed

MAX_BOUNDS = 64  # compares one kernel's runs check at run time (more: the check pass stays)
_MIRRORED = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "eq": "eq", "ne": "ne"}


@dataclass(frozen=True)
class Bound:
    """`op(x(P) + k, x(Q))` holds for every k in [low, high], x the sign- or zero-extension of `bits` bits: where
    x(P) + low and x(P) + high are in the type's range (P + k does not wrap), at both ends; where low = high, the
    compare of x(P + low mod 2^bits) and x(Q) itself."""

    op: str
    signed: bool
    bits: int
    varying: Poly  # P: no constant term
    low: int
    high: int
    bound: Poly  # Q


Proof = tuple  # ("T",) | ("and", p, q) | ("or", p, q) | Bound


def _shape(c: Cond) -> tuple:
    """`c` with each compare's constants left out: words of one shape differ only in them."""
    if c[0] == "cmp":
        return (c[1], c[2], c[3], _body(c[4]), _body(c[5]))
    return (c[0], *(_shape(x) for x in c[1:]))


def _body(p: Poly) -> Poly:
    return tuple(t for t in p if t[0] != ())


def _leaves(c: Cond) -> list[Cond]:
    return [c] if c[0] == "cmp" else [x for y in c[1:] for x in _leaves(y)]


def _bound(leaves: list[Cond]) -> Bound | None:
    """One compare position over a group's words (same op and non-constant parts)."""
    _, op, is_signed, bits, a, b = leaves[0]
    ks = [(signed(dict(x[4]).get((), 0), bits), signed(dict(x[5]).get((), 0), bits)) for x in leaves]
    kas, kbs = {k for k, _ in ks}, {k for _, k in ks}
    if len(kbs) == 1:
        varying, fixed, op_, kvals = _body(a), plus(_body(b), constant(kbs.pop(), bits), bits), op, kas
    elif len(kas) == 1:
        varying, fixed, op_, kvals = _body(b), plus(_body(a), constant(kas.pop(), bits), bits), _MIRRORED[op], kbs
    else:
        return None
    low, high = min(kvals), max(kvals)
    if fixed is None or (low != high and (op_ in ("eq", "ne") or bits == 64)):
        return None
    return Bound(op_, is_signed, bits, varying, low, high, fixed)


def _proof(shape: tuple, conds: list[Cond]) -> Proof | None:
    if shape[0] in ("T",):
        return TRUE
    if shape[0] == "F":
        return None
    if shape[0] in ("and", "or"):
        parts = [_proof(shape[k], [c[k] for c in conds]) for k in (1, 2)]
        if shape[0] == "and":
            return (
                None
                if None in parts
                else (TRUE if parts[0] == TRUE else parts[1] if parts[1] == TRUE else ("and", *parts))
            )
        if TRUE in parts:
            return TRUE
        known = [p for p in parts if p is not None]
        return ("or", *known) if len(known) == 2 else (known[0] if known else None)
    return _bound(conds)


def run_proof(conds: list[Cond | None]) -> Proof | None:
    """A check once per run that every one of its words (load conditions `conds`) is loaded, or None."""
    if any(c is None for c in conds):
        return None
    groups: dict[tuple, list[Cond]] = {}
    for c in conds:
        groups.setdefault(_shape(c), []).append(c)  # type: ignore[arg-type]
    out: Proof = TRUE
    for shape, members in groups.items():
        part = _proof(shape, members)
        if part is None:
            return None
        out = part if out == TRUE else (out if part == TRUE else ("and", out, part))
    return out


def bounds(proof: Proof) -> list[Bound]:
    """The compares a proof evaluates."""
    if isinstance(proof, Bound):
        return [proof]
    return [b for p in proof[1:] for b in bounds(p)]
