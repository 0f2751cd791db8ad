"""`ptxtool optimize`: parse -> passes -> print -> verify with ptxas and the SASS -> hand back the text to write.

Verification (nothing is written unless all of it holds): ptxas accepts the output; per kernel the multiset of SASS
mnemonics is unchanged (beyond what a pass's own new instructions add); every SASS memory instruction made from a
rewritten PTX line carries the modifiers the pass promised; and every other instruction keeps its full opcode.
SASS is tied to PTX lines by assembling both versions with `-lineinfo` (after dropping `.loc`, so that lines are
the printed PTX's own) and reading `nvdisasm -gp`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ptxtool.errors import EXIT_FOUND, EXIT_OK, InputError
from ptxtool.passes import DEFAULT_PIPELINE, PASSES, PassReport, run_pipeline
from ptxtool.passes.cache_operators import NAME as CACHE_OPERATORS
from ptxtool.passes.cache_operators import POLICIES, STORE_HINTS, Policy, Settings
from ptxtool.sources import Source, parse_source
from ptxtool.syntax import ast, format_module, parse
from ptxtool.toolchain.compile import Compiled, compile_ptx, target_arch
from ptxtool.toolchain.resources import FunctionResources
from ptxtool.toolchain.sass import GLOBAL_MEMORY, disassemble, listing, statistics

SCHEMA = "ptxtool.optimize/1"
_LINE_DIRECTIVES = frozenset((".loc", ".file"))


@dataclass
class KernelChange:
    """One kernel before -> after: ptxas's registers and spills, SASS global-memory variants with counts."""

    name: str
    before: FunctionResources | None
    after: FunctionResources | None
    memory_before: dict[str, int]
    memory_after: dict[str, int]

    def to_data(self) -> dict[str, Any]:
        def res(r: FunctionResources | None) -> dict[str, Any] | None:
            return None if r is None else {"registers": r.registers, "spill_bytes": r.spill_stores + r.spill_loads}

        return {
            "kernel": self.name,
            "before": res(self.before) | {"memory": self.memory_before} if self.before else None,
            "after": res(self.after) | {"memory": self.memory_after} if self.after else None,
        }


@dataclass
class OptimizeResult:
    """The optimized text, what each pass did, per-kernel before/after, and why verification failed (if it did)."""

    path: str
    arch: str
    text: str
    reports: list[PassReport]
    kernels: list[KernelChange] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    gpu: str | None = None

    @property
    def changed(self) -> bool:
        return any(r.changed for r in self.reports)

    @property
    def verified(self) -> bool:
        return not self.problems

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.verified else EXIT_FOUND

    @property
    def warnings(self) -> list[str]:
        return [w for r in self.reports for w in r.warnings]

    def to_data(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "file": self.path,
            "arch": self.arch,
            "changed": self.changed,
            "verified": self.verified,
            "problems": self.problems,
            "gpu": self.gpu,
            "passes": [r.to_data() for r in self.reports],
            "kernels": [k.to_data() for k in self.kernels],
        }


# ---------------------------------------------------------------- settings


def settings_from_config(table: dict[str, Any], where: str) -> tuple[tuple[str, ...], Settings]:
    """The pipeline and cache-operator settings from `[tool.ptxtool.optimize]`; InputError on unknown keys.
    `store-hint` is `store_hint`: keys are spelled like the flags and the other tables too."""
    table = {key.replace("-", "_"): value for key, value in table.items()}
    known = {"passes", "noalias", "store_hint", "include", "exclude", *POLICIES}
    unknown = sorted(set(table) - known)
    if unknown:
        raise InputError.at(where, f"[tool.ptxtool.optimize]: unknown key {unknown[0]!r} (known: {sorted(known)})")
    passes = tuple(_strings(table, "passes", where) or DEFAULT_PIPELINE)
    check_passes(passes, where)
    include, exclude = _strings(table, "include", where), _strings(table, "exclude", where)
    defaults = Settings()
    policies = {name: _policy(table.get(name), getattr(defaults, name), include, exclude, where) for name in POLICIES}
    hint = table.get("store_hint", defaults.store_hint)
    if hint not in STORE_HINTS:
        raise InputError.at(where, f"[tool.ptxtool.optimize]: store_hint must be one of {list(STORE_HINTS)}")
    return passes, Settings(**policies, noalias=tuple(_strings(table, "noalias", where)), store_hint=hint)


