"""tune's `registers` generator: the register pass's variants of the tuned kernel (launch bounds and caps from
passes/registers/bounds.py, values rematerialized by remat.py) as candidates, after the pass's own ptxas rules have
dropped those that add spills inside loops or lower occupancy for nothing (those become notes and are never timed).
The pass's `variants` lists them without choosing; tune's timing chooses.
"""

from __future__ import annotations

from collections.abc import Iterator
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
    from ptxtool.passes import Analyses
    from ptxtool.passes.registers import RegisterSettings, variants
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

    settings = RegisterSettings(context.arch, kernel, spec.block, spec.shared_bytes, numbers, remat="remat" in wanted)
    found = variants(context.module, settings, Analyses())
    if not found:
        context.notes.append("registers: ptxas gave no numbers for the kernel: no candidate")
        return
    ((entry, survivors),) = found
    for t in entry.tried:
        if t.numbers is None or t.verdict.startswith("dropped"):
            context.notes.append(f"registers:{t.change}: not timed: {t.verdict.removeprefix('dropped: ')}")
    if not survivors:
        context.notes.append(f"registers: {entry.note or 'no variant'}")
        return
    original = next(f for f in context.module.kernels if f.name == kernel)
    for survivor in survivors:
        module = survivor.module
        changed = kinds(original, next(f for f in module.kernels if f.name == kernel))
        name = f"registers:{survivor.change}"
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
        yield Candidate(
            name,
            "registers",
            text,
            context.input.launch,
            code_changed=True,
            settings=(("change", survivor.change), ("kinds", changed), ("registers", survivor.numbers.registers)),
            judged=True,
        )
