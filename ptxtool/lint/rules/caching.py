"""PTX005 and PTX006: the non-coherent (`.nc`, read-only data cache) path, missed where it is safe and used where it
is not, from the memory facts (pointer provenance from kernel parameters, parameters the kernel writes)."""

from __future__ import annotations

from collections.abc import Iterator

from ptxtool.isa import Mode
from ptxtool.lint.context import Context
from ptxtool.lint.registry import Hit, rule

# modifiers under which a load must see other threads' writes: never a candidate for .nc
_COHERENT = frozenset(("volatile", "relaxed", "acquire", "mmio", "cv"))


@rule("PTX005", "readonly-without-nc", "note")
def readonly_without_nc(ctx: Context) -> Iterator[Hit]:
    """A global load from a kernel parameter that the kernel provably never writes, without `.nc`.

    When no store, atomic, bulk copy or call of the kernel can write through a pointer parameter (the memory facts
    follow each address back to the parameter it came from; any write through a pointer of unknown origin makes
    nothing provable), its loads may use the non-coherent read-only path (`ld.global.nc`, LDG.CONSTANT in SASS):
    what nvcc does for `const T* __restrict__`. `ptxtool optimize` makes that change and checks it with ptxas and
    the SASS. Keep the plain load if another pointer argument of the same launch may alias this buffer and is
    written: `.nc` is only correct for memory that nothing writes while the kernel runs.

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
        for access in facts.accesses:
            i = ops[access.op].instruction
            if (
                access.param_read_only
                and access.mode is Mode.READ
                and access.space == "global"
                and i.opcode == "ld"
                and "nc" not in i.modifiers
                and not _COHERENT.intersection(i.modifiers)
            ):
                loads.setdefault(access.param, []).append(i)
        # optimize adds .nc by itself only when no pointer is written; else the user must vouch for no aliasing
        written = sorted(facts.written_params)
        fix = (
            f"`ptxtool optimize --noalias {function.name}` adds it if it never aliases {', '.join(written)}"
            if written
            else "`ptxtool optimize` adds it"
        )
        for param, found in loads.items():
            first = found[0]
            count = f"{len(found)} loads" if len(found) > 1 else "a load"
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
        facts = ctx.memory(function)
        ops = ctx.cfg(function).linear.ops
        written: dict[str, int] = {}
        for a in facts.accesses:
            if a.mode is not Mode.READ and a.base.startswith(("param:", "global:")):
                written.setdefault(a.base, a.line)
        for p in facts.written_params:
            written.setdefault(f"param:{p}", 0)
        for access in facts.accesses:
            i = ops[access.op].instruction
            if access.mode is Mode.READ and "nc" in i.modifiers and access.base in written:
                what = access.base.split(":", 1)
                kind = "parameter" if what[0] == "param" else ".global variable"
                line = written[access.base]
                where = f" (written at line {line})" if line else " (handed to a call that may write it)"
                yield Hit(
                    access.line,
                    i.column,
                    f"{i.mnemonic} reads {kind} '{what[1]}', which '{function.name}' writes{where}",
                )
