"""PTX007: local memory written into the PTX: `.local` variables and ld.local/st.local."""

from __future__ import annotations

from collections.abc import Iterator

from ptxtool.lint.context import Context
from ptxtool.lint.registry import Hit, rule
from ptxtool.syntax import ast


def _statements(block: ast.Block) -> Iterator[ast.Statement]:
    """Every statement of a body, nested blocks included (never the operands: they cannot declare anything)."""
    for s in block.statements:
        yield s
        if isinstance(s, ast.Block):
            yield from _statements(s)


@rule("PTX007", "local-memory", "warning")
def local_memory(ctx: Context) -> Iterator[Hit]:
    """Local memory in the PTX: a `.local` variable, or ld.local/st.local instructions.

    Local memory is per-thread but lives off-chip (cached in L1/L2): a local array indexed at run time, a struct
    whose address is taken, or `-G` code all put data there, and every access costs a memory round trip. Each
    `.local` declaration is reported, and each function's ld.local/st.local once (at the first, with the count).
    Spills that ptxas adds are a different matter: see PTX008.

        .local .align 4 .b8 __local_depot0[64];    // PTX007
        st.local.u32 [%rd1], %r1;                  // PTX007 (first of N)
    """
    module_locals = [i for i in ctx.module.items if isinstance(i, ast.Declaration) and i.has(".local")]
    for declaration in module_locals:
        names = ", ".join(d.name for d in declaration.declarators)
        yield Hit(declaration.line, declaration.column, f"module-level .local variable {names}")
    for function in ctx.bodies():
        for node in _statements(function.body):
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
