"""A kernel's launch bounds and register caps as data, and the variants of them worth asking ptxas about.

ptxas divides the register file by what the bounds promise (`.maxntid` threads × `.minnctapersm` blocks per SM, or
`.maxnreg`): an over-tight promise forces spills, a loose one costs occupancy. This module only proposes; ptxas's
numbers and GPU time choose (`ptxtool.passes.registers`). It never lowers `.maxntid` below the block size a launch
spec uses, never touches `.reqntid` (the launch must use exactly that size), and never adds a directive the file's
`.version`/`.target` do not allow.

    .maxntid 256, 1, 1           .maxntid 256, 1, 1
    .minnctapersm 8        ->    .minnctapersm 5        (row_reduce32: 32 -> 48 registers, 364 -> 0 B spilled)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod

from ptxtool.analysis.launch_bounds import MAXNTID, REQNTID
from ptxtool.isa import satisfied
from ptxtool.isa.features import PRAGMAS
from ptxtool.isa.targets import Target, version
from ptxtool.syntax import ast
from ptxtool.toolchain.occupancy import limits_for, occupancy

SMEM_SPILLING = "enable_smem_spilling"
_WORDS = (MAXNTID, ".minnctapersm", ".maxnreg")  # the directives this module may set, in the order it writes them
MIN_CAP = 24  # below this a cap leaves ptxas no room for addresses and predicates
MAX_STATIC_SHARED = 48 << 10  # static shared memory a kernel may have without a launch-time opt-in


@dataclass(frozen=True, slots=True)
class Bounds:
    """What a kernel promises ptxas: its `.maxntid`/`.reqntid` dimensions, `.minnctapersm`, `.maxnreg`, and
    whether its body asks for spilling to shared memory."""

    maxntid: tuple[int, ...] | None = None
    reqntid: tuple[int, ...] | None = None
    minnctapersm: int | None = None
    maxnreg: int | None = None
    smem_spilling: bool = False

    @property
    def threads(self) -> int | None:
        """The most threads a block may have, as far as the kernel says."""
        dims = self.reqntid or self.maxntid
        return prod(dims) if dims else None

    def describe(self) -> str:
        parts = [f".maxntid {', '.join(map(str, self.maxntid))}"] if self.maxntid else []
        parts += [f".reqntid {', '.join(map(str, self.reqntid))}"] if self.reqntid else []
        parts += [f".minnctapersm {self.minnctapersm}"] if self.minnctapersm is not None else []
        parts += [f".maxnreg {self.maxnreg}"] if self.maxnreg is not None else []
        parts += [f'.pragma "{SMEM_SPILLING}"'] if self.smem_spilling else []
        return " ".join(parts) or "no bounds"


@dataclass(frozen=True, slots=True)
class Candidate:
    """Bounds to try and what they change, in words (`.minnctapersm 2 -> 1`)."""

    bounds: Bounds
    change: str


def _is_smem_pragma(statement: ast.Statement) -> bool:
    return (
        isinstance(statement, ast.Directive)
        and statement.word == ".pragma"
        and any(isinstance(a, ast.String) and a.text.strip('"') == SMEM_SPILLING for g in statement.args for a in g)
    )


def read(function: ast.Function) -> Bounds:
    """The bounds a kernel declares (its performance directives and the smem-spilling pragma of its body)."""
    values = {d.word: tuple(int(v.value) for v in d.values) for d in function.directives}
    body = function.body.statements if function.body else ()
    return Bounds(
        maxntid=values.get(MAXNTID),
        reqntid=values.get(REQNTID),
        minnctapersm=values[".minnctapersm"][0] if ".minnctapersm" in values else None,
        maxnreg=values[".maxnreg"][0] if ".maxnreg" in values else None,
        smem_spilling=any(_is_smem_pragma(s) for s in body),
    )


def _values(bounds: Bounds, word: str) -> tuple[int, ...] | None:
    value = {MAXNTID: bounds.maxntid, ".minnctapersm": bounds.minnctapersm, ".maxnreg": bounds.maxnreg}[word]
    return value if value is None or isinstance(value, tuple) else (value,)


def apply(function: ast.Function, bounds: Bounds) -> ast.Function:
    """The function with these bounds: a directive whose value changes is replaced where it stands, one set to None
    is removed, a new one goes after the others; `.reqntid` and every other directive stay as written."""
    if bounds.reqntid != read(function).reqntid:
        raise ValueError("the bounds of a kernel never change its .reqntid")
    directives: list[ast.PerfDirective] = []
    for d in function.directives:
        if d.word not in _WORDS:
            directives.append(d)
        elif (values := _values(bounds, d.word)) is not None:
            same = tuple(int(v.value) for v in d.values) == values
            directives.append(d if same else replace(d, values=tuple(ast.Immediate(str(v)) for v in values)))
    present = {d.word for d in function.directives}
    for word in _WORDS:
        if word not in present and (values := _values(bounds, word)) is not None:
            directives.append(ast.PerfDirective(word, tuple(ast.Immediate(str(v)) for v in values)))
    body = function.body
    if body is not None and bounds.smem_spilling != any(_is_smem_pragma(s) for s in body.statements):
        if bounds.smem_spilling:
            pragma = ast.Directive(".pragma", ((ast.String(f'"{SMEM_SPILLING}"'),),), semicolon=True)
            statements = (pragma, *body.statements)
        else:
            statements = tuple(s for s in body.statements if not _is_smem_pragma(s))
        body = replace(body, statements=statements)
    return replace(function, directives=tuple(directives), body=body)


def dynamic_shared(module: ast.Module) -> bool:
    """Whether the module declares `.extern .shared` memory: a kernel may then take any amount at launch."""
    return any(isinstance(i, ast.Declaration) and i.has(".extern") and i.has(".shared") for i in module.items)


def uses_dynamic_shared(module: ast.Module, function: ast.Function) -> bool:
    """Whether the kernel may touch `.extern .shared` memory: its body or any non-kernel function (a callee) names
    one. ptxas refuses the smem-spilling pragma there ("not allowed for dynamic SMEM"), spec or no spec."""
    bodies = [f.body for f in module.functions if f.body is not None and (f is function or not f.is_kernel)]
    nodes = [*module.items, *(n for body in bodies for n in ast.walk(body))]
    names = {
        d.name
        for n in nodes
        if isinstance(n, ast.Declaration) and n.has(".extern") and n.has(".shared")
        for d in n.declarators
    }
    return bool(names) and any(isinstance(n, ast.Name) and n.text in names for n in nodes)


def smem_spilling_allowed(module: ast.Module, arch: str) -> bool:
    """Whether the file's `.version` and `.target` (and the target assembled for) allow the smem-spilling pragma."""
    ptx = version(module.version or "") or (0, 0)
    targets = tuple(t for t in map(Target.parse, (*module.targets, arch)) if t is not None)
    return satisfied(PRAGMAS[SMEM_SPILLING].needs, ptx, targets)


