"""The split with one producer warp that stages a trip with `cp.async.bulk` (`--variant split-bulk`, sm_90+): the
trip's bytes as runs of contiguous shared bytes with contiguous global sources (footprint.py), each copied by one

    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [ring+slot+start], [src], size, [full+8*slot];

and the bytes no run holds ("loose": sgemm's transposed A tile) by cp.async, as split-async copies them.

What the PTX cannot tell (each run's source 16-byte aligned, its indices not wrapping, every word of it on the load
path rather than zero-filled, on this trip and for these parameters) the producer warp checks at run time first.
The per-run check (per_run.py; up to 64 runs whose atoms it computes): each lane evaluates its runs' sources and
no-wrap assumptions (footprint.py proved the rest), and a check pass replays the consumer threads' staging only
for loose words' cp.asyncs, zero-fill flags, or registers the tail reads. Else the per-word check:
it replays every consumer thread's staging (the check pass, issuing the loose words' cp.asyncs only), and for
each word w of run r takes b = src(w) - (offset(w) - start(r)), the run's base as that word implies it; the least
and the greatest b over the run's words (32-bit shared reductions on its low and its high word, which ptxas
aggregates per warp; one lane per run then compares) are equal and 16-byte aligned iff the run's words are exactly
the bytes [b, b + size) in order. The warp votes. If every run holds and no run word is
zero-filled, lane 0 adds the runs' bytes to full[slot]'s tx-count (`mbarrier.expect_tx`), the lanes fence the
async proxy (generic writes to the slot, of an earlier fallback trip, before the bulk writes) and issue one bulk
copy per run; else the staging pass copies the run words with cp.async (the fallback: the split-async trip). Either
way each of the 32 lanes then arrives with `cp.async.mbarrier.arrive.noinc` (when its cp.asyncs have landed): the
full barrier's count stays 32, and a phase completes when all arrived and every expected byte landed. Both passes
run the staging part's own arithmetic, so a staging part that reads a register it also updates (a pointer stepped
in the staging part, not the tail) is refused (`replay_refusal`): on a fallback trip it would step twice.

No bulk copy outlives the kernel unwaited: consumers wait on full[slot] on every trip the producers stage (the trip
count is uniform), and that phase completes only when its expected bytes have landed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.dataflow.liveness import ENTRY, def_use
from ptxtool.analysis.staging import StagedLoop
from ptxtool.isa.targets import BULK_COPY_ALIGN, STATIC_SHARED_PER_BLOCK, Target, shared_limit
from ptxtool.passes.warp_roles.async_producers import ARRIVE as NOINC
from ptxtool.passes.warp_roles.copies import AsyncCopy, copying
from ptxtool.passes.warp_roles.emit import FULL, RING, relocated, ring_layout, statements
from ptxtool.passes.warp_roles.footprint import NO_RUN, Footprint
from ptxtool.passes.warp_roles.per_run import RunCode
from ptxtool.passes.warp_roles.producers import Staging
from ptxtool.syntax import ast
from ptxtool.toolchain.sass import SassMark

VARIANT = "split-bulk"
BOUNDS = "__wr_bounds"  # per run, of the bases its words imply on this trip: least and greatest low word, high word
_BOUND = ("min", "max", "min", "max")  # the four .u32 bounds of a run, in order (32-bit: ATOMS, not a CAS loop)
SASS_PROOF = (SassMark("UBLKCP"), SassMark("LDGSTS"))  # the bulk copies; the fallback's cp.asyncs
WARP = 32


def replay_refusal(cfg: CFG, found: StagedLoop) -> tuple[int, str] | None:
    """(line, why) where running the staging part twice in one trip (the check pass, then the fallback) is not the
    same as running it once: a register it reads both as it was before the part and as the part itself sets it."""
    du = def_use(cfg)
    inside = range(found.staging.start, found.filled)
    names = {r.key: r.name for r in cfg.linear.registers.values()}
    for at in inside:
        op = cfg.linear.ops[at]
        for key in op.uses:
            defs = du.defs_of.get((at, key), ())
            mine = [d for d in defs if d != ENTRY and d in inside]
            if mine and len(mine) != len(defs):
                return op.line, (
                    f"the staging part reads {names[key]} at line {op.line} as the trip found it and sets it at line "
                    f"{cfg.linear.ops[mine[0]].line}: the check pass and the fallback would step it twice"
                )
    return None


def unfitting(module: ast.Module, found: StagedLoop, runs: Footprint, stages: int) -> str | None:
    """Why the ring, its mbarriers and the runs' bounds (16 bytes a run) overflow static shared memory, or None."""
    arch = next((t for t in map(Target.parse, module.targets) if t), None)
    limit = min((shared_limit(arch) if arch else None) or STATIC_SHARED_PER_BLOCK, STATIC_SHARED_PER_BLOCK)
    _, slot = ring_layout(found)
    need = stages * slot + 16 * stages + 16 * len(runs.runs)
    if need > limit:
        runs_bounds = f"the bounds of {len(runs.runs)} runs"
        return f"shared memory does not fit {stages} stages and {runs_bounds}: {need} bytes > {limit}"
    return None


