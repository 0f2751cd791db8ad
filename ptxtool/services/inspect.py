"""The `inspect` service: per kernel, what ptxas (resources), the SASS (statistics), the occupancy rules
and the PTX itself (instruction families, cache operators, barriers, shared memory, parameters) say about it; with
`pressure`, the estimated register-pressure curve beside the registers ptxas really keeps live at each PTX line.

Files are inspected in parallel processes; results come back in input order.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from math import prod

from ptxtool.analysis.cfg import CFG, build_cfg
from ptxtool.analysis.launch_bounds import block_bounds
from ptxtool.analysis.pressure import PressureCurve, pressure
from ptxtool.analysis.statements import statements
from ptxtool.errors import (
    EXIT_FOUND,
    EXIT_INPUT,
    EXIT_OK,
    Diagnostic,
    EnvironmentProblem,
    InputError,
    Location,
    UsageError,
)
from ptxtool.isa.caching import CACHE_WORDS
from ptxtool.isa.types import TYPE_BYTES, VECTOR_LANES
from ptxtool.sources import Source, Unreadable, parse_source, write_atomic
from ptxtool.syntax import ast
from ptxtool.toolchain.compile import Compiled, compile_ptx, target_arch
from ptxtool.toolchain.occupancy import Occupancy, occupancy
from ptxtool.toolchain.resources import FunctionResources, ToolWarning
from ptxtool.toolchain.sass import (
    ListingLine,
    LiveCount,
    SassInstruction,
    SassStats,
    disassemble,
    instructions,
    life_ranges,
    listing,
    live_by_line,
    statistics,
    with_lines,
)

DEFAULT_BLOCK_SIZE = 256  # used when neither the kernel (.reqntid/.maxntid) nor --block-size gives one

BARRIER_OPCODES = frozenset({"bar", "barrier", "mbarrier", "membar"})


@dataclass(frozen=True, slots=True)
class Options:
    """How to compile and what to assume: target override, launch block size, backend; whether to add the
    pressure curves (of every kernel, or only `pressure_kernel`)."""

    arch: str | None = None
    block_size: int | None = None
    backend: str = "ptxas"
    pressure: bool = False
    pressure_kernel: str | None = None


@dataclass(frozen=True)
class KernelPressure:
    """One kernel's estimated pressure curve beside the general registers live per PTX line in its SASS
    (`real`, from nvdisasm: lines of the kernel itself; `inlined`: lines of the functions ptxas inlined into it),
    the register count ptxas gave the same cubin, and the registers live at the estimated peak with the PTX lines
    that define them."""

    curve: PressureCurve
    real: dict[int, int]
    inlined: dict[int, int]
    registers: int | None
    peak_live: tuple[tuple[str, tuple[int, ...]], ...]

    def as_data(self) -> dict:
        """The two series for `inspect --json` (schema in docs/inspect.md): [PTX line, registers] pairs, each peak."""
        peak = self.curve.peak
        live = [{"register": name, "defined": list(lines)} for name, lines in self.peak_live]
        real_peak = max(self.real.items(), key=lambda kv: kv[1], default=None)
        return {
            "estimated": {
                "peak": {"line": peak.line, "units": peak.units, "live": live} if peak else None,
                "lines": [[line, units] for line, units in sorted(self.curve.by_line().items())],
            },
            "sass": {
                "registers": self.registers,
                "peak": {"line": real_peak[0], "live": real_peak[1]} if real_peak else None,
                "lines": [[line, live] for line, live in sorted(self.real.items())],
                "inlined": [[line, live] for line, live in sorted(self.inlined.items())],
            },
        }


@dataclass
class PtxFacts:
    """What the PTX of one kernel says, before ptxas: counts by opcode, global accesses by cache operator,
    barriers, declared shared memory (`dynamic_shared`: an extern array sized at launch), parameters."""

    instructions: int = 0
    families: dict[str, int] = field(default_factory=dict)
    global_loads: dict[str, int] = field(default_factory=dict)
    global_stores: dict[str, int] = field(default_factory=dict)
    barriers: dict[str, int] = field(default_factory=dict)
    shared_declared: int = 0
    dynamic_shared: bool = False
    params: list[dict] = field(default_factory=list)


@dataclass
class KernelReport:
    """Everything `inspect` knows about one kernel. `block_size_from` says where the block size came from."""

    name: str
    line: int
    resources: FunctionResources
    occupancy: Occupancy | None
    block_size_from: str
    sass: SassStats
    ptx: PtxFacts
    warnings: list[ToolWarning] = field(default_factory=list)
    pressure: KernelPressure | None = None


@dataclass
class FileReport:
    """One input: target, backend, the kernels, and ptxas warnings not tied to a kernel. `lines_are_ptx` is False
    for a .cu input: its kernels' and warnings' lines are then the .cu lines the generated PTX's `.loc` names (0
    where it names none), not lines of PTX that nobody keeps."""

    path: str
    arch: str
    backend: str
    relocatable: bool
    kernels: list[KernelReport]
    warnings: list[ToolWarning] = field(default_factory=list)
    lines_are_ptx: bool = True

    def ptxas_warnings(self) -> list[Diagnostic]:
        """ptxas's warnings as diagnostics (`ptxas/<kind>`), each at its own line or else its kernel's."""
        lines = {k.name: k.line for k in self.kernels}
        warnings = [w for k in self.kernels for w in k.warnings] + self.warnings
        return [
            Diagnostic(
                Location(self.path, w.line or lines.get(w.function, 0)), w.message, "warning", code=f"ptxas/{w.kind}"
            )
            for w in warnings
        ]


# ---------------------------------------------------------------- PTX facts


def _declared_bytes(attributes: tuple[ast.Attribute, ...], dims: tuple[ast.Immediate | None, ...]) -> int | None:
    """Size of a declared variable; None for an unsized (extern, dynamic) array."""
    if any(d is None for d in dims):
        return None
    width = next((TYPE_BYTES[a.word] for a in attributes if a.word in TYPE_BYTES), 0)
    vector = next((VECTOR_LANES[a.word] for a in attributes if a.word in VECTOR_LANES), 1)
    return width * vector * prod(int(d.value) for d in dims if d is not None)


def _access_key(instruction: ast.Instruction) -> str:
    words = [m for m in instruction.modifiers if m in CACHE_WORDS or m.startswith(("L1::", "L2::"))]
    return ".".join(words) or "default"


def _names(instruction: ast.Instruction) -> Iterator[str]:
    """The text of every Name in an instruction: its guard's and its operands', however nested."""
    for node in (instruction.guard, *instruction.operands):
        if type(node) is ast.Name:
            yield node.text
        elif node is not None and type(node) is not ast.Immediate:  # a literal holds no name: no walk for it
            yield from (n.text for n in ast.walk(node) if isinstance(n, ast.Name))


def ptx_facts(function: ast.Function, module_shared: dict[str, ast.Declaration]) -> PtxFacts:
    """Facts about one kernel's PTX; `module_shared` maps module-level .shared names to their declarations."""
    facts = PtxFacts()
    families: Counter[str] = Counter()
    loads: Counter[str] = Counter()
    stores: Counter[str] = Counter()
    barriers: Counter[str] = Counter()
    used_module_shared: set[str] = set()
    assert function.body is not None
    for statement in statements(function.body):
        if isinstance(statement, ast.Declaration) and statement.has(".shared"):
            for d in statement.declarators:
                size = _declared_bytes(statement.attributes, d.dims)
                facts.dynamic_shared |= size is None
                facts.shared_declared += size or 0
        if not isinstance(statement, ast.Instruction):
            continue
        families[statement.opcode] += 1
        if "global" in statement.modifiers and statement.opcode in ("ld", "st"):
            (loads if statement.opcode == "ld" else stores)[_access_key(statement)] += 1
        if statement.opcode in BARRIER_OPCODES:
            barriers[".".join((statement.opcode, *statement.modifiers[:1]))] += 1
        if module_shared:
            used_module_shared.update(n for n in _names(statement) if n in module_shared)
    for name in sorted(used_module_shared):
        declaration = module_shared[name]
        d = next(d for d in declaration.declarators if d.name == name)
        size = _declared_bytes(declaration.attributes, d.dims)
        facts.dynamic_shared |= size is None
        facts.shared_declared += size or 0
    facts.instructions = sum(families.values())
    facts.families = dict(families.most_common())
    facts.global_loads, facts.global_stores, facts.barriers = dict(loads), dict(stores), dict(barriers)
    for p in function.params or ():
        type_word = next((a.word for a in p.attributes if a.word in TYPE_BYTES), "")
        facts.params.append({"name": p.name, "type": type_word, "bytes": _declared_bytes(p.attributes, p.dims) or 0})
    return facts


