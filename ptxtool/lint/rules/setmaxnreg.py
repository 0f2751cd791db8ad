"""PTX003: setmaxnreg that ptxas will ignore or that cannot be satisfied."""

from __future__ import annotations

from collections.abc import Iterator

from ptxtool import isa
from ptxtool.analysis.launch_bounds import block_bounds
from ptxtool.lint.context import Context
from ptxtool.lint.registry import Hit, rule
from ptxtool.syntax import ast

WARPGROUP = 128  # threads: setmaxnreg acts on a whole warpgroup


def _count(i: ast.Instruction) -> int | None:
    value = i.operands[0].value if i.operands and isinstance(i.operands[0], ast.Immediate) else None
    return value if isinstance(value, int) else None


def _directives(function: ast.Function) -> dict[str, list[int]]:
    return {d.word: [int(v.value) for v in d.values] for d in function.directives}


def _callees(i: ast.Instruction, bodies: dict[str, ast.Function]) -> list[str]:
    """The functions with bodies a call may reach (the callee, or each of a `.calltargets` list's)."""
    return [n.text for operand in i.operands for n in isa.operand_names(operand) if n.text in bodies]


def _first_use(function: ast.Function, bodies: dict[str, ast.Function], seen: set[str]) -> ast.Instruction | None:
    """The function's first setmaxnreg, or its first call that reaches one: ptxas ignores both alike (C7508)."""
    for i in ast.instructions(function.body):
        if i.opcode == "setmaxnreg":
            return i
        if i.opcode == "call":
            for name in _callees(i, bodies):
                if name not in seen and _first_use(bodies[name], bodies, seen | {name}) is not None:
                    return i
    return None


def _firsts(cfg, block: int, after: int) -> tuple[list[ast.Instruction], bool]:
    """The setmaxnreg each path from op `after` of `block` (-1: its start) meets first, and whether some path meets
    none before the kernel ends (a block met again adds nothing: its paths are counted once)."""
    first: list[ast.Instruction] = []
    seen: set[int] = set()
    open_path = False
    todo = [(block, after)]
    while todo:
        index, skip = todo.pop()
        if skip < 0 and index in seen:
            continue
        if skip < 0:
            seen.add(index)
        ends_path = False
        for op in cfg.ops(cfg.blocks[index])[skip + 1 :]:
            if op.instruction.opcode == "setmaxnreg":
                first.append(op.instruction)
                if not op.guarded:  # a guarded one may be skipped: what follows it may come first too
                    ends_path = True
                    break
        if not ends_path:
            successors = cfg.blocks[index].successors
            open_path |= not successors
            todo.extend((b, -1) for b in successors)
    return first, open_path


def _steady(ctx: Context, function: ast.Function) -> list[ast.Instruction]:
    """The count each warpgroup keeps for its role: the setmaxnreg a path from entry meets first. A later one on the
    same path (a producer's brief `inc` once its loads are issued) waits for registers others have released, so it
    never adds to what the roles hold at once. Where the first is an `.inc` that every path then follows with a
    `.dec` (Triton's default partition takes registers to set the kernel up, then gives them back for its role),
    the role keeps the `.dec`'s count."""
    cfg = ctx.cfg(function)
    if not cfg.blocks:
        return []
    first, _ = _firsts(cfg, 0, -1)
    steady: list[ast.Instruction] = []
    for i in first:
        if "inc" in i.modifiers:
            op = next(op for op in cfg.linear.ops if op.instruction is i)
            block = cfg.block_of[op.index]
            position = next(k for k, o in enumerate(cfg.ops(cfg.blocks[block])) if o is op)
            then, open_path = _firsts(cfg, block, position)
            if then and not open_path and all("dec" in j.modifiers for j in then):
                steady.extend(then)
                continue
        steady.append(i)
    return steady


