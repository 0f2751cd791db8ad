"""The bulk producers' per-run check (split-bulk): each trip the atoms of the runs' sources (footprint.py) are computed
once in 64-bit registers, then lane r mod 32 evaluates run r's source polynomial, checks it 16-byte aligned and each
of the run's no-wrap assumptions (two compares each), and keeps it for the run's bulk copy. O(runs + atoms)
instructions a trip, where the per-word check replays every consumer thread's staging.

Exact: every atom's register holds its value modulo 2^bits of its width (a 32-bit parameter, %ctaid, a 32-bit trip
offset zero-extended), a polynomial of them evaluated with 64-bit ring arithmetic is exact modulo 2^64 and so modulo
the 2^bits of a narrower polynomial; a widening is then applied exactly (`and` with 2^bits - 1, or shl/shr.s)."""

from __future__ import annotations

from dataclasses import dataclass

from ptxtool.passes.warp_roles.conditions import TRUE
from ptxtool.passes.warp_roles.footprint import Atom, Footprint, Run
from ptxtool.passes.warp_roles.sources import Poly, Widening, signed
from ptxtool.passes.warp_roles.zero_fill import Bound, Proof, bounds

MAX_RUNS = 64  # the per-run code is straight-line per run: beyond this many, split-bulk is refused
WARP = 32
_LOADS = {16: ("u16", "%wr_h16"), 32: ("u32", "%wr_h32")}


@dataclass(frozen=True)
class RunCode:
    """`start` at the top of each trip (on trip 0: each trip register's value as the loop found it), `evaluate`
    per trip (atoms, each lane's runs' sources into %wr_run<j>, %wr_ok false where a run is misaligned or an
    assumption fails), `declarations`."""

    start: str
    evaluate: str
    declarations: str
    sources: int  # %wr_run<j>: run lane + 32 j


def _immediate(value: int) -> str:
    return str(signed(value, 64))


def _evaluated(value: Poly, into: str, index: dict[str, int]) -> list[str]:
    """`into` = `value` (64-bit ring arithmetic on the atoms' registers)."""
    lines = [f"mov.s64 {into}, {_immediate(dict(value).get((), 0))};"]
    for monomial, coefficient in value:
        if not monomial:
            continue
        lines.append(f"mov.b64 %wr_mul, %wr_at{index[monomial[0]]};")
        lines += [f"mul.lo.s64 %wr_mul, %wr_mul, %wr_at{index[name]};" for name in monomial[1:]]
        if coefficient != 1:
            lines.append(f"mul.lo.s64 %wr_mul, %wr_mul, {_immediate(coefficient)};")
        lines.append(f"add.s64 {into}, {into}, %wr_mul;")
    return lines


def _atom_code(k: int, atom: Atom, index: dict[str, int], inits: dict[str, tuple[str, int]]) -> list[str] | None:
    """%wr_at<k> = the atom's value this trip (None: a kind or width not evaluated)."""
    into = f"%wr_at{k}"
    if atom.kind == "param" and atom.bits == 64:
        return [f"ld.param.u64 {into}, [{atom.operand}];"]
    if atom.kind == "param" and atom.bits in _LOADS:
        word, helper = _LOADS[atom.bits]
        return [f"ld.param.{word} {helper}, [{atom.operand}];", f"cvt.u64.{word} {into}, {helper};"]
    if atom.kind == "special":
        return [f"mov.u32 %wr_h32, {atom.operand};", f"cvt.u64.u32 {into}, %wr_h32;"]
    if atom.kind == "trip" and atom.name in inits:
        init, bits = inits[atom.name]
        if bits == 64:
            return [f"sub.s64 {into}, {atom.operand}, {init};"]
        return [f"sub.s32 %wr_h32, {atom.operand}, {init};", f"cvt.u64.u32 {into}, %wr_h32;"]
    if atom.kind == "cvta":
        return [*_evaluated(atom.inner, "%wr_ev", index), f"cvta.to.global.u64 {into}, %wr_ev;"]
    if atom.kind == "zext" and atom.bits < 64:
        return [*_evaluated(atom.inner, "%wr_ev", index), f"and.b64 {into}, %wr_ev, {(1 << atom.bits) - 1};"]
    if atom.kind == "sext" and atom.bits < 64:
        shift = 64 - atom.bits
        return [
            *_evaluated(atom.inner, "%wr_ev", index),
            f"shl.b64 {into}, %wr_ev, {shift};",
            f"shr.s64 {into}, {into}, {shift};",
        ]
    return None


