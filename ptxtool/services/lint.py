"""The `lint` service: read each file (PTX, or CUDA C++ compiled to PTX with nvcc), run the selected rules on it,
drop what the file's comments suppress, and say what could not be checked (notices) or read (errors)."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from ptxtool.errors import (
    EXIT_ENVIRONMENT,
    EXIT_FOUND,
    EXIT_INPUT,
    EXIT_OK,
    Diagnostic,
    EnvironmentProblem,
    InputError,
    Location,
    UsageError,
)
from ptxtool.lint.context import Context
from ptxtool.lint.cuda import LineMap, annotated_ptx, cuda_lines, line_map
from ptxtool.lint.registry import Rule, all_rules
from ptxtool.lint.settings import LintSettings, active_rules, fails, options_for, severity_for
from ptxtool.lint.suppress import cuda_suppressions, suppressions
from ptxtool.sources import Source, Unreadable, parse_source
from ptxtool.syntax import ast
from ptxtool.toolchain.discover import find_tool

if TYPE_CHECKING:
    from ptxtool.toolchain.compile import Compiled

SCHEMA = "ptxtool.lint/1"
_UNSUPPORTED_TARGET = "is not defined for option 'gpu-name'"  # ptxas on a .target it does not know (sm_52)


def finding(r: Rule, severity: str, location: Location, message: str) -> Diagnostic:
    """A rule's finding as the one diagnostic type (code: the rule id; the JSON keeps `rule` and `name`). In a .cu
    file a finding whose PTX line no `.loc` maps is at line 0, the whole file."""
    return Diagnostic(location, message, severity, code=r.id, properties={"rule": r.id, "name": r.name})


@dataclass
class FileResult:
    """What linting one file gave: findings, notices (checks skipped and why), errors (the file is bad input)."""

    path: str
    findings: list[Diagnostic] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    errors: list[Diagnostic] = field(default_factory=list)
    checked: bool = True  # False when the file could not be checked at all (a .cu file without nvcc)


_NO_NVCC = "not checked: nvcc is not available to compile it to PTX (install nvidia-cuda-nvcc)"


def _cuda_source(path: str, settings: LintSettings) -> Source | str:
    """PTX from a .cu/.cuh file with nvcc, or why it was not checked (a notice) when nvcc is missing or cannot
    compile it here (no host compiler, no CUDA headers), unless nvcc is required."""
    try:
        find_tool("nvcc")
    except EnvironmentProblem:
        if settings.require_nvcc:
            raise
        return _NO_NVCC
    try:
        return Source(path, annotated_ptx(path, settings.arch))
    except EnvironmentProblem as problem:
        if settings.require_nvcc:
            raise
        return f"not checked: {problem}"


def _ptxas(source: Source, module: ast.Module, settings: LintSettings) -> Compiled | EnvironmentProblem | InputError:
    """What ptxas made of the file (its warnings and resources), or the error that says why there is nothing."""
    from ptxtool.toolchain.compile import compile_ptx, target_arch

    try:
        arch = target_arch(module.targets, source.display, settings.arch)
        return compile_ptx(source.text, source.display, arch)
    except (EnvironmentProblem, InputError) as error:
        return error


def _ptxas_failed(
    error: EnvironmentProblem | InputError, module: ast.Module, settings: LintSettings, result: FileResult
):
    """Why the ptxas rules did not run: a notice, or ptxas's errors where no finding explains them."""
    if isinstance(error, EnvironmentProblem):
        result.notices.append(f"ptxas rules skipped: {error}")
        return
    explained = {f.location.line for f in result.findings}
    if all(d.location.line in explained for d in error.diagnostics):
        result.notices.append("ptxas rejected the file for the problems found above; ptxas rules skipped")
    elif any(_UNSUPPORTED_TARGET in d.message for d in error.diagnostics):
        target = settings.arch or module.targets[0]
        result.notices.append(f"this ptxas cannot assemble for {target}; ptxas rules skipped")
    else:
        result.errors.extend(error.diagnostics)


def _run(
    r: Rule, ctx: Context, settings: LintSettings, path: str, cuda: tuple[LineMap, list[str]] | None
) -> list[Diagnostic]:
    ctx.options = options_for(settings, r)
    severity = severity_for(settings, r)
    out = []
    for hit in r.check(ctx):
        if cuda is None:
            out.append(finding(r, severity, Location(path, hit.line, hit.column), hit.message))
            continue
        lines, text = cuda[0].find(hit.line), cuda[1]  # generated PTX: point into the CUDA file, quote the PTX
        ptx = text[hit.line - 1].strip() if 0 < hit.line <= len(text) else ""
        told = cuda_lines(hit.message, cuda[0])
        message = f"{told} [generated PTX line {hit.line}: {ptx}]" if ptx else told
        out.append(finding(r, severity, Location(path, *lines), message))
    return out


def lint_file(given: Source | Unreadable, settings: LintSettings) -> FileResult:
    """Lint one source with the selected rules; bad input ends up in `errors`, never raised."""
    result = FileResult(given.display)
    if isinstance(given, Unreadable):
        result.errors.extend(given.diagnostics)
        return result
    try:
        source = _cuda_source(given.path, settings) if given.is_cuda else given
        if isinstance(source, str):
            result.notices.append(source)
            result.checked = False
            return result
        module = parse_source(source)
    except InputError as error:
        result.errors.extend(error.diagnostics or [Diagnostic(Location(given.path), str(error))])
        return result
    return lint_module(given, source, module, settings)


