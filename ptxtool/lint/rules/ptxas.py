"""PTX008: what ptxas warns about while assembling the file (spills, serialized wgmma, ignored setmaxnreg)."""

from __future__ import annotations

from collections.abc import Iterator

from ptxtool.lint.context import Context
from ptxtool.lint.registry import Hit, rule
from ptxtool.lint.rules.local_memory import debug_build
from ptxtool.syntax import ast


@rule(
    "PTX008",
    "ptxas-warning",
    "warning",
    options={"kinds": ["spill", "wgmma-serialized", "wgmma-wait-injected", "setmaxnreg-ignored", "setmaxnreg"]},
    needs_ptxas=True,
)
def ptxas_warning(ctx: Context) -> Iterator[Hit]:
    """A ptxas warning about the code it made: register spills, serialized wgmma, setmaxnreg ignored.

    The file is assembled with the ptxas ptxtool finds (PTXTOOL_PTXAS, then the nvidia-cuda-nvcc wheel) for its
    own .target, with `-v --warn-on-spills`, and each warning of a kind listed in option `kinds` is reported at
    the PTX line ptxas names, else at the declaration of the function it names (for a warning that names none, such
    as C7508 'setmaxnreg' ignored, the first kernel using the instruction it is about). Spills put registers in
    local memory; serialized wgmma loses the overlap of tensor-core work (ptxas says why: a register dependence, a
    call, a missing `wgmma.fence`...). Spills in a module built for debugging (`.target sm_XY, debug`, nvcc -G) are
    not reported: unoptimized code keeps values in local memory on purpose (as PTX007 says). This rule runs a tool:
    it is skipped with a notice (not a failure) when ptxas is missing, and with `--no-ptxas`. `ptxtool inspect`
    shows the resources behind these warnings.

        ptxas warning : Registers are spilled to local memory in function 'k', 96 bytes spill stores
    """
    functions = {f.name: f.line for f in ctx.module.functions}
    kinds = set(ctx.options["kinds"]) - ({"spill"} if debug_build(ctx.module) else set())
    for w in ctx.ptxas_warnings or ():
        if w.kind in kinds:
            line = w.line or functions.get(w.function, 0) or _declaration(ctx, w.kind)
            yield Hit(line, 1 if line else 0, f"ptxas: {w.message}")


_OPCODE_OF_KIND = {"setmaxnreg-ignored": "setmaxnreg", "setmaxnreg": "setmaxnreg", "wgmma-serialized": "wgmma"}


def _declaration(ctx: Context, kind: str) -> int:
    """Where a warning that names no function nor line belongs (C7508 'setmaxnreg ignored' is one): the declaration of
    the first kernel using the instruction it is about (for C7508, one whose register count at entry ptxas cannot
    fix), else of the first kernel."""
    from ptxtool.lint.rules.setmaxnreg import entry_count_known

    kernels = [f for f in ctx.bodies() if f.is_kernel] or ctx.bodies()
    opcode = _OPCODE_OF_KIND.get(kind)
    using = [f for f in kernels if opcode and any(i.opcode == opcode for i in ast.instructions(f.body))]
    if kind == "setmaxnreg-ignored":
        using = [f for f in using if not entry_count_known(f)] or using
    return (using or kernels)[0].line if kernels else 0