def tables(kernel: str) -> tuple[str, str, str]:
    """The names of the kernel's tables: run of each 16-byte granule, start and size of each run."""
    return f"__wr_{kernel}_run", f"__wr_{kernel}_start", f"__wr_{kernel}_size"


def run_tables(kernel: str, found: Footprint) -> str:
    """The module-scope `.const` tables the check and the copies read. (As `.global` tables read with ld.global,
    ptxas 13.5 gave nvcc's sgemm_unrolled split 56 registers and 3 KB of spills instead of 168 and none.)"""
    run, start, size = tables(kernel)

    def table(name: str, values: list[int]) -> str:
        return f".const .align 4 .u32 {name}[{len(values)}] = {{{', '.join(map(str, values))}}};"

    return "\n".join(
        (
            table(run, list(found.granules)),
            table(start, [r.start for r in found.runs]),
            table(size, [r.size for r in found.runs]),
        )
    )


def declarations(found: Footprint, plan: RunCode | None) -> str:
    """The check's and the copies' registers, and (the per-word check) the runs' bounds in shared memory."""
    runs = len(found.runs)
    return "\n".join(
        (
            ".reg .pred %wr_ok, %wr_bulk, %wr_q, %wr_lead, %wr_loose;",
            ".reg .b32 %wr_o, %wr_rb, %wr_ri, %wr_st, %wr_sz, %wr_r, %wr_x;",
            ".reg .b64 %wr_t, %wr_b, %wr_d;",
            ".reg .b32 %wr_w<4>;",
            plan.declarations if plan is not None else f".shared .align 16 .b32 {BOUNDS}[{4 * runs}];",
        )
    )


def feeds_tail(cfg: CFG, found: StagedLoop) -> bool:
    """Whether the loop's tail reads a register the staging part sets: then the producers replay the staging part
    on every trip, bulk or not (the per-run check could skip it otherwise)."""
    du = def_use(cfg)
    staging = range(found.staging.start, found.filled)
    return any(
        d in staging for at in found.tail for key in cfg.linear.ops[at].uses for d in du.defs_of.get((at, key), ())
    )


def _lanes(label: str, runs: int, body: str) -> str:
    """`body` for every run r = lane, lane + 32, ... (%wr_r), in a loop of its own."""
    return (
        f"mov.u32 %wr_r, %wr_vtid;\n{label}:\nsetp.ge.u32 %wr_q, %wr_r, {runs};\n@%wr_q bra {label}_done;\n"
        f"{body}\nadd.u32 %wr_r, %wr_r, {WARP};\nbra {label};\n{label}_done:"
    )


def _entry(name: str, index: str, into: str, guard: str = "") -> str:
    """`into` = entry `index` of `.const` table `name` (under `guard`: an index out of the table is not read)."""
    return f"mov.u64 %wr_t, {name};\nmad.wide.u32 %wr_t, {index}, 4, %wr_t;\n{guard}ld.const.u32 {into}, [%wr_t];"


def _bounds(index: str) -> str:
    """%wr_x = the address of run `index`'s four bounds."""
    return f"mov.u32 %wr_x, {BOUNDS};\nmad.lo.u32 %wr_x, {index}, 16, %wr_x;"