def _fails(condition: str) -> list[str]:
    return [f"{condition};", "@%wr_q mov.pred %wr_ok, 0;"]


def _extended(into: str, signed_: bool, bits: int) -> list[str]:
    """`into` (a 64-bit value modulo 2^bits) as the `bits`-bit type reads it: zero- or sign-extended, exactly."""
    if bits == 64:
        return []
    if not signed_:
        return [f"and.b64 {into}, {into}, {(1 << bits) - 1};"]
    return [f"shl.b64 {into}, {into}, {64 - bits};", f"shr.s64 {into}, {into}, {64 - bits};"]


def _proof_code(proof: Proof, index: dict[str, int], preds: list[str]) -> list[str]:
    """`%wr_g<n>` (n: the length of `preds` on entry, where it appends it) = `proof` (zero_fill.py) on this trip's
    atoms."""
    into = f"%wr_g{len(preds)}"
    preds.append(into)
    if not isinstance(proof, Bound):
        left = f"%wr_g{len(preds)}"
        code = _proof_code(proof[1], index, preds)
        right = f"%wr_g{len(preds)}"
        code += _proof_code(proof[2], index, preds)
        return [*code, f"{proof[0]}.pred {into}, {left}, {right};"]
    b = proof
    word = "s64" if b.signed or b.bits < 64 else "u64"
    code = [*_evaluated(b.bound, "%wr_bd", index), *_extended("%wr_bd", b.signed, b.bits)]
    code += _evaluated(b.varying, "%wr_lo", index)
    if b.low == b.high:  # one k: the compare itself, P + k taken modulo 2^bits
        code += [f"add.s64 %wr_lo, %wr_lo, {b.low};", *_extended("%wr_lo", b.signed, b.bits)]
        return [*code, f"setp.{b.op}.{word} {into}, %wr_lo, %wr_bd;"]
    least, past = (-(1 << (b.bits - 1)), 1 << (b.bits - 1)) if b.signed else (0, 1 << b.bits)
    code += _extended("%wr_lo", b.signed, b.bits)
    code += [f"add.s64 %wr_hi, %wr_lo, {b.high};", f"add.s64 %wr_lo, %wr_lo, {b.low};"]
    return [  # P + k does not wrap for k in [low, high]; then the compare is monotone in k: both ends
        *code,
        f"setp.ge.s64 {into}, %wr_lo, {least};",
        *(
            line
            for test in (
                f"lt.s64 %wr_q, %wr_hi, {past}",
                f"{b.op}.s64 %wr_q, %wr_lo, %wr_bd",
                f"{b.op}.s64 %wr_q, %wr_hi, %wr_bd",
            )
            for line in (f"setp.{test};", f"and.pred {into}, {into}, %wr_q;")
        ),
    ]


def _closure(run: Run, atoms: tuple[Atom, ...], index: dict[str, int]) -> set[int]:
    """The atoms run `run`'s check reads (its source, assumptions, zero-fill proof), with the atoms they read."""
    polys = [run.source, *(a.inner for a in run.assumptions)]
    polys += [p for b in (bounds(run.loaded) if run.loaded is not None else ()) for p in (b.varying, b.bound)]
    names = [n for p in polys for m, _ in p for n in m]
    names += [Widening(a.kind, a.bits, a.inner, 0).base for a in run.assumptions]
    out: set[int] = set()
    while names:
        k = index[names.pop()]
        if k not in out:
            out.add(k)
            names += [n for m, _ in atoms[k].inner for n in m]
    return out


