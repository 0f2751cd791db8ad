"""Passes: each a pure function `Module -> (Module, PassReport)` in its own module; the pipeline is a tuple of names
looked up in PASSES, run in order, each pass seeing the previous one's output."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ptxtool.passes import cache_operators
from ptxtool.passes.report import PassReport, Rewrite, Skip
from ptxtool.syntax import ast

__all__ = ["DEFAULT_PIPELINE", "PASSES", "PassReport", "Rewrite", "Skip", "run_pipeline"]

# name -> (the pass, the settings type it takes)
PASSES: dict[str, tuple[Callable[[ast.Module, Any], tuple[ast.Module, PassReport]], type]] = {
    cache_operators.NAME: (cache_operators.cache_operators, cache_operators.Settings),
}
DEFAULT_PIPELINE: tuple[str, ...] = (cache_operators.NAME,)


def run_pipeline(
    module: ast.Module, names: Sequence[str], settings: dict[str, Any] | None = None
) -> tuple[ast.Module, list[PassReport]]:
    """Run the named passes in order; `settings` maps a pass name to its settings object (default: its defaults)."""
    reports = []
    for name in names:
        function, kind = PASSES[name]
        module, report = function(module, (settings or {}).get(name) or kind())
        reports.append(report)
    return module, reports
