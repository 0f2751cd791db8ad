"""`ptxtool report`: one self-contained HTML page per run: for each kernel what `inspect` says (resources,
occupancy), its PTX with each line's SASS under it, the pressure curve beside ptxas's live registers, the CFG and
the lint findings on their lines; with `optimized`, the two PTX files side by side and the SASS changes per kernel
(and optimize's verification record when the optimized file is what `optimize` makes of the input); with `tune`,
the candidate table of a tuning result."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ptxtool.errors import EXIT_OK, EnvironmentProblem, InputError, UsageError
from ptxtool.lint.settings import LintSettings
from ptxtool.sources import Source, Unreadable, read_source, write_atomic
from ptxtool.syntax import ast

if TYPE_CHECKING:
    from ptxtool.lint.context import Context
    from ptxtool.toolchain.compile import Compiled
    from ptxtool.toolchain.sass import ListingLine


@dataclass(frozen=True, slots=True)
class Options:
    output: str | None = None  # None: the page on stdout
    optimized: str | None = None
    tune: str | None = None
    arch: str | None = None
    block_size: int | None = None
    lint: LintSettings = field(default_factory=LintSettings)  # [tool.ptxtool.lint] and the rules it selects

    def checked(self, files: tuple[str, ...]) -> Options:
        """These options for these inputs, or the usage error they make (before anything is read)."""
        if self.optimized and len(files) != 1:
            raise UsageError("--optimized compares with one FILE: give exactly one")
        if self.output and not self.output.endswith((".html", ".htm")) and self.output != "/dev/null":
            raise UsageError(f"-o {self.output}: report writes one HTML file (.html)")
        return self


@dataclass(frozen=True)
class Span:
    """A run of PTX lines [start, end] (1-based): a function (`function` set, `kernel` when it is an .entry) or
    lines of the module between functions."""

    start: int
    end: int
    function: str | None = None
    kernel: bool = False


@dataclass(frozen=True)
class KernelView:
    """What the page shows of one kernel: inspect's report (resources, occupancy, pressure) as dicts of
    `inspect --json`'s document, and the pictures."""

    name: str
    data: dict  # the kernel's entry in inspect --json
    cfg_svg: str
    pressure_svg: str | None


@dataclass(frozen=True)
class FileView:
    """One input: its lines cut into spans, the SASS per PTX line (function, instruction), lint findings per line,
    the source line (`.loc`) at each PTX line where it changes, and notes about what could not be shown."""

    path: str
    arch: str
    lines: list[str]
    spans: list[Span]
    kernels: dict[str, KernelView]
    sass: dict[int, list[tuple[str, str]]]
    unplaced: dict[str, list[str]]  # SASS without a PTX line, per function
    findings: dict[int, list[dict]]
    source_at: dict[int, tuple[str, str]]  # PTX line -> ("file:line", source text or "")
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class KernelChange:
    """One kernel's SASS before and after, and ptxas's resources on each side."""

    name: str
    before: list[str]
    after: list[str]
    resources: tuple[dict | None, dict | None]


@dataclass(frozen=True)
class Comparison:
    """The input against an optimized file: both texts, the SASS per kernel, and optimize's record (or why none)."""

    before_path: str
    after_path: str
    before: list[str]
    after: list[str]
    kernels: list[KernelChange]
    record: dict | None
    record_note: str


@dataclass(frozen=True)
class ReportResult:
    files: list[FileView]
    comparison: Comparison | None
    tune: dict | None
    html: str
    written: str | None

    exit_code = EXIT_OK

    def to_data(self) -> dict:
        return {
            "written": self.written,
            "files": [{"path": f.path, "kernels": [k.data for k in f.kernels.values()]} for f in self.files],
        }


# ---------------------------------------------------------------- one file


def ptx_lines(text: str) -> list[str]:
    """The lines as the parser numbers them: split at newlines only (a form feed or U+2028 in a comment does not
    start a line), without a carriage return at the end."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return lines[:-1] if lines and not lines[-1] else lines


def _spans(module: ast.Module, count: int) -> list[Span]:
    """The file's lines cut at function boundaries (a function from its header line to its closing brace)."""
    spans, at = [], 1
    for f in module.functions:
        end = f.body.end_line if f.body is not None else f.line
        if f.line > at:
            spans.append(Span(at, f.line - 1))
        spans.append(Span(f.line, end, f.name, f.is_kernel))
        at = end + 1
    if at <= count:
        spans.append(Span(at, count))
    return spans


