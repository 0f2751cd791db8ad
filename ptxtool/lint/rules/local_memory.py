"""PTX007: local memory in the PTX (`.local` variables, ld.local/st.local) that ptxas keeps in the SASS."""

from __future__ import annotations

from collections.abc import Iterator

from ptxtool.analysis.statements import statements
from ptxtool.lint.context import Context
from ptxtool.lint.registry import Hit, rule
from ptxtool.syntax import ast


def debug_build(module: ast.Module) -> bool:
    """`.target sm_XY, debug` (nvcc -G): every variable lives in local memory on purpose; not performance code."""
    return "debug" in module.targets


@rule("PTX007", "local-memory", "warning", asks_ptxas=True)
def local_memory(ctx: Context) -> Iterator[Hit]:
    """Local memory that ptxas keeps: a `.local` variable, or ld.local/st.local, in a function whose code uses it.

    Local memory is per-thread but lives off-chip (cached in L1/L2): a local array indexed at run time or a struct
    whose address is taken puts data there, and every access costs a memory round trip. ptxas is asked: a function
    it compiles without a stack frame (ptxas -v: `0 bytes stack frame`) has no LDL/STL in its SASS, because ptxas
    kept its arrays in registers, and is not reported. Otherwise each `.local` declaration is reported, and each
    function's ld.local/st.local once (at the first, with the count). Not reported: modules built for debugging
    (`.target sm_XY, debug`, nvcc -G), where everything lives in local memory on purpose. Without ptxas (missing,
    `--no-ptxas`, or it rejects the file) the PTX alone decides. Spills that ptxas adds are PTX008's.

        .local .align 4 .b8 __local_depot0[64];    // PTX007
        st.local.u32 [%rd1], %r1;                  // PTX007 (first of N)
    """
    if debug_build(ctx.module):
        return
    functions = ctx.ptxas_functions or {}

    def kept_local(function: ast.Function) -> bool:
        resources = functions.get(function.name)
        return resources is None or bool(resources.stack_frame or resources.local)

    if any(kept_local(f) for f in ctx.bodies()):
        for declaration in (i for i in ctx.module.items if isinstance(i, ast.Declaration) and i.has(".local")):
            names = ", ".join(d.name for d in declaration.declarators)
            yield Hit(declaration.line, declaration.column, f"module-level .local variable {names}")
    for function in ctx.bodies():
        if not kept_local(function):
            continue
        for node in statements(function.body):
            if isinstance(node, ast.Declaration) and node.has(".local"):
                names = ", ".join(d.name for d in node.declarators)
                yield Hit(node.line, node.column, f".local variable {names} in '{function.name}' (off-chip memory)")
        accesses = [i for i in ast.instructions(function.body) if i.opcode in ("ld", "st") and "local" in i.modifiers]
        if accesses:
            first = accesses[0]
            yield Hit(
                first.line,
                first.column,
                f"{len(accesses)} ld.local/st.local in '{function.name}', first here: {first.mnemonic}",
            )
