"""Where each staging copy reads global memory, per thread, as a polynomial over values the thread cannot see
(parameters, %ctaid, the trip's loop-carried registers): fills.py's run of the staging part, with each load's address
followed symbolically beside it, so that the difference of two threads' sources cancels to a constant where they
read neighbouring bytes (sgemm's `B[(k0 + rb) * N + col0 + cb]`: a row of cb contiguous, rows N floats apart).

This only guesses where runs of contiguous global bytes break (footprint.py): integers are unbounded here (a 32-bit
index widened by mul.wide or cvt may wrap in PTX; here it does not), a loop-carried register is its value before the
loop plus one unknown the same in every thread, `cvta.to.global` is the identity. Nothing relies on the guess for
safety: the bulk producers check every run's words on every trip at run time (bulk_producers.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ptxtool import isa
from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.dataflow.liveness import ENTRY, def_use
from ptxtool.analysis.staging import StagedLoop
from ptxtool.passes.warp_roles.fills import FillTrace, Write
from ptxtool.syntax import ast

Poly = tuple[tuple[tuple[str, ...], int], ...]  # sorted (monomial of atoms, coefficient), no zero coefficients
_UNIFORM_SPECIALS = ("%ctaid", "%nctaid", "%nclusterid", "%clusterid")  # the same in every thread of the block


def constant(value: int) -> Poly:
    return (((), value),) if value else ()


def atom(name: str) -> Poly:
    return (((name,), 1),)


def _normal(terms: dict[tuple[str, ...], int]) -> Poly:
    return tuple(sorted((m, c) for m, c in terms.items() if c))


def plus(a: Poly, b: Poly, sign: int = 1) -> Poly:
    terms = dict(a)
    for m, c in b:
        terms[m] = terms.get(m, 0) + sign * c
    return _normal(terms)


def times(a: Poly, b: Poly) -> Poly:
    terms: dict[tuple[str, ...], int] = {}
    for ma, ca in a:
        for mb, cb in b:
            m = tuple(sorted(ma + mb))
            terms[m] = terms.get(m, 0) + ca * cb
    return _normal(terms)


def offset_of(a: Poly, b: Poly) -> int | None:
    """a - b where it is a constant (the same for every value of the atoms), else None."""
    difference = plus(a, b, -1)
    if not difference:
        return 0
    return difference[0][1] if len(difference) == 1 and difference[0][0] == () else None


@dataclass(frozen=True)
class Sourced:
    """A staging write and the polynomial of the global address its copy reads (None: not followed)."""

    write: Write
    source: Poly | None


class SourceTrace(FillTrace):
    """FillTrace with each register's symbolic value beside its known one (state keys ("s", key)) and each load's
    source polynomial as it runs."""

    def __init__(self, cfg: CFG, found: StagedLoop, trace: FillTrace, load_of: dict[int, int]) -> None:
        super().__init__(cfg, found, trace.live_in, trace.key, trace.key_def, trace.ntid)
        self.du = def_use(cfg)
        self.load_of = load_of  # store op -> the load op its copy reads
        self.loads = frozenset(load_of.values())
        self.last: dict[int, Poly | None] = {}  # load op -> its latest address in this thread
        self.memo: dict[tuple[int, int], Poly | None] = {}
        self.loop = range(found.staging.start, found.tail.stop)
        self.tid = 0
        self.sourced: list[Sourced] = []

    def sources(self, tid: int) -> list[Sourced]:
        self.tid, self.last, self.sourced = tid, {}, []
        writes = self.writes(tid)
        assert len(writes) == len(self.sourced)
        return self.sourced

    def store(
        self, tid: int, at: int, taken: bool | None, state: dict, out: list[Write], forks: tuple[int, ...]
    ) -> None:
        before = len(out)
        super().store(tid, at, taken, state, out, forks)
        if len(out) > before:
            self.sourced.append(Sourced(out[-1], self.last.get(self.load_of.get(at, -2))))

    def observe(self, tid: int, at: int, state: dict, taken: bool | None) -> None:
        op = self.ops[at]
        i = op.instruction
        if at in self.loads and len(i.operands) == 2 and isinstance(i.operands[1], ast.Address):
            address = i.operands[1]
            base = self.symbolic(at, address.base, state)
            self.last[at] = None if base is None else plus(base, constant(ast.displacement(address)))
        if taken is False or at in self.stores:
            return
        value = self.evaluated(at, lambda x: self.symbolic(at, x, state)) if taken else None
        for key in op.defs:
            state["s", key] = value

    def symbolic(self, at: int, operand: ast.Operand, state: dict) -> Poly | None:
        """`operand` of op `at` in this thread as it runs the trip."""
        known = self.read(self.tid, at, operand, state)
        if isinstance(known, tuple) and known[0] is None:
            return constant(known[1])
        if isinstance(operand, ast.Name) and operand.text not in self.buffers:
            key = self.key(at, operand.text)
            if key is not None and ("s", key) in state:
                return state["s", key]
        return self.outside(at, operand)

    def outside(self, at: int, operand: ast.Operand) -> Poly | None:
        """A value the trip did not compute: from before the loop, or carried from the trip before (its value before
        the loop plus one unknown shared by every thread)."""
        if isinstance(operand, ast.Immediate):
            try:
                value = ast.literal_value(operand.text)
            except ValueError:
                return None
            return constant(value) if isinstance(value, int) and not isinstance(value, bool) else None
        if not isinstance(operand, ast.Name):
            return None
        text = operand.text
        if text == "%tid.x":
            return constant(self.tid)
        if text.startswith("%") and self.key(at, text) is None:  # a special register
            return atom(text) if text.startswith(_UNIFORM_SPECIALS) else None
        key = self.key(at, text)
        if key is None:
            return None
        known = self.live_in(at, operand)  # a function of %tid.x and constants alone: its value in this thread
        if known is not None and known[0] is None:
            return constant(known[1][self.tid])
        defs = self.du.defs_of.get((at, key), ())
        before = [d for d in defs if d == ENTRY or d not in self.loop]
        if len(before) != 1 or before[0] == ENTRY:
            return None
        value = self.defined(before[0])
        if value is None or len(before) == len(defs):
            return value
        return plus(value, atom(f"trip:{key}"))

    def defined(self, at: int) -> Poly | None:
        """What definition `at` (before the loop) gives in this thread."""
        memo = (at, self.tid)
        if memo not in self.memo:
            self.memo[memo] = None  # in progress: a cycle is not followed
            self.memo[memo] = self.evaluated(at, lambda x: self.outside(at, x))
        return self.memo[memo]

    def evaluated(self, at: int, read: Callable[[ast.Operand], Poly | None]) -> Poly | None:
        """Op `at`'s result from its operands' polynomials (`read`), where the op is arithmetic this models."""
        i = self.ops[at].instruction
        family = isa.family(i)
        if family == "ld" and "param" in i.modifiers and isinstance(i.operands[1], ast.Address):
            return atom(f"param:{i.operands[1].base.text}+{ast.displacement(i.operands[1])}")
        if family not in ("mov", "cvta", "cvt", "add", "sub", "neg", "mul", "mad", "shl"):
            return None
        if isa.memory_accesses(i) or i.guard is not None or not i.operands:
            return None
        args = [read(x) for x in i.operands[1:]]
        if any(a is None for a in args):
            return None
        if family in ("mov", "cvta", "cvt") and len(args) == 1:
            return args[0]
        if family == "add" and len(args) == 2:
            return plus(args[0], args[1])
        if family == "sub" and len(args) == 2:
            return plus(args[0], args[1], -1)
        if family == "neg" and len(args) == 1:
            return plus((), args[0], -1)
        if family == "mul" and len(args) == 2 and "hi" not in i.modifiers:
            return times(args[0], args[1])
        if family == "mad" and len(args) == 3 and "hi" not in i.modifiers:
            return plus(times(args[0], args[1]), args[2])
        if family == "shl" and len(args) == 2 and len(args[1]) <= 1 and all(m == () for m, _ in args[1]):
            return times(args[0], constant(1 << (args[1][0][1] if args[1] else 0)))
        return None