def _source_lines(module: ast.Module, text: str, lines: list[int], beside: Path) -> dict[int, tuple[str, str]]:
    """At each PTX line whose `.loc` source line differs from the line before: `file:line` and that line's text
    (empty when the file cannot be read here)."""
    from ptxtool.syntax.lineinfo import LineInfo

    files = any(isinstance(d, ast.Directive) and d.word == ".file" for d in module.items)
    if not files or ".loc" not in text:  # no file or no mark: no line to show, without walking every statement
        return {}
    info = LineInfo.of(module)
    if not info.files:
        return {}
    texts: dict[str, list[str] | None] = {}
    out, last = {}, None
    for n in lines:
        at = info.find(n)
        if at is None or at == last:
            last = at
            continue
        last = at
        if at.file not in texts:
            texts[at.file] = next(
                (p.read_text(errors="replace").splitlines() for p in (Path(at.file), beside / at.file) if p.is_file()),
                None,
            )
        text = texts[at.file]
        out[n] = (f"{at.file}:{at.line}", text[at.line - 1].strip() if text and 0 < at.line <= len(text) else "")
    return out


def _sass_by_line(functions: dict[str, list[ListingLine]]) -> tuple[dict[int, list[tuple[str, str]]], dict]:
    by_line: dict[int, list[tuple[str, str]]] = {}
    unplaced: dict[str, list[str]] = {}
    for name, entries in functions.items():
        for e in entries:
            if e.address is None:
                continue
            if e.ptx_line:
                by_line.setdefault(e.ptx_line, []).append((name, e.text))
            else:
                unplaced.setdefault(name, []).append(e.text)
    return by_line, unplaced


def _findings(
    source: Source, module: ast.Module, ctx: Context, options: Options, ptxas: Callable[[], Compiled]
) -> tuple[dict[int, list[dict]], list[str]]:
    from ptxtool.services.lint import lint_module

    linted = lint_module(source, source, module, options.lint, ctx, ptxas)
    out: dict[int, list[dict]] = {}
    notes = [f"lint: {n}" for n in linted.notices]
    for d in linted.findings:
        line = d.location.line
        if line:
            found = {"line": line, "rule": d.code, "severity": d.severity, "message": d.message}
            out.setdefault(line, []).append(found)
        else:  # about the whole file: no line to sit on
            notes.append(f"lint: {d.code} {d.severity}: {d.message}")
    return out, notes


def _written_target(text: str) -> str | None:
    """The first target of the first `.target` line, read without parsing: a guess to start ptxas with while the
    file is parsed (the parsed module decides; a wrong guess only costs a second ptxas run)."""
    found = _TARGET_LINE.search(text)
    return found.group(1) if found else None


_TARGET_LINE = re.compile(r"^[ \t]*\.target[ \t]+(sm_\w+)", re.M)


def view_file(source: Source, options: Options, index: int = 0) -> FileView:
    """Everything the page shows of one PTX file, the `index`-th on the page (InputError when it does not parse or
    ptxas rejects it). The file is parsed once and each function's CFG built once for lint, inspect's pressure
    curves and the pictures; ptxas (one `-lineinfo` build for all) starts before the parse and nvdisasm runs after
    it, both in threads, while Python parses and analyses."""
    from ptxtool.lint.context import Context
    from ptxtool.report.html import line_anchor
    from ptxtool.report.json_report import inspect_document
    from ptxtool.report.pictures import cfg_svg, pressure_svg
    from ptxtool.services.inspect import Options as InspectOptions
    from ptxtool.services.inspect import disassembled, inspect_module
    from ptxtool.sources import parse_source
    from ptxtool.toolchain.compile import compile_ptx, target_arch

    wanted = InspectOptions(options.arch, options.block_size, pressure=True)

    def compile_for(arch: str) -> Compiled:
        return compile_ptx(source.text, source.display, arch, lineinfo=True)

    with ThreadPoolExecutor(2) as tools:
        guess = options.arch or _written_target(source.text)
        compiling = tools.submit(compile_for, guess) if guess else None
        module = parse_source(source)
        arch = target_arch(module.targets, source.display, options.arch)
        if arch != guess:
            compiling = tools.submit(compile_for, arch)
        building = tools.submit(lambda: disassembled(compiling.result(), wanted))
        ctx = Context(module)
        for f in ctx.bodies():
            ctx.cfg(f)
        findings, notes = _findings(source, module, ctx, options, compiling.result)
        lines = ptx_lines(source.text)  # what needs no tool first, while nvdisasm runs
        drawn = [
            cfg_svg(ctx.cfg(f), ctx.loops(f), lambda line: "#" + line_anchor(index, line), ids=f"f{index}-k{n}-")
            for n, f in enumerate(module.kernels)
        ]
        source_at = _source_lines(module, source.text, list(range(1, len(lines) + 1)), Path(source.path).parent)
        report = inspect_module(source, module, wanted, built=building.result(), cfg=ctx.cfg)
        sass, unplaced = _sass_by_line(building.result().listing or {})
    documented = inspect_document([report], [], {})["files"][0]["kernels"]  # the numbers of `inspect --json`
    kernels = {}
    for k, data, picture in zip(report.kernels, documented, drawn, strict=True):
        curve = pressure_svg(k.pressure.curve, k.pressure.real, "ptxas live (SASS)") if k.pressure else None
        kernels[k.name] = KernelView(k.name, data, picture, curve)
    notes += [f"ptxas: {w.message}" for w in report.warnings]
    return FileView(
        source.display, arch, lines, _spans(module, len(lines)), kernels, sass, unplaced, findings, source_at, notes
    )