def lint_module(
    given: Source,
    source: Source,
    module: ast.Module,
    settings: LintSettings,
    ctx: Context | None = None,
    ptxas: Callable[[], Compiled | EnvironmentProblem | InputError] | None = None,
) -> FileResult:
    """Lint `module`, parsed from `source` (the PTX of `given`: the same source, or nvcc's PTX of a .cu file).
    A caller that has the analyses (`ctx`) or a build of `source` (`ptxas`: it, or the error that says why there
    is none; called only when a rule wants ptxas) shares them: the findings are those `lint_file` gives."""
    from ptxtool.toolchain.compile import Compiled

    result = FileResult(given.display)
    path, generated = given.path, given.is_cuda
    rules = active_rules(settings)
    ctx = ctx or Context(module)
    lines = (line_map(module, path), source.text.splitlines()) if generated else None
    asking = settings.ptxas and any(r.needs_ptxas or r.asks_ptxas for r in rules)
    compiled = (ptxas or partial(_ptxas, source, module, settings))() if asking else None
    if isinstance(compiled, Compiled):
        ctx.ptxas_warnings, ctx.ptxas_functions = compiled.warnings, compiled.functions
    for r in rules:
        if r.needs_ptxas:
            continue
        result.findings.extend(_run(r, ctx, settings, result.path, lines))
    tool_rules = [r for r in rules if r.needs_ptxas]
    if tool_rules and isinstance(compiled, EnvironmentProblem | InputError):
        _ptxas_failed(compiled, module, settings, result)
    elif tool_rules and compiled is not None:
        for r in tool_rules:
            result.findings.extend(_run(r, ctx, settings, result.path, lines))
    silenced = cuda_suppressions(given.text) if generated else suppressions(module, source.text)
    kept = [f for f in result.findings if not silenced.silenced(f.code, f.location.line)]
    result.findings = sorted(kept, key=lambda f: (f.location.line, f.location.column, f.code))
    return result


def lint_files(sources: list[Source | Unreadable], settings: LintSettings, jobs: int | None = None) -> list[FileResult]:
    """Lint sources in parallel processes (one per core unless `jobs` says otherwise), results in input order.
    An environment problem the settings make fatal (nvcc required) is raised."""
    jobs = min(len(sources), jobs or os.cpu_count() or 1)
    if jobs <= 1:
        return [lint_file(s, settings) for s in sources]
    with ProcessPoolExecutor(jobs) as pool:
        return list(pool.map(lint_file, sources, [settings] * len(sources)))


# ---------------------------------------------------------------- the command


@dataclass(frozen=True, slots=True)
class Options:
    settings: LintSettings
    jobs: int | None = None
    statistics: bool = False  # the text report counts findings per rule instead of listing them


@dataclass(frozen=True)
class RuleInfo:
    """What reports say about a rule: its id, name, default severity, summary and documentation."""

    id: str
    name: str
    severity: str
    summary: str
    doc: str

    def to_data(self) -> dict:
        return {"name": self.name, "severity": self.severity, "summary": self.summary}


def rule_table() -> list[RuleInfo]:
    return [RuleInfo(r.id, r.name, r.severity, r.summary, r.doc) for r in all_rules().values()]


@dataclass(frozen=True)
class LintResult:
    """Per file: findings, notices, errors; `fail_on` decides which findings make the exit code 1."""

    files: list[FileResult]
    rules: list[RuleInfo]
    fail_on: str = "note"
    statistics: bool = False

    @property
    def findings(self) -> list[Diagnostic]:
        return [f for r in self.files for f in r.findings]

    @property
    def exit_code(self) -> int:
        if any(not r.checked for r in self.files):  # never 0 for a file nobody checked: the notice says why
            return EXIT_ENVIRONMENT
        if any(r.errors for r in self.files):
            return EXIT_INPUT
        return EXIT_FOUND if any(fails(self.fail_on, f.severity) for f in self.findings) else EXIT_OK

    def diagnostics(self) -> list[Diagnostic]:
        """File by file, why it could not be read, parsed or assembled, and its findings (SARIF, annotations)."""
        return [d for r in self.files for d in (*r.errors, *r.findings)]

    def to_data(self) -> dict:
        from ptxtool import __version__

        return {
            "schema": SCHEMA,
            "ptxtool": __version__,
            "findings": [f.to_data() for f in self.findings],
            "notices": [{"path": r.path, "message": n} for r in self.files for n in r.notices],
            "errors": [d.to_data() for r in self.files for d in r.errors],
            "rules": {r.id: r.to_data() for r in self.rules},
        }


def execute(options: Options, sources: list[Source | Unreadable]) -> LintResult:
    results = lint_files(sources, options.settings, options.jobs)
    return LintResult(results, rule_table(), options.settings.fail_on, options.statistics)


@dataclass(frozen=True)
class RulesResult:
    """`--list-rules` and `--explain`: the rules to describe (one, in full, when `explain`)."""

    rules: list[RuleInfo]
    explain: bool = False
    options: dict = field(default_factory=dict)

    exit_code = EXIT_OK

    def to_data(self) -> dict:
        return {r.id: r.to_data() | {"doc": r.doc} for r in self.rules}


def describe(explain: str | None) -> RulesResult:
    """Every rule, or the one `explain` names (by id or name)."""
    rules = all_rules()
    if not explain:
        return RulesResult(rule_table())
    chosen = rules.get(explain.upper()) or next((r for r in rules.values() if r.name == explain), None)
    if chosen is None:
        raise UsageError(f"no rule {explain!r}; `ptxtool lint --list-rules` lists them")
    info = RuleInfo(chosen.id, chosen.name, chosen.severity, chosen.summary, chosen.doc)
    return RulesResult([info], True, dict(chosen.options))
