"""Cache operators on global loads and stores where analysis proves them safe (the DeepSeek/DeepEP technique):
`.nc` on read-only data, `.L1::no_allocate` (+ `.L2::256B`) on streaming loads, `.cs` on write-once stores, and
optionally an L2 evict_first policy through `createpolicy` + `.L2::cache_hint`.

A grid-stride copy whose source the kernel never writes, with `noalias` declared for the kernel:

    ld.global.v4.u32  {%r4, %r5, %r6, %r7}, [%rd8];      ->  ld.global.nc.L1::no_allocate.L2::256B.v4.u32 ...
    st.global.v4.u32  [%rd9], {%r4, %r5, %r6, %r7};      ->  st.global.cs.v4.u32 ...

(SASS: `LDG.E.128` -> `LDG.E.NA.LTC256B.128.CONSTANT`, `STG.E.128` -> `STG.E.EF.128`.) Whether a load may be
`.nc` is the memory analysis's verdict (`non_coherent`: nothing the kernel, its callees or another agent can write);
ordered, volatile and scoped accesses keep their form, except under the explicit `unsafe_volatile_nc` policy, which
is outside the PTX memory model and says so in every report. Every added qualifier is checked against the file's
`.version`/`.target` and `Settings.arch`.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ptxtool import isa
from ptxtool.analysis.cfg import CFG, build_cfg
from ptxtool.analysis.launch_bounds import block_bounds
from ptxtool.analysis.memory import (
    BLOCK_INDICES,
    Affine,
    MemoryAccess,
    MemoryBase,
    MemoryFacts,
    Symbol,
    memory_facts,
    non_coherent,
)
from ptxtool.isa.caching import access_bytes, cache_operator, coherent, with_modifier
from ptxtool.isa.targets import MAX_BLOCK
from ptxtool.passes.report import PassReport, Rewrite, Skip
from ptxtool.syntax import ast
from ptxtool.syntax.names import matches

NAME = "cache-operators"
LINE_BYTES = 128  # an L1/L2 line: a streaming warp must move at least this far per trip
WIDE_BYTES = 256  # a warp footprint this wide earns `.L2::256B`
POLICY_REGISTER = "%ptxtool_evict_first"
POLICY_SASS = frozenset(("ULDC", "UMOV"))  # a policy replaces the default memory descriptor's uniform load

# What each qualifier the pass adds must show in nvdisasm's opcode (OPTIMIZATIONS.md's table); None: nothing visible.
SASS_MODIFIER: dict[str, str | None] = {
    "nc": "CONSTANT",
    "L1::no_allocate": "NA",
    "L2::256B": "LTC256B",
    "cs": "EF",
    "L2::cache_hint": None,
}
# Targets where ptxas shows a qualifier differently: ptxas 13.5 lowers `.L2::256B` to a 128-byte prefetch on sm_80.
SASS_MODIFIER_ON: dict[tuple[str, str], str] = {("L2::256B", "sm_80"): "LTC128B"}
STORE_HINTS = ("cs", "L1::no_allocate")

_GRID = ("%nctaid", "%ntid")


# What an added qualifier needs that the file's .version/.target or the target used lacks (one name to stub in tests).
_unmet = isa.unmet_added


@dataclass(frozen=True)
class Policy:
    """One policy switched on or off, and the kernels it applies to (globs; empty include: all)."""

    enabled: bool
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def applies(self, kernel: str) -> bool:
        included = not self.include or matches(kernel, self.include)
        return self.enabled and included and not matches(kernel, self.exclude)


@dataclass(frozen=True)
class Settings:
    """The pass's policies; `noalias` names kernels whose pointer parameters the user declares alias-free
    (`__restrict__`), `store_hint` picks `cs` or `L1::no_allocate` for write-once stores, and `arch` is the target
    the output will be assembled for (`--arch`; None: the file's `.target`): every added qualifier must suit it."""

    readonly: Policy = Policy(True)
    streaming: Policy = Policy(True)
    stores: Policy = Policy(True)
    l2_evict_first: Policy = Policy(False)
    unsafe_volatile_nc: Policy = Policy(False)
    noalias: tuple[str, ...] = ()
    store_hint: str = "cs"
    arch: str | None = None

    def alias_free(self, kernel: str) -> bool:
        return matches(kernel, self.noalias)


POLICIES = ("readonly", "streaming", "stores", "l2_evict_first", "unsafe_volatile_nc")
UNSAFE_WARNING = (
    "--unsafe-volatile-nc rewrote {kernel}:{line} `{before}` to a non-coherent load: this is OUTSIDE the PTX memory "
    "model (DeepEP's trick, 'tested to be correct on Hopper'), correct only if the data is complete before the load"
)


_Shape = frozenset[tuple[Symbol, int]]  # an offset's symbolic terms, hashable


def _shape(terms: dict[Symbol, int]) -> _Shape:
    return frozenset((s, c) for s, c in terms.items() if c)


def _local(terms: dict[Symbol, int]) -> _Shape:
    """The terms that are not multiples of the grid size (`%nctaid`): what an unrolled grid-stride loop keeps."""
    return frozenset((s, c) for s, c in terms.items() if c and not any("%nctaid" in f for f in s.factors))


@dataclass(frozen=True)
class _Neighbours:
    """A kernel's accesses grouped by pointer and symbolic shape, built once, so that finding an access's neighbours
    is a hash look-up and a bisection instead of a comparison with every other access (quadratic: a kernel with
    1,600 loads took minutes)."""

    spans: dict[tuple[MemoryBase, _Shape], tuple[int, int]]  # same terms: least, most const
    offsets: dict[tuple[MemoryBase, _Shape], list[tuple[int, int]]]  # same shape: (const, op), sorted
    bases: Counter[tuple[MemoryBase, int | None]]  # accesses per pointer (op None), and per pointer and op
    local: Counter[tuple[MemoryBase, int | None, _Shape]]  # the same, per shape off the grid size

    @classmethod
    def of(cls, accesses: tuple[MemoryAccess, ...]) -> _Neighbours:
        spans: dict[tuple[MemoryBase, _Shape], tuple[int, int]] = {}
        offsets: dict[tuple[MemoryBase, _Shape], list[tuple[int, int]]] = {}
        bases: Counter[tuple[MemoryBase, int | None]] = Counter()
        local: Counter[tuple[MemoryBase, int | None, _Shape]] = Counter()
        for a in accesses:
            terms, const = a.offset.terms, a.offset.const
            key = (a.base, frozenset(terms.items()))
            least, most = spans.get(key, (const, const))
            spans[key] = (min(least, const), max(most, const))
            offsets.setdefault((a.base, _shape(terms)), []).append((const, a.op))
            shape = _local(terms)
            for op in (None, a.op):
                bases[a.base, op] += 1
                local[a.base, op, shape] += 1
        for row in offsets.values():
            row.sort()
        return cls(spans, offsets, bases, local)


@dataclass
class _Kernel:
    """What the decisions of one kernel stand on."""

    module: ast.Module
    function: ast.Function
    cfg: CFG
    facts: MemoryFacts
    alias_free: bool
    neighbours: _Neighbours

    @property
    def name(self) -> str:
        return self.function.name


def _split_by_grid(k: _Kernel, a: MemoryAccess) -> bool:
    """The address tells apart every block (and thread) that could touch it: it involves a block index, and every
    `%ctaid`/`%tid` dimension the kernel reads (`bias[i]` indexed by `%ctaid.x` is read again by each
    `%ctaid.y`), and tells its values apart (`%tid.x & 31` does not); an enclosing loop the address may not move in
    would read it again too."""
    used = a.offset.distinct
    return bool(used & BLOCK_INDICES) and k.facts.indices <= used and a.depth <= 1 and _blocks_apart(k, a)


def _blocks_apart(k: _Kernel, a: MemoryAccess) -> bool:
    """No two blocks reach the same element: along each block index the address's stride covers a whole block's
    span (`%ctaid.x * %ntid.x * w` over `%tid.x * w`, or a constant stride of at least `.maxntid`/`.reqntid` times the
    thread stride; without those, the hardware's largest block), counting the constant offsets of the pointer's other
    accesses with the same terms
    (`a[blockIdx.x * 32 + threadIdx.x]` with 256-thread blocks is read by up to 8 blocks)."""
    least, most = k.neighbours.spans.get((a.base, frozenset(a.offset.terms.items())), (0, 0))
    reach = most - least
    declared = block_bounds(k.function)
    bounds = declared.dims if declared else ()
    for symbol, coefficient in a.offset.terms.items():
        blocks = [f for f in symbol.factors if f.startswith("%ctaid.")]
        if not blocks:
            continue
        dimension = blocks[0][-1]
        thread = abs(a.offset.coefficient(f"%tid.{dimension}"))
        if f"%ntid.{dimension}" in symbol.factors:
            if abs(coefficient) >= thread and not reach:
                continue
            return False
        axis = "xyz".index(dimension)
        most = bounds[axis] if axis < len(bounds) else MAX_BLOCK[axis]
        if len(symbol.factors) != 1 or abs(coefficient) < most * thread + reach:
            return False
    return True


def _grid_stride(stride: Affine) -> bool:
    """A stride that is a product of `%nctaid`/`%ntid` and a constant, with at least one `%nctaid`."""
    if stride.const or len(stride.terms) != 1:
        return False
    factors = next(iter(stride.terms)).factors
    return bool(factors) and all(f.startswith(_GRID) for f in factors) and any("%nctaid" in f for f in factors)


def _streaming(k: _Kernel, a: MemoryAccess, width: int) -> str | None:
    """Why an access touches each line once in the whole grid and moves on (None: not provably so)."""
    if not _split_by_grid(k, a):
        return None
    if a.loop is not None:
        if a.stride is None:
            return None
        if (stride := a.stride.constant) is not None:
            moves = abs(stride) >= LINE_BYTES
            return f"streaming: moves {stride} bytes per trip of its loop, split by block" if moves else None
        return (
            f"streaming: grid-stride loop (stride {a.stride} bytes, %nctaid x %ntid)"
            if _grid_stride(a.stride)
            else None
        )
    if a.offset.coefficient("%tid.x") == width and 32 * width >= LINE_BYTES:
        return f"streaming: one {width}-byte element per thread, {32 * width} bytes per warp, split by block"
    return None


def _wide(a: MemoryAccess, width: int) -> bool:
    """Consecutive lanes read consecutive elements and a warp covers a 256-byte span."""
    return a.offset.coefficient("%tid.x") == width and 32 * width >= WIDE_BYTES


def _touched_once(k: _Kernel, a: MemoryAccess, width: int) -> bool:
    """No other access through the same pointer may land on the lines this warp touches (no load-then-store, no
    stencil neighbours): another access is provably elsewhere only when it differs by a whole warp footprint or
    more with the same symbolic terms, or by multiples of the grid size (`%nctaid`: an unrolled grid-stride loop)."""
    n, base, op, terms = k.neighbours, a.base, a.op, a.offset.terms
    shape = _local(terms)
    others = n.bases[base, None] - n.bases[base, op]
    if others - (n.local[base, None, shape] - n.local[base, op, shape]):
        return False  # another access differs by more than multiples of the grid size
    footprint, const = 32 * width, a.offset.const
    row = n.offsets.get((base, _shape(terms)), [])
    for other, at in row[bisect_right(row, const - footprint, key=lambda e: e[0]) :]:
        if other >= const + footprint:
            break
        if at != op:
            return False  # the same terms, less than a warp footprint away
    return True


# ---------------------------------------------------------------- decisions


@dataclass
class _Plan:
    """Qualifiers wanted on one instruction, each with its reason, and qualifiers turned down."""

    add: list[tuple[str, str]] = field(default_factory=list)
    remove: tuple[str, ...] = ()
    skips: list[str] = field(default_factory=list)
    unsafe: bool = False


def _plan_load(k: _Kernel, a: MemoryAccess, instr: ast.Instruction, settings: Settings) -> _Plan:
    plan = _Plan()
    mods = set(instr.modifiers)
    written_here = a.param is not None and a.param in k.facts.written_params
    if ordered := coherent(instr):
        if settings.unsafe_volatile_nc.applies(k.name) and ordered == {"volatile"}:
            return _plan_unsafe(a, written_here)
        plan.skips.append("ordered/volatile/scoped load: stays coherent")
        return plan
    if op := cache_operator(instr):
        plan.skips.append(f"has cache operator .{op} (the author's choice)")
        return plan
    if a.param is None:
        plan.skips.append(f"pointer of unknown origin ({a.base}): not provably safe")
        return plan
    if written_here:
        plan.skips.append(f"the kernel writes {a.param}: the load stays coherent")
        return plan
    width = access_bytes(instr)
    if settings.readonly.applies(k.name) and "nc" not in mods:
        verdict = non_coherent(k.facts, a, instr)
        if unmet := _unmet(k.module, instr, with_modifier(instr, "nc"), settings.arch):
            plan.skips.append(f".nc: needs {' or '.join(str(n) for n in unmet.needs)}")
        elif verdict.allowed(k.alias_free):
            why = "pointers declared alias-free" if verdict.aliases else "nothing the kernel writes may alias it"
            plan.add.append(("nc", f"read-only: {a.param} is never written in the kernel ({why})"))
        elif verdict.blockers:
            plan.skips.append(f".nc: {verdict.blockers[0]}")
        else:
            aliases = "; ".join(verdict.aliases)
            plan.skips.append(f".nc: {aliases} (declare the pointers alias-free with --noalias {k.name})")
    streaming = _streaming(k, a, width) if _touched_once(k, a, width) else None
    if settings.streaming.applies(k.name) and streaming:
        if not any(m.startswith("L1::") for m in mods):
            plan.add.append(("L1::no_allocate", streaming))
        if _wide(a, width) and not any(re.fullmatch(r"L2::\d+B", m) for m in mods):
            plan.add.append(("L2::256B", f"wide sequential: 32 lanes x {width} bytes contiguous"))
    if settings.l2_evict_first.applies(k.name) and streaming and not any(m.startswith("L2::") for m in mods):
        plan.add.append(("L2::cache_hint", f"{streaming}; L2 evict_first policy"))
    return plan


def _plan_unsafe(a: MemoryAccess, written_here: bool) -> _Plan:
    plan = _Plan()
    polled = a.loop is not None and (a.stride is None or a.stride.constant == 0)
    if a.param is None or written_here or polled:
        why = "a poll of a flag" if polled else "data the kernel itself writes" if written_here else "unknown pointer"
        plan.skips.append(f"--unsafe-volatile-nc: not applied to {why}")
        return plan
    plan.remove, plan.unsafe = ("volatile",), True
    reason = "UNSAFE (--unsafe-volatile-nc): non-coherent read of data other agents write, outside the memory model"
    plan.add = [("nc", reason), ("L1::no_allocate", reason), ("L2::256B", reason)]
    return plan


def _plan_store(k: _Kernel, a: MemoryAccess, instr: ast.Instruction, settings: Settings) -> _Plan:
    plan = _Plan()
    mods = set(instr.modifiers)
    if coherent(instr):
        plan.skips.append("ordered/scoped store: left as written")
        return plan
    if cache_operator(instr) or any(m.startswith("L1::") for m in mods):
        plan.skips.append("already has a cache operator or eviction hint (the author's choice)")
        return plan
    if a.param is None:
        plan.skips.append(f"pointer of unknown origin ({a.base}): not provably safe")
        return plan
    width = access_bytes(instr)
    if not _touched_once(k, a, width):
        plan.skips.append("not write-once: the kernel reads or writes these lines again")
        return plan
    streaming = _streaming(k, a, width)
    if settings.stores.applies(k.name) and streaming:
        plan.add.append((settings.store_hint, f"write-once: {streaming}"))
    if settings.l2_evict_first.applies(k.name) and streaming and not any(m.startswith("L2::") for m in mods):
        plan.add.append(("L2::cache_hint", f"write-once: {streaming}; L2 evict_first policy"))
    return plan


# ---------------------------------------------------------------- legality and the tree


def _apply(
    module: ast.Module, k: _Kernel, instr: ast.Instruction, plan: _Plan, arch: str | None, report: PassReport
) -> ast.Instruction:
    """The rewritten instruction (qualifiers the file's version cannot take are skipped and reported)."""
    new = replace(instr, modifiers=tuple(m for m in instr.modifiers if m not in plan.remove))
    reasons, promised = [], []
    for qualifier, reason in plan.add:
        candidate = with_modifier(new, qualifier)
        if qualifier == "L2::cache_hint":
            candidate = replace(candidate, operands=(*candidate.operands, ast.Name(POLICY_REGISTER)))
        unmet = _unmet(module, instr, candidate, arch)
        if unmet is not None:
            needs = " or ".join(str(n) for n in unmet.needs)
            report.skipped.append(Skip(k.name, instr.line, instr.mnemonic, f".{qualifier}: needs {needs}"))
            continue
        new = candidate
        reasons.append(f".{qualifier}: {reason}")
        shown_on = (arch,) if arch else module.targets
        on_target = [SASS_MODIFIER_ON[qualifier, t] for t in shown_on if (qualifier, t) in SASS_MODIFIER_ON]
        if shown := next(iter(on_target), SASS_MODIFIER[qualifier]):
            promised.append(shown)
    if new == instr:
        return instr
    report.rewrites.append(Rewrite(k.name, instr.line, instr.mnemonic, new.mnemonic, tuple(reasons), tuple(promised)))
    if plan.unsafe:
        report.warnings.append(UNSAFE_WARNING.format(kernel=k.name, line=instr.line, before=instr.mnemonic))
    return new


def _replace(block: ast.Block, new: dict[int, ast.Instruction]) -> ast.Block:
    statements = tuple(
        new.get(id(s), s) if isinstance(s, ast.Instruction) else _replace(s, new) if isinstance(s, ast.Block) else s
        for s in block.statements
    )
    return replace(block, statements=statements)


_CREATE_POLICY = ast.Instruction(
    "createpolicy", ("fractional", "L2::evict_first", "b64"), (ast.Name(POLICY_REGISTER), ast.Immediate("1.0"))
)


def _with_policy(body: ast.Block) -> ast.Block:
    """The body with the evict_first policy register declared and created first (once: run again, unchanged)."""
    if any(isinstance(n, ast.Declarator) and n.name == POLICY_REGISTER for n in ast.walk(body)):
        return body
    declare = ast.Declaration((ast.Attribute(".reg"), ast.Attribute(".b64")), (ast.Declarator(POLICY_REGISTER),))
    at = next((n for n, s in enumerate(body.statements) if not isinstance(s, ast.Declaration)), len(body.statements))
    return replace(body, statements=(*body.statements[:at], declare, _CREATE_POLICY, *body.statements[at:]))


def _foreign_policy_register(body: ast.Block) -> bool:
    """Whether the kernel declares the policy register's name without the pass's own `createpolicy` (the author's
    register: appending it as a cache policy would hand ptxas an arbitrary value)."""
    nodes = list(ast.walk(body))
    declared = any(isinstance(n, ast.Declarator) and n.name == POLICY_REGISTER for n in nodes)
    ours = (_CREATE_POLICY.opcode, _CREATE_POLICY.modifiers, tuple(str(o) for o in _CREATE_POLICY.operands))
    created = any(
        isinstance(n, ast.Instruction) and (n.opcode, n.modifiers, tuple(str(o) for o in n.operands)) == ours
        for n in nodes
    )
    return declared and not created


def _rewrite_kernel(
    module: ast.Module, function: ast.Function, settings: Settings, report: PassReport, cfg: CFG, facts: MemoryFacts
) -> ast.Function:
    k = _Kernel(module, function, cfg, facts, settings.alias_free(function.name), _Neighbours.of(facts.accesses))
    unmet = _unmet(module, ast.Instruction("ret"), _CREATE_POLICY, settings.arch)
    if settings.l2_evict_first.applies(k.name) and unmet is not None:
        needs = " or ".join(str(n) for n in unmet.needs)
        report.skipped.append(Skip(k.name, function.line, "createpolicy", f"L2 evict_first policy: needs {needs}"))
        settings = replace(settings, l2_evict_first=Policy(False))
    elif settings.l2_evict_first.applies(k.name) and _foreign_policy_register(function.body):
        why = f"L2 evict_first policy: the kernel already has a register named {POLICY_REGISTER}"
        report.skipped.append(Skip(k.name, function.line, "createpolicy", why))
        settings = replace(settings, l2_evict_first=Policy(False))
    planners = {"ld": _plan_load, "st": _plan_store}
    new: dict[int, ast.Instruction] = {}
    for a in k.facts.accesses:
        instr = k.cfg.linear.ops[a.op].instruction
        planner = planners.get(instr.opcode)
        if planner is None or a.space != "global" or id(instr) in new:
            continue
        plan = planner(k, a, instr, settings)
        report.skipped.extend(Skip(k.name, instr.line, instr.mnemonic, why) for why in plan.skips)
        if plan.add:
            rewritten = _apply(module, k, instr, plan, settings.arch, report)
            if rewritten is not instr:
                new[id(instr)] = rewritten
    if not new:
        return function
    body = _replace(function.body, new)
    if any(ast.Name(POLICY_REGISTER) in i.operands for i in new.values()):
        body = _with_policy(body)
        report.inserted.append(k.name)
    return replace(function, body=body)


def cache_operators(
    module: ast.Module,
    settings: Settings | None = None,
    analysed: Callable[[ast.Function], tuple[CFG, MemoryFacts]] | None = None,
) -> tuple[ast.Module, PassReport]:
    """Add cache operators to the global loads and stores of every kernel where they are provably safe; `analysed`
    gives a function's CFG and memory facts (the pass manager's cached ones; by default computed here)."""
    settings = settings or Settings()
    report = PassReport(NAME, sass_may_change=POLICY_SASS)
    analysed = analysed or (lambda f: (cfg := build_cfg(f), memory_facts(module, f, cfg)))
    items = tuple(
        _rewrite_kernel(module, item, settings, report, *analysed(item))
        if isinstance(item, ast.Function) and item.is_kernel and item.body is not None
        else item
        for item in module.items
    )
    return (module if items == module.items else replace(module, items=items)), report