def _strings(table: dict[str, Any], key: str, where: str) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError.at(where, f"[tool.ptxtool.optimize]: {key} must be a list of strings")
    return value


def _policy(value: Any, default: Policy, include: list[str], exclude: list[str], where: str) -> Policy:
    """A policy from `true`/`false` or `{enabled = true, include = [...], exclude = [...]}`."""
    if value is None or isinstance(value, bool):
        enabled = default.enabled if value is None else value
        return Policy(enabled, tuple(include), tuple(exclude))
    if isinstance(value, dict) and set(value) <= {"enabled", "include", "exclude"}:
        return Policy(
            bool(value.get("enabled", True)),
            tuple(_strings(value, "include", where) or include),
            tuple(_strings(value, "exclude", where) + exclude),
        )
    raise InputError.at(where, "[tool.ptxtool.optimize]: a policy is true/false or {enabled, include, exclude}")


def check_passes(names: tuple[str, ...], where: str) -> None:
    for name in names:
        if name not in PASSES:
            raise InputError.at(where, f"unknown pass {name!r} (known: {', '.join(PASSES)})")


# ---------------------------------------------------------------- the service


def optimize(
    source: Source,
    passes: tuple[str, ...] = DEFAULT_PIPELINE,
    settings: Settings | None = None,
    arch: str | None = None,
) -> OptimizeResult:
    """Run the passes over one file and verify the result; `result.problems` says why it must not be written."""
    module = parse_source(source)
    arch = target_arch(module.targets, source.display, arch)
    check_passes(passes, source.display)
    optimized, reports = run_pipeline(module, passes, {CACHE_OPERATORS: settings or Settings()})
    changed = any(r.changed for r in reports)
    text = format_module(optimized) if changed else source.text
    result = OptimizeResult(source.display, arch, text, reports)
    before = compile_ptx(source.text, source.display, arch)  # the input must assemble: InputError (exit 2) if not
    try:
        after = compile_ptx(text, source.display, arch) if changed else before
    except InputError as error:
        result.problems.append(f"ptxas rejects the optimized PTX: {'; '.join(d.message for d in error.diagnostics)}")
        return result
    result.kernels = _kernel_changes(module, before, after)
    if changed:
        result.problems += _verify_sass(module, optimized, reports, arch, source.display)
    return result


def _kernel_changes(module: ast.Module, before: Compiled, after: Compiled) -> list[KernelChange]:
    sass_before, sass_after = disassemble(before.cubin), disassemble(after.cubin)
    return [
        KernelChange(
            k.name,
            before.functions.get(k.name),
            after.functions.get(k.name),
            statistics(sass_before.get(k.name, [])).global_memory,
            statistics(sass_after.get(k.name, [])).global_memory,
        )
        for k in module.kernels
    ]


def _without_line_info(module: ast.Module) -> ast.Module:
    """The module without `.loc`/`.file`, so that `-lineinfo` ties SASS to the printed PTX's own lines."""

    def strip(block: ast.Block) -> ast.Block:
        kept = tuple(
            strip(s) if isinstance(s, ast.Block) else s
            for s in block.statements
            if not (isinstance(s, ast.Directive) and s.word in _LINE_DIRECTIVES)
        )
        return replace(block, statements=kept)

    items = tuple(
        replace(i, body=strip(i.body)) if isinstance(i, ast.Function) and i.body else i
        for i in module.items
        if not (isinstance(i, ast.Directive) and i.word in _LINE_DIRECTIVES)
    )
    return replace(module, items=items)


