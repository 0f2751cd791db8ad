"""The split with one producer warp that stages a trip with `cp.async.bulk` (`--variant split-bulk`, sm_90+): the
trip's bytes as runs of contiguous shared bytes with contiguous global sources (footprint.py), each copied by one

    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [ring+slot+start], [src], size, [full+8*slot];

and the bytes no run holds ("loose": sgemm's transposed A tile) by cp.async, as split-async copies them.

What the PTX cannot tell (each run's source 16-byte aligned, its indices not wrapping, none of its words
zero-filled, on this trip and for these parameters) the producer warp checks once per run and trip (per_run.py:
lane r mod 32 evaluates run r's source, its no-wrap assumptions and its zero-fill proof from the atoms; footprint.py
and zero_fill.py proved the rest). A check pass replays the consumer threads' staging only where it must: to issue
the loose words' cp.asyncs, to read the zero-fill flags of a kernel whose zero-fill is not proven per run, or to
compute what the loop's tail reads. The warp votes. If every run holds, lane 0 adds the runs' bytes to
full[slot]'s tx-count (`mbarrier.expect_tx`), the lanes fence the async proxy (generic writes to the slot, of an
earlier fallback trip, before the bulk writes) and issue one bulk copy per run; else the staging pass copies the
run words with cp.async (the fallback: the split-async trip). Either way each of the 32 lanes then arrives with
`cp.async.mbarrier.arrive.noinc` (when its cp.asyncs have landed): the full barrier's count stays 32, and a phase
completes when all arrived and every expected byte landed. Whether a staging store writes run words, loose words
or both is known statically (footprint.py); only a store that writes both tells them apart at run time, by its
slot offset against the runs' spans. Both passes run the staging part's own arithmetic, so a staging part that
reads a register it also updates (a pointer stepped in the staging part, not the tail) is refused
(`replay_refusal`): on a fallback trip it would step twice.

No bulk copy outlives the kernel unwaited: consumers wait on full[slot] on every trip the producers stage (the trip
count is uniform), and that phase completes only when its expected bytes have landed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.dataflow.liveness import ENTRY, def_use
from ptxtool.analysis.staging import StagedLoop
from ptxtool.isa.targets import STATIC_SHARED_PER_BLOCK, Target, shared_limit
from ptxtool.passes.warp_roles.async_producers import ARRIVE as NOINC
from ptxtool.passes.warp_roles.copies import AsyncCopy, copying
from ptxtool.passes.warp_roles.emit import FULL, RING, relocated, ring_layout, statements
from ptxtool.passes.warp_roles.footprint import Footprint
from ptxtool.passes.warp_roles.per_run import RunCode
from ptxtool.passes.warp_roles.producers import Staging
from ptxtool.syntax import ast
from ptxtool.toolchain.sass import SassMark

VARIANT = "split-bulk"
SASS_PROOF = (SassMark("UBLKCP"), SassMark("LDGSTS"))  # the bulk copies; the fallback's cp.asyncs
WARP = 32
MAX_SPANS = 8  # a store writing run and loose words compares its offset with each span of runs: beyond, refused


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
    """Why the ring and its mbarriers overflow static shared memory, or a store writing run and loose words would
    compare its offset with more than MAX_SPANS spans of runs; or None."""
    arch = next((t for t in map(Target.parse, module.targets) if t), None)
    limit = min((shared_limit(arch) if arch else None) or STATIC_SHARED_PER_BLOCK, STATIC_SHARED_PER_BLOCK)
    _, slot = ring_layout(found)
    need = stages * slot + 16 * stages
    if need > limit:
        return f"shared memory does not fit {stages} stages: {need} bytes > {limit}"
    if any(kind == "mixed" for _, kind in runs.kinds) and len(runs.spans) > MAX_SPANS:
        return (
            f"a staging store writes both run and loose words, and the runs make {len(runs.spans)} spans of the slot "
            f"(more than {MAX_SPANS} to tell its words apart)"
        )
    return None


def declarations(plan: RunCode) -> str:
    """The check's and the copies' registers."""
    return "\n".join(
        (
            ".reg .pred %wr_ok, %wr_bulk, %wr_q, %wr_lead, %wr_loose;",
            ".reg .b32 %wr_o, %wr_rb;",
            ".reg .b64 %wr_b;",
            plan.declarations,
        )
    )


def feeds_tail(cfg: CFG, found: StagedLoop) -> bool:
    """Whether the loop's tail reads a register the staging part sets: then the producers replay the staging part
    on every trip, bulk or not."""
    du = def_use(cfg)
    staging = range(found.staging.start, found.filled)
    return any(
        d in staging for at in found.tail for key in cfg.linear.ops[at].uses for d in du.defs_of.get((at, key), ())
    )


def _locate(store: ast.Instruction, wide: Callable[[str], bool], spans: tuple[tuple[int, int], ...]) -> str:
    """%wr_loose = the relocated store's slot offset is in no span of runs (a store writing both kinds)."""
    address = store.operands[0]
    assert isinstance(address, ast.Address)
    base = address.base.text if isinstance(address.base, ast.Name) else RING
    take = f"cvt.u32.u64 %wr_o, {base};" if wide(base) else f"mov.u32 %wr_o, {base};"
    code = [
        take,
        f"add.s32 %wr_o, %wr_o, {ast.displacement(address)};",
        f"mov.u32 %wr_rb, {RING};",
        "sub.u32 %wr_o, %wr_o, %wr_rb;",  # the replay's addresses are slot 0's until relocated
        "mov.pred %wr_loose, 1;",
    ]
    for start, end in spans:  # o in [start, end): o - start < end - start, unsigned
        code += [
            f"sub.u32 %wr_rb, %wr_o, {start};",
            f"setp.lt.u32 %wr_q, %wr_rb, {end - start};",
            "@%wr_q mov.pred %wr_loose, 0;",
        ]
    return "\n".join(code)