def bulk_staging(
    kernel: str,
    copies: tuple[AsyncCopy, ...],
    found: Footprint,
    wide: Callable[[str], bool],
    registers: frozenset[str],
    space: str,
    plan: RunCode | None = None,
    replays: bool = True,
) -> Staging:
    """The producers' trip: the per-run check (`plan`) or the per-word one (reset the runs' bounds, the check pass),
    the vote, then either the bulk copies or the split-async staging (`space`: the file's spelling of the mbarriers'
    state space). With `plan`, the check pass runs only where it copies loose words, reads zero-fill flags or
    (`replays`) computes what the tail reads."""
    if plan is not None:
        return _per_run_staging(kernel, copies, found, wide, registers, space, plan, replays)
    run, start, size = tables(kernel)
    runs = len(found.runs)
    capture = copying(copies, registers, lambda i: relocated(i, wide))
    by_store = {c.store: c for c in copies}

    def locate(store: ast.Instruction) -> str:
        return _locate(run, store, wide, bool(found.loose))

    def copied(index: int, i: ast.Instruction, loose: bool) -> tuple[ast.Statement, ...]:
        """The store's cp.async, for the loose words only (`loose`) or for the run words only."""
        *moved, cp = capture(index, i)
        assert isinstance(cp, ast.Instruction)
        if found.loose:
            cp = replace(cp, guard=ast.Guard(ast.Name("%wr_loose"), negated=not loose))
        return (*moved, cp)

    def check(index: int, i: ast.Instruction) -> tuple[ast.Statement, ...]:
        copy = by_store.get(index)
        if copy is None:
            return capture(index, i)  # loads take their address, zeros and selps set the flag
        ours = "@!%wr_loose " if found.loose else ""
        code = (
            f"{locate(i)}\n{_entry(start, '%wr_ri', '%wr_st', ours)}\n"
            f"sub.u32 %wr_st, %wr_o, %wr_st;\ncvt.u64.u32 %wr_d, %wr_st;\nsub.u64 %wr_b, {copy.source}, %wr_d;\n"
            f"cvt.u32.u64 %wr_w0, %wr_b;\nshr.u64 %wr_d, %wr_b, 32;\ncvt.u32.u64 %wr_w1, %wr_d;\n{_bounds('%wr_ri')}\n"
            + "\n".join(f"{ours}red.shared.{m}.u32 [%wr_x+{4 * k}], %wr_w{k // 2};" for k, m in enumerate(_BOUND))
        )
        if copy.zero_fill:
            code += f"\n{ours}and.pred %wr_ok, %wr_ok, {copy.flag};"
        return (*statements(code), *(copied(index, i, True) if found.loose else ()))

    def edit(index: int, i: ast.Instruction) -> tuple[ast.Statement, ...]:
        if index not in by_store or not found.loose:
            return capture(index, i)
        return (*statements(locate(i)), *copied(index, i, False))

    reset = _lanes(
        "$__wr_reset",
        runs,
        _bounds("%wr_r")
        + "".join(f"\nst.shared.u32 [%wr_x+{4 * k}], {-1 if m == 'min' else 0};" for k, m in enumerate(_BOUND)),
    )
    before = f"mov.pred %wr_ok, 1;\n{reset}\nbar.warp.sync -1;"
    verify = _lanes(
        "$__wr_verify",
        runs,
        _bounds("%wr_r")
        + "".join(f"\nld.shared.u32 %wr_w{k}, [%wr_x+{4 * k}];" for k in range(4))
        + "\nsetp.ne.u32 %wr_q, %wr_w0, %wr_w1;\n@%wr_q mov.pred %wr_ok, 0;\n"
        "setp.ne.u32 %wr_q, %wr_w2, %wr_w3;\n@%wr_q mov.pred %wr_ok, 0;\n"
        f"and.b32 %wr_w1, %wr_w0, {BULK_COPY_ALIGN - 1};\nsetp.ne.u32 %wr_q, %wr_w1, 0;\n@%wr_q mov.pred %wr_ok, 0;",
    )
    issue = _lanes(
        "$__wr_issue",
        runs,
        f"{_bounds('%wr_r')}\nld.shared.u32 %wr_w0, [%wr_x];\nld.shared.u32 %wr_w2, [%wr_x+8];\n"
        "cvt.u64.u32 %wr_b, %wr_w2;\nshl.b64 %wr_b, %wr_b, 32;\n"
        "cvt.u64.u32 %wr_d, %wr_w0;\nor.b64 %wr_b, %wr_b, %wr_d;\n"
        f"{_entry(start, '%wr_r', '%wr_st')}\n"
        f"{_entry(size, '%wr_r', '%wr_sz')}\nmov.u32 %wr_o, {RING};\nadd.u32 %wr_o, %wr_o, %wr_st;\n"
        "add.u32 %wr_o, %wr_o, %wr_off;\n"
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%wr_o], [%wr_b], %wr_sz, [%wr_bar];",
    )
    decide = (
        f"bar.warp.sync -1;\n{verify}\nvote.sync.all.pred %wr_bulk, %wr_ok, -1;\n@!%wr_bulk bra $__wr_fallback;\n"
        f"mov.u32 %wr_bar, {FULL};\nmad.lo.u32 %wr_bar, %wr_slot, 8, %wr_bar;\nsetp.eq.u32 %wr_lead, %wr_vtid, 0;\n"
        f"@%wr_lead mbarrier.expect_tx.relaxed.cta.{space}.b64 [%wr_bar], {found.total};\nbar.warp.sync -1;\n"
        f"fence.proxy.async.shared::cta;\n{issue}\nbra $__wr_staged;\n$__wr_fallback:"
    )
    return Staging(edit, f"$__wr_staged:\n{NOINC}", "cp.async.wait_all;", check=check, before=before, decide=decide)


