"""Warp-role splitting: a staged tile loop (analysis/staging.py) becomes consumer warps that compute and producer
warps that stage, joined by an S-slot mbarrier ring; the block grows by the producers, added after the consumers so
every consumer keeps its %tid.

The split variant in this version has one producer thread per consumer thread (P = N/32 warps): producer thread
N+t replays consumer t's code up to and through the staging part, with t as its %tid.x and every write but the
staging stores dropped, and writes stage k into ring slot k mod S. A two-barrier loop

    $L: ld.global.f32 %f2, [%rd5];  st.shared.f32 [%r8], %f2;  bar.sync 0;
        ld.shared.f32 %f3, [%r11];  fma...;                  bar.sync 0;  add...; @%p2 bra $L;

becomes, for consumers (%tid.x < N)

    $L: <slot, parity of trip k>;  mbarrier.try_wait.parity [full+8*slot] (loop);
        add %wr_a, %r11, slot*T;  ld.shared.f32 %f3, [%wr_a];  fma...;  mbarrier.arrive [empty+8*slot];  add...

and for producers (%tid.x >= N): wait `empty[slot]` (the opposite parity, so the first S trips pass), stage into
the slot, `mbarrier.arrive [full+8*slot]`, step, and `ret` after the loop. CTA-wide barriers left in the
consumers' code become `bar.sync 1, N`. The pipeline variant (S stages without roles) is not implemented yet and
is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from ptxtool import isa
from ptxtool.analysis.cfg import build_cfg
from ptxtool.analysis.launch_bounds import block_bounds, with_exact_block
from ptxtool.analysis.staging import Refusal, StagedLoop, find_staged_loop, full_barrier
from ptxtool.isa import Effect, Mode
from ptxtool.isa.opcodes import OPCODES
from ptxtool.isa.targets import (
    MAX_REGISTERS_PER_THREAD,
    REGISTERS_PER_CTA,
    SETMAXNREG_RANGE,
    SETMAXNREG_STEP,
    WARPGROUP_WARPS,
    Target,
    version,
)
from ptxtool.passes.report import PassReport, Rewrite, Skip
from ptxtool.syntax import ast, parse

NAME = "warp-roles"
VARIANTS = ("split", "pipeline")
RING, FULL, EMPTY = "__wr_ring", "__wr_full", "__wr_empty"
OWN_PREFIXES = ("%wr_", "$__wr_", "__wr_")  # the split's registers, labels and shared variables
CONSUMER_BARRIER = 1  # the named barrier consumers use where the input waited CTA-wide
SASS_PROOF = ("SYNCS.PHASECHK", "SYNCS.ARRIVE")  # what nvdisasm shows of the ring's mbarrier waits and arrivals


@dataclass(frozen=True)
class RoleSettings:
    """`variant` split|pipeline, `producer_warps` (None: one producer thread per consumer thread), `stages` S,
    `setmaxnreg` (None: where the consumers' registers would not fit otherwise; True: always, or refuse; False:
    never)."""

    variant: str = "split"
    producer_warps: int | None = None
    stages: int = 2
    setmaxnreg: bool | None = None
    registers: dict[str, int] | None = None  # per kernel, from ptxas (None: the register budget is not checked)


def _statements(body: str, target: Target | str = "sm_90") -> tuple[ast.Statement, ...]:
    """PTX statements from text (the pass writes its additions as PTX, not as node constructors)."""
    module = parse(f".version 8.0\n.target {target}\n.address_size 64\n.entry _wr() {{\n{body}\n}}\n")
    return module.functions[0].body.statements


def _map(
    block: ast.Block,
    edit: Callable[[int, ast.Instruction], tuple[ast.Statement, ...]],
    labels: dict,
    start: int = 0,
) -> ast.Block:
    """Rebuild a body: each instruction (numbered as the Linear form numbers ops, the first `start`) replaced by
    `edit`'s statements, each label renamed through `labels`."""
    counter = [start]

    def walk(b: ast.Block) -> ast.Block:
        out: list[ast.Statement] = []
        for s in b.statements:
            if isinstance(s, ast.Instruction):
                out.extend(edit(counter[0], s))
                counter[0] += 1
            elif isinstance(s, ast.Block):
                out.append(walk(s))
            elif isinstance(s, ast.Label):
                out.append(replace(s, name=labels.get(s.name, s.name)))
            else:
                out.append(s)
        return replace(b, statements=tuple(out))

    return walk(block)


