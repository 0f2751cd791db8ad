"""tune's `registers` generator: the register pass's variants of the tuned kernel (launch bounds and caps from
passes/registers/bounds.py, values rematerialized by remat.py) as candidates, after the pass's own ptxas rules have
dropped those that add spills inside loops or lower occupancy for nothing (those become notes and are never timed).

The pass chooses one variant itself, by ptxas's numbers or through its `time` hook. This adapter hands it a `time`
hook that keeps the modules it is asked to time and answers None ("not timed"): the pass's choice is discarded and
its survivors, in order, are tune's candidates. An entry point of the pass that lists its variants (change,
function, ptxas numbers, verdict) without choosing would replace the hook.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import fields

from ptxtool.passes.registers import bounds
from ptxtool.services.tuning.space import Candidate, Context
from ptxtool.syntax import ast


def kinds(before: ast.Function, after: ast.Function) -> tuple[str, ...]:
    """What a variant changes, read from the kernels themselves (REGISTER_KINDS): each bounds field that differs,
    and `remat` when the body differs once the input's bounds are put back."""
    old, new = bounds.read(before), bounds.read(after)
    found = [f.name.replace("_", "-") for f in fields(bounds.Bounds) if getattr(old, f.name) != getattr(new, f.name)]
    found += ["remat"] * (bounds.apply(after, old).body != before.body)
    return tuple(found)


def candidates(context: Context) -> Iterator[Candidate]:
    """One candidate per variant the register pass keeps for the tuned kernel, with the input's minimal edits
    (`optimize`'s splice) and the spec's launch; the variants it drops, and why, in the notes."""
    wanted = context.space.registers
    if not wanted:
        return
    from ptxtool.passes import run_pipeline
    from ptxtool.passes.registers import NAME, RegisterSettings, RegistersReport
    from ptxtool.services.registers import measure, splice
    from ptxtool.syntax import format_module, parse

    spec, kernel = context.spec, context.kernel

    def numbers(module: ast.Module) -> dict:
        found = measure(
            module,
            arch=context.arch,
            path=context.source.display,
            launched=kernel,
            block=spec.block,
            dynamic_shared=spec.shared_bytes,
        )
        return {kernel: found[kernel]} if kernel in found else {}  # the pass then looks at the tuned kernel only

    asked: list[ast.Module] = []

    def keep(name: str, modules: Sequence[ast.Module]) -> None:
        asked.extend(modules[1:])  # modules[0] is the input

    settings = RegisterSettings(
        context.arch, kernel, spec.block, spec.shared_bytes, numbers, keep, remat="remat" in wanted
    )
    _, (report,) = run_pipeline(context.module, (NAME,), {NAME: settings})
    assert isinstance(report, RegistersReport)
    entry = next((k for k in report.kernels if k.name == kernel), None)
    if entry is None:
        context.notes.append("registers: ptxas gave no numbers for the kernel: no candidate")
        return
    survivors = [t for t in entry.tried if t.numbers is not None and not t.verdict.startswith("dropped")]
    for t in entry.tried:
        if all(t is not s for s in survivors):
            context.notes.append(f"registers:{t.change}: not timed: {t.verdict.removeprefix('dropped: ')}")
    if not survivors:
        context.notes.append(f"registers: {entry.note or 'no variant'}")
        return
    assert len(survivors) == len(asked), "the register pass timed other variants than it kept"
    original = next(f for f in context.module.kernels if f.name == kernel)
    for tried, module in zip(survivors, asked, strict=True):
        changed = kinds(original, next(f for f in module.kernels if f.name == kernel))
        name = f"registers:{tried.change}"
        outside = [k for k in changed if k not in wanted]
        if outside:
            context.notes.append(f"{name}: changes {', '.join(outside)}, which the space leaves out")
            continue
        try:
            text = splice(context.source.text, context.module, module)
        except RuntimeError as error:
            context.notes.append(f"{name}: no minimal edit: {error}")
            continue
        if format_module(parse(text)) != format_module(module):
            context.notes.append(f"{name}: the spliced text is not the pass's kernel (a splicing bug): left out")
            continue
        n = tried.numbers
        assert n is not None
        yield Candidate(
            name,
            "registers",
            text,
            context.input.launch,
            code_changed=True,
            settings=(("change", tried.change), ("kinds", changed), ("registers", n.registers)),
            judged=True,
        )
