"""PTX001: what the file's own `.version`/`.target` does not allow, from the ISA tables (as `parse --check`)."""

from __future__ import annotations

from collections.abc import Iterator

from ptxtool.analysis.legality import check_module
from ptxtool.lint.context import Context
from ptxtool.lint.registry import Hit, rule


@rule("PTX001", "unsupported-feature", "error")
def unsupported_feature(ctx: Context) -> Iterator[Hit]:
    """An instruction, modifier, special register or directive that the file's .target or .version does not support.

    ptxas rejects such a file; the message names the smallest change that makes it legal: a newer `.version`, or a
    target that has the feature (`sm_90a` for wgmma and setmaxnreg). The facts come from ptxtool's ISA tables, the
    same ones `ptxtool parse --check` uses.

        .version 7.8
        .target sm_80
        ...
        setmaxnreg.inc.sync.aligned.u32 232;   // PTX001: needs sm_90a (or sm_100a...)
    """
    for problem in check_module(ctx.module):
        yield Hit(problem.location.line, problem.location.column, problem.message)
