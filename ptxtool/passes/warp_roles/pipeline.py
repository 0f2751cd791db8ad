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
from ptxtool.isa.caching import type_bits
from ptxtool.passes.warp_roles.copies import AsyncCopy, copying
from ptxtool.passes.warp_roles.emit import RING, copied_label, mapped, relocated, renamed, statements
from ptxtool.passes.warp_roles.producers import body_units, declared_registers, share_name, substituted
from ptxtool.syntax import ast

AHEAD = 1  # the ahead copy's registers are share 1's names (%wr_s1_r5)
_TABLES = (".branchtargets", ".calltargets", ".callprototype")  # directives named by the label before them


def _tables(function: ast.Function) -> dict[str, ast.Statement]:
    """The jump and call tables of the body, by the label that names each (`$L: .branchtargets $a, $b;`)."""
    out: dict[str, ast.Statement] = {}
    body = function.body.statements
    for before, s in zip(body, body[1:], strict=False):
        if isinstance(s, ast.Directive) and s.word in _TABLES and isinstance(before, ast.Label):
            out[before.name] = s
    return out


def pipeline_refusal(function: ast.Function, found: StagedLoop, cfg: CFG) -> str | None:
    """Why the loop cannot be given an ahead copy: a `{ }` scope spanning parts, the loop entered other than by
    falling into its header, or a staging branch back to the header (a trip would stage twice)."""
    units = body_units(function, found)
    if isinstance(units, str):
        return units
    tables = _tables(function)
    for part, _, s in units:
        if part in ("staging", "tail") and isinstance(s, ast.Label) and s.name in tables:
            return f"a {tables[s.name].word} table in the loop at line {s.line} (the ahead copy would repeat it)"
        if part in ("staging", "tail") and isinstance(s, ast.Instruction) and s.opcode == "brx":
            return f"{s.mnemonic} at line {s.line} in the loop's {part} part (its table is not copied ahead)"
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

    guard = i.guard and replace(i.guard, predicate=substituted(i.guard.predicate, names))
    return replace(i, operands=substituted(i.operands, names), guard=guard)


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


def _bit_type(kind: str) -> str:
    """The mov type that copies a register of type `kind` bit for bit (mov takes no .f16, .f16x2, .bf16: PTX ISA)."""
    return "pred" if kind == "pred" else f"b{type_bits(kind) or 32}"


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
    units = body_units(function, found)
    assert not isinstance(units, str), units  # pipeline_refusal said so first
    lo, hi = found.staging.start, found.tail.stop
    registers = declared_registers(function)
    label_index = {s.name: index for part, index, s in units if isinstance(s, ast.Label)}
    converted = copying(copies, registers, lambda i: relocated(i, wide, "%wr_qoff"))

    def staged(index: int, i: ast.Instruction) -> tuple[ast.Statement, ...]:
        """A staging instruction as the ahead copy runs it (before its registers are renamed)."""
        return converted(index, renamed(i, ring_names))

    def ahead(j: str) -> list[ast.Statement]:
        """One trip of the ahead copy, under %wr_more: staging into slot q mod S, then its tail (more trips?)."""

        def label(text: str) -> str | None:
            at = label_index.get(text)
            if at is None:
                return None
            if lo < at < found.filled:
                return copied_label(f"q{j}", text)
            if at == found.filled:
                return f"$__wr_staged{j}"
            if at == lo:
                return f"$__wr_cont{j}"
            if found.released < at < hi:
                return copied_label(f"q{j}", text)
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
    entry = [f"mov.{_bit_type(r.type)} {share_name(r.name, AHEAD)}, {r.name};" for r in reads]
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
    tables = _tables(function)
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
            if isinstance(s, ast.Label) and s.name in tables:  # a jump table stays right after its label
                body.append(tables[s.name])
            if isinstance(s, ast.Label) and s.name in exits and label_index[s.name] != hi:
                body += statements("cp.async.wait_all;")
    if not waited:
        body += statements("cp.async.wait_all;")
    return replace(function, body=replace(function.body, statements=tuple(body)))