def _rename(operand: ast.Operand, names: dict[str, ast.Operand]) -> ast.Operand:
    """An operand with names replaced (labels, %tid.x, ring members), inside addresses and lists too."""
    if isinstance(operand, ast.Name):
        return names.get(operand.text, operand)
    if isinstance(operand, ast.Address) and isinstance(operand.base, ast.Name) and operand.base.text in names:
        new = names[operand.base.text]
        if isinstance(new, ast.SymbolOffset):  # [tile+8] -> [__wr_ring+(off+8)]
            extra = int(operand.offset.value) * (1 if operand.plus else -1) if operand.offset is not None else 0
            total = int(new.offset.value) + extra
            return ast.Address(new.symbol, ast.Immediate(str(abs(total))) if total else None, total >= 0)
        return replace(operand, base=new)
    if isinstance(operand, ast.Vector | ast.ParenList):
        return replace(operand, items=tuple(_rename(x, names) for x in operand.items))
    if isinstance(operand, ast.SymbolOffset) and operand.symbol.text in names:
        new = names[operand.symbol.text]
        if isinstance(new, ast.SymbolOffset):
            total = int(new.offset.value) + int(ast.constant_value(operand.offset))
            return ast.SymbolOffset(new.symbol, ast.Immediate(str(total)))
    return operand


def _renamed(i: ast.Instruction, names: dict[str, ast.Operand]) -> ast.Instruction:
    return replace(i, operands=tuple(_rename(x, names) for x in i.operands))


def _relocated(i: ast.Instruction, wide: Callable[[str], bool]) -> tuple[ast.Statement, ...]:
    """A shared access moved into the current ring slot: each shared address plus the slot's offset (%wr_off),
    through a scratch register of its own per operand."""
    out: list[ast.Statement] = []
    operands = list(i.operands)
    shared = [a for a, _, s in isa.memory_accesses(i) if s.startswith("shared")]
    for n, operand in enumerate(operands):
        if not isinstance(operand, ast.Address) or not any(a is operand for a in shared):
            continue
        base = operand.base.text
        if wide(base):
            out += _statements(f"cvt.u64.u32 %wr_wide, %wr_off;\nadd.u64 %wr_ad{n}, {base}, %wr_wide;")
            operands[n] = replace(operand, base=ast.Name(f"%wr_ad{n}"))
        else:  # a 32-bit register or the ring's symbol
            out += _statements(f"mov.u32 %wr_a{n}, {base};\nadd.u32 %wr_a{n}, %wr_a{n}, %wr_off;")
            operands[n] = replace(operand, base=ast.Name(f"%wr_a{n}"))
    return (*out, replace(i, operands=tuple(operands)))