def bulk_staging(
    copies: tuple[AsyncCopy, ...],
    found: Footprint,
    wide: Callable[[str], bool],
    registers: frozenset[str],
    space: str,
    plan: RunCode,
    replays: bool,
) -> Staging:
    """The producers' trip: the per-run check (`plan`: atoms, each lane's runs evaluated and checked), the check
    pass where it is needed (loose words' cp.asyncs, zero-fill flags not proven per run, `replays`: what the tail
    reads), the vote, then the bulk copies or the split-async staging (`space`: the file's spelling of the
    mbarriers' state space)."""
    capture = copying(copies, registers, lambda i: relocated(i, wide))
    by_store = {c.store: c for c in copies}
    kinds = dict(found.kinds)
    flagged = any(r.loaded is None for r in found.runs) and any(c.zero_fill for c in copies)  # else proven per run

    def copied(index: int, i: ast.Instruction, of_loose: bool) -> tuple[ast.Statement, ...]:
        """The store's cp.async where it copies loose words (`of_loose`) or run words; nothing where it has none."""
        kind = kinds.get(index, "run")
        if kind == ("run" if of_loose else "loose"):
            return ()
        *moved, cp = capture(index, i)
        assert isinstance(cp, ast.Instruction)
        if kind == "mixed":
            cp = replace(cp, guard=ast.Guard(ast.Name("%wr_loose"), negated=not of_loose))
        return (*moved, cp)

    def locate(index: int, i: ast.Instruction) -> tuple[ast.Statement, ...]:
        return statements(_locate(i, wide, found.spans)) if kinds.get(index) == "mixed" else ()

    def check(index: int, i: ast.Instruction) -> tuple[ast.Statement, ...]:
        copy = by_store.get(index)
        if copy is None:
            return capture(index, i)  # loads take their address, zeros and selps set the flag
        code = locate(index, i)
        if copy.zero_fill and flagged and kinds.get(index) != "loose":
            guard = "@!%wr_loose " if kinds.get(index) == "mixed" else ""
            code += statements(f"{guard}and.pred %wr_ok, %wr_ok, {copy.flag};")
        return (*code, *copied(index, i, True))

    def edit(index: int, i: ast.Instruction) -> tuple[ast.Statement, ...]:
        if index not in by_store or not found.loose:
            return capture(index, i)
        return (*locate(index, i), *copied(index, i, False))

    checking = bool(found.loose) or replays or flagged
    issue = []
    for j in range(plan.sources):
        issue.append(
            f"setp.ge.u32 %wr_q, %wr_vtid, {len(found.runs) - WARP * j};\n@%wr_q bra $__wr_issue{j};\n"
            f"mov.u32 %wr_o, {RING};\nadd.u32 %wr_o, %wr_o, %wr_st{j};\nadd.u32 %wr_o, %wr_o, %wr_off;\n"
            f"mov.b64 %wr_b, %wr_run{j};\n"
            f"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%wr_o], [%wr_b], %wr_sz{j}, "
            f"[%wr_bar];\n$__wr_issue{j}:"
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
