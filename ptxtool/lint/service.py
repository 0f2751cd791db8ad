"""The `lint` service: read each file (PTX, or CUDA C++ compiled to PTX with nvcc), run the selected rules on it,
drop what the file's comments suppress, and say what could not be checked (notices) or read (errors)."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ptxtool.errors import Diagnostic, EnvironmentProblem, InputError, Location
from ptxtool.lint.context import Context
from ptxtool.lint.cuda import LineMap, cuda_lines, cuda_to_ptx, line_map
from ptxtool.lint.registry import Rule
from ptxtool.lint.settings import Settings, active_rules, options_for, severity_for
from ptxtool.lint.suppress import cuda_suppressions, suppressions
from ptxtool.sources import STDIN, Source, parse_source, read_source
from ptxtool.syntax import ast
from ptxtool.toolchain.discover import find_tool

CUDA_SUFFIXES = (".cu", ".cuh")
_UNSUPPORTED_TARGET = "is not defined for option 'gpu-name'"  # ptxas on a .target it does not know (sm_52)


@dataclass(frozen=True, slots=True)
class Finding:
    """One finding: where (line 0 when the PTX was generated from a .cu file), which rule, how bad, and why."""

    path: str
    line: int
    column: int
    rule: str
    name: str
    severity: str
    message: str

    def to_data(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass
class FileResult:
    """What linting one file gave: findings, notices (checks skipped and why), errors (the file is bad input)."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    errors: list[Diagnostic] = field(default_factory=list)
    checked: bool = True  # False when the file could not be checked at all (a .cu file without nvcc)


_NO_NVCC = "not checked: nvcc is not available to compile it to PTX (install nvidia-cuda-nvcc)"


def _cuda_source(path: str, settings: Settings) -> Source | str:
    """PTX from a .cu/.cuh file with nvcc, or why it was not checked (a notice) when nvcc is missing or cannot
    compile it here (no host compiler, no CUDA headers), unless nvcc is required."""
    if not Path(path).is_file():
        raise InputError.at(path, "no such file")
    try:
        find_tool("nvcc")
    except EnvironmentProblem:
        if settings.require_nvcc:
            raise
        return _NO_NVCC
    try:
        return Source(path, cuda_to_ptx(path, settings.arch))
    except EnvironmentProblem as problem:
        if settings.require_nvcc:
            raise
        return f"not checked: {problem}"


def _ptxas(source: Source, module: ast.Module, settings: Settings):
    """What ptxas made of the file (its warnings and resources), or the error that says why there is nothing."""
    from ptxtool.toolchain.compile import compile_ptx, target_arch

    try:
        arch = target_arch(module.targets, source.display, settings.arch)
        return compile_ptx(source.text, source.display, arch)
    except (EnvironmentProblem, InputError) as error:
        return error


def _ptxas_failed(error: EnvironmentProblem | InputError, module: ast.Module, settings: Settings, result: FileResult):
    """Why the ptxas rules did not run: a notice, or ptxas's errors where no finding explains them."""
    if isinstance(error, EnvironmentProblem):
        result.notices.append(f"ptxas rules skipped: {error}")
        return
    explained = {f.line for f in result.findings}
    if all(d.location.line in explained for d in error.diagnostics):
        result.notices.append("ptxas rejected the file for the problems found above; ptxas rules skipped")
    elif any(_UNSUPPORTED_TARGET in d.message for d in error.diagnostics):
        target = settings.arch or module.targets[0]
        result.notices.append(f"this ptxas cannot assemble for {target}; ptxas rules skipped")
    else:
        result.errors.extend(error.diagnostics)


def _run(r: Rule, ctx: Context, settings: Settings, path: str, cuda: tuple[LineMap, list[str]] | None) -> list[Finding]:
    ctx.options = options_for(settings, r)
    severity = severity_for(settings, r)
    out = []
    for hit in r.check(ctx):
        if cuda is None:
            out.append(Finding(path, hit.line, hit.column, r.id, r.name, severity, hit.message))
            continue
        lines, text = cuda[0].find(hit.line), cuda[1]  # generated PTX: point into the CUDA file, quote the PTX
        ptx = text[hit.line - 1].strip() if 0 < hit.line <= len(text) else ""
        told = cuda_lines(hit.message, cuda[0])
        message = f"{told} [generated PTX line {hit.line}: {ptx}]" if ptx else told
        out.append(Finding(path, *lines, r.id, r.name, severity, message))
    return out


def lint_file(path: str, settings: Settings) -> FileResult:
    """Lint one file with the selected rules; bad input ends up in `errors`, never raised."""
    result = FileResult(path)
    generated = path.endswith(CUDA_SUFFIXES)
    try:
        source = _cuda_source(path, settings) if generated else read_source(path)
        if isinstance(source, str):
            result.notices.append(source)
            result.checked = False
            return result
        result.path = source.display
        module = parse_source(source)
    except InputError as error:
        result.errors.extend(error.diagnostics or [Diagnostic(Location(path), str(error))])
        return result
    rules = active_rules(settings)
    ctx = Context(module)
    lines = (line_map(module, path), source.text.splitlines()) if generated else None
    asking = settings.ptxas and any(r.needs_ptxas or r.asks_ptxas for r in rules)
    compiled = _ptxas(source, module, settings) if asking else None
    if compiled is not None and not isinstance(compiled, Exception):
        ctx.ptxas_warnings, ctx.ptxas_functions = compiled.warnings, compiled.functions
    for r in rules:
        if r.needs_ptxas:
            continue
        result.findings.extend(_run(r, ctx, settings, result.path, lines))
    tool_rules = [r for r in rules if r.needs_ptxas]
    if tool_rules and isinstance(compiled, Exception):
        _ptxas_failed(compiled, module, settings, result)
    elif tool_rules and compiled is not None:
        for r in tool_rules:
            result.findings.extend(_run(r, ctx, settings, result.path, lines))
    silenced = cuda_suppressions(Path(path).read_text(errors="replace")) if generated else suppressions(module)
    kept = [f for f in result.findings if not silenced.silenced(f.rule, f.line)]
    result.findings = sorted(kept, key=lambda f: (f.line, f.column, f.rule))
    return result


def lint_files(paths: list[str], settings: Settings, jobs: int | None = None) -> list[FileResult]:
    """Lint files in parallel processes (one per core unless `jobs` says otherwise), results in input order.
    An environment problem the settings make fatal (nvcc required) is raised."""
    jobs = min(len(paths), jobs or os.cpu_count() or 1)
    if jobs <= 1 or STDIN in paths:  # stdin belongs to this process
        return [lint_file(p, settings) for p in paths]
    with ProcessPoolExecutor(jobs) as pool:
        return list(pool.map(lint_file, paths, [settings] * len(paths)))
