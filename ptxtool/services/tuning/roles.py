"""tune's `warp-roles` generator: the warp-role split of the tuned kernel for every variant, producer-warp count and
stage count the space names, through `optimize`'s verification (ptxas accepts it, the SASS shows the ring's
mbarrier waits and arrivals, or the pipeline's LDGSTS and its group waits). A setting the pass refuses is no
candidate: its reason goes in the notes. The pipeline variant keeps the block: its candidate launches as the spec.

The split grows the block by its producer warps, added after the consumers so each consumer keeps its %tid. The
candidate's launch is the spec's with the block the split kernel declares: the pass states it as the kernel's
`.reqntid` (its report's "N threads (.reqntid)"), and that directive is read here, never recomputed. Since the
consumers are the input's threads, the candidate counts as a change of code: outputs must be bit-identical.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from ptxtool.errors import InputError
from ptxtool.services.tuning.space import DEFAULT_PRODUCERS, Candidate, Context, Dims, Launch, dims_text
from ptxtool.syntax import ast


def _dims(values: tuple[int, ...]) -> Dims:
    return (*values, *(1,) * (3 - len(values)))  # type: ignore[return-value]


def launch_block(before: ast.Function, after: ast.Function, spec_block: Dims) -> Dims | str:
    """The block to launch the split kernel with (its `.reqntid`), or why the spec's launch cannot be carried over:
    the pass split the kernel for the block it declares, so that must be the spec's, and the split must only add
    threads in x after them."""
    from ptxtool.analysis.launch_bounds import block_bounds

    declared, grown = block_bounds(before), block_bounds(after)
    if grown is None or not grown.exact:
        return "the split kernel declares no exact block (.reqntid): its launch is unknown"
    consumers = _dims(declared.dims) if declared else None
    if consumers != spec_block:
        shown = "no block" if consumers is None else f"block {dims_text(consumers)}"
        return f"the pass splits for the kernel's declared {shown}; the spec launches {dims_text(spec_block)}"
    block = _dims(grown.dims)
    if block[1:] != spec_block[1:] or block[0] <= spec_block[0]:
        return f"the split's block {dims_text(block)} does not add threads after the spec's {dims_text(spec_block)}"
    return block


def split_kernel(context: Context, roles: Any, registers: dict[str, int]) -> ast.Function | str:
    """The tuned kernel as the pass splits it with these settings, verified as `optimize` verifies the split
    (ptxas, the SASS's mbarrier waits and arrivals), or why there is none. The pass runs on the parsed module first,
    so a refusal costs no ptxas run."""
    from ptxtool.passes import run_pipeline
    from ptxtool.passes.warp_roles import NAME
    from ptxtool.services.optimize import Options, execute
    from ptxtool.syntax import parse

    kernel = context.kernel
    _, (first,) = run_pipeline(context.module, (NAME,), {NAME: replace(roles, registers=registers)})
    why = next((s.reason for s in first.skipped if s.kernel == kernel), None)
    if why is not None:
        return why
    try:
        result = execute(Options(passes=(NAME,), roles=roles), context.source)
    except InputError as error:
        return str(error)
    report = result.reports[0]
    why = next((s.reason for s in report.skipped if s.kernel == kernel), None)
    if why is not None or result.problems:
        return why or "; ".join(result.problems)
    if not any(r.kernel == kernel for r in report.rewrites):
        return "the pass left the kernel as it was"
    module = parse(result.text)
    return next(f for f in module.kernels if f.name == kernel)


def candidates(context: Context) -> Iterator[Candidate]:
    """One candidate per distinct split the pass makes of the tuned kernel (the input with that kernel replaced),
    at the block it declares; refusals grouped by reason in the notes."""
    from ptxtool.passes.warp_roles import RoleSettings
    from ptxtool.services.optimize import role_registers
    from ptxtool.syntax import format_module
    from ptxtool.toolchain.compile import compile_ptx

    kernel, spec = context.kernel, context.spec
    original = next(f for f in context.module.kernels if f.name == kernel)
    settings = context.space.warp_roles.settings()
    if not settings:
        return
    registers = role_registers(compile_ptx(context.source.text, context.source.display, context.arch))
    refused: dict[str, list[tuple[str, str, str]]] = {}
    seen: dict[str, str] = {}
    for variant, producers, stages in settings:
        shown = (variant, str(DEFAULT_PRODUCERS if producers is None else producers), str(stages))
        label = _label([shown])
        split = split_kernel(context, RoleSettings(variant=variant, producer_warps=producers, stages=stages), registers)
        if isinstance(split, str):
            block: Dims | str = split
        elif variant == "pipeline":  # the block and every thread's %tid stay: the spec's launch
            block = spec.block
        else:
            block = launch_block(original, split, spec.block)
        if isinstance(block, str) or isinstance(split, str):
            refused.setdefault(str(block), []).append(shown)
            continue
        items = tuple(split if item is original else item for item in context.module.items)
        text = format_module(replace(context.module, items=items))
        if text in seen:
            context.notes.append(f"warp-roles {label} gives the same code as {seen[text]}")
            continue
        seen[text] = label
        yield Candidate(
            f"warp-roles:{label} block={dims_text(block)}",
            "warp-roles",
            text,
            Launch(spec.grid, block),
            code_changed=True,
            settings=(
                ("variant", variant),
                ("producer_warps", DEFAULT_PRODUCERS if producers is None else producers),
                ("stages", stages),
                ("block", list(block)),
            ),
            judged=True,
        )
    for why, shown in refused.items():
        context.notes.append(f"warp-roles {_label(shown)}: no candidate: {why}")


def _label(settings: list[tuple[str, str, str]]) -> str:
    """Settings as few words: `split P=default/1 S=2/3/4` where they are every combination of their values, else
    each one, comma-separated."""
    columns = [list(dict.fromkeys(column)) for column in zip(*settings, strict=True)]
    if len(settings) == len(columns[0]) * len(columns[1]) * len(columns[2]):
        variants, producers, stages = ("/".join(c) for c in columns)
        return f"{variants} P={producers} S={stages}"
    return ", ".join(f"{v} P={p} S={s}" for v, p, s in settings)
