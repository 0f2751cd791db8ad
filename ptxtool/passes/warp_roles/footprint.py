"""The bytes one trip stages, as runs a `cp.async.bulk` can copy: every thread's staging writes of a trip (fills.py
runs the staging part for each thread of the block), laid out in a ring slot and grouped into runs of contiguous
shared bytes whose global sources are contiguous in the same order (sources.py's polynomials: the difference of two
words' sources is the difference of their offsets for every value of the parameters, %ctaid and the trip), each run
trimmed to 16-byte boundaries of the slot (the ISA's rule for bulk copies). The words no such run holds stay
`loose`: the producers copy them with cp.async as split-async does.

Proven here, on the shared side: every thread writes the same bytes on every trip (fills.py) and no two writes of a
trip share a byte (a bulk copy writes each byte once). On the global side, statically: the sources (exact modulo
2^64) of a run's words differ by exactly their offsets once each widening atom `zext32(A+c)` is taken as
`zext32(A) + c`, which holds while A + c does not wrap for the c the run's words use: each such widening (but one
used with c = 0 alone) is the run's `Assumption`, two compares at run time. What the PTX cannot tell (the
assumptions, 16-byte alignment, zero-filled words) is checked at run time on every trip, falling back to cp.async
for a trip where it does not hold (bulk_producers.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.staging import StagedLoop
from ptxtool.isa.targets import BULK_COPY_ALIGN, MBARRIER_TX_COUNT_MAX
from ptxtool.passes.warp_roles.conditions import TRUE, Cond
from ptxtool.passes.warp_roles.copies import AsyncCopy, staging_trace
from ptxtool.passes.warp_roles.emit import ring_layout
from ptxtool.passes.warp_roles.fills import Refused
from ptxtool.passes.warp_roles.sources import (
    Poly,
    SourceTrace,
    Widening,
    atom,
    constant,
    offset_of,
    plus,
    signed,
    times,
)
from ptxtool.passes.warp_roles.zero_fill import MAX_BOUNDS, Proof, bounds, run_proof


@dataclass(frozen=True)
class Assumption:
    """`kind+bits(inner + c)` is `kind+bits(inner) + c` for every c in [low, high]: inner + c does not wrap."""

    kind: str
    bits: int
    inner: Poly
    low: int
    high: int


@dataclass(frozen=True)
class Run:
    """A run of `size` contiguous bytes from `start` in a ring slot, inside shared buffer `buffer`, read from global
    address `source` (its atoms: sources.py's) where its `assumptions` hold."""

    buffer: str
    start: int
    size: int
    source: Poly = ()
    assumptions: tuple[Assumption, ...] = ()
    loaded: Proof | None = TRUE  # every word of the run loaded, not zero-filled, where this holds (None: not proven)


Uses = dict[str, tuple[Widening, int, int]]  # a widening's base atom -> the widening, least and greatest c


def substituted(source: Poly, wides: dict[str, Widening]) -> tuple[Poly | None, Uses]:
    """`source` with each widening atom `w(A+c)` as `w(A') + c'` (A' + c': A with its own widenings so taken), and
    the c each base is used with."""
    uses: Uses = {}

    def walk(value: Poly, bits: int) -> Poly | None:
        out: Poly | None = ()
        for monomial, coefficient in value:
            term: Poly | None = constant(coefficient, bits)
            for name in monomial:
                term = times(term, factor(name, bits), bits)
            out = plus(out, term, bits)
        return out

    def factor(name: str, bits: int) -> Poly | None:
        w = wides.get(name)
        if w is None:
            return atom(name)
        whole = plus(walk(w.inner, w.bits), constant(w.c, w.bits), w.bits)
        if whole is None:
            return None
        c = signed(dict(whole).get((), 0), w.bits)
        body = tuple(t for t in whole if t[0] != ())
        if not body:  # the inner part cancelled: the widening of a constant, exactly
            return constant(c if w.kind == "sext" else c & ((1 << w.bits) - 1), bits)
        used = Widening(w.kind, w.bits, body, c)
        _, low, high = uses.get(used.base, (used, c, c))
        uses[used.base] = (used, min(low, c), max(high, c))
        return plus(atom(used.base), constant(c, bits), bits)

    return walk(source, 64), uses


def _merged(a: Uses, b: Uses) -> Uses:
    out = dict(a)
    for base, (w, low, high) in b.items():
        _, x, y = out.get(base, (w, low, high))
        out[base] = (w, min(x, low), max(y, high))
    return out


@dataclass(frozen=True)
class Atom:
    """A value the producers compute once a trip to evaluate the runs' sources: `kind` param (`operand`: its
    address, `name+disp`), special (`operand`: the register), trip (`operand`: the loop's register, this trip's value
    minus its value before the loop), cvta (of `inner`), zext or sext (of `inner`, a `bits`-bit value)."""

    name: str
    kind: str
    bits: int
    inner: Poly = ()
    operand: str = ""


@dataclass(frozen=True)
class Footprint:
    """A trip's staged bytes as runs, in slot order, the bytes of the trip no run holds (copied with cp.async), and
    what each staging store writes over all threads: run words only, loose words only, or both ("mixed": told apart
    at run time by the slot offset, against `spans`, the runs merged where they touch)."""

    runs: tuple[Run, ...]
    loose: int = 0
    kinds: tuple[tuple[int, str], ...] = ()  # store op -> "run", "loose" or "mixed"
    spans: tuple[tuple[int, int], ...] = ()  # [start, end) of the slot's bytes that runs hold
    atoms: tuple[Atom, ...] | None = None  # what the runs' sources read, each after those it reads (None: unknown)

    @property
    def total(self) -> int:
        """The bytes of one trip: what full[slot] expects on a bulk trip."""
        return sum(r.size for r in self.runs)


def footprint(cfg: CFG, found: StagedLoop, copies: tuple[AsyncCopy, ...]) -> Footprint | tuple[int, str]:
    """The runs of one trip's staging writes over all threads, or (line, why none is bulk-copyable)."""
    offsets, _ = ring_layout(found)
    trace, threads = staging_trace(cfg, found)
    sourcing = SourceTrace(cfg, found, trace, copies)
    words: list[tuple[int, int, str, int, int, Poly | None]] = []  # slot offset, size, buffer, thread, store, source
    loads: dict[int, Cond | None] = {}  # slot offset -> the word's load condition
    for tid in range(threads):
        try:
            written = sourcing.sources(tid)
        except Refused as refused:
            return refused.line, refused.why
        words += [
            (offsets[x.write.buffer] + x.write.offset, x.write.size, x.write.buffer, tid, x.write.store, x.source)
            for x in written
        ]
        loads.update((offsets[x.write.buffer] + x.write.offset, x.loaded) for x in written)
    if not words:
        return cfg.linear.ops[found.stores[0]].line, "the staging stores write no bytes on a trip"
    words.sort(key=lambda w: (w[0], w[3]))
    line = cfg.linear.ops
    for (a, n, buffer, t, at, _), (b, _, _, u, bt, _) in zip(words, words[1:], strict=False):
        if b < a + n:
            return line[bt].line, (
                f"the staging stores at lines {line[at].line} (thread {t}) and {line[bt].line} (thread {u}) write the "
                f"same bytes of {buffer} in one trip: a bulk copy writes each byte once"
            )
    pieces: list[list] = []  # [buffer, start, end, source of the start (substituted), widenings used]
    proven: dict[Poly, tuple[Poly | None, Uses]] = {}
    for offset, size, buffer, _, _, source in words:
        if source is not None and source not in proven:
            proven[source] = substituted(source, sourcing.wides)
        exact, uses = proven[source] if source is not None else (None, {})
        last = pieces[-1] if pieces else None
        if (
            last is not None
            and last[0] == buffer
            and last[2] == offset
            and exact is not None
            and last[3] is not None
            and offset_of(exact, last[3]) == offset - last[1]
        ):
            last[2] += size
            last[4] = _merged(last[4], uses)
        else:
            pieces.append([buffer, offset, offset + size, exact, uses])
    runs = [
        Run(buffer, low, high - low, plus(source, constant(low - start)) or (), _assumed(uses))
        for buffer, start, end, source, uses in pieces
        if (high := end // BULK_COPY_ALIGN * BULK_COPY_ALIGN) > (low := -(-start // BULK_COPY_ALIGN) * BULK_COPY_ALIGN)
        and source is not None
    ]  # trimmed to 16-byte boundaries (words are aligned to their size, at most 16: none straddles one)
    loose = sum(size for _, size, *_ in words) - sum(r.size for r in runs)
    if not runs:
        unfollowed = next((w for w in words if w[5] is None), None)
        at = unfollowed[4] if unfollowed else words[0][4]
        because = (
            f" (the address the copy at line {line[at].line} reads is not followed exactly: a value other than "
            "parameters, %ctaid, constants, %tid.x and a loop step the same in every thread, or integer arithmetic "
            "other than add, sub, mul, mad, shl and conversions)"
            if unfollowed
            else ""
        )
        return line[at].line, (
            f"no run of the trip's staged bytes is proven contiguous in global memory in the same order, "
            f"{BULK_COPY_ALIGN}-byte aligned and a multiple of {BULK_COPY_ALIGN} bytes in the ring slot: nothing for "
            f"cp.async.bulk to copy{because}"
        )
    total = sum(r.size for r in runs)
    if total > MBARRIER_TX_COUNT_MAX:
        return line[words[0][4]].line, (
            f"a trip stages {total} bytes, more than an mbarrier's tx-count holds ({MBARRIER_TX_COUNT_MAX})"
        )
    spans: list[list[int]] = []
    for run in runs:
        if spans and spans[-1][1] == run.start:
            spans[-1][1] += run.size
        else:
            spans.append([run.start, run.start + run.size])
    held: dict[int, set[bool]] = {}
    for offset, _, _, _, store, _ in words:
        held.setdefault(store, set()).add(any(a <= offset < b for a, b in spans))
    kinds = tuple((at, "mixed" if len(h) > 1 else "run" if True in h else "loose") for at, h in sorted(held.items()))
    runs = _proven(runs, loads)
    bases = {w.base: w for *_, uses in pieces for w, _, _ in uses.values()}
    return Footprint(tuple(runs), loose, kinds, tuple(map(tuple, spans)), _atoms(runs, bases, sourcing))  # type: ignore[arg-type]


def _proven(runs: list[Run], loads: dict[int, Cond | None]) -> list[Run]:
    """The runs with the proof that their words are all loaded (zero_fill.py), where one is found for every run and
    they check at most MAX_BOUNDS compares together; else none proven."""
    proofs = [run_proof([c for o, c in loads.items() if r.start <= o < r.start + r.size]) for r in runs]
    if None in proofs or sum(len(bounds(p)) for p in proofs) > MAX_BOUNDS:  # type: ignore[arg-type]
        return [replace(r, loaded=None) for r in runs]
    return [replace(r, loaded=p) for r, p in zip(runs, proofs, strict=True)]


def _assumed(uses: Uses) -> tuple[Assumption, ...]:
    """The run's widenings but those used with c = 0 alone (`w(A+0)` is `w(A)`): with one c the words still cancel,
    but the producers evaluate the source as `w(A) + c`, which is the address only where A + c does not wrap."""
    return tuple(
        Assumption(w.kind, w.bits, w.inner, low, high) for _, (w, low, high) in sorted(uses.items()) if low or high
    )


def _atoms(runs: list[Run], bases: dict[str, Widening], sourcing: SourceTrace) -> tuple[Atom, ...] | None:
    """Every atom the runs' sources and assumptions read, each after the atoms it reads (None: one not known)."""

    def atom_of(name: str) -> Atom | None:
        if name in bases:
            w = bases[name]
            return Atom(name, w.kind, w.bits, w.inner)
        if name in sourcing.wides:
            w = sourcing.wides[name]
            return Atom(name, w.kind, w.bits, plus(w.inner, constant(w.c, w.bits), w.bits) or ())
        if name in sourcing.cvtas:
            return Atom(name, "cvta", 64, sourcing.cvtas[name])
        if name in sourcing.params:
            address, bits = sourcing.params[name]
            return Atom(name, "param", bits, operand=address)
        if name in sourcing.trips:
            register, bits = sourcing.trips[name]
            return Atom(name, "trip", bits, operand=register)
        return Atom(name, "special", 32, operand=name) if name.startswith("%") and name != "%tid.x" else None

    roots = [n for r in runs for m, _ in r.source for n in m]
    compared = [b for r in runs if r.loaded is not None for b in bounds(r.loaded)]
    roots += [n for b in compared for m, _ in (*b.varying, *b.bound) for n in m]
    roots += [Widening(a.kind, a.bits, a.inner, 0).base for r in runs for a in r.assumptions]
    order: list[Atom] = []
    done: set[str] = set()
    work = [(n, False) for n in reversed(roots)]
    while work:
        name, ready = work.pop()
        if name in done:
            continue
        found = atom_of(name)
        if found is None:
            return None
        if ready:
            done.add(name)
            order.append(found)
            continue
        work.append((name, True))
        work += [(n, False) for m, _ in found.inner for n in m if n not in done]
    return tuple(order)
