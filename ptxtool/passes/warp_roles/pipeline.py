"""The pipeline variant: no roles; each thread stages S - 1 trips ahead of its compute, with cp.async (copies.py)
into a ring of S slots. The staging part and the tail run a second time per trip in registers of their own (the
"ahead" copy, %r5 -> %wr_s1_r5, started from the loop's entry values), so trip k issues trip k + S - 1:

    <entry: ahead registers = the kernel's; trips 0 .. S-2 issued, each under %wr_more, each one commit_group>
    $L: @%wr_more { staging of the ahead trip into slot q mod S, as cp.async; its tail: more trips? }
        cp.async.commit_group;  cp.async.wait_group S-1;    // trip k's copies have landed (this thread's)
        bar.sync 0;  compute from slot k mod S;  bar.sync 0;  // the first barrier shows them to the CTA,
        tail; @%p bra $L;                                      // the second frees the slot refilled next
    cp.async.wait_all;                                         // nothing in flight after the loop

Every trip commits one group (empty where the ahead copy has run out of trips), so wait_group S-1 always means
"trip k's group has completed".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ptxtool import isa
from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.dataflow.liveness import ENTRY, def_use
from ptxtool.analysis.staging import StagedLoop
from ptxtool.passes.warp_roles.copies import AsyncCopy
from ptxtool.passes.warp_roles.emit import RING, mapped, relocated, renamed, statements
from ptxtool.passes.warp_roles.producers import _registers, _substituted, _units, share_name
from ptxtool.syntax import ast

AHEAD = 1  # the ahead copy's registers are share 1's names (%wr_s1_r5)


def pipeline_refusal(function: ast.Function, found: StagedLoop, cfg: CFG) -> str | None:
    """Why the loop cannot be given an ahead copy: a `{ }` scope spanning parts, the loop entered other than by
    falling into its header, or a staging branch back to the header (a trip would stage twice)."""
    units = _units(function, found)
    if isinstance(units, str):
        return units
    headers = {s.name for part, _, s in units if part == "header" and isinstance(s, ast.Label)}
    for op in cfg.linear.ops:
        if not headers & set(op.targets):
            continue
        if op.index not in found.tail:
            where = "staging part" if op.index in found.staging else "code outside the loop"
            return f"the {where} branches to the loop's header at line {op.line} (the pipeline enters it once)"
    return None


def _copy_instruction(
    i: ast.Instruction, registers: frozenset[str], label: Callable[[str], str | None]
) -> ast.Instruction:
    def names(text: str) -> str | None:
        return share_name(text, AHEAD) if text in registers else label(text)

    guard = i.guard and replace(i.guard, predicate=_substituted(i.guard.predicate, names))
    return replace(i, operands=_substituted(i.operands, names), guard=guard)


def _ahead(s: ast.Statement, registers: frozenset[str], label: Callable[[str], str | None]) -> ast.Statement:
    """A statement of the ahead copy: registers renamed to the copy's, labels through `label`."""
    if isinstance(s, ast.Instruction):
        return _copy_instruction(s, registers, label)
    if isinstance(s, ast.Label):
        return replace(s, name=label(s.name) or s.name)
    if isinstance(s, ast.Declaration) and s.has(".reg"):
        return replace(s, declarators=tuple(replace(x, name=share_name(x.name, AHEAD)) for x in s.declarators))
    if isinstance(s, ast.Block):
        return replace(s, statements=tuple(_ahead(x, registers, label) for x in s.statements))
    return s


def _flag(copy: AsyncCopy, value: str, guard: ast.Guard | None) -> ast.Instruction:
    return ast.Instruction("mov", ("pred",), (ast.Name(copy.flag), ast.Immediate(value)), guard=guard)


def _capture(copy: AsyncCopy, load: ast.Instruction) -> tuple[ast.Statement, ...]:
    """In place of the load: its address into the copy's source register (and, on a zero-fill copy, the flag:
    this path copies), under the load's guard."""
    address = load.operands[1]
    assert isinstance(address, ast.Address)
    value = int(ast.constant_value(address.offset)) * (1 if address.plus else -1) if address.offset else 0
    source = ast.Name(copy.source)
    if isinstance(address.base, ast.Name) and address.base.text.startswith("%"):
        take = ast.Instruction("add", ("s64",), (source, address.base, ast.Immediate(str(value))), guard=load.guard)
    else:  # a global variable's address
        symbol = ast.SymbolOffset(address.base, ast.Immediate(str(value))) if value else address.base
        take = ast.Instruction("mov", ("u64",), (source, symbol), guard=load.guard)
    flagged = copy.zero_fill and copy.select is None
    return (take, _flag(copy, "1", load.guard)) if flagged else (take,)