def block_size(function: ast.Function, option: int | None) -> tuple[int, str]:
    """The block size to assume and where it came from: .reqntid, then --block-size, then .maxntid, else 256."""
    bounds = block_bounds(function)
    if bounds is not None and (bounds.exact or not option):
        return bounds.threads, bounds.directive
    return (option, "option") if option else (DEFAULT_BLOCK_SIZE, "default")


# ---------------------------------------------------------------- pressure


def kernel_pressure(
    function: ast.Function, real: dict[int, int], registers: int | None, cfg: CFG | None = None
) -> KernelPressure:
    """The estimate for `function` (from `cfg` when the caller has built it) set beside `real` (PTX line -> live
    registers, the kernel's lines apart from those of inlined functions) and ptxas's register count."""
    cfg = cfg or build_cfg(function)
    curve = pressure(cfg)
    peak = curve.peak
    last = max((op.line for op in cfg.linear.ops), default=function.line)
    own = {line: live for line, live in real.items() if function.line <= line <= last}
    defined: dict[str, list[int]] = {}
    for op in cfg.linear.ops:
        for key in op.defs:
            defined.setdefault(key, []).append(op.line)
    live = curve.live[peak.op] if peak else frozenset()
    peak_live = sorted(((key, tuple(sorted(set(defined.get(key, []))))) for key in live), key=lambda kv: (kv[1], kv[0]))
    inlined = {line: live for line, live in real.items() if line not in own}
    return KernelPressure(curve, own, inlined, registers, tuple(peak_live))