def per_run_code(found: Footprint, registers: frozenset[str]) -> RunCode | str:
    """The per-run check of `found`'s runs, or why the producers cannot build it. `registers`: the kernel's register
    names (a trip register must be one)."""
    atoms = found.atoms
    if len(found.runs) > MAX_RUNS:
        return f"{len(found.runs)} runs, more than the per-run check's {MAX_RUNS}"
    trips = [a for a in (atoms or ()) if a.kind == "trip"]
    unknown = "a value the runs' sources read is not one the producers compute once a trip"
    if atoms is None:
        return unknown
    for a in trips:
        if a.operand not in registers:
            return f"{unknown} (the step of a loop register of a nested scope)"
        if a.bits not in (32, 64):
            return f"{unknown} (the {a.bits}-bit step of {a.operand})"
    index = {a.name: k for k, a in enumerate(atoms)}
    inits = {a.name: (f"%wr_init{n}", a.bits) for n, a in enumerate(trips)}
    computed: dict[int, list[str]] = {}
    for k, atom in enumerate(atoms):
        lines = _atom_code(k, atom, index, inits)
        if lines is None:
            return f"{unknown} ({atom.name})"
        computed[k] = lines
    reads = [_closure(run, atoms, index) for run in found.runs]
    shared = {k for k in computed if sum(k in r for r in reads) > 1}  # the others: in their one run's block
    code = [line for k in sorted(shared) for line in computed[k]]
    preds: list[str] = []
    width = 0
    for r, run in enumerate(found.runs):
        code += [f"setp.ne.u32 %wr_q, %wr_vtid, {r % WARP};", f"@%wr_q bra $__wr_run{r};"]
        code += [line for k in sorted(reads[r] - shared) for line in computed[k]]
        code += _evaluated(run.source, "%wr_sum", index)
        code += ["and.b64 %wr_mul, %wr_sum, 15;", *_fails("setp.ne.s64 %wr_q, %wr_mul, 0")]
        for a in run.assumptions:
            base = index[Widening(a.kind, a.bits, a.inner, 0).base]
            low, high = (0, 1 << a.bits) if a.kind == "zext" else (-(1 << (a.bits - 1)), 1 << (a.bits - 1))
            code += [f"add.s64 %wr_mul, %wr_at{base}, {a.low};", *_fails(f"setp.lt.s64 %wr_q, %wr_mul, {low}")]
            code += [f"add.s64 %wr_mul, %wr_at{base}, {a.high};", *_fails(f"setp.ge.s64 %wr_q, %wr_mul, {high}")]
        if run.loaded is not None and run.loaded != TRUE:  # a word of the run zero-filled: the trip falls back
            code += _proof_code(run.loaded, index, preds)
            code += ["@!%wr_g0 mov.pred %wr_ok, 0;"]
            width = max(width, len(preds))
            preds = []
        j = r // WARP
        code += [f"mov.b64 %wr_run{j}, %wr_sum;", f"mov.u32 %wr_st{j}, {run.start};", f"mov.u32 %wr_sz{j}, {run.size};"]
        code += [f"$__wr_run{r}:"]
    sources = -(-len(found.runs) // WARP)
    declared = [
        f".reg .b64 %wr_at<{max(len(atoms), 1)}>, %wr_run<{sources}>, %wr_sum, %wr_ev, %wr_mul;",
        ".reg .b64 %wr_lo, %wr_hi, %wr_bd;",
        f".reg .pred %wr_g<{max(width, 1)}>;",
        f".reg .b32 %wr_h32, %wr_st<{sources}>, %wr_sz<{sources}>;",
        ".reg .b16 %wr_h16;",
        *(f".reg .b{bits} {init};" for init, bits in inits.values()),
    ]
    first = "setp.eq.u32 %wr_q, %wr_k, 0;\n"  # trip 0: the registers as the loop found them
    start = first + "\n".join(f"@%wr_q mov.b{a.bits} {inits[a.name][0]}, {a.operand};" for a in trips) if trips else ""
    return RunCode(start, "\n".join(code), "\n".join(declared), sources)