def _sass_by_input_line(module: ast.Module, arch: str, path: str) -> dict[str, list[tuple[str, int]]]:
    """Per kernel, each SASS instruction's full opcode and the input line of the PTX instruction it came from (0
    for instructions a pass inserted)."""
    text = format_module(_without_line_info(module))
    printed = parse(text)
    line_of: dict[int, int] = {}
    for mine, theirs in zip(module.functions, printed.functions, strict=True):
        if mine.body is not None and theirs.body is not None:
            for a, b in zip(ast.instructions(mine.body), ast.instructions(theirs.body), strict=True):
                line_of[b.line] = a.line
    cubin = compile_ptx(text, path, arch, lineinfo=True).cubin
    out = {}
    for kernel, lines in listing(cubin, with_ptx_lines=True).items():
        out[kernel] = [
            (_opcode(entry.text), line_of.get(entry.ptx_line, -1)) for entry in lines if not entry.text.endswith(":")
        ]
    return out


def _opcode(text: str) -> str:
    words = text.split()
    return words[1] if words[0].startswith("@") and len(words) > 1 else words[0]


def _verify_sass(
    module: ast.Module, optimized: ast.Module, reports: list[PassReport], arch: str, path: str
) -> list[str]:
    """What in the SASS breaks the passes' promises or changed without being promised. NOPs are alignment padding;
    where a pass inserted instructions, what they assemble to is new, and the mnemonics the pass names may change."""
    before = _sass_by_input_line(module, arch, path)
    after = _sass_by_input_line(optimized, arch, path)
    problems = []
    rewrites = [r for report in reports for r in report.rewrites]
    for kernel in sorted(set(before) | set(after)):
        inserted = [report for report in reports if kernel in report.inserted]
        free = {"NOP"} | {m for report in inserted for m in report.sass_may_change}
        old, new = (
            [(op, line) for op, line in side.get(kernel, []) if op.split(".")[0] not in free]
            for side in (before, after)
        )
        if inserted:  # what the pass's own instructions (input line 0) assemble to is new by design
            new = [(op, line) for op, line in new if line != 0]
        lines = {r.line for r in rewrites if r.kernel == kernel}
        mnemonics = Counter(op.split(".")[0] for op, _ in old), Counter(op.split(".")[0] for op, _ in new)
        if mnemonics[0] != mnemonics[1]:
            gone, came = dict(mnemonics[0] - mnemonics[1]), dict(mnemonics[1] - mnemonics[0])
            problems.append(f"{kernel}: the SASS mnemonics changed: {gone} became {came}")
        kept = [Counter(op for op, line in side if line not in lines) for side in (old, new)]
        if kept[0] != kept[1]:
            gone, came = dict(kept[0] - kept[1]), dict(kept[1] - kept[0])
            problems.append(f"{kernel}: SASS not promised changed: {gone} became {came}")
        for r in (r for r in rewrites if r.kernel == kernel):
            made = [op for op, line in new if line == r.line and op.split(".")[0] in GLOBAL_MEMORY]
            was = [op for op, line in old if line == r.line and op.split(".")[0] in GLOBAL_MEMORY]
            missing = [op for op in made if not set(r.sass) <= set(op.split(".")[1:])]
            if not made or len(made) != len(was) or missing:
                problems.append(
                    f"{kernel}: line {r.line} `{r.after}` promised SASS .{'.'.join(r.sass)} but ptxas made "
                    f"{made or 'no memory instruction'} (was {was})"
                )
    return problems


def verify_on_gpu(result: OptimizeResult, original: str, spec_path: str) -> None:
    """Run the original and the optimized file on the GPU with the spec; a difference becomes a problem."""
    import tempfile

    from ptxtool.report.gpu import run_lines
    from ptxtool.services.launch import load_spec
    from ptxtool.services.run import run
    from ptxtool.sources import read_source

    spec = load_spec(spec_path)
    with tempfile.TemporaryDirectory(prefix="ptxtool-") as tmp:
        optimized = str(Path(tmp) / Path(original).name)
        Path(optimized).write_text(result.text)
        report = run([read_source(original), read_source(optimized)], spec)
    result.gpu = report.verdict
    if report.exit_code != EXIT_OK:
        result.problems += [f"on the GPU ({spec_path}): {line.strip()}" for line in run_lines(report)[1:4]]