@dataclass(frozen=True)
class Built:
    """What the tools made of one source: ptxas's build, its SASS instructions, and with pressure the registers
    live at each SASS instruction and the `-gp` listing they were placed with. With pressure the one build is a
    `-lineinfo` build, so the SASS maps to PTX lines (line info changes neither ptxas's code nor its resources, so
    the other numbers are those of a plain build), and the instructions are read from the listing."""

    compiled: Compiled
    sass: dict[str, list[SassInstruction]]
    live: dict[str, list[LiveCount]] | None = None
    listing: dict[str, list[ListingLine]] | None = None


def build(source: Source, arch: str, options: Options) -> Built:
    """Run ptxas once, then nvdisasm (`disassembled`)."""
    compiled = compile_ptx(source.text, source.display, arch, backend=options.backend, lineinfo=options.pressure)
    return disassembled(compiled, options)


def disassembled(compiled: Compiled, options: Options) -> Built:
    """nvdisasm's outputs for a build: `-json` alone; with pressure, the `-gp` listing and the life ranges side by
    side (threads: the tools run while Python waits), the listing giving the instructions too."""
    if not options.pressure:
        return Built(compiled, disassemble(compiled.cubin))
    with ThreadPoolExecutor(1) as pool:
        ranges = pool.submit(life_ranges, compiled.cubin)
        lines = listing(compiled.cubin, with_ptx_lines=True)
        return Built(compiled, instructions(lines), with_lines(ranges.result(), lines), lines)


def _pressures(
    module: ast.Module, built: Built, options: Options, cfg: Callable[[ast.Function], CFG]
) -> dict[str, KernelPressure]:
    """Pressure per kernel (or only options.pressure_kernel), beside the registers live in its SASS."""
    assert built.live is not None
    functions = built.compiled.functions
    return {
        f.name: kernel_pressure(
            f,
            live_by_line(built.live.get(f.name, [])),
            functions[f.name].registers if f.name in functions else None,
            cfg(f),
        )
        for f in module.kernels
        if options.pressure_kernel in (None, f.name)
    }


# ---------------------------------------------------------------- one file


def load(source: Source, arch: str | None) -> tuple[Source, ast.Module, bool]:
    """The PTX of a source (nvcc's with `.loc` line info, for CUDA C++), parsed; and whether its lines are the
    user's PTX lines."""
    if source.is_cuda:
        from ptxtool.lint.cuda import annotated_ptx

        source = Source(source.path, annotated_ptx(source.path, arch))
        return source, parse_source(source), False
    return source, parse_source(source), True


def _user_line(module: ast.Module, path: str) -> Callable[[int], int]:
    """For PTX nvcc made of `path`: the `path` line of a PTX line by its `.loc` marks (a declaration line: the
    function's first mark), 0 where the function has none of that file."""
    from ptxtool.lint.cuda import line_map

    lines = line_map(module, path)
    return lambda ptx_line: lines.find(ptx_line)[0]


def _told(warning: ToolWarning, user_line: Callable[[int], int]) -> ToolWarning:
    return replace(warning, line=user_line(warning.line) if warning.line else 0)


