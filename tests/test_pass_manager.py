"""The pass manager: a toy pass registered in one line runs in a pipeline, its analyses are computed once per
function and kept until a pass changes that function without preserving them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from ptxtool import passes
from ptxtool.passes import Analyses, Pass, PassReport, register, run_pipeline
from ptxtool.syntax import ast, format_module, parse

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


@dataclass(frozen=True)
class Blocks:
    """The toy pass's settings: the function to touch (None: touch none)."""

    touch: str | None = None


def count_blocks(module: ast.Module, settings: Blocks, analyses: Analyses) -> tuple[ast.Module, PassReport]:
    """Reads the CFG and loops of every function; with `touch`, rebuilds that one function (an identical copy)."""
    report = PassReport("count-blocks")
    functions = []
    for f in module.functions:
        if f.body is not None:
            analyses.get("loops", f)
            report.warnings.append(f"{f.name}: {len(analyses.get('cfg', f).blocks)} blocks")
        functions.append(replace(f) if f.name == settings.touch else f)
    items = tuple(functions.pop(0) if isinstance(i, ast.Function) else i for i in module.items)
    return replace(module, items=items), report


@pytest.fixture
def toy():
    for name, preserves in (("count-blocks", frozenset()), ("count-blocks-keeps-cfg", frozenset({"cfg"}))):
        register(Pass(name, count_blocks, Blocks, requires=("cfg", "loops"), preserves=preserves))
    yield
    del passes.PASSES["count-blocks"], passes.PASSES["count-blocks-keeps-cfg"]


def test_a_registered_pass_runs_and_reports(toy):
    module = parse((SAMPLES / "elementwise.sm90.ptx").read_text())
    out, reports = run_pipeline(module, ["count-blocks"])
    assert format_module(out) == format_module(module)
    bodies = [f.name for f in module.functions if f.body is not None]
    assert [w.split(":")[0] for w in reports[0].warnings] == bodies


def test_analyses_are_computed_once_per_function_until_invalidated(toy):
    module = parse((SAMPLES / "elementwise.sm90.ptx").read_text())
    bodies = sum(1 for f in module.functions if f.body is not None)
    analyses = Analyses()
    run_pipeline(module, ["count-blocks", "count-blocks"], analyses=analyses)
    assert analyses.computed == {"cfg": bodies, "loops": bodies}  # the second pass used the cache
    analyses = Analyses()
    touch = {"count-blocks": Blocks(touch="saxpy")}
    run_pipeline(module, ["count-blocks", "count-blocks"], touch, analyses)
    assert analyses.computed == {"cfg": bodies + 1, "loops": bodies + 1}  # saxpy was rebuilt: its analyses again
    analyses = Analyses()
    keeps = {"count-blocks-keeps-cfg": Blocks(touch="saxpy")}
    run_pipeline(module, ["count-blocks-keeps-cfg", "count-blocks"], keeps, analyses)
    assert analyses.computed == {"cfg": bodies, "loops": bodies + 1}  # the CFG was preserved, the loops were not


def test_registry_refuses_duplicates_and_unknown_analyses(toy):
    with pytest.raises(AssertionError, match="registered twice"):
        register(Pass("count-blocks", count_blocks, Blocks))
    with pytest.raises(AssertionError, match="unknown analyses"):
        register(Pass("needs-magic", count_blocks, Blocks, requires=("magic",)))


def test_the_default_pipeline_is_registered():
    assert set(passes.DEFAULT_PIPELINE) <= set(passes.PASSES)
    assert all(set(p.requires) <= set(passes.ANALYSES) for p in passes.PASSES.values())


def test_memory_facts_are_cached_and_read_the_whole_module(toy):
    """cache-operators takes its memory facts from the manager: computed once per kernel, kept while the module is
    the same, and computed again for every kernel once any function changes (a kernel's facts include its
    callees' effects)."""
    from ptxtool.passes.cache_operators import NAME, Policy, Settings

    module = parse((SAMPLES / "elementwise.sm90.ptx").read_text())
    kernels = sum(1 for f in module.functions if f.is_kernel and f.body is not None)
    off = Policy(False)
    quiet = {NAME: Settings(readonly=off, streaming=off, stores=off)}  # rewrites nothing: the module stays
    analyses = Analyses()
    run_pipeline(module, [NAME, NAME], quiet, analyses)
    assert analyses.computed["memory"] == kernels
    run_pipeline(
        module, ["count-blocks-keeps-cfg", NAME], {**quiet, "count-blocks-keeps-cfg": Blocks("saxpy")}, analyses
    )
    assert analyses.computed["memory"] == 2 * kernels  # saxpy changed: every kernel's memory facts again
    assert "memory" in passes.PASSES[NAME].requires
