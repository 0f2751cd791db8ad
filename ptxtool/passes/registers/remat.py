"""Rematerialization: values a loop keeps live only to read them are recomputed just before each read it reaches
(inside it, or after it), so their registers are free across the loop (analysis.remat says which values, and
proves the recomputation reads the same operands). nvcc and LLVM hoist per-stream addresses out of loops; 32
pointers loaded once from a table (`sum_table` in tests/data/registers/many_streams.cu) take 80 registers:

    ld.global.nc.u64    %rd41, [%rd40];          // before the loop
    cvta.to.global.u64  %rd1, %rd41;
    ...
    add.s64             %rd73, %rd1, %rd106;     // in the loop

    ld.param.u64        %remat_b64_0, [sum_table_param_0];    // in the loop, before the read
    cvta.to.global.u64  %remat_b64_1, %remat_b64_0;
    ld.global.u64       %remat_b64_2, [%remat_b64_1];
    cvta.to.global.u64  %remat_b64_3, %remat_b64_2;
    add.s64             %rd73, %remat_b64_3, %rd106;

A recomputed global load drops `.nc`: ptxas hoists a `.nc` reload back out of the loop, but keeps a coherent one in
place (the memory is read-only, so both read the same value). The original definitions stay; ptxas removes the
ones nothing reads. Whether a change pays is ptxas's register count and the GPU's time, decided by the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ptxtool import isa
from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.linear import Op
from ptxtool.analysis.loops import Loop
from ptxtool.analysis.remat import Candidate, Node, candidates
from ptxtool.syntax import ast
from ptxtool.syntax.printer import LINE

PREFIX = "%remat_"


@dataclass(frozen=True, slots=True)
class Remat:
    """One register no longer kept live across a loop: its name, the PTX line of its definition, how many reads
    now take a recomputed value, and the instructions recomputed before each of them (as the input wrote them)."""

    register: str
    line: int
    uses: int
    recomputed: tuple[str, ...]


def _names(function: ast.Function) -> set[str]:
    """Every name the function declares or mentions, so fresh names collide with none."""
    out: set[str] = {p.name for p in (*(function.params or ()), *(function.returns or ()))}

    def walk(block: ast.Block) -> None:
        for s in block.statements:
            if isinstance(s, ast.Block):
                walk(s)
            elif isinstance(s, ast.Declaration):
                out.update(d.name for d in s.declarators)
            elif isinstance(s, ast.Instruction):
                out.update(n.text for o in s.operands for n in isa.operand_names(o))

    if function.body is not None:
        walk(function.body)
    return out


class _Fresh:
    """Fresh registers, one `.reg .<type> %remat_<type>_<n>` range per type."""

    def __init__(self, taken: set[str]) -> None:
        self.prefix = PREFIX
        while any(n.startswith(self.prefix) for n in taken):
            self.prefix += "_"
        self.counts: dict[str, int] = {}

    def name(self, type_: str) -> str:
        n = self.counts.get(type_, 0)
        self.counts[type_] = n + 1
        return f"{self.prefix}{type_}_{n}"

    def declarations(self) -> tuple[ast.Declaration, ...]:
        return tuple(
            ast.Declaration(
                (ast.Attribute(".reg"), ast.Attribute(f".{t}")),
                (ast.Declarator(f"{self.prefix}{t}_", ast.Immediate(str(n))),),
            )
            for t, n in sorted(self.counts.items())
        )


def _substitute(instr: ast.Instruction, position: int, name: str) -> ast.Instruction:
    """The instruction reading register `name` at operand `position` (an address's base for an address)."""
    operands = list(instr.operands)
    old = operands[position]
    operands[position] = replace(old, base=ast.Name(name)) if isinstance(old, ast.Address) else ast.Name(name)
    return replace(instr, operands=tuple(operands))


class _Emitter:
    """The recomputation of trees before one reading instruction, each op once."""

    def __init__(self, cfg: CFG, fresh: _Fresh) -> None:
        self.cfg, self.fresh = cfg, fresh
        self.out: list[ast.Instruction] = []
        self.done: dict[int, str] = {}

    def emit(self, node: Node) -> str:
        if node.op in self.done:
            return self.done[node.op]
        op: Op = self.cfg.linear.ops[node.op]
        instr = op.instruction
        for position, child in node.inputs:
            instr = _substitute(instr, position, self.emit(child))
        register = self.cfg.linear.registers[op.defs[0]]
        name = self.fresh.name(register.type)
        instr = _substitute(instr, 0, name)
        if instr.opcode == "ld":
            instr = replace(instr, modifiers=tuple(m for m in instr.modifiers if m != "nc"))
        self.out.append(replace(instr, leading=(), trailing=()))
        self.done[node.op] = name
        return name


def _rewrite(block: ast.Block, edits: dict[int, tuple[list[ast.Instruction], ast.Instruction]]) -> ast.Block:
    statements: list[ast.Statement] = []
    for s in block.statements:
        if isinstance(s, ast.Block):
            statements.append(_rewrite(s, edits))
        elif id(s) in edits:
            before, new = edits[id(s)]
            if before:
                before[0] = replace(before[0], leading=s.leading)
                new = replace(new, leading=())
            statements.extend(before)
            statements.append(new)
        else:
            statements.append(s)
    return replace(block, statements=tuple(statements))


def rematerialize(
    function: ast.Function,
    cfg: CFG,
    loops: tuple[Loop, ...],
    *,
    readonly: Callable[[Op], bool] | None = None,
    limit: int | None = None,
    pure: bool = False,
) -> tuple[ast.Function, tuple[Remat, ...]]:
    """Recompute the values kept across loops that analysis.remat finds (at most `limit`, widest first) at their
    reads in and after the loop. `readonly(op)` vouches for global loads (analysis.remat.readonly_loads); without
    it none is recomputed. By default only values whose recomputation reloads global memory, the form ptxas keeps
    in the loop, and those read only after the loop; `pure` adds those read in it made of arithmetic and
    `.param`/`.const` reads alone, which ptxas often hoists back out (a variant to judge by ptxas's numbers: 32 ->
    24 registers on the corpus's daxpy_grid_stride, 24 -> 32 on grid_reduce_cg; attn_bwd_dkdv_w8's wgmma
    descriptors: 724 -> 252 spill bytes).
    Returns the function unchanged and () when nothing applies."""
    chosen: list[Candidate] = list(candidates(cfg, loops, readonly=readonly, pure=pure))[:limit]
    if not chosen or function.body is None:
        return function, ()
    ops = cfg.linear.ops
    fresh = _Fresh(_names(function))
    readers: dict[int, list[Candidate]] = {}
    for c in chosen:
        for u in c.uses:
            readers.setdefault(u, []).append(c)
    edits: dict[int, tuple[list[ast.Instruction], ast.Instruction]] = {}
    for u, reading in sorted(readers.items()):
        emitter = _Emitter(cfg, fresh)
        instr = ops[u].instruction
        for c in reading:
            name = emitter.emit(c.tree)
            for position, key in enumerate(ops[u].keys):
                if key == c.register:
                    instr = _substitute(instr, position, name)
            for position, operand in enumerate(instr.operands):
                if isinstance(operand, ast.Address) and isinstance(operand.base, ast.Name):
                    if operand.base.text == c.register:
                        instr = _substitute(instr, position, name)
                if isinstance(operand, (ast.Vector, ast.ParenList)) and ast.Name(c.register) in operand.items:
                    items = tuple(ast.Name(name) if x == ast.Name(c.register) else x for x in operand.items)
                    instr = replace(
                        instr,
                        operands=(
                            *instr.operands[:position],
                            replace(operand, items=items),
                            *instr.operands[position + 1 :],
                        ),
                    )
        edits[id(ops[u].instruction)] = (emitter.out, instr)
    body = _rewrite(function.body, edits)
    declarations = fresh.declarations()
    at = next((k for k, s in enumerate(body.statements) if not isinstance(s, ast.Declaration)), len(body.statements))
    body = replace(body, statements=(*body.statements[:at], *declarations, *body.statements[at:]))
    done = tuple(
        Remat(
            cfg.linear.registers[c.register].name,
            ops[c.tree.op].line,
            len(c.uses),
            tuple(LINE[ast.Instruction](ops[o].instruction) for o in c.tree.ops()),
        )
        for c in chosen
    )
    return replace(function, body=body), done
