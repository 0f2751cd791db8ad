"""PTX005 and PTX006: the non-coherent (`.nc`, read-only data cache) path, missed where it is safe and used where it
is not, from the memory facts (pointer provenance from kernel parameters, parameters the kernel writes)."""

from __future__ import annotations

from collections.abc import Iterator

from ptxtool import isa
from ptxtool.analysis.memory import MemoryBase, Space, non_coherent
from ptxtool.isa import Mode
from ptxtool.isa.caching import with_modifier
from ptxtool.lint.context import Context
from ptxtool.lint.registry import Hit, rule
from ptxtool.syntax import ast


def _nc_legal(module: ast.Module, instr: ast.Instruction) -> bool:
    """Whether the file's .version and .target can take `.nc` on this load (the optimizer's own check)."""
    return isa.unmet_added(module, instr, with_modifier(instr, "nc")) is None


@rule("PTX005", "readonly-without-nc", "note")
def readonly_without_nc(ctx: Context) -> Iterator[Hit]:
    """A global load that `ptxtool optimize` would make non-coherent (`.nc`), alone or with `--noalias`.

    The decision is the optimizer's own (`ptxtool.analysis.memory.non_coherent`): the load comes from a kernel
    parameter the kernel never writes; no store, atomic, bulk copy or call writes through a pointer of unknown
    origin; and nothing lets the kernel observe other agents' writes (ordered, volatile or scoped accesses,
    atomics, fences, mbarrier/cluster waits, `griddepcontrol.wait`, bulk stores, polls, in the kernel or a callee).
    Then `ld.global.nc` (LDG.CONSTANT in SASS) is what nvcc emits for `const T* __restrict__`. If the kernel also
    writes through another pointer parameter or a module variable, `.nc` is only right when they never alias
    this buffer: the note says `--noalias KERNEL` (what `__restrict__` declares) is needed. Loads with an explicit
    cache operator (`.ca`, `.cg`...) are the author's choice and are not reported.

        ld.param.u64 %rd1, [k_param_0];        // never stored through
        cvta.to.global.u64 %rd2, %rd1;
        ld.global.f32 %f1, [%rd2];             // PTX005: could be ld.global.nc.f32

    One finding per kernel and parameter, at its first such load, with the number of loads.
    """
    for function in ctx.bodies():
        if not function.is_kernel:
            continue
        facts = ctx.memory(function)
        ops = ctx.cfg(function).linear.ops
        loads: dict[str, list] = {}
        aliases: dict[str, tuple[str, ...]] = {}
        for access in facts.accesses:
            i = ops[access.op].instruction
            verdict = non_coherent(facts, access, i)
            if access.param and "nc" not in i.modifiers and verdict.allowed(True) and _nc_legal(ctx.module, i):
                loads.setdefault(access.param, []).append(i)
                aliases[access.param] = verdict.aliases
        for param, found in loads.items():
            first = found[0]
            count = f"{len(found)} loads" if len(found) > 1 else "a load"
            written = sorted({*facts.written_params, *facts.written_globals})
            fix = (
                f"`ptxtool optimize --noalias {function.name}` adds it if it never aliases {', '.join(written)}"
                if aliases[param]
                else "`ptxtool optimize` adds it"
            )
            yield Hit(
                first.line,
                first.column,
                f"{count} of parameter '{param}' ('{function.name}' never writes it) without '.nc', first "
                f"{first.mnemonic}: {fix}",
            )


@rule("PTX006", "nc-load-of-written-memory", "error")
def nc_load_of_written_memory(ctx: Context) -> Iterator[Hit]:
    """A non-coherent load (`ld.global.nc`, `ld.nc`) of memory that the kernel itself writes.

    The read-only path is not kept coherent with stores during the kernel: a `.nc` load may return stale data
    for memory that this or another thread has written (through the same parameter or the same `.global`
    variable). Use a plain `ld.global` there (in CUDA: drop `__restrict__`/`__ldg` for that buffer).

        st.global.f32 [%rd2], %f1;         // %rd2 from k_param_0
        ld.global.nc.f32 %f2, [%rd2+4];    // PTX006: k_param_0 is written by this kernel
    """
    for function in ctx.bodies():
        ops = ctx.cfg(function).linear.ops
        if not any("nc" in op.instruction.modifiers for op in ops):  # nothing to report: skip the memory facts
            continue
        facts = ctx.memory(function)
        written: dict[MemoryBase, int] = {}
        for a in facts.accesses:
            if a.mode is not Mode.READ and a.base.space in (Space.PARAM, Space.GLOBAL):
                written.setdefault(a.base, a.line)
        for p in facts.written_params:
            written.setdefault(MemoryBase(Space.PARAM, p), 0)
        for access in facts.accesses:
            i = ops[access.op].instruction
            if access.mode is Mode.READ and "nc" in i.modifiers and access.base in written:
                kind = "parameter" if access.base.space is Space.PARAM else ".global variable"
                line = written[access.base]
                where = f" (written at line {line})" if line else " (handed to a call that may write it)"
                yield Hit(
                    access.line,
                    i.column,
                    f"{i.mnemonic} reads {kind} '{access.base.name}', which '{function.name}' writes{where}",
                )
