"""PTX008: what ptxas warns about while assembling the file (spills, serialized wgmma, ignored setmaxnreg)."""

from __future__ import annotations

from collections.abc import Iterator

from ptxtool.lint.context import Context
from ptxtool.lint.registry import Hit, rule


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
    the PTX line ptxas names, else at the function's first line. Spills put registers in local memory; serialized
    wgmma loses the overlap of tensor-core work (ptxas says why: a register dependence, a call, a missing
    `wgmma.fence`...). This rule runs a tool: it is skipped with a notice (not a failure) when ptxas is missing,
    and with `--no-ptxas`. `ptxtool inspect` shows the resources behind these warnings.

        ptxas warning : Registers are spilled to local memory in function 'k', 96 bytes spill stores
    """
    functions = {f.name: f.line for f in ctx.module.functions}
    kinds = set(ctx.options["kinds"])
    for w in ctx.ptxas_warnings or ():
        if w.kind in kinds:
            line = w.line or functions.get(w.function, 0)
            yield Hit(line, 1 if line else 0, f"ptxas: {w.message}")