def _selected(copy: AsyncCopy, selp: ast.Instruction) -> ast.Instruction:
    """In place of `selp %v, %loaded, 0, %p`: the flag is %p (negated where the load is selp's second choice)."""
    loaded_first = isinstance(selp.operands[2], ast.Immediate)  # selp d, a, b, p is p ? a : b; the zero is b
    return ast.Instruction("mov" if loaded_first else "not", ("pred",), (ast.Name(copy.flag), selp.operands[3]))


def _cp_async(copy: AsyncCopy, store: ast.Instruction) -> tuple[ast.Statement, ...]:
    """The relocated store as a cp.async from the captured address; zero-filled (src-size 0) where the flag is
    off. `.cg` (L2 only) for 16 bytes, as CUTLASS does; `.ca` for 4 and 8 (the only sizes it takes)."""
    level = "cg" if copy.size == 16 else "ca"
    destination, size = store.operands[0], ast.Immediate(str(copy.size))
    operands: tuple[ast.Operand, ...] = (destination, ast.Address(ast.Name(copy.source)), size)
    out: list[ast.Statement] = []
    if copy.zero_fill:
        read = ast.Name(f"%wr_n{copy.number}")
        out.append(ast.Instruction("selp", ("u32",), (read, size, ast.Immediate("0"), ast.Name(copy.flag))))
        operands = (*operands, read)
    out.append(ast.Instruction("cp", ("async", level, "shared", "global"), operands))
    return tuple(out)