def _locate(run: str, store: ast.Instruction, wide: Callable[[str], bool], loose: bool) -> str:
    """%wr_o = the store's offset in the slot, %wr_ri = the run that holds it (%wr_loose: none, where some bytes
    are loose)."""
    address = store.operands[0]
    assert isinstance(address, ast.Address)
    base = address.base.text if isinstance(address.base, ast.Name) else RING
    take = f"cvt.u32.u64 %wr_o, {base};" if wide(base) else f"mov.u32 %wr_o, {base};"
    flag = f"\nsetp.eq.u32 %wr_loose, %wr_ri, {NO_RUN};" if loose else ""
    return (
        f"{take}\nadd.s32 %wr_o, %wr_o, {ast.displacement(address)};\nmov.u32 %wr_rb, {RING};\n"
        f"sub.u32 %wr_o, %wr_o, %wr_rb;\nshr.u32 %wr_st, %wr_o, 4;\n{_entry(run, '%wr_st', '%wr_ri')}{flag}"
    )


def _per_run_staging(
    kernel: str,
    copies: tuple[AsyncCopy, ...],
    found: Footprint,
    wide: Callable[[str], bool],
    registers: frozenset[str],
    space: str,
    plan: RunCode,
    replays: bool,
) -> Staging:
    """The trip with the per-run check: the atoms and each lane's runs evaluated and checked (per_run.py), the
    check pass only for the loose words' cp.asyncs and the zero-fill flags, the vote, the bulk copies or the
    split-async staging."""
    run, start, size = tables(kernel)
    capture = copying(copies, registers, lambda i: relocated(i, wide))
    by_store = {c.store: c for c in copies}
    loose = bool(found.loose)
    flagged = any(r.loaded is None for r in found.runs) and any(c.zero_fill for c in copies)  # else proven per run

    def copied(index: int, i: ast.Instruction, of_loose: bool) -> tuple[ast.Statement, ...]:
        *moved, cp = capture(index, i)
        assert isinstance(cp, ast.Instruction)
        if loose:
            cp = replace(cp, guard=ast.Guard(ast.Name("%wr_loose"), negated=not of_loose))
        return (*moved, cp)

    def check(index: int, i: ast.Instruction) -> tuple[ast.Statement, ...]:
        copy = by_store.get(index)
        if copy is None:
            return capture(index, i)
        code = _locate(run, i, wide, True) if loose else ""
        if copy.zero_fill and flagged:
            code += f"\n{'@!%wr_loose ' if loose else ''}and.pred %wr_ok, %wr_ok, {copy.flag};"
        return (*(statements(code) if code else ()), *(copied(index, i, True) if loose else ()))

    def edit(index: int, i: ast.Instruction) -> tuple[ast.Statement, ...]:
        if index not in by_store or not loose:
            return capture(index, i)
        return (*statements(_locate(run, i, wide, True)), *copied(index, i, False))

    checking = loose or replays or flagged
    issue = []
    for j in range(plan.sources):
        issue.append(
            f"add.u32 %wr_r, %wr_vtid, {WARP * j};\nsetp.ge.u32 %wr_q, %wr_r, {len(found.runs)};\n"
            f"@%wr_q bra $__wr_issue{j};\n{_entry(start, '%wr_r', '%wr_st')}\n{_entry(size, '%wr_r', '%wr_sz')}\n"
            f"mov.u32 %wr_o, {RING};\nadd.u32 %wr_o, %wr_o, %wr_st;\nadd.u32 %wr_o, %wr_o, %wr_off;\n"
            f"mov.b64 %wr_b, %wr_run{j};\n"
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%wr_o], [%wr_b], %wr_sz, [%wr_bar];\n"
            f"$__wr_issue{j}:"
        )
    decide = (  # the atoms after the check pass: not live across it (the staging part sets no trip register)
        f"{plan.evaluate}\nvote.sync.all.pred %wr_bulk, %wr_ok, -1;\n@!%wr_bulk bra $__wr_fallback;\n"
        f"mov.u32 %wr_bar, {FULL};\nmad.lo.u32 %wr_bar, %wr_slot, 8, %wr_bar;\nsetp.eq.u32 %wr_lead, %wr_vtid, 0;\n"
        f"@%wr_lead mbarrier.expect_tx.relaxed.cta.{space}.b64 [%wr_bar], {found.total};\nbar.warp.sync -1;\n"
        f"fence.proxy.async.shared::cta;\n{chr(10).join(issue)}\nbra $__wr_staged;\n$__wr_fallback:"
    )
    return Staging(
        edit,
        f"$__wr_staged:\n{NOINC}",
        "cp.async.wait_all;",
        check=check if checking else None,
        before=f"mov.pred %wr_ok, 1;\n{plan.start}" if plan.start else "mov.pred %wr_ok, 1;",
        decide=decide,
    )