def inspect_file(source: Source, options: Options) -> FileReport:
    """Compile one PTX (or .cu) source and report on each of its kernels."""
    source, module, lines_are_ptx = load(source, options.arch)
    return inspect_module(source, module, options, lines_are_ptx)


def inspect_module(
    source: Source,
    module: ast.Module,
    options: Options,
    lines_are_ptx: bool = True,
    built: Built | None = None,
    cfg: Callable[[ast.Function], CFG] = build_cfg,
) -> FileReport:
    """Report on each kernel of a parsed source; `built` and `cfg` let a caller that already has the tools' output
    or the control-flow graphs (report, lint) share them instead of making them again."""
    arch = target_arch(module.targets, source.display, options.arch)
    built = built or build(source, arch, options)
    compiled = built.compiled
    if not lines_are_ptx:
        compiled = replace(compiled, warnings=[_told(w, _user_line(module, source.path)) for w in compiled.warnings])
    module_shared = {
        d.name: item
        for item in module.items
        if isinstance(item, ast.Declaration) and item.has(".shared")
        for d in item.declarators
    }
    pressures = _pressures(module, built, options, cfg) if options.pressure else {}
    lines = source.text.split("\n")  # as the parser numbers them
    kernels = []
    for function in module.kernels:
        assert function.body is not None
        text = "\n".join(lines[function.line - 1 : function.body.end_line])
        named = {name: d for name, d in module_shared.items() if name in text}  # a name used is a name written
        resources = compiled.functions.get(function.name) or FunctionResources(function.name, is_kernel=True)
        threads, threads_from = block_size(function, options.block_size)
        kernels.append(
            KernelReport(
                function.name,
                function.line if lines_are_ptx else _user_line(module, source.path)(function.line),
                resources,
                occupancy(arch, resources.registers or 0, resources.shared, threads),
                threads_from,
                statistics(built.sass.get(function.name, [])),
                ptx_facts(function, named),
                [w for w in compiled.warnings if w.function == function.name],
                pressures.get(function.name),
            )
        )
    names = {k.name for k in kernels}
    loose = [w for w in compiled.warnings if w.function not in names]
    return FileReport(source.display, arch, options.backend, compiled.relocatable, kernels, loose, lines_are_ptx)


# ---------------------------------------------------------------- many files


@dataclass(frozen=True, slots=True)
class Failure:
    """A file that could not be inspected: its diagnostics (bad input) or an environment problem."""

    path: str
    diagnostics: tuple[Diagnostic, ...] = ()
    environment: str = ""


def _inspect_one(source: Source | Unreadable, options: Options) -> FileReport | Failure:
    """inspect_file with errors as values, so they cross process boundaries intact."""
    if isinstance(source, Unreadable):
        return Failure(source.display, source.diagnostics)
    try:
        return inspect_file(source, options)
    except InputError as error:
        return Failure(source.display, tuple(error.diagnostics) or (Diagnostic(Location(source.display), str(error)),))
    except EnvironmentProblem as problem:
        return Failure(source.display, environment=str(problem))


def inspect_files(
    sources: list[Source | Unreadable],
    options: Options,
    jobs: int | None = None,
    advance: Callable[[], None] | None = None,
) -> list[FileReport | Failure]:
    """Inspect sources in parallel processes (one per core unless `jobs` says otherwise), results in input order.
    `advance` is called once per finished file (for a progress bar). An environment problem stops everything."""
    jobs = min(len(sources), jobs or os.cpu_count() or 1)
    results: list[FileReport | Failure] = []
    if jobs <= 1:
        for source in sources:
            results.append(_inspect_one(source, options))
            if advance:
                advance()
    else:
        with ProcessPoolExecutor(jobs) as pool:
            futures = [pool.submit(_inspect_one, source, options) for source in sources]
            if advance:
                for future in futures:
                    future.add_done_callback(lambda _: advance())
            results = [f.result() for f in futures]
    problem = next((r.environment for r in results if isinstance(r, Failure) and r.environment), None)
    if problem:
        raise EnvironmentProblem(problem)
    return results


# ---------------------------------------------------------------- the command


