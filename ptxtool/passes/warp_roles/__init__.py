"""Warp-role splitting: a staged tile loop (analysis/staging.py) becomes consumer warps that compute and producer
warps that stage, joined by an S-slot mbarrier ring; the block grows by the producers, added after the consumers so
every consumer keeps its %tid.

With P = N/32 producer warps (the default) producer thread N+t replays consumer t's code up to and through the
staging part, with t as its %tid.x and every write but the staging stores dropped, and writes stage k into ring
slot k mod S; with fewer, producer thread N+p replays consumer threads p + 32P j in turn (producers.py), and on
sm_90a setmaxnreg may move registers from producers to consumers (registers.py). A two-barrier loop

    $L: ld.global.f32 %f2, [%rd5];  st.shared.f32 [%r8], %f2;  bar.sync 0;
        ld.shared.f32 %f3, [%r11];  fma...;                  bar.sync 0;  add...; @%p2 bra $L;

becomes, for consumers (%tid.x < N)

    $L: <slot, parity of trip k>;  mbarrier.try_wait.parity [full+8*slot] (loop);
        add %wr_a, %r11, slot*T;  ld.shared.f32 %f3, [%wr_a];  fma...;  mbarrier.arrive [empty+8*slot];  add...

and for producers (%tid.x >= N): wait `empty[slot]` (the opposite parity, so the first S trips pass), stage into the
slot, `mbarrier.arrive [full+8*slot]`, step, and `ret` after the loop. CTA-wide barriers left in the consumers' code
become `bar.sync 1, N`. Below sm_90 the waits are test_wait, and every instruction written is checked against the file's
.version/.target in the ISA tables (emit.Forms). The split-async variant's producers stage with cp.async and arrive when
their copies land (async_producers.py). The pipeline variant (`variant="pipeline"`) keeps the block and has every thread
stage S - 1 trips ahead with cp.async (pipeline.py, copies.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ptxtool import isa
from ptxtool.analysis.cfg import build_cfg
from ptxtool.analysis.dataflow.liveness import def_use
from ptxtool.analysis.launch_bounds import block_bounds, with_exact_block
from ptxtool.analysis.loops import find_loops
from ptxtool.analysis.staging import Refusal, StagedLoop, find_staged_loop, full_barrier
from ptxtool.isa import Mode
from ptxtool.isa.targets import Target
from ptxtool.passes.report import PassReport, Rewrite, Skip
from ptxtool.passes.warp_roles import async_producers, bulk_producers
from ptxtool.passes.warp_roles.copies import AsyncCopy, async_copies, counted, stale_slot
from ptxtool.passes.warp_roles.emit import (
    EMPTY,
    FULL,
    RING,
    Forms,
    mapped,
    relocated,
    renamed,
    ring_layout,
    slot_code,
    statements,
)
from ptxtool.passes.warp_roles.footprint import Footprint, footprint
from ptxtool.passes.warp_roles.per_run import RunCode, per_run_code
from ptxtool.passes.warp_roles.pipeline import pipeline_refusal, pipelined
from ptxtool.passes.warp_roles.producers import Staging, producer_code, producer_refusal, share_name
from ptxtool.passes.warp_roles.registers import RegisterSplit, launch_registers, register_split
from ptxtool.syntax import ast
from ptxtool.toolchain.sass import SassMark, mbarrier_sass

NAME = "warp-roles"
VARIANTS = ("split", async_producers.VARIANT, bulk_producers.VARIANT, "pipeline")
OWN_PREFIXES = ("%wr_", "$__wr_", "__wr_")  # the split's registers, labels and shared variables
CONSUMER_BARRIER = 1  # the named barrier consumers use where the input waited CTA-wide
SETMAXNREG_PROOF = (SassMark("USETMAXREG"),)  # what nvdisasm shows of setmaxnreg, where the split moves registers
PIPELINE_PROOF = (SassMark("LDGSTS"), SassMark("LDGDEPBAR"), SassMark("DEPBAR.LE"))  # cp.async, commit, wait_group


@dataclass(frozen=True)
class RoleSettings:
    """`variant` split|split-async|pipeline, `producer_warps` (None: one producer thread per consumer thread),
    `stages` S, `setmaxnreg` (None: where the consumers' registers would not fit otherwise; True: always, or
    refuse; False: never)."""

    variant: str = "split"
    producer_warps: int | None = None
    stages: int = 2
    setmaxnreg: bool | None = None
    registers: dict[str, int] | None = None  # per kernel, from ptxas (None: the register budget is not checked)
    refused: dict[str, str] | None = None  # per kernel, why its split is not kept, found outside the pass (ptxas)


def _split(
    function: ast.Function,
    found: StagedLoop,
    settings: RoleSettings,
    shares: int,
    forms: Forms,
    moved: RegisterSplit | None,
    copies: tuple[AsyncCopy, ...] = (),
    bulk: Footprint | None = None,
) -> ast.Function:
    """The kernel with its roles: prologue (mbarrier init, the role branch), consumers, producers (N / shares
    threads, each staging `shares` consumer threads' parts, with `copies` as cp.async where given)."""
    cfg = build_cfg(function)
    n, stages = found.threads, settings.stages
    offsets, stage_bytes = ring_layout(found)
    ring_names: dict[str, ast.Operand] = {
        b: ast.SymbolOffset(ast.Name(RING), ast.Immediate(str(off))) for b, off in offsets.items()
    }
    wide_regs = {r.name for r in cfg.linear.registers.values() if r.type.endswith("64")}

    def reading_shared(i: ast.Instruction) -> bool:
        return any(s.startswith("shared") and m is not Mode.WRITE for _, m, s in isa.memory_accesses(i))

    def consumer(index: int, i: ast.Instruction) -> tuple[ast.Statement, ...]:
        i = renamed(i, ring_names)
        if index in found.staging:
            return (i,) if index in found.kept else ()
        if index == found.filled:
            empty = f"mov.u32 %wr_ebar, {EMPTY};\nmad.lo.u32 %wr_ebar, %wr_slot, 8, %wr_ebar;"
            return statements(
                f"{slot_code(stages, stage_bytes, FULL)}\n{empty}\n{forms.wait_code('$__wr_full_wait', '%wr_ph')}"
            )
        if index in found.compute and reading_shared(i):
            return relocated(i, wide_regs.__contains__)
        if index == found.released:
            return statements(f"mbarrier.arrive.{forms.space}.b64 %wr_state, [%wr_ebar];\nadd.u32 %wr_k, %wr_k, 1;")
        if full_barrier(i):
            return statements(f"bar.sync {CONSUMER_BARRIER}, {n};")
        return (i,)

    body = function.body
    consumer_body = mapped(body, consumer, {})
    wide = wide_regs.__contains__
    registers = frozenset(r.name for r in cfg.linear.registers.values())
    staging = async_producers.async_staging(copies, wide, registers) if copies else Staging()
    plan = per_run_code(bulk, registers) if bulk is not None else None
    if bulk is not None:
        assert isinstance(plan, RunCode)  # the footprint's refusal said so first
        staging = bulk_producers.bulk_staging(
            copies, bulk, wide, registers, forms.space, plan, bulk_producers.feeds_tail(cfg, found)
        )
    producers = producer_code(function, found, shares, stages, stage_bytes, forms, ring_names, wide, staging)
    producer_threads = n // shares
    share_registers = [
        replace(d, declarators=tuple(replace(x, name=share_name(x.name, j)) for x in d.declarators))
        for j in range(1, shares)
        for d in body.statements
        if isinstance(d, ast.Declaration) and d.has(".reg")
    ]
    vtids = ", ".join(share_name("%wr_vtid", j) for j in range(1, shares))
    declarations = "\n".join(
        (
            ".reg .pred %wr_p, %wr_done;",
            ".reg .b32 %wr_tid, %wr_vtid, %wr_k, %wr_slot, %wr_ph, %wr_eph, %wr_off, %wr_bar, %wr_ebar, %wr_a<8>;",
            *([f".reg .b32 {vtids};"] if vtids else []),
            ".reg .b64 %wr_state, %wr_wide, %wr_ad<8>;",
            *([async_producers.declarations(copies)] if copies else []),
            *([bulk_producers.declarations(plan)] if isinstance(plan, RunCode) else []),
            f".shared .align 16 .b8 {RING}[{stages * stage_bytes}];",
            f".shared .align 8 .b64 {FULL}[{stages}];",
            f".shared .align 8 .b64 {EMPTY}[{stages}];",
        )
    )
    inits = "\n".join(
        f"mbarrier.init.{forms.space}.b64 [{FULL}+{8 * s}], {producer_threads};\n"
        f"mbarrier.init.{forms.space}.b64 [{EMPTY}+{8 * s}], {n};"
        for s in range(stages)
    )
    prologue = (
        f"{declarations}\nmov.u32 %wr_tid, %tid.x;\nsetp.ne.u32 %wr_p, %wr_tid, 0;\n@%wr_p bra $__wr_inited;\n{inits}\n"
        f"$__wr_inited:\nbar.sync 0;\nmov.u32 %wr_k, 0;\nsetp.ge.u32 %wr_p, %wr_tid, {n};\n@%wr_p bra $__wr_producer;"
    )
    shares_of = "\n".join(
        f"add.u32 {share_name('%wr_vtid', j)}, %wr_vtid, {producer_threads * j};" for j in range(1, shares)
    )
    producer_prologue = f"$__wr_producer:\nsub.u32 %wr_vtid, %wr_tid, {n};\n{shares_of}"
    consumer_prologue = ""
    if moved:  # after the role branch, which is uniform per warpgroup: each warpgroup executes one setmaxnreg
        producer_prologue += f"\nsetmaxnreg.dec.sync.aligned.u32 {moved.producers};"
        consumer_prologue = f"setmaxnreg.inc.sync.aligned.u32 {moved.consumers};"
    kept = [s for s in consumer_body.statements if not (isinstance(s, ast.Declaration) and _is_ring(s, offsets))]
    split_body = (
        *[s for s in kept if isinstance(s, ast.Declaration)],
        *share_registers,
        *statements(prologue),
        *(statements(consumer_prologue, forms.target) if moved else ()),
        *[s for s in kept if not isinstance(s, ast.Declaration)],
        *statements("ret;"),
        *statements(producer_prologue, forms.target),
        *producers,
        *statements("ret;"),
    )
    split = with_exact_block(replace(function, body=replace(body, statements=split_body)), (n + producer_threads, 1, 1))
    if moved:  # setmaxnreg needs the launch count declared (else ptxas ignores it: "unable to determine")
        launch = ast.PerfDirective(".maxnreg", (ast.Immediate(str(moved.launch)),))
        split = replace(split, directives=(*split.directives, launch))
    return split


def _unwritable(forms: Forms, before: ast.Function, after: ast.Function, variant: str) -> str | None:
    """The first instruction of the `variant`'s output that the file's .version or .target does not allow, in one
    line (the ISA tables decide: mbarrier and cp.async need sm_80, test_wait's .parity PTX ISA 7.1, ...); what the
    input uses already is the file's own business."""
    assert before.body is not None and after.body is not None
    known = frozenset(r.what for i in ast.instructions(before.body) for r in isa.requirements(i))
    for i in ast.instructions(after.body):
        if why := forms.unmet(i, known):
            return f"the {variant} would write {i.mnemonic}: {why}"
    return None


def _is_ring(d: ast.Declaration, offsets: dict[str, int]) -> bool:
    return d.has(".shared") and all(x.name in offsets for x in d.declarators)


def warp_roles(module: ast.Module, settings: RoleSettings | None = None) -> tuple[ast.Module, PassReport]:
    """Split every kernel with a staged tile loop into producer and consumer warps; refuse the others, saying why."""
    settings = settings or RoleSettings()
    report = PassReport(NAME)
    arch = next((t for t in map(Target.parse, module.targets) if t), None)
    forms = Forms.of(module, arch) if arch else None
    new_items = list(module.items)
    for at, item in enumerate(module.items):
        if not (isinstance(item, ast.Function) and item.is_kernel and item.body is not None):
            continue
        why = _unsupported(module, settings, arch) or (settings.refused or {}).get(item.name)
        if settings.variant == "pipeline" and not why:
            assert forms is not None  # _unsupported refuses a file without an sm_ target
            done = _pipeline(module, item, settings, forms)
            if isinstance(done, Refusal):
                report.skipped.append(Skip(item.name, done.line, "warp-roles", done.reason))
            else:
                new_items[at], rewrite = done
                report.rewrites.append(rewrite)
                report.inserted.append(item.name)
            continue
        registers = (settings.registers or {}).get(item.name)
        found: StagedLoop | Refusal
        warps = _threads(item) // 32
        bulk = settings.variant == bulk_producers.VARIANT
        producers = (1 if bulk else warps) if settings.producer_warps is None else settings.producer_warps
        plan: RegisterSplit | str | None = None
        limited = registers is not None and warps > 0 and registers > launch_registers(32 * (warps + producers))
        if not why and warps and (settings.setmaxnreg or (limited and settings.setmaxnreg is None)):
            plan = register_split(module, item, 32 * warps, 32 * producers, registers)
        if why:
            found = Refusal(item.name, item.line, why)
        elif settings.setmaxnreg and isinstance(plan, str):
            found = Refusal(item.name, item.line, plan)
        else:
            budget = None if isinstance(plan, RegisterSplit) else registers
            found = find_staged_loop(
                module, item, stages=settings.stages, extra_threads=32 * producers, registers=budget
            )
            if isinstance(found, Refusal) and isinstance(plan, str) and found.reason.startswith("registers do not"):
                found = replace(found, reason=f"{found.reason}; {plan}")
        if isinstance(found, StagedLoop) and found.kind != "ld+st":
            found = Refusal(item.name, item.line, f"{found.kind} staging is not split by this version (ld+st only)")
        if isinstance(found, StagedLoop) and bulk and producers != 1:
            found = Refusal(
                item.name, item.line, f"{bulk_producers.VARIANT} has one producer warp (P = 1), not {producers}"
            )
        if isinstance(found, StagedLoop) and not (1 <= producers <= warps and warps % producers == 0):
            found = Refusal(
                item.name, item.line, f"producer warps must divide the {warps} consumer warps, not {producers}"
            )
        if isinstance(found, StagedLoop) and (taken := _taken_name(module, item)):
            found = Refusal(item.name, item.line, f"the kernel already names {taken}, a name the split declares")
        shares = warps // producers if producers else 1
        if isinstance(found, StagedLoop) and (why := producer_refusal(item, found, shares)):
            found = Refusal(item.name, item.line, why)
        copying = settings.variant in (async_producers.VARIANT, bulk_producers.VARIANT)
        if isinstance(found, StagedLoop) and not copying:
            cfg = build_cfg(item)
            du = def_use(cfg)
            if stale := stale_slot(cfg, du, find_loops(cfg, du), found):
                found = Refusal(item.name, *stale)
        copies: tuple[AsyncCopy, ...] = ()
        if isinstance(found, StagedLoop) and copying:
            converted = async_producers.producer_copies(build_cfg(item), found)
            if isinstance(converted[0], int):
                found = Refusal(item.name, *converted)
            else:
                copies = converted
        runs: Footprint | None = None
        if isinstance(found, StagedLoop) and bulk:
            cfg = build_cfg(item)
            laid = bulk_producers.replay_refusal(cfg, found) or footprint(cfg, found, copies)
            if isinstance(laid, Footprint) and (why := bulk_producers.unfitting(module, found, laid, settings.stages)):
                laid = (item.line, why)
            names = frozenset(r.name for r in cfg.linear.registers.values())
            if isinstance(laid, Footprint) and isinstance(why := per_run_code(laid, names), str):
                laid = (item.line, f"the per-run check cannot be built: {why}")
            if isinstance(laid, tuple):
                line, why = laid
                found = Refusal(item.name, line, f"bulk producers: {why}")
            else:
                runs = laid
        if isinstance(found, Refusal):
            report.skipped.append(Skip(item.name, found.line, "warp-roles", found.reason))
            continue
        moved = plan if isinstance(plan, RegisterSplit) else None
        assert forms is not None  # _unsupported refuses a file without an sm_ target
        split = _split(item, found, settings, shares, forms, moved, copies, runs)
        if why := _unwritable(forms, item, split, "split"):
            report.skipped.append(Skip(item.name, item.line, "warp-roles", why))
            continue
        new_items[at] = split
        _, stage_bytes = ring_layout(found)
        total = found.threads + 32 * producers
        report.rewrites.append(
            Rewrite(
                item.name,
                item.line,
                f"{found.threads} threads",
                f"{total} threads (.reqntid)",
                (
                    f"split: {warps} consumer warps + {producers} producer warps, "
                    f"{settings.stages}-slot mbarrier ring of {stage_bytes} bytes per slot",
                    f"launch with {total} threads per block: consumers keep %tid.x 0..{found.threads - 1}",
                    f"producer thread p stages consumer threads p + {32 * producers}j, j < {shares}",
                    *(
                        [
                            f"producers copy with cp.async: {counted(copies, 'per consumer thread and trip')}, "
                            f"{sum(c.zero_fill for c in copies)} zero-filled where the input stored zero, "
                            "arriving on full[slot] as they land (cp.async.mbarrier.arrive.noinc)"
                        ]
                        if copies and runs is None
                        else []
                    ),
                    *(
                        [
                            f"producers copy with cp.async.bulk: {len(runs.runs)} "
                            f"run{'s' if len(runs.runs) > 1 else ''} of "
                            f"{_sizes(runs)} bytes, {runs.total} bytes per trip (mbarrier.expect_tx)"
                            f"{f', {runs.loose} with cp.async' if runs.loose else ''}; "
                            "runs proven contiguous in global memory while their 32-bit indices do not wrap; a "
                            f"trip whose runs are not 16-byte aligned, whose indices wrap "
                            f"({sum(len(r.assumptions) for r in runs.runs)} no-wrap checks) or that zero-fills a "
                            "word is staged with cp.async instead (checked on every trip)"
                        ]
                        if runs is not None
                        else []
                    ),
                    *(
                        [
                            f"setmaxnreg: launch {moved.launch} registers per thread (.maxnreg), producers "
                            f"{moved.producers}, consumers {moved.consumers}"
                        ]
                        if moved
                        else []
                    ),
                ),
            )
        )
        report.inserted.append(item.name)
    return replace(module, items=tuple(new_items)), report


def _sizes(runs: Footprint) -> str:
    """The runs' sizes, grouped: `16 x 256 + 4096`."""
    counts: dict[int, int] = {}
    for r in runs.runs:
        counts[r.size] = counts.get(r.size, 0) + 1
    return " + ".join(f"{n} x {size}" if n > 1 else str(size) for size, n in counts.items())


def _pipeline(
    module: ast.Module, function: ast.Function, settings: RoleSettings, forms: Forms
) -> tuple[ast.Function, Rewrite] | Refusal:
    """The kernel pipelined S - 1 trips deep with cp.async (pipeline.py, copies.py), or why not."""
    cfg = build_cfg(function)
    found = find_staged_loop(module, function, stages=settings.stages, cfg=cfg, roles=False)
    if isinstance(found, StagedLoop) and found.kind != "ld+st":
        found = Refusal(function.name, function.line, f"{found.kind} staging is pipelined already (ld+st only)")
    if isinstance(found, StagedLoop) and (taken := _taken_name(module, function)):
        found = Refusal(function.name, function.line, f"the kernel already names {taken}, a name the pass declares")
    if isinstance(found, StagedLoop) and (why := pipeline_refusal(function, found, cfg)):
        found = Refusal(function.name, function.line, why)
    if isinstance(found, Refusal):
        return found
    du = def_use(cfg)
    copies = async_copies(cfg, du, find_loops(cfg, du), found)
    if isinstance(copies[0], int):
        line, why = copies
        return Refusal(function.name, line, why)
    offsets, stage_bytes = ring_layout(found)
    ring_names: dict[str, ast.Operand] = {
        b: ast.SymbolOffset(ast.Name(RING), ast.Immediate(str(off))) for b, off in offsets.items()
    }
    wide = {r.name for r in cfg.linear.registers.values() if r.type.endswith("64")}.__contains__
    stages = settings.stages
    out = pipelined(function, found, copies, stages, stage_bytes, ring_names, wide, cfg)
    if why := _unwritable(forms, function, out, "pipeline"):
        return Refusal(function.name, function.line, why)
    filled = sum(c.zero_fill for c in copies)
    rewrite = Rewrite(
        function.name,
        function.line,
        counted(copies, "ld.global+st.shared per trip"),
        f"{counted(copies, 'cp.async per trip')}, {stages - 1} trips ahead",
        (
            f"pipeline: {stages}-slot cp.async ring of {stage_bytes} bytes per slot, the block unchanged",
            f"{len(copies)} staging stores became cp.async ({filled} zero-filled where the input stored zero)",
        ),
    )
    return out, rewrite


def sass_proof(function: ast.Function, arch: str) -> tuple[SassMark, ...]:
    """What the SASS for `arch` of a kernel this pass rewrote must show: the pipeline's copies and their group waits,
    or the split's mbarrier waits and arrivals as that SASS generation spells them (toolchain.sass.MBARRIER_SASS),
    and setmaxnreg's register moves, the producers' cp.asyncs and their arrivals where the split made them."""
    body = tuple(ast.instructions(function.body)) if function.body is not None else ()
    ops, families = {i.opcode for i in body}, {isa.family(i) for i in body}
    if "mbarrier" not in ops:
        return PIPELINE_PROOF
    ring = mbarrier_sass(arch)
    assert ring is not None, f"an mbarrier ring assembled for {arch}"  # ptxas rejects mbarrier below sm_80
    copying = (*async_producers.SASS_PROOF, *ring.copies_arrive) if "cp.async.mbarrier.arrive" in families else ()
    copying += bulk_producers.SASS_PROOF if "cp.async.bulk" in families else ()
    return (*ring.wait, *ring.arrive, *(SETMAXNREG_PROOF if "setmaxnreg" in ops else ()), *copying)


def _taken_name(module: ast.Module, function: ast.Function) -> str | None:
    """A name of the input that the split's own registers, labels or shared variables would declare again."""
    items = [d for d in module.items if isinstance(d, ast.Declaration)]
    for node in (*ast.walk(function), *(n for d in items for n in ast.walk(d))):
        name = (
            node.text
            if isinstance(node, ast.Name)
            else node.name
            if isinstance(node, (ast.Declarator, ast.Label, ast.Param))
            else None
        )
        if name is not None and name.startswith(OWN_PREFIXES):
            return name
    return None


def _threads(function: ast.Function) -> int:
    """The block's declared threads in x (0 when undeclared: find_staged_loop refuses it)."""
    bounds = block_bounds(function)
    return bounds.dims[0] if bounds else 0


def misused(settings: RoleSettings) -> str | None:
    """Settings that do not go together on the command line (`optimize` exits 2): producer warps belong to the
    splits alone (the pass itself ignores them for the pipeline, as tune's product of settings asks)."""
    if settings.variant == "pipeline" and settings.producer_warps is not None:
        return "--producer-warps is the split's setting: the pipeline variant has no producer warps"
    return None


def _unsupported(module: ast.Module, settings: RoleSettings, arch: Target | None) -> str | None:
    """Why the settings or the file rule the pass out for every kernel."""
    if settings.variant not in VARIANTS:
        return f"unknown variant {settings.variant!r} ({', '.join(VARIANTS)})"
    if settings.stages < 2 or settings.stages > 16:
        return f"stages must be 2..16, not {settings.stages}"
    if arch is None:
        return "the file names no sm_ .target: what the pass writes cannot be checked against it"
    return None