def pipelined(
    function: ast.Function,
    found: StagedLoop,
    copies: tuple[AsyncCopy, ...],
    stages: int,
    stage_bytes: int,
    ring_names: dict[str, ast.Operand],
    wide: Callable[[str], bool],
    cfg: CFG,
) -> ast.Function:
    """The kernel with its staged loop pipelined S - 1 trips deep (the module docstring's shape)."""
    units = _units(function, found)
    assert not isinstance(units, str), units  # pipeline_refusal said so first
    lo, hi = found.staging.start, found.tail.stop
    registers = _registers(function)
    label_index = {s.name: index for part, index, s in units if isinstance(s, ast.Label)}
    by_load = {c.load: c for c in copies}
    by_store = {c.store: c for c in copies}
    by_select = {c.select: c for c in copies if c.select is not None}
    zeros = {z: c for c in copies for z in c.zeros}

    def staged(index: int, i: ast.Instruction) -> tuple[ast.Statement, ...]:
        """A staging instruction as the ahead copy runs it (before its registers are renamed)."""
        i = renamed(i, ring_names)
        if index in by_load:
            return _capture(by_load[index], i)
        if index in by_select:
            return (_selected(by_select[index], i),)
        if index in by_store:
            moved = relocated(i, wide, "%wr_qoff")
            last = moved[-1]
            assert isinstance(last, ast.Instruction)
            return (*moved[:-1], *_cp_async(by_store[index], last))
        if index in zeros:
            return (i, _flag(zeros[index], "0", i.guard))
        return (i,)

    def ahead(j: str) -> list[ast.Statement]:
        """One trip of the ahead copy, under %wr_more: staging into slot q mod S, then its tail (more trips?)."""

        def label(text: str) -> str | None:
            at = label_index.get(text)
            if at is None:
                return None
            bare = text.lstrip("$")
            if lo < at < found.filled:
                return f"$__wr_q{j}_{bare}"
            if at == found.filled:
                return f"$__wr_staged{j}"
            if at == lo:
                return f"$__wr_cont{j}"
            if found.released < at < hi:
                return f"$__wr_q{j}_{bare}"
            return f"$__wr_stop{j}"  # out of the loop: the ahead copy has no more trips

        out = list(
            statements(
                f"@!%wr_more bra $__wr_skip{j};\nrem.u32 %wr_qslot, %wr_q, {stages};\n"
                f"mul.lo.u32 %wr_qoff, %wr_qslot, {stage_bytes};"
            )
        )
        for part in ("staging", "tail"):
            for p, index, s in units:
                if p != part:
                    continue
                if isinstance(s, ast.Instruction):
                    out += [_ahead(x, registers, label) for x in staged(index, s)]
                elif isinstance(s, ast.Block):
                    out.append(_ahead(mapped(s, staged, {}, start=index), registers, label))
                else:
                    out.append(_ahead(s, registers, label))
            if part == "staging":
                out += statements(f"$__wr_staged{j}:\nadd.u32 %wr_q, %wr_q, 1;")
        out += statements(
            f"$__wr_stop{j}:\nmov.pred %wr_more, 0;\n$__wr_cont{j}:\n$__wr_skip{j}:\ncp.async.commit_group;"
        )
        return out

    kept = found.kept

    def real(index: int, i: ast.Instruction) -> tuple[ast.Statement, ...]:
        i = renamed(i, ring_names)
        if index in found.staging:
            return (i,) if index in kept else ()
        if index == found.filled:
            slot = f"rem.u32 %wr_slot, %wr_k, {stages};\nmul.lo.u32 %wr_off, %wr_slot, {stage_bytes};"
            return (*statements(slot), i)
        if index in found.compute and any(s.startswith("shared") for _, _, s in isa.memory_accesses(i)):
            return relocated(i, wide)
        if index == found.released:
            return (i, *statements("add.u32 %wr_k, %wr_k, 1;"))
        return (i,)

    exits = {t for op in cfg.linear.ops[lo:hi] for t in op.targets if label_index.get(t, lo) not in range(lo, hi)}
    du = def_use(cfg)
    ahead_ops = [op for op in cfg.linear.ops[lo:hi] if op.index in found.staging or op.index in found.tail]
    reads = sorted(  # the ahead copy's registers that enter the loop with a value: copied once, at the entry
        {
            cfg.linear.registers[k]
            for op in ahead_ops
            for k in op.uses
            if any(d == ENTRY or d not in range(lo, hi) for d in du.defs_of.get((op.index, k), ()))
        },
        key=lambda r: r.name,
    )
    entry = [f"mov.{r.type} {share_name(r.name, AHEAD)}, {r.name};" for r in reads]
    prologue = statements("\n".join((*entry, "mov.u32 %wr_k, 0;", "mov.u32 %wr_q, 0;", "mov.pred %wr_more, 1;")))
    declared = [
        d
        for d in function.body.statements
        if isinstance(d, ast.Declaration)
        and not (d.has(".shared") and all(x.name in ring_names for x in d.declarators))
    ]
    n = max(len(copies), 1)
    body: list[ast.Statement] = [
        *declared,
        *(_ahead(d, registers, lambda _: None) for d in declared if d.has(".reg")),
        *statements(
            f".reg .pred %wr_more, %wr_cp<{n}>;\n"
            f".reg .b32 %wr_k, %wr_q, %wr_slot, %wr_qslot, %wr_off, %wr_qoff, %wr_a<8>, %wr_n<{n}>;\n"
            f".reg .b64 %wr_wide, %wr_ad<8>, %wr_src<{n}>;\n"
            f".shared .align 16 .b8 {RING}[{stages * stage_bytes}];"
        ),
    ]
    entered = issued = waited = False
    for part, index, s in units:
        if part == "header" and not entered:  # the entry code goes before the header's labels
            body += [*prologue, *(x for j in range(stages - 1) for x in ahead(str(j)))]
            entered = True
        if part not in ("pre", "header") and not issued:
            body += [*ahead("L"), *statements(f"cp.async.wait_group {stages - 1};")]
            issued = True
        if part == "post" and not waited and not isinstance(s, ast.Label):
            body += statements("cp.async.wait_all;")
            waited = True
        if isinstance(s, ast.Instruction):
            body += real(index, s)
        elif isinstance(s, ast.Block):
            body.append(mapped(s, real, {}, start=index))
        elif not (part == "staging" and isinstance(s, ast.Label)):  # staging labels are the ahead copy's now
            body.append(s)
            if isinstance(s, ast.Label) and s.name in exits and label_index[s.name] != hi:
                body += statements("cp.async.wait_all;")
    if not waited:
        body += statements("cp.async.wait_all;")
    return replace(function, body=replace(function.body, statements=tuple(body)))