def candidates(
    bounds: Bounds,
    *,
    arch: str,
    spills: bool,
    limited_by: str,
    registers: int,
    shared: int,
    block: tuple[int, ...] | None,
    smem_spilling: bool,
) -> tuple[Candidate, ...]:
    """The variants of `bounds` worth compiling for a kernel that spills (relax what forces the spills, or spill to
    shared memory) or whose occupancy registers limit (caps that fit one or two more blocks per SM). `block` is
    the launch spec's block (None: unknown); `shared` the static plus dynamic shared memory per block."""
    found: list[Candidate] = []

    def add(new: Bounds, change: str) -> None:
        if new != bounds and all(c.bounds != new for c in found):
            found.append(Candidate(new, change))

    threads = prod(block) if block else bounds.threads
    if spills:
        if (m := bounds.minnctapersm) is not None and m > 1:
            for relaxed in relaxations(arch, bounds.threads, m):
                add(replace(bounds, minnctapersm=relaxed), f".minnctapersm {m} -> {relaxed}")
        if (cap := bounds.maxnreg) is not None:
            for raised in sorted({cap + 8, cap + 24, cap * 2} - {cap}):
                if raised < 255:
                    add(replace(bounds, maxnreg=raised), f".maxnreg {cap} -> {raised}")
            add(replace(bounds, maxnreg=None), f".maxnreg {cap} removed")
        if block and bounds.maxntid and not bounds.reqntid and prod(block) < prod(bounds.maxntid):
            # ptxas reads the product; dimensions as the author wrote them (a 1-D .maxntid takes the block's size)
            n = len(bounds.maxntid)
            spec = tuple(block) if n == len(block) else (prod(block), *(1,) * (n - 1))
            change = f".maxntid {', '.join(map(str, bounds.maxntid))} -> {', '.join(map(str, spec))} (the spec's block)"
            add(replace(bounds, maxntid=spec), change)
        if smem_spilling and (bounds.maxntid or bounds.reqntid) and not bounds.smem_spilling:
            add(replace(bounds, smem_spilling=True), f'.pragma "{SMEM_SPILLING}" added')
    elif limited_by == "registers" and threads:
        now = occupancy(arch, registers, shared, threads)
        limits = limits_for(arch)
        if now is not None and limits is not None:
            for more in (1, 2):
                cap = _cap_for(arch, shared, threads, now.blocks_per_sm + more)
                if cap is not None and cap < registers:
                    add(replace(bounds, maxnreg=cap), f".maxnreg {cap} added ({now.blocks_per_sm + more} blocks/SM)")
    return tuple(found)


MAX_RELAXATIONS = 6  # the five budgets nearest the author's, and the loosest


def relaxations(arch: str, threads: int | None, m: int) -> tuple[int, ...]:
    """The `.minnctapersm` values below `m` worth compiling: per register budget they give ptxas (the registers with
    which that many blocks of `threads` fit an SM, a multiple of 8), the one nearest the author's; at most the five
    nearest and the loosest. x11_echo512 (ccminer, 128 threads) at 7 blocks spills 180 B in 72 registers, at 6 still
    104 B, at 5 nothing in 96, at 3 nothing in 151: 1, m/2 and m-1 alone would miss 5. Without `threads`, those three.
    """
    if not threads:
        return tuple(sorted({1, m // 2, m - 1} - {0, m}, reverse=True))
    budgets = {_cap_for(arch, 0, threads, m)}
    found = []
    for relaxed in range(m - 1, 0, -1):
        budget = _cap_for(arch, 0, threads, relaxed)
        if budget not in budgets:
            budgets.add(budget)
            found.append(relaxed)
    return tuple(found[: MAX_RELAXATIONS - 1] + found[MAX_RELAXATIONS - 1 :][-1:])


def _cap_for(arch: str, shared: int, threads: int, blocks: int) -> int | None:
    """The most registers per thread (a multiple of 8) with which `blocks` blocks fit on one SM, if any."""
    for cap in range(248, MIN_CAP - 1, -8):
        fit = occupancy(arch, cap, shared, threads)
        if fit is not None and fit.blocks_per_sm >= blocks:
            return cap
    return None
