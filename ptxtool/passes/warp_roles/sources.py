"""Where each staging copy reads global memory, per thread, as an exact polynomial over values the thread cannot see
(parameters, %ctaid, the trip's loop-carried offsets): fills.py's run of the staging part, with each load's address
followed symbolically beside it, so that the difference of two threads' sources cancels to a constant where they
read neighbouring bytes (sgemm's `B[(k0 + rb) * N + col0 + cb]`: a row of cb contiguous, rows N floats apart).

Exact under PTX's wrap-around semantics: a value is a polynomial modulo 2^bits (bits: the width of the op that made
it), which add, sub, neg, mul.lo, mad.lo and shl keep exactly (a ring). What a ring cannot say is an atom of its
own: a widening (cvt, mul.wide) of a non-constant value is `zext32(A+c)` (its bits are not A + c over 64 bits where
A + c wraps; footprint.py substitutes it under an assumption checked at run time), `cvta.to.global` of a value is
`cvta(...)` (the ISA does not make it linear). A loop-carried register is its value before the loop plus `trip:key`
only where the loop's induction analysis proves its step the same in every thread. Anything else, or a polynomial
past MAX_TERMS terms or MAX_DEGREE factors, is not followed (None: its words are not a run)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ptxtool import isa
from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.dataflow.liveness import ENTRY, def_use
from ptxtool.analysis.staging import StagedLoop
from ptxtool.isa.integer import compare_form
from ptxtool.passes.warp_roles.conditions import FALSE, TRUE, Cond, choose, compare, conj, disj, negate
from ptxtool.passes.warp_roles.copies import AsyncCopy
from ptxtool.passes.warp_roles.fills import FillTrace, Write
from ptxtool.passes.warp_roles.memo import memoized
from ptxtool.syntax import ast

Poly = tuple[tuple[tuple[str, ...], int], ...]  # sorted (monomial of atoms, coefficient mod 2^bits), none zero
Sym = tuple[int | None, Poly]  # (bits, polynomial); bits None: an immediate, of whatever width reads it
MAX_TERMS = 64  # beyond these a value is not followed (squarings, long products): no run, not a blow-up
MAX_DEGREE = 4
MAX_NAME = 1000  # an atom's spelling (widenings of widenings nest): past it, not followed
_UNIFORM_SPECIALS = ("%ctaid", "%nctaid", "%nclusterid", "%clusterid")  # the same in every thread of the block
TID = "%tid.x"
_INTEGER = re.compile(r"[sub](8|16|32|64)$")


def constant(value: int, bits: int = 64) -> Poly:
    value &= (1 << bits) - 1
    return (((), value),) if value else ()


def atom(name: str) -> Poly:
    return (((name,), 1),)


def _normal(terms: dict[tuple[str, ...], int], bits: int) -> Poly | None:
    mask = (1 << bits) - 1
    out = tuple(sorted((m, c & mask) for m, c in terms.items() if c & mask))
    return out if len(out) <= MAX_TERMS else None


def plus(a: Poly | None, b: Poly | None, bits: int = 64, sign: int = 1) -> Poly | None:
    if a is None or b is None:
        return None
    terms = dict(a)
    for m, c in b:
        terms[m] = terms.get(m, 0) + sign * c
    return _normal(terms, bits)


def times(a: Poly | None, b: Poly | None, bits: int = 64) -> Poly | None:
    if a is None or b is None or len(a) * len(b) > MAX_TERMS * MAX_TERMS:
        return None
    terms: dict[tuple[str, ...], int] = {}
    for ma, ca in a:
        for mb, cb in b:
            m = tuple(sorted(ma + mb))
            if len(m) > MAX_DEGREE:
                return None
            terms[m] = terms.get(m, 0) + ca * cb
    return _normal(terms, bits)


def reduced(value: Poly, bits: int) -> Poly | None:
    """`value` modulo 2^bits: a truncation (exact: the ring's homomorphism)."""
    return _normal(dict(value), bits)


def signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def offset_of(a: Poly, b: Poly, bits: int = 64) -> int | None:
    """a - b (signed, modulo 2^bits) where it is a constant for every value of the atoms, else None."""
    difference = plus(a, b, bits, -1)
    if difference is None:
        return None
    if not difference:
        return 0
    return signed(difference[0][1], bits) if len(difference) == 1 and difference[0][0] == () else None


def render(value: Poly) -> str:
    """A canonical spelling of a polynomial (atom names of widenings and conversions are built from it)."""
    return "+".join(f"{c}*{'*'.join(m)}" if m else str(c) for m, c in value) or "0"


@dataclass(frozen=True)
class Widening:
    """An atom `kind+bits(inner+c)`: the `bits`-bit value inner + c (inner: no constant term), zero- ("zext") or
    sign-extended ("sext") to 64 bits. Where inner + c' does not wrap for c' in [c, ...], it is `base` + c."""

    kind: str
    bits: int
    inner: Poly
    c: int  # signed, in [-2^(bits-1), 2^(bits-1))

    @property
    def base(self) -> str:
        """The atom of the widened `inner` alone (c = 0)."""
        return f"{self.kind}{self.bits}({render(self.inner)})"


def widened(kind: str, bits: int, value: Poly, to: int, wides: dict[str, Widening]) -> Poly | None:
    """`value` (a `bits`-bit polynomial) zero- or sign-extended to `to` bits: exact for a constant, else the atom of
    the widening (registered in `wides`)."""
    c = dict(value).get((), 0)
    inner = tuple(t for t in value if t[0] != ())
    if not inner:
        return constant(signed(c, bits) if kind == "sext" else c, to)
    w = Widening(kind, bits, inner, signed(c, bits))
    name = f"{w.base}{w.c:+d}"
    if len(name) > MAX_NAME:
        return None
    wides[name] = w
    return atom(name)


@dataclass(frozen=True)
class Sourced:
    """A staging write, the polynomial of the 64-bit global address its copy reads (None: not followed) and the
    condition under which it stores the loaded bytes rather than zeros (conditions.py; None: not followed)."""

    write: Write
    source: Poly | None
    loaded: Cond | None = TRUE


class SourceTrace(FillTrace):
    """FillTrace with each register's symbolic value beside its known one (state keys ("s", key)), each predicate's
    condition (("p", key)), each zero-filling copy's load condition as copies.py's flag follows it (("f", store)),
    and each load's source polynomial as it runs."""

    def __init__(self, cfg: CFG, found: StagedLoop, trace: FillTrace, copies: tuple[AsyncCopy, ...]) -> None:
        super().__init__(cfg, found, trace.live_in, trace.key, trace.key_def, trace.ntid)
        self.du = def_use(cfg)
        self.load_of = {c.store: c.load for c in copies}  # store op -> the load op its copy reads
        self.loads = frozenset(self.load_of.values())
        self.flags = {c.load: c for c in copies if c.zero_fill and c.select is None}
        self.flags.update({z: c for c in copies for z in c.zeros})
        self.selects = {c.select: c for c in copies if c.select is not None}
        self.filling = frozenset(c.store for c in copies if c.zero_fill)
        # what ("a", x) and ("x", x) follow: each load's register, and each selp's (x: its copy's store)
        self.flag_of = {c.load: ("f", c.store) for c in copies if c.zero_fill and c.select is None}
        self.flag_of.update({c.store: ("f", c.store) for c in copies if c.select is not None})
        self.held = frozenset((*self.loads, *(c.store for c in copies if c.select is not None)))
        self.memo: dict[int, Sym | None] = {}  # definition before the loop -> its value (%tid.x an atom)
        self.loop = range(found.staging.start, found.tail.stop)
        self.tid = 0
        self.sourced: list[Sourced] = []
        self.wides: dict[str, Widening] = {}
        self.cvtas: dict[str, Poly] = {}  # cvta atom -> the value converted
        self.known: dict[str, tuple[int, ...]] = {}  # atom of a register known per thread -> its values
        self.varies: dict[str, bool] = {}
        self.params: dict[str, tuple[str, int]] = {}  # param atom -> its address (`name+disp`) and bits
        self.trips: dict[str, tuple[str, int]] = {}  # trip atom -> the register (outermost scope's) and bits
        self.carried: dict[str, bool] = {}  # register key -> its step is proven the same in every thread
        self.steps_of = {iv.register: iv.step for iv in found.loop.induction}

    def sources(self, tid: int) -> list[Sourced]:
        self.tid, self.sourced = tid, []
        writes = self.writes(tid)
        assert len(writes) == len(self.sourced)
        return self.sourced

    def store(
        self, tid: int, at: int, taken: bool | None, state: dict, out: list[Write], forks: tuple[int, ...]
    ) -> None:
        before = len(out)
        super().store(tid, at, taken, state, out, forks)
        if len(out) > before:
            loaded = state.get(("f", at)) if at in self.filling else TRUE
            self.sourced.append(Sourced(out[-1], self.source(at, state), loaded))

    def source(self, store: int, state: dict) -> Poly | None:
        """The address the value `store` stores was loaded from on this path, where no path stores a loaded value
        from another (a load skipped on this fill iteration keeps the one before): else None (loose words)."""
        held = store if store in self.held else self.load_of.get(store)
        return state.get(("a", held)) if state.get(("x", held), TRUE) == FALSE else None

    def merger(self, at: int, state: dict) -> Callable[[Any, Any, Any], Any]:
        """Conditions and flags the two ways disagree on join as `c ? first : second` (c: the branch taken); other
        values are unknown."""
        taken = self.guard(at, state, None)

        def merge(key: Any, first: Any, second: Any) -> Any:
            return choose(taken, first, second) if isinstance(key, tuple) and key[0] in ("p", "f") else None

        return merge

    def joined(self, at: int, state: dict, first: dict, second: dict) -> None:
        """FillTrace's join; a held register's address joins as one way's, the other way's loaded value then stale
        (its flag), where the ways' addresses differ."""
        taken = self.guard(at, state, None)
        super().joined(at, state, first, second)
        for x in self.held:
            if not any(k in way for way in (first, second) for k in (("a", x), ("x", x))):
                continue
            a, b = first.get(("a", x)), second.get(("a", x))
            stale = first.get(("x", x), TRUE), second.get(("x", x), TRUE)
            if a == b:
                state["a", x], state["x", x] = a, choose(taken, *stale)
                continue
            keep_first = choose(taken, stale[0], self.loaded(second, x))
            keep_second = choose(taken, self.loaded(first, x), stale[1])
            state["a", x], state["x", x] = (a, keep_first) if keep_first == FALSE else (b, keep_second)

    def loaded(self, state: dict, x: int) -> Cond:
        """Where held register `x` holds a loaded value (its copy's flag; not followed: everywhere)."""
        flag = self.flag_of.get(x)
        value = state.get(flag) if flag is not None else None
        return TRUE if value is None else value

    def held_after(self, at: int, state: dict, guard: Cond | None) -> dict:
        """Op `at`'s effect on the held registers under `guard`: ("a", x) the address a load (or the selp choosing
        it) read on this path, ("x", x) where the register may hold a loaded value from another (the load skipped
        on this fill iteration: the iteration before's); a zero makes it hold none."""
        i = self.ops[at].instruction
        if at in self.loads and guard != FALSE and len(i.operands) == 2 and isinstance(i.operands[1], ast.Address):
            base = self.symbolic(at, i.operands[1].base, state)
            address = (
                plus(base[1], constant(ast.displacement(i.operands[1]))) if base is not None and base[0] == 64 else None
            )
            same = address is not None and state.get(("a", at)) == address
            kept = state.get(("x", at), TRUE) if same else self.loaded(state, at)
            return {("a", at): address, ("x", at): conj(negate(guard), kept)}
        if at in self.flags and at != self.flags[at].load:  # a zero
            x = self.flags[at].load
            return {("x", x): conj(negate(guard), state.get(("x", x), TRUE))}
        if at in self.selects and guard != FALSE:
            copy = self.selects[at]
            fresh = state.get(("x", copy.load), TRUE) == FALSE and guard == TRUE
            return {("a", copy.store): state.get(("a", copy.load)) if fresh else None, ("x", copy.store): FALSE}
        return {}

    def condition(self, at: int, operand: ast.Operand, state: dict) -> Cond | None:
        """Predicate `operand` of op `at` in this thread: a known value, or its condition (None: not followed)."""
        known = self.read(self.tid, at, operand, state)
        if isinstance(known, bool):
            return TRUE if known else FALSE
        key = self.key(at, operand.text) if isinstance(operand, ast.Name) else None
        return state.get(("p", key)) if key is not None else None

    def conditions(self, at: int, state: dict, taken: bool | None) -> None:
        """Op `at`'s effect on the predicates' conditions and the copies' flags, as copies.py's edit sets them (the
        load: on; a zero: off; a selp: its predicate), under its guard."""
        op = self.ops[at]
        i = op.instruction
        guard = self.guard(at, state, taken)
        if at in self.flags:
            copy = self.flags[at]
            old = state.get(("f", copy.store))
            state["f", copy.store] = disj(guard, old) if at == copy.load else conj(negate(guard), old)
        if at in self.selects and guard == TRUE:
            copy = self.selects[at]
            chosen = self.condition(at, i.operands[3], state)
            state["f", copy.store] = chosen if isinstance(i.operands[2], ast.Immediate) else negate(chosen)
        if taken is False:
            return
        values = self.predicates(at, state) if taken else {}
        for key in op.defs:
            state["p", key] = values.get(key)

    def predicates(self, at: int, state: dict) -> dict[str, Cond | None]:
        """The conditions an unguarded op gives the predicates it writes: `setp p|q, a, b` sets q to the compare's
        negation (PTX ISA, setp); any other destination is not followed."""
        i = self.ops[at].instruction
        value = self.predicate(at, state)
        first = i.operands[0] if i.operands else None
        pairs = [(first, value)]
        if isinstance(first, ast.PredPair):
            pairs = [(first.first, value), (first.second, negate(value) if i.opcode == "setp" else None)]
        keys = [self.key_def(at, name.text) if isinstance(name, ast.Name) else None for name, _ in pairs]
        return {key: v for key, (_, v) in zip(keys, pairs, strict=True) if key is not None}

    def guard(self, at: int, state: dict, taken: bool | None) -> Cond | None:
        """Where op `at` runs in this thread (`taken`: its guard's known value, None unknown)."""
        i = self.ops[at].instruction
        if i.guard is None or taken is not None:
            return TRUE if i.guard is None or taken else FALSE
        guard = self.condition(at, i.guard.predicate, state)
        return negate(guard) if i.guard.negated else guard

    def predicate(self, at: int, state: dict) -> Cond | None:
        """The condition an unguarded op gives its predicate: an integer compare of followed values, or and, or,
        not, mov of conditions."""
        i = self.ops[at].instruction
        if i.opcode == "setp" and (form := compare_form(i)) is not None:
            op, is_signed, bits = form
            values = [self.symbolic(at, x, state) for x in i.operands[1:]]
            sides = [self.at(v, bits) if v is not None else None for v in values]
            if any(s is None for s in sides):
                return None
            return compare(op, is_signed, bits, sides[0][1], sides[1][1])  # type: ignore[index]
        if "pred" not in i.modifiers or i.opcode not in ("and", "or", "not", "mov"):
            return None
        args = [self.condition(at, x, state) for x in i.operands[1:]]
        if i.opcode in ("not", "mov") and len(args) == 1:
            return negate(args[0]) if i.opcode == "not" else args[0]
        if len(args) != 2:
            return None
        return conj(*args) if i.opcode == "and" else disj(*args)

    def observe(self, tid: int, at: int, state: dict, taken: bool | None) -> None:
        op = self.ops[at]
        held = self.held_after(at, state, self.guard(at, state, taken))
        self.conditions(at, state, taken)
        state.update(held)
        if taken is False or at in self.stores:
            return
        value = self.evaluated(at, lambda x: self.symbolic(at, x, state)) if taken else None
        for key in op.defs:
            state["s", key] = value

    def symbolic(self, at: int, operand: ast.Operand, state: dict) -> Sym | None:
        """`operand` of op `at` in this thread as it runs the trip."""
        known = self.read(self.tid, at, operand, state)
        if isinstance(known, tuple) and known[0] is None:
            return self.register_bits(at, operand), constant(known[1])
        if isinstance(operand, ast.Name) and operand.text not in self.buffers:
            key = self.key(at, operand.text)
            if key is not None and ("s", key) in state:
                return state["s", key]
        return self.outside(at, operand)

    def before_loop(self, at: int, operand: ast.Operand) -> tuple[int | None, bool]:
        """(the one definition before the loop that `operand` of op `at` reads, whether the loop also sets it)."""
        if not isinstance(operand, ast.Name) or (key := self.key(at, operand.text)) is None:
            return None, False
        defs = self.du.defs_of.get((at, key), ())
        before = [d for d in defs if d == ENTRY or d not in self.loop]
        if len(before) != 1 or before[0] == ENTRY:
            return None, False
        return before[0], len(before) != len(defs)

    def outside(self, at: int, operand: ast.Operand, nested: bool = False) -> Sym | None:
        """A value the trip did not compute: from before the loop, or carried from the trip before (its value before
        the loop plus `trip:key`, where the loop steps it by the same amount in every thread). `nested`: inside
        `defined`, for every thread at once (%tid.x an atom), whose stack has evaluated the definitions it reads
        (what it has not is a cycle: None); else in this thread."""
        if isinstance(operand, ast.Immediate):
            try:
                value = ast.literal_value(operand.text)
            except ValueError:
                return None
            return (None, constant(value)) if isinstance(value, int) and not isinstance(value, bool) else None
        if not isinstance(operand, ast.Name):
            return None
        text = operand.text
        if text == "%tid.x":
            return 32, atom(TID) if nested else constant(self.tid, 32)
        if text.startswith("%") and self.key(at, text) is None:  # a special register
            return (32, atom(text)) if text.startswith(_UNIFORM_SPECIALS) else None
        key = self.key(at, text)
        if key is None:
            return None
        known = self.live_in(at, operand)  # a function of %tid.x and constants alone: its value in each thread
        if known is not None and known[0] is None:
            values = known[1]
            if not nested or len(set(values)) == 1:
                return self.register_bits(at, operand), constant(values[self.tid if not nested else 0])
            name = f"known:{key}@{at}"
            self.known[name] = values
            return self.register_bits(at, operand), atom(name)
        source, carried = self.before_loop(at, operand)
        if source is None:
            return None
        value = self.memo.get(source) if nested else self.defined(source)
        if value is not None and not nested:
            value = self.in_thread(value)
        if value is None or value[0] is None or not carried:
            return value
        if nested or not self.uniform_step(key):  # before the loop, a value the loop set is not a trip's
            return None
        self.trips[f"trip:{key}"] = (operand.text if key == operand.text else "", value[0])  # "": a nested scope's
        return value[0], plus(value[1], atom(f"trip:{key}"), value[0])

    def uniform_step(self, key: str) -> bool:
        """Whether the loop steps `key` (an induction variable) by an amount the same in every thread: a constant,
        or registers each defined once, before the loop, from values every thread shares."""
        if key not in self.carried:
            self.carried[key] = False
            step = self.steps_of.get(key)
            if step is not None:
                self.carried[key] = isinstance(step, int) or all(
                    self.shared_register(part.rpartition("*")[2])
                    for part in str(step).split(" + ")
                    if not part.lstrip("-").isdigit()
                )
        return self.carried[key]

    def shared_register(self, key: str) -> bool:
        """Whether `key` is defined once, before the loop, to a value followed and the same in every thread."""
        defs = [op.index for op in self.ops if key in op.defs]
        if len(defs) != 1 or defs[0] in self.loop:
            return False
        value = self.defined(defs[0])
        return value is not None and not any(self.threaded(name) for m, _ in value[1] for name in m)

    def threaded(self, name: str) -> bool:
        """Whether atom `name` differs from thread to thread (%tid.x, a known function of it, or built on one)."""
        if name not in self.varies:
            inner = self.wides[name].inner if name in self.wides else self.cvtas.get(name, ())
            self.varies[name] = name == TID or name in self.known or any(self.threaded(a) for m, _ in inner for a in m)
        return self.varies[name]

    def in_thread(self, value: Sym) -> Sym | None:
        """`value` (for every thread: %tid.x an atom) in this thread."""
        bits, poly = value
        if bits is None or not any(self.threaded(name) for m, _ in poly for name in m):
            return value
        done = self.substitute(poly, bits)
        return None if done is None else (bits, done)

    def substitute(self, poly: Poly, bits: int) -> Poly | None:
        """`poly` modulo 2^bits with this thread's values for its atoms that vary by thread, the widenings and
        conversions built on them rebuilt (a widening is not a ring operation: it is applied again, exactly)."""
        out: Poly | None = ()
        for monomial, coefficient in poly:
            term: Poly | None = constant(coefficient, bits)
            for name in monomial:
                term = times(term, self.atom_in_thread(name, bits), bits)
            out = plus(out, term, bits)
        return out

    def atom_in_thread(self, name: str, bits: int) -> Poly | None:
        if not self.threaded(name):
            return atom(name)
        if name == TID:
            return constant(self.tid, bits)
        if name in self.known:
            return constant(self.known[name][self.tid], bits)
        if name in self.cvtas:
            inner = self.substitute(self.cvtas[name], 64)
            return None if inner is None else self.cvta(inner)
        w = self.wides[name]
        inner = self.substitute(w.inner, w.bits)
        body = plus(inner, constant(w.c, w.bits), w.bits)
        if body is None or (again := widened(w.kind, w.bits, body, bits, self.wides)) is None:
            return None
        return reduced(again, bits)

    def cvta(self, value: Poly) -> Poly | None:
        """The atom of `cvta.to.global` of `value` (not modelled: the ISA does not make it linear)."""
        name = f"cvta({render(value)})"
        if len(name) > MAX_NAME:
            return None
        self.cvtas[name] = value
        return atom(name)

    def defined(self, at: int) -> Sym | None:
        """What definition `at` (before the loop) gives, for every thread at once (%tid.x an atom), its sources
        first (a source still in progress is a cycle: None)."""
        return memoized(at, self.memo, self.sources_before_loop, self.evaluated_before_loop)

    def sources_before_loop(self, at: int) -> list[int]:
        """The definitions before the loop that op `at` reads."""
        return [d for x in self.ops[at].instruction.operands[1:] if (d := self.before_loop(at, x)[0]) is not None]

    def evaluated_before_loop(self, at: int) -> Sym | None:
        """Op `at`'s value from its sources' memoized ones."""
        return self.evaluated(at, lambda x: self.outside(at, x, nested=True))

    def evaluated(self, at: int, read: Callable[[ast.Operand], Sym | None]) -> Sym | None:
        """Op `at`'s result from its operands' polynomials (`read`), where the op is integer arithmetic this models
        exactly (modulo 2^bits of its type)."""
        i = self.ops[at].instruction
        family = isa.family(i)
        if i.guard is not None or not i.operands or not isinstance(i.operands[0], ast.Name):
            return None  # one register defined (not a vector's)
        if family == "ld" and "param" in i.modifiers and isinstance(i.operands[1], ast.Address):
            base, bits = i.operands[1].base, _bits(i.modifiers[-1])
            if (
                not isinstance(base, ast.Name)
                or self.key(at, base.text) is not None
                or not bits
                or len(i.modifiers) != 2
            ):
                return None  # a parameter by its name, one scalar integer (not through a register)
            address = f"{base.text}+{ast.displacement(i.operands[1])}"
            self.params[f"param:{address}"] = (address, bits)
            return bits, atom(f"param:{address}")
        if isa.memory_accesses(i):
            return None
        words = [(m[0], int(m[1:])) for m in i.modifiers if _INTEGER.match(m)]
        args = [read(x) for x in i.operands[1:]]
        if not words or any(a is None for a in args):
            return None
        if family == "cvta" and "to" in i.modifiers and "global" in i.modifiers and len(args) == 1:
            return None if (address := self.cvta(args[0][1])) is None else (64, address)  # type: ignore[index]
        if family == "cvt" and len(words) == 2 and len(args) == 1 and set(i.modifiers) <= {f"{k}{b}" for k, b in words}:
            (_, to), (kind, bits) = words
            return self.converted(args[0], "sext" if kind == "s" else "zext", bits, to)  # type: ignore[arg-type]
        if len(words) != 1:
            return None
        bits = words[0][1]
        mode = set(i.modifiers) - {f"{words[0][0]}{bits}"}
        if family == "mov" and len(args) == 1 and not mode:
            return self.at(args[0], bits)  # type: ignore[arg-type]
        if family in ("mul", "mad") and mode == {"wide"}:
            kind = "sext" if words[0][0] == "s" else "zext"
            factors = [self.converted(a, kind, bits, 2 * bits) for a in args[:2]]  # type: ignore[arg-type]
            if any(f is None for f in factors):
                return None
            product = times(factors[0][1], factors[1][1], 2 * bits)  # type: ignore[index]
            if family == "mul" or product is None:
                return (2 * bits, product) if product is not None and len(args) == 2 else None
            addend = self.at(args[2], 2 * bits)  # type: ignore[arg-type]
            return (2 * bits, total) if addend and (total := plus(product, addend[1], 2 * bits)) is not None else None
        if mode - {"lo"} or (mode and family not in ("mul", "mad")):
            return None
        widths = [32 if family == "shl" and k == 1 else bits for k in range(len(args))]  # shl's amount: a .u32
        values = [self.at(a, w) for a, w in zip(args, widths, strict=True)]  # type: ignore[arg-type]
        if any(v is None for v in values):
            return None
        p = [v[1] for v in values]  # type: ignore[index]
        result: Poly | None = None
        if family == "add" and len(p) == 2:
            result = plus(p[0], p[1], bits)
        elif family == "sub" and len(p) == 2:
            result = plus(p[0], p[1], bits, -1)
        elif family == "neg" and len(p) == 1:
            result = plus((), p[0], bits, -1)
        elif family == "mul" and len(p) == 2:
            result = times(p[0], p[1], bits)
        elif family == "mad" and len(p) == 3:
            result = plus(times(p[0], p[1], bits), p[2], bits)
        elif family == "shl" and len(p) == 2 and all(m == () for m, _ in p[1]):
            amount = p[1][0][1] if p[1] else 0  # clamped to the width (PTX ISA, shl)
            result = () if amount >= bits else times(p[0], constant(1 << amount, bits), bits)
        return None if result is None else (bits, result)

    @staticmethod
    def at(value: Sym, bits: int) -> Sym | None:
        """`value` as a `bits`-bit operand: an immediate or a wider value truncated; a narrower one is not followed
        (its bits above its width are not the polynomial's)."""
        have, poly = value
        if have is not None and have < bits:
            return None
        return (bits, r) if (r := reduced(poly, bits)) is not None else None

    def converted(self, value: Sym, kind: str, bits: int, to: int) -> Sym | None:
        """cvt from a `bits`-bit integer to a `to`-bit one: a truncation, or a widening (its own atom)."""
        source = self.at(value, bits)
        if source is None:
            return None
        if to <= bits:
            return (to, r) if (r := reduced(source[1], to)) is not None else None
        return None if (wide := widened(kind, bits, source[1], to, self.wides)) is None else (to, wide)

    def register_bits(self, at: int, operand: ast.Operand) -> int | None:
        """The bits of the register op `at` reads (None: not a register)."""
        if not isinstance(operand, ast.Name) or (key := self.key(at, operand.text)) is None:
            return None
        register = self.cfg.linear.registers.get(key)
        return _bits(register.type) if register else None


def _bits(word: str) -> int | None:
    match = _INTEGER.match(word)
    return int(match.group(1)) if match else None