# ---------------------------------------------------------------- --optimized, --tune


def _compare(source: Source, optimized: Source, options: Options) -> Comparison:
    """The two files' lines, each kernel's SASS on both sides, and optimize's record when it reproduces the file."""
    from ptxtool.services.optimize import Options as OptimizeOptions
    from ptxtool.services.optimize import execute as optimize
    from ptxtool.sources import parse_source
    from ptxtool.toolchain.compile import compile_ptx, target_arch
    from ptxtool.toolchain.sass import listing

    sides = []
    for s in (source, optimized):
        module = parse_source(s)
        arch = target_arch(module.targets, s.display, options.arch)
        compiled = compile_ptx(s.text, s.display, arch)
        sides.append((module, compiled, listing(compiled.cubin, with_ptx_lines=False)))
    names = [k.name for k in sides[0][0].kernels] + [
        k.name for k in sides[1][0].kernels if k.name not in {k.name for k in sides[0][0].kernels}
    ]

    def resources(compiled, name: str) -> dict | None:
        r = compiled.functions.get(name)
        return None if r is None else {"registers": r.registers, "spill_bytes": r.spill_bytes, "stack": r.stack_frame}

    kernels = [
        KernelChange(
            name,
            [e.text for e in sides[0][2].get(name, []) if e.address is not None],
            [e.text for e in sides[1][2].get(name, []) if e.address is not None],
            (resources(sides[0][1], name), resources(sides[1][1], name)),
        )
        for name in names
    ]
    record, note = None, ""
    try:
        made = optimize(OptimizeOptions(arch=options.arch), source)
    except (InputError, EnvironmentProblem) as error:
        note = f"no verification record: optimize could not run on {source.display} ({error})"
    else:
        if made.text == optimized.text:
            record = made.to_data()
        else:
            note = (
                f"no verification record: {optimized.display} is not what `ptxtool optimize` (default settings) "
                f"makes of {source.display}, so its checks say nothing about this file"
            )
    lines = (ptx_lines(source.text), ptx_lines(optimized.text))
    return Comparison(source.display, optimized.display, *lines, kernels, record, note)


def read_tune(path: str) -> dict:
    """A tuning result: a JSON object with a `candidates` list and a `winner` (other fields are shown as given)."""
    text = read_source(path).text
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError.at(path, f"not JSON: {error.msg}", error.lineno, error.colno) from None
    if not isinstance(data, dict):
        raise InputError.at(path, "a tuning result is a JSON object with `candidates` and `winner`", 1, 1)
    candidates = data.get("candidates", [])
    if not isinstance(candidates, list):
        raise InputError.at(path, "`candidates` must be a list", 1, 1)
    return data


# ---------------------------------------------------------------- the command


def execute(options: Options, sources: list[Source | Unreadable]) -> ReportResult:
    """Build the page for all sources (InputError at the first that cannot be read, parsed or assembled)."""
    from ptxtool.report.html import render

    bad = [d for s in sources if isinstance(s, Unreadable) for d in s.diagnostics]
    if bad:
        raise InputError(bad)
    tune = read_tune(options.tune) if options.tune else None  # bad extra inputs fail before the long work
    optimized = read_source(options.optimized) if options.optimized else None
    files = [view_file(s, options, i) for i, s in enumerate(sources) if isinstance(s, Source)]
    comparison = None
    if optimized:
        (first,) = (s for s in sources if isinstance(s, Source))
        comparison = _compare(first, optimized, options)
    page = render(files, comparison, tune)
    if options.output:
        write_atomic(options.output, page)
    return ReportResult(files, comparison, tune, page, options.output)
