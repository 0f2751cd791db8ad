"""Passes and the pass manager. A pass is `run(module, settings, analyses) -> (module, PassReport)` in its own
module, registered here with the analyses it reads and those it leaves valid; the manager computes each analysis
once per function and keeps it until a pass changes that function without preserving it.

Adding a pass is its module plus one line in PASSES (or `register(Pass(...))`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ptxtool.passes import cache_operators, registers, warp_roles
from ptxtool.passes.report import PassReport, Rewrite, Skip
from ptxtool.syntax import ast

__all__ = [
    "ANALYSES",
    "DEFAULT_PIPELINE",
    "PASSES",
    "Analyses",
    "Pass",
    "PassReport",
    "Rewrite",
    "Skip",
    "register",
    "run_pipeline",
]


def _cfg(function: ast.Function, analyses: Analyses) -> Any:
    from ptxtool.analysis.cfg import build_cfg

    return build_cfg(function)


def _loops(function: ast.Function, analyses: Analyses) -> Any:
    from ptxtool.analysis.loops import find_loops

    return find_loops(analyses.get("cfg", function))


def _pressure(function: ast.Function, analyses: Analyses) -> Any:
    from ptxtool.analysis.pressure import pressure

    return pressure(analyses.get("cfg", function))


def _memory(function: ast.Function, analyses: Analyses) -> Any:
    from ptxtool.analysis.memory import memory_facts

    assert analyses.module is not None, "the memory analysis reads the module: run it through run_pipeline"
    return memory_facts(analyses.module, function, analyses.get("cfg", function))


# analysis name -> how to compute it for one function (it may ask the manager for the analyses it builds on)
ANALYSES: dict[str, Callable[[ast.Function, Analyses], Any]] = {
    "cfg": _cfg,
    "loops": _loops,
    "pressure": _pressure,
    "memory": _memory,
}
# Analyses that read more than their function (callees' bodies, module variables): valid while the module is.
MODULE_WIDE = frozenset({"memory"})


class Analyses:
    """The analyses of one pipeline run, per function, computed on first use. An entry stays valid while its
    function is the same object, or while every pass since has declared the analysis preserved."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], tuple[ast.Function, Any]] = {}
        self.computed: Counter[str] = Counter()  # how often each analysis ran (what the cache saves shows here)
        self.module: ast.Module | None = None  # the module the functions belong to (set by run_pipeline)

    def get(self, name: str, function: ast.Function) -> Any:
        key = (name, function.name)
        held = self._cache.get(key)
        if held is not None and held[0] is function:
            return held[1]
        value = ANALYSES[name](function, self)
        self.computed[name] += 1
        self._cache[key] = (function, value)
        return value

    def after(self, module: ast.Module, preserves: frozenset[str]) -> None:
        """A pass made `module`: keep what it preserves (rebound to the new functions), and whatever belongs to
        functions it left as they were; drop the rest."""
        current = {f.name: f for f in module.functions}
        before = self.module.items if self.module is not None else ()
        same_module = len(before) == len(module.items) and all(
            a is b for a, b in zip(before, module.items, strict=True)
        )
        kept = {}
        for (name, fname), (function, value) in self._cache.items():
            new = current.get(fname)
            unchanged = new is function and (same_module or name not in MODULE_WIDE)
            if unchanged or (new is not None and (name in preserves or "*" in preserves)):
                kept[(name, fname)] = (new, value)
        self._cache = kept
        self.module = module


@dataclass(frozen=True)
class Pass:
    """A registered pass: its settings type (its defaults when none are given), the analyses it reads through the
    manager, and the analyses it leaves valid (`"*"`: it changes no control flow, no registers, nothing analysed)."""

    name: str
    run: Callable[[ast.Module, Any, Analyses], tuple[ast.Module, PassReport]]
    settings: type
    requires: tuple[str, ...] = ()
    preserves: frozenset[str] = frozenset()


def _cache_operators(module: ast.Module, settings: Any, analyses: Analyses) -> tuple[ast.Module, PassReport]:
    return cache_operators.cache_operators(
        module, settings, lambda f: (analyses.get("cfg", f), analyses.get("memory", f))
    )


def _warp_roles(module: ast.Module, settings: Any, analyses: Analyses) -> tuple[ast.Module, PassReport]:
    return warp_roles.warp_roles(module, settings)


PASSES: dict[str, Pass] = {
    p.name: p
    for p in (
        # changes modifiers of ld/st only: control flow and liveness stay, but the CFG holds the old instructions
        Pass(
            cache_operators.NAME,
            _cache_operators,
            cache_operators.Settings,
            requires=("cfg", "memory"),
            preserves=frozenset({"loops"}),
        ),
        Pass(registers.NAME, registers.run, registers.RegisterSettings, requires=("cfg", "loops")),  # bounds, remat
        # restructures whole kernels; the optimize service verifies its output as a whole (never by default)
        Pass(warp_roles.NAME, _warp_roles, warp_roles.RoleSettings),
    )
}
DEFAULT_PIPELINE: tuple[str, ...] = (cache_operators.NAME,)


def register(p: Pass) -> Pass:
    """Add a pass to the registry (a second pass of one name is a bug)."""
    assert p.name not in PASSES, f"pass {p.name!r} registered twice"
    unknown = set(p.requires) - set(ANALYSES)
    assert not unknown, f"pass {p.name!r} requires unknown analyses {sorted(unknown)}"
    PASSES[p.name] = p
    return p


def run_pipeline(
    module: ast.Module, names: Sequence[str], settings: dict[str, Any] | None = None, analyses: Analyses | None = None
) -> tuple[ast.Module, list[PassReport]]:
    """Run the named passes in order, sharing one analysis cache; `settings` maps a pass name to its settings object
    (default: its defaults)."""
    analyses = analyses or Analyses()
    analyses.after(module, frozenset())  # a new module: drop what belongs to another
    reports = []
    for name in names:
        p = PASSES[name]
        module, report = p.run(module, (settings or {}).get(name) or p.settings(), analyses)
        analyses.after(module, p.preserves)
        reports.append(report)
    return module, reports