@dataclass(frozen=True, slots=True)
class Checks:
    """What `inspect` checks and writes beside the per-file work: budget and baseline files, the SVG picture."""

    budget: str | None = None
    baseline: str | None = None
    update_baseline: bool = False
    svg: str | None = None
    jobs: int | None = None
    strict: bool = False  # a budget table that matches no kernel is a violation (exit 1), not a warning

    def checked(self, options: Options, paths: Sequence[str]) -> Checks:
        """These checks with these options and inputs, or the usage error they make (before any input is read)."""
        if self.update_baseline and not self.baseline:
            raise UsageError("--update-baseline needs --baseline FILE (where to write it)")
        if (options.pressure_kernel is not None or self.svg) and not options.pressure:
            raise UsageError("--kernel and --svg go with --pressure")
        if self.svg and len(paths) > 1:
            raise UsageError("--svg draws one kernel of one file: give one FILE (and --kernel when it has several)")
        return self


@dataclass
class InspectResult:
    """Every file's report or failure (input order), the violations, and what was written (baseline, SVG)."""

    results: list[FileReport | Failure]
    violations: list[Diagnostic] = field(default_factory=list)  # budget/<limit>, baseline/<metric>
    drawn: list[tuple[FileReport, KernelReport]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # budget tables that name no kernel inspected (not --strict)

    @property
    def reports(self) -> list[FileReport]:
        return [r for r in self.results if not isinstance(r, Failure)]

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for r in self.results if isinstance(r, Failure) for d in r.diagnostics]

    def diagnostics(self) -> list[Diagnostic]:
        """Why inputs could not be inspected, the violations, then ptxas's warnings (SARIF)."""
        return self.errors + self.violations + [d for r in self.reports for d in r.ptxas_warnings()]

    @property
    def exit_code(self) -> int:
        if len(self.reports) < len(self.results):
            return EXIT_INPUT
        return EXIT_FOUND if self.violations else EXIT_OK

    def to_data(self) -> dict:
        from ptxtool import __version__
        from ptxtool.report.json_report import inspect_document
        from ptxtool.toolchain.discover import find_tool

        tools = {"ptxtool": __version__, "ptxas": find_tool("ptxas").version}
        document = inspect_document(self.reports, self.violations, tools, self.errors)
        for document_file, report in zip(document["files"], self.reports, strict=True):
            for data, kernel in zip(document_file["kernels"], report.kernels, strict=True):
                if kernel.pressure:
                    data["pressure"] = kernel.pressure.as_data()
        return document


def execute(
    options: Options, sources: list[Source | Unreadable], checks: Checks = Checks(), advance=None
) -> InspectResult:
    from ptxtool.report.pictures import peak_text, pressure_svg
    from ptxtool.services import budget as rules

    checks.checked(options, [s.path for s in sources])
    limits = rules.load_budget(checks.budget) if checks.budget else None
    before = rules.load_baseline(checks.baseline) if checks.baseline and not checks.update_baseline else None
    result = InspectResult(inspect_files(sources, options, checks.jobs, advance))
    reports = result.reports
    if options.pressure:
        result.drawn = [(r, k) for r in reports for k in r.kernels if k.pressure]
    if options.pressure_kernel and reports and not result.drawn:
        there = ", ".join(k.name for r in reports for k in r.kernels)
        raise InputError.at(reports[0].path, f"no kernel named {options.pressure_kernel!r}; there are: {there}")
    if checks.svg and len(result.drawn) > 1:
        names = ", ".join(k.name for _, k in result.drawn)
        raise UsageError(f"--svg draws one kernel: choose it with --kernel ({names})")
    failed = len(result.results) - len(reports)
    loose = rules.unmatched(limits, reports) if limits and reports and not failed else []
    if not checks.strict:
        result.warnings = [f"budget {v.location.path}: {v.message}" for v in loose]
    result.violations = (rules.check_budget(limits, reports) if limits else []) + (
        rules.check_baseline(before, checks.baseline, reports) if before else []
    )
    if checks.strict:
        result.violations += loose
    if checks.update_baseline and failed:  # a baseline without the failed files' kernels would stop guarding them
        result.notes.append(f"baseline {checks.baseline} not written: {failed} input(s) failed")
    elif checks.update_baseline:
        rules.write_baseline(checks.baseline, reports)
        result.notes.append(f"wrote baseline {checks.baseline} ({sum(len(r.kernels) for r in reports)} kernels)")
    if checks.svg and result.drawn:
        report, kernel = result.drawn[0]
        p = kernel.pressure
        caption = " ".join(peak_text(p.curve, p.peak_live).split())
        write_atomic(checks.svg, pressure_svg(p.curve, p.real, f"{report.backend} live", caption))
        result.notes.append(f"wrote {checks.svg} ({kernel.name})")
    return result