def _ring_layout(found: StagedLoop) -> tuple[dict[str, int], int]:
    """Each staged buffer's offset in one ring slot, and the slot's size (a multiple of 16: every slot aligned)."""
    offsets, total = {}, 0
    for b in found.buffers:
        total = -(-total // b.align) * b.align
        offsets[b.name] = total
        total += b.size
    return offsets, -(-total // 16) * 16


def _slot(stages: int, stage_bytes: int, which: str) -> str:
    """PTX computing the slot of trip %wr_k, its parity, its ring offset and its `which` mbarrier's address."""
    return (
        f"rem.u32 %wr_slot, %wr_k, {stages};\ndiv.u32 %wr_ph, %wr_k, {stages};\nand.b32 %wr_ph, %wr_ph, 1;\n"
        f"mul.lo.u32 %wr_off, %wr_slot, {stage_bytes};\nmov.u32 %wr_bar, {which};\n"
        f"mad.lo.u32 %wr_bar, %wr_slot, 8, %wr_bar;"
    )


def _wait(label: str, parity: str, arch: Target) -> str:
    test = "try_wait" if arch.number >= 90 else "test_wait"
    return f"{label}:\nmbarrier.{test}.parity.shared::cta.b64 %wr_done, [%wr_bar], {parity};\n@!%wr_done bra {label};"


def _split(
    function: ast.Function,
    found: StagedLoop,
    settings: RoleSettings,
    shares: int,
    arch: Target,
    moved: RegisterSplit | None,
) -> ast.Function:
    """The kernel with its roles: prologue (mbarrier init, the role branch), consumers, producers (N / shares
    threads, each staging `shares` consumer threads' parts)."""
    cfg = build_cfg(function)
    n, stages = found.threads, settings.stages
    offsets, stage_bytes = _ring_layout(found)
    ring_names: dict[str, ast.Operand] = {
        b: ast.SymbolOffset(ast.Name(RING), ast.Immediate(str(off))) for b, off in offsets.items()
    }
    wide_regs = {r.name for r in cfg.linear.registers.values() if r.type.endswith("64")}

    def reading_shared(i: ast.Instruction) -> bool:
        return any(s.startswith("shared") and m is not Mode.WRITE for _, m, s in isa.memory_accesses(i))

    def consumer(index: int, i: ast.Instruction) -> tuple[ast.Statement, ...]:
        i = _renamed(i, ring_names)
        if index in found.staging:
            return (i,) if index in found.kept else ()
        if index == found.filled:
            empty = f"mov.u32 %wr_ebar, {EMPTY};\nmad.lo.u32 %wr_ebar, %wr_slot, 8, %wr_ebar;"
            return _statements(
                f"{_slot(stages, stage_bytes, FULL)}\n{empty}\n{_wait('$__wr_full_wait', '%wr_ph', arch)}"
            )
        if index in found.compute and reading_shared(i):
            return _relocated(i, wide_regs.__contains__)
        if index == found.released:
            return _statements("mbarrier.arrive.shared::cta.b64 %wr_state, [%wr_ebar];\nadd.u32 %wr_k, %wr_k, 1;")
        if full_barrier(i):
            return _statements(f"bar.sync {CONSUMER_BARRIER}, {n};")
        return (i,)

    body = function.body
    consumer_body = _map(body, consumer, {})
    producer_code = _producer(function, found, shares, stages, stage_bytes, arch, ring_names, wide_regs.__contains__)
    producer_threads = n // shares
    copies = [
        replace(d, declarators=tuple(replace(x, name=_share_name(x.name, j)) for x in d.declarators))
        for j in range(1, shares)
        for d in body.statements
        if isinstance(d, ast.Declaration) and d.has(".reg")
    ]
    vtids = ", ".join(_share_name("%wr_vtid", j) for j in range(1, shares))
    declarations = "\n".join(
        (
            ".reg .pred %wr_p, %wr_done;",
            ".reg .b32 %wr_tid, %wr_vtid, %wr_k, %wr_slot, %wr_ph, %wr_eph, %wr_off, %wr_bar, %wr_ebar, %wr_a<8>;",
            *([f".reg .b32 {vtids};"] if vtids else []),
            ".reg .b64 %wr_state, %wr_wide, %wr_ad<8>;",
            f".shared .align 16 .b8 {RING}[{stages * stage_bytes}];",
            f".shared .align 8 .b64 {FULL}[{stages}];",
            f".shared .align 8 .b64 {EMPTY}[{stages}];",
        )
    )
    inits = "\n".join(
        f"mbarrier.init.shared::cta.b64 [{FULL}+{8 * s}], {producer_threads};\n"
        f"mbarrier.init.shared::cta.b64 [{EMPTY}+{8 * s}], {n};"
        for s in range(stages)
    )
    prologue = (
        f"{declarations}\nmov.u32 %wr_tid, %tid.x;\nsetp.ne.u32 %wr_p, %wr_tid, 0;\n@%wr_p bra $__wr_inited;\n{inits}\n"
        f"$__wr_inited:\nbar.sync 0;\nmov.u32 %wr_k, 0;\nsetp.ge.u32 %wr_p, %wr_tid, {n};\n@%wr_p bra $__wr_producer;"
    )
    shares_of = "\n".join(
        f"add.u32 {_share_name('%wr_vtid', j)}, %wr_vtid, {producer_threads * j};" for j in range(1, shares)
    )
    producer_prologue = f"$__wr_producer:\nsub.u32 %wr_vtid, %wr_tid, {n};\n{shares_of}"
    consumer_prologue = ""
    if moved:  # after the role branch, which is uniform per warpgroup: each warpgroup executes one setmaxnreg
        producer_prologue += f"\nsetmaxnreg.dec.sync.aligned.u32 {moved.producers};"
        consumer_prologue = f"setmaxnreg.inc.sync.aligned.u32 {moved.consumers};"
    kept = [s for s in consumer_body.statements if not (isinstance(s, ast.Declaration) and _is_ring(s, offsets))]
    statements = (
        *[s for s in kept if isinstance(s, ast.Declaration)],
        *copies,
        *_statements(prologue),
        *(_statements(consumer_prologue, arch) if moved else ()),
        *[s for s in kept if not isinstance(s, ast.Declaration)],
        *_statements("ret;"),
        *_statements(producer_prologue, arch),
        *producer_code,
        *_statements("ret;"),
    )
    split = with_exact_block(replace(function, body=replace(body, statements=statements)), (n + producer_threads, 1, 1))
    if moved:  # setmaxnreg needs the launch count declared (else ptxas ignores it: "unable to determine")
        launch = ast.PerfDirective(".maxnreg", (ast.Immediate(str(moved.launch)),))
        split = replace(split, directives=(*split.directives, launch))
    return split


def _is_ring(d: ast.Declaration, offsets: dict[str, int]) -> bool:
    return d.has(".shared") and all(x.name in offsets for x in d.declarators)


def warp_roles(module: ast.Module, settings: RoleSettings | None = None) -> tuple[ast.Module, PassReport]:
    """Split every kernel with a staged tile loop into producer and consumer warps; refuse the others, saying why."""
    settings = settings or RoleSettings()
    report = PassReport(NAME)
    arch = next((t for t in map(Target.parse, module.targets) if t), None)
    new_items = list(module.items)
    for at, item in enumerate(module.items):
        if not (isinstance(item, ast.Function) and item.is_kernel and item.body is not None):
            continue
        why = _unsupported(module, settings, arch)
        registers = (settings.registers or {}).get(item.name)
        found: StagedLoop | Refusal
        warps = _threads(item) // 32
        producers = warps if settings.producer_warps is None else settings.producer_warps
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
        if isinstance(found, StagedLoop) and not (1 <= producers <= warps and warps % producers == 0):
            found = Refusal(
                item.name, item.line, f"producer warps must divide the {warps} consumer warps, not {producers}"
            )
        if isinstance(found, StagedLoop) and (taken := _taken_name(module, item)):
            found = Refusal(item.name, item.line, f"the kernel already names {taken}, a name the split declares")
        shares = warps // producers if producers else 1
        if isinstance(found, StagedLoop) and (why := producer_refusal(item, found, shares)):
            found = Refusal(item.name, item.line, why)
        if isinstance(found, Refusal):
            report.skipped.append(Skip(item.name, found.line, "warp-roles", found.reason))
            continue
        moved = plan if isinstance(plan, RegisterSplit) else None
        new_items[at] = _split(item, found, settings, shares, arch, moved)
        _, stage_bytes = _ring_layout(found)
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


def _unsupported(module: ast.Module, settings: RoleSettings, arch: Target | None) -> str | None:
    """Why the settings or the file rule the pass out for every kernel."""
    if settings.variant not in VARIANTS:
        return f"unknown variant {settings.variant!r} (split or pipeline)"
    if settings.variant == "pipeline":
        return "the pipeline variant is not implemented yet"
    if settings.stages < 2 or settings.stages > 16:
        return f"stages must be 2..16, not {settings.stages}"
    if arch is None or arch.number < 90:
        return "the split needs sm_90 or later (mbarrier.try_wait)"
    ptx = version(module.version or "")
    if ptx is None or ptx < (7, 8):
        return "the split needs PTX ISA 7.8 or later (mbarrier.try_wait.parity)"
    return None


# ---------------------------------------------------------------- the producers' code

# the producers replay the kernel's ops by part; labels point at the part of the op after them
_PARTS = ("pre", "header", "staging", "filled", "compute", "released", "tail", "post")
_COPIED = ("pre", "staging", "tail")  # the parts each share runs in turn; the others run once


def _part(found: StagedLoop, index: int, label: bool) -> str:
    """The part of op `index` (or, `label`, of a label before it)."""
    lo, hi = found.staging.start, found.tail.stop
    if index < lo:
        return "pre"
    if index == lo and label:
        return "header"
    if index < found.filled:
        return "staging"
    if index == found.filled:
        return "filled"
    if index < found.released:
        return "compute"
    if index == found.released:
        return "released"
    return "tail" if index < hi else "post"


def _units(function: ast.Function, found: StagedLoop) -> list[tuple[str, int, ast.Statement]] | str:
    """The body's top-level instructions, labels and nested scopes with their part and first op index; a reason
    when a nested `{ }` scope spans two parts or holds a label (its copies could not be kept apart)."""
    out: list[tuple[str, int, ast.Statement]] = []
    index = 0
    for s in function.body.statements:
        if isinstance(s, ast.Instruction):
            out.append((_part(found, index, False), index, s))
            index += 1
        elif isinstance(s, ast.Label):
            out.append((_part(found, index, True), index, s))
        elif isinstance(s, ast.Block):
            count = sum(1 for _ in ast.instructions(s))
            parts = {_part(found, k, False) for k in range(index, index + count)}
            if len(parts) > 1 or any(isinstance(x, ast.Label) for x in ast.walk(s)):
                return f"a nested {{ }} scope at line {s.line} spans the loop's parts or holds a label"
            out.append((parts.pop() if parts else "pre", index, s))
            index += count
    return out


def producer_refusal(function: ast.Function, found: StagedLoop, shares: int) -> str | None:
    """Why the producers cannot run `shares` consumer threads' parts in turn, or None. One producer thread keeps
    one register copy per share, but one local-memory frame: a share's local stores would clobber another's."""
    units = _units(function, found)
    if isinstance(units, str):
        return units
    if shares == 1:
        return None
    for part, _, s in units:
        if part not in _COPIED:
            continue
        for i in ast.instructions(s) if isinstance(s, ast.Block) else (s,):
            if isinstance(i, ast.Instruction) and any(sp.startswith("local") for _, _, sp in isa.memory_accesses(i)):
                return f"the producers' code uses local memory at line {i.line}: {shares} shares would share one frame"
    return None


def _share_name(name: str, share: int) -> str:
    """Share j's copy of a register (share 0 keeps the kernel's): %r5 -> %wr_s1_r5."""
    return name if share == 0 else f"%wr_s{share}_{name[1:]}"


def _share_label(name: str, share: int) -> str:
    """Share j's copy of a label in the producers' code."""
    bare = name.lstrip("$")
    return f"$__wr_p{bare}" if share == 0 else f"$__wr_s{share}p{bare}"


def _substituted(node: object, names: Callable[[str], str | None]) -> object:
    """An operand with every Name that `names` maps replaced (in addresses, vectors, expressions too)."""
    if isinstance(node, ast.Name):
        new = names(node.text)
        return node if new is None else replace(node, text=new)
    if isinstance(node, tuple):
        return tuple(_substituted(x, names) for x in node)
    if isinstance(node, ast.NODE_TYPES) and not isinstance(node, ast.Owner):
        changes = {f.name: _substituted(getattr(node, f.name), names) for f in fields(node)}
        return replace(node, **changes)
    return node


def _copy(s: ast.Statement, share: int, part: str, names: Callable[[str, str, int], str | None]) -> ast.Statement:
    """Statement `s` of `part` as share `share` runs it: its registers and labels renamed."""
    rename = lambda text: names(text, part, share)  # noqa: E731
    if isinstance(s, ast.Instruction):
        guard = s.guard and replace(s.guard, predicate=_substituted(s.guard.predicate, rename))
        return replace(s, operands=_substituted(s.operands, rename), guard=guard)
    if isinstance(s, ast.Label):
        return replace(s, name=_share_label(s.name, share))
    if isinstance(s, ast.Declaration) and s.has(".reg"):
        return replace(s, declarators=tuple(replace(x, name=_share_name(x.name, share)) for x in s.declarators))
    if isinstance(s, ast.Block):
        return replace(s, statements=tuple(_copy(x, share, part, names) for x in s.statements))
    return s


def _registers(function: ast.Function) -> frozenset[str]:
    """Every register name the kernel declares (`%r<4>` as %r0..%r3)."""
    out: set[str] = set()
    for d in ast.walk(function.body):
        if isinstance(d, ast.Declaration) and d.has(".reg"):
            for x in d.declarators:
                count = int(x.count.value) if x.count is not None else None
                out.update([x.name] if count is None else (f"{x.name}{k}" for k in range(count)))
    return frozenset(out)


def _producer(
    function: ast.Function,
    found: StagedLoop,
    shares: int,
    stages: int,
    stage_bytes: int,
    arch: Target,
    ring_names: dict[str, ast.Operand],
    wide: Callable[[str], bool],
) -> list[ast.Statement]:
    """The producers' code after `$__wr_producer`: consumer threads %wr_vtid + (N / shares)·j for j < shares,
    replayed in turn per part (their code before the loop, then per trip their staging, then their tail), each
    share in registers of its own; the waits, the arrival and the trip count once per trip."""
    units = _units(function, found)
    assert not isinstance(units, str), units  # producer_refusal said so first
    lo = found.staging.start
    replayed = {**ring_names, "%tid.x": ast.Name("%wr_vtid")}
    registers = _registers(function) | {"%wr_vtid"}
    label_part = {s.name: part for part, _, s in units if isinstance(s, ast.Label)}

    def edit(index: int, i: ast.Instruction) -> tuple[ast.Statement, ...]:
        i = _renamed(i, replayed)
        if index in found.staging and any(s.startswith("shared") for _, _, s in isa.memory_accesses(i)):
            return _relocated(i, wide)
        writes = any(m is not Mode.READ and s != "local" for _, m, s in isa.memory_accesses(i))  # local: its own
        if index < lo and (writes or isa.effects(i) & (Effect.BARRIER | Effect.ATOMIC | Effect.FENCE)):
            return ()
        return (i,)

    def names(text: str, part: str, share: int) -> str | None:
        if text in registers:
            return _share_name(text, share)
        target = label_part.get(text)
        if target is None:
            return None
        if target == part or share == shares - 1 or (part == "pre" and target == "post"):
            return _share_label(text, share if target == part else 0)
        return f"$__wr_{part}{share + 1}"  # the next share's copy of this part: every share steps, the last decides

    def edited(part: str) -> list[ast.Statement]:
        out: list[ast.Statement] = []
        for p, index, s in units:
            if p != part:
                continue
            if isinstance(s, ast.Instruction):
                out.extend(edit(index, s))
            elif isinstance(s, ast.Block):
                out.append(_map(s, edit, {}, start=index))
            else:
                out.append(s)
        return out

    def copies(part: str) -> list[ast.Statement]:
        code = edited(part)
        out: list[ast.Statement] = []
        for share in range(shares):
            out += _statements(f"$__wr_{part}{share}:") if share else ()
            out += [_copy(s, share, part, names) for s in code]
        return out

    def once(part: str) -> list[ast.Statement]:
        return [_copy(s, 0, part, names) for s in edited(part) if isinstance(s, ast.Label)]

    wait = (
        _slot(stages, stage_bytes, EMPTY)
        + "\nxor.b32 %wr_eph, %wr_ph, 1;\n"
        + _wait("$__wr_empty_wait", "%wr_eph", arch)
    )
    arrive = (
        f"mov.u32 %wr_bar, {FULL};\nmad.lo.u32 %wr_bar, %wr_slot, 8, %wr_bar;\n"
        "mbarrier.arrive.shared::cta.b64 %wr_state, [%wr_bar];\nadd.u32 %wr_k, %wr_k, 1;"
    )
    return [
        *copies("pre"),
        *once("header"),
        *_statements(wait),
        *copies("staging"),
        *once("filled"),
        *_statements(arrive),
        *copies("tail"),
        *once("post"),
    ]


# ---------------------------------------------------------------- setmaxnreg: registers from producers to consumers

PRODUCER_REGISTERS = (40, 32, 24)  # what producers keep, most first (CUTLASS and DeepGEMM keep 40, others 24)


@dataclass(frozen=True)
class RegisterSplit:
    """The kernel launches with `launch` registers per thread (`.maxnreg`); producers `setmaxnreg.dec` to
    `producers`, consumers `setmaxnreg.inc` to `consumers`, within the CTA's pool."""

    launch: int
    producers: int
    consumers: int


def launch_registers(threads: int) -> int:
    """The registers per thread a block of `threads` may launch with, a multiple of setmaxnreg's step."""
    return min(REGISTERS_PER_CTA // threads, MAX_REGISTERS_PER_THREAD) // SETMAXNREG_STEP * SETMAXNREG_STEP


def register_split(
    module: ast.Module, function: ast.Function, consumers: int, producers: int, registers: int | None
) -> RegisterSplit | str:
    """The setmaxnreg split for `consumers` + `producers` threads (consumers needing ptxas's `registers` of the
    input), or why there is none. Warpgroup-aligned roles, a target with setmaxnreg, no register directive of the
    kernel's own, and consumers x C + producers x D within launch x threads (else `.inc` would wait forever)."""
    low, high = SETMAXNREG_RANGE
    total = consumers + producers
    launch = launch_registers(total)
    arch = next((t for t in map(Target.parse, module.targets) if t), None)
    ptx = version(module.version or "") or (0, 0)
    need = OPCODES["setmaxnreg"].needs
    if arch is None or not any(n.target_ok(arch) and ptx >= n.ptx for n in need):
        return f"setmaxnreg needs {' or '.join(f'{n.target} (PTX ISA {n.ptx[0]}.{n.ptx[1]})' for n in need)}"
    group = 32 * WARPGROUP_WARPS
    if consumers % group or producers % group:
        return (
            f"setmaxnreg needs roles of whole warpgroups ({WARPGROUP_WARPS} warps): "
            f"{consumers // 32} consumer warps + {producers // 32} producer warps"
        )
    own = [d.word for d in function.directives if d.word in (".maxnreg", ".minnctapersm")]
    if own:
        return f"the kernel declares {own[0]}, which setmaxnreg's launch count would override"
    floor = max(registers or 0, launch + SETMAXNREG_STEP)
    for keep in PRODUCER_REGISTERS:
        room = (launch * total - producers * keep) // consumers
        given = min(high, room // SETMAXNREG_STEP * SETMAXNREG_STEP)
        if keep <= launch and given >= floor:
            return RegisterSplit(launch, keep, given)
    best = min(high, (launch * total - producers * low) // consumers // SETMAXNREG_STEP * SETMAXNREG_STEP)
    what = f"consumers need {registers}" if registers and registers > launch else f"consumers launch with {launch}"
    return f"setmaxnreg cannot make room: {what}, producers at {low} leave them {best}"