def entry_count_known(function: ast.Function) -> bool:
    """Whether ptxas can fix a kernel's register count at entry, which it needs to honour setmaxnreg: `.maxnreg`, or
    `.minnctapersm` with `.maxntid`/`.reqntid` (without them it ignores every setmaxnreg, warning C7508)."""
    directives = _directives(function)
    return ".maxnreg" in directives or (block_bounds(function) is not None and ".minnctapersm" in directives)


@rule(
    "PTX003",
    "setmaxnreg-config",
    "warning",
    options={"register-file": 65536, "min-registers": 24, "max-registers": 256},
)
def setmaxnreg_config(ctx: Context) -> Iterator[Hit]:
    """setmaxnreg that ptxas ignores or the CTA cannot satisfy.

    `setmaxnreg.inc/.dec.sync.aligned.u32 N` changes the registers of each thread of a warpgroup. Reported:
    - N not a multiple of 8, or outside [24, 256] (options `min-registers`, `max-registers`): ptxas rejects it;
    - the kernel has neither `.maxnreg` nor `.minnctapersm` with `.maxntid` or `.reqntid`: ptxas cannot fix the starting
      register count and ignores every setmaxnreg (warning "'setmaxnreg' ignored");
    - the counts exceed the register file a CTA may use (option `register-file`, 65536 per SM, divided by
      `.minnctapersm`): the estimate assumes the warp-specialized layout, one warpgroup running the smallest `.dec`
      and all the others the largest `.inc` (all of them the largest `.inc` when there is no `.dec`), counting only
      the setmaxnreg each path from entry meets first (a role's steady state; a later `.inc` waits for registers
      released by others), or the `.dec` every path takes after a first `.inc` (a set-up phase that gives its
      registers back).

        .maxntid 384, 1, 1
        .minnctapersm 1
        ...
        setmaxnreg.dec.sync.aligned.u32 40;
        setmaxnreg.inc.sync.aligned.u32 240;   // PTX003: 128*40 + 256*240 = 66560 > 65536 registers
    """
    low, high, budget = ctx.options["min-registers"], ctx.options["max-registers"], ctx.options["register-file"]
    bodies = {f.name: f for f in ctx.bodies()}
    for function in ctx.bodies():
        uses = [i for i in ast.instructions(function.body) if i.opcode == "setmaxnreg"]
        for i in uses:
            n = _count(i)
            if n is not None and (n % 8 or not low <= n <= high):
                yield Hit(i.line, i.column, f"{i.mnemonic} {n}: the count must be a multiple of 8 in [{low}, {high}]")
        first = _first_use(function, bodies, {function.name}) if function.is_kernel else None
        if first is None:
            continue
        if not entry_count_known(function):
            via = f" (through {first.mnemonic} {_callees(first, bodies)[0]})" if first.opcode == "call" else ""
            yield Hit(
                first.line,
                first.column,
                f"setmaxnreg in '{function.name}'{via} without .maxnreg or .maxntid/.reqntid + .minnctapersm: ptxas "
                "ignores it",
            )
            continue
        if not uses:
            continue
        directives, bounds = _directives(function), block_bounds(function)
        if bounds is None:
            continue
        groups = max(1, bounds.threads // WARPGROUP)
        per_cta = budget // max(1, (directives.get(".minnctapersm") or [1])[0])
        steady = _steady(ctx, function)
        inc = [(n, i) for i in steady if "inc" in i.modifiers and (n := _count(i)) is not None]
        dec = [n for i in steady if "dec" in i.modifiers and (n := _count(i)) is not None]
        if not inc:
            continue
        most, where = max(inc, key=lambda pair: pair[0])
        need = WARPGROUP * (min(dec) + (groups - 1) * most if dec else groups * most)
        if need > per_cta:
            layout = (
                f"{WARPGROUP}*{min(dec)} + {WARPGROUP * (groups - 1)}*{most}" if dec else f"{groups * WARPGROUP}*{most}"
            )
            yield Hit(
                where.line,
                where.column,
                f"setmaxnreg counts need {layout} = {need} registers per CTA, more than {per_cta} available",
            )
