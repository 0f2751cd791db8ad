"""`ptxtool optimize`: parse -> passes -> verify each rewrite with ptxas and the SASS -> splice the kept ones into
the input's own text (byte for byte elsewhere; the spliced text is parsed again and must be the verified module).

Verification is per rewrite (all rewrites of one input line are one unit). The input and the output made of the
units still kept are assembled as written and with `-lineinfo` (after dropping `.loc`/`.file`, so that nvdisasm
ties each SASS instruction to a PTX line, mapped back to the input's line; both builds must have the same SASS)
and compared:
- promise: every SASS memory instruction made from a rewritten line carries the modifiers the pass promised (on
  sm_80 `.L2::256B` shows as `.LTC128B` or `.LTC256B`: either keeps it); a line whose access ptxas removed has
  nothing to check;
- order: no memory instruction made from a rewritten line crosses an ordering instruction (barrier, fence,
  atomic, wait, call) that it did not cross in the input's SASS (`toolchain.sass.crossings` says exactly how);
- nothing else: per function, the memory (by full opcode), ordering and control-flow instructions of the lines
  not rewritten keep their counts (less the branch of an access ptxas if-converted).
A unit that fails is dropped and the rest verified again, until what is left holds (`strict`: any failure fails
the file, and nothing is written). docs/optimize.md states the rules; services never print, exit or read config.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ptxtool.analysis.batching import sass_loops
from ptxtool.analysis.cfg import build_cfg
from ptxtool.analysis.staging import Refusal, find_staged_loop
from ptxtool.errors import EXIT_FOUND, EXIT_OK, Diagnostic, InputError, Location, UsageError
from ptxtool.passes import DEFAULT_PIPELINE, PASSES, PassReport, run_pipeline, warp_roles
from ptxtool.passes.cache_operators import NAME as CACHE_OPERATORS
from ptxtool.passes.cache_operators import POLICIES, Policy, Settings
from ptxtool.passes.registers import NAME as REGISTERS
from ptxtool.passes.report import Insertion, Rewrite, dropped_rewrite
from ptxtool.sources import STDIN, Source, parse_source, write_atomic
from ptxtool.syntax import ParseError, ast, format_module, parse
from ptxtool.syntax.names import matches
from ptxtool.syntax.printer import LINE, inline
from ptxtool.toolchain.compile import Compiled, compile_ptx, target_arch
from ptxtool.toolchain.resources import FunctionResources
from ptxtool.toolchain.sass import GLOBAL_MEMORY, ListingLine, SassCode, crossings, disassemble, listing
from ptxtool.toolchain.sass import missing as sass_missing

SCHEMA = "ptxtool.optimize/2"  # /2: `problems` are diagnostics (in /1, strings)
# The `code` of each reason a file fails (its `problems`): a unit --strict let fail, the split's own proof, the register
# pass's numbers, the GPU comparison.
_STRICT, _WARP_ROLES_PROOF, _REGISTERS_PROOF, _GPU = (
    "optimize/strict",
    "optimize/warp-roles",
    "optimize/registers",
    "optimize/gpu",
)
_LINE_DIRECTIVES = frozenset((".loc", ".file"))
# Spellings of one promise: ptxas shows `.L2::256B` as a 128- or a 256-byte L2 prefetch depending on the target.
_SAME_PROMISE = {"LTC128B": "LTC", "LTC256B": "LTC"}
# What a branch around one access amounts to in SASS: ptxas may replace it with a predicated access (if-conversion).
_IF_CONVERSION = frozenset(("BRA", "BSSY", "BSYNC"))
Failures = dict[tuple[str, int], str]  # a unit (kernel, input line) -> why it fails, in words


@dataclass(frozen=True)
class Options:
    """What `optimize` runs: the pipeline and its settings, the target (None: the file's), all-or-nothing, and a
    launch spec to compare original and optimized on the GPU with (None: no GPU run)."""

    passes: tuple[str, ...] = DEFAULT_PIPELINE
    settings: Settings = field(default_factory=Settings)
    arch: str | None = None
    strict: bool = False
    spec: str | None = None
    output: str | None = None  # write the verified text here (None: stdout, unless in_place or diff)
    in_place: bool = False
    diff: bool = False  # the unified diff of the verified rewrites on stdout; nothing written
    verbose: bool = False  # also report each candidate the passes skipped
    named: tuple[tuple[str, str], ...] = ()  # (option, kernel glob) the user gave: a glob naming no kernel is a typo
    roles: warp_roles.RoleSettings = field(
        default_factory=warp_roles.RoleSettings
    )  # --variant/--producer-warps/--stages

    def checked(self, path: str, as_json: bool) -> Options:
        """These options for this input, or the usage error they make (before the input is read)."""
        if self.output and self.in_place:
            raise UsageError("give -o or --in-place, not both")
        if self.diff and (self.output or self.in_place or as_json):
            raise UsageError("--diff writes nothing: drop -o/--in-place/--json, or --diff to write")
        if as_json and not (self.output or self.in_place):
            raise UsageError("--json needs -o or --in-place: without them stdout carries the PTX")
        if self.in_place and path == STDIN:
            raise UsageError("--in-place needs a file, not stdin")
        return self


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


@dataclass(frozen=True)
class Batching:
    """warp-roles: the loads in flight of a split kernel's consumers' loop (the compute part's loads, counted by
    `analysis.batching`) in the input's SASS and in the split's; None where no SASS loop holds the compute part."""

    kernel: str
    before: int | None
    after: int | None

    @property
    def fell(self) -> bool:
        return self.before is not None and self.after is not None and self.after < self.before

    def __str__(self) -> str:
        said = f"{self.kernel}: consumers' loads in flight per trip {_count(self.before)} -> {_count(self.after)}"
        return said + (" (ptxas batches them less: time the split before using it)" if self.fell else "")

    def to_data(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "before": self.before, "after": self.after, "fell": self.fell}


def _count(n: int | None) -> str:
    return "?" if n is None else str(n)


@dataclass
class Checks:
    """What verification looked at in what is written: promised SASS modifiers (present / promised), rewritten
    lines whose access ptxas removed, and the GPU comparison (verdict and trials) when one ran."""

    promised: int = 0
    present: int = 0
    removed: int = 0
    gpu: str | None = None
    trials: int = 0
    roles: int = 0  # warp-roles: split kernels whose SASS shows the ring's mbarrier waits and arrivals
    batching: list[Batching] = field(default_factory=list)  # warp-roles: consumers' loads in flight, per kernel

    def to_data(self) -> dict[str, Any]:
        return {
            "promised_modifiers": self.promised,
            "present_modifiers": self.present,
            "removed_by_ptxas": self.removed,
            "gpu": self.gpu,
            "gpu_trials": self.trials,
            "split_kernels_with_mbarriers": self.roles,
            "consumer_loads_in_flight": [b.to_data() for b in self.batching],
        }


@dataclass
class OptimizeResult:
    """The text to write (the input with the kept rewrites spliced in), what each pass did (its kept rewrites),
    what verification dropped and why, per-kernel before/after, and why the file failed (strict, GPU)."""

    path: str
    arch: str
    text: str
    reports: list[PassReport]
    kernels: list[KernelChange] = field(default_factory=list)
    dropped: list[Diagnostic] = field(default_factory=list)  # optimize/dropped: each with why, in words
    insertions: list[Insertion] = field(default_factory=list)
    failures: list[Diagnostic] = field(default_factory=list)  # why the file failed (--strict, a pass's proof, GPU)
    checks: Checks = field(default_factory=Checks)
    options: Options = field(default_factory=Options)
    original: str = ""  # the input's text (for --diff)
    unmatched: list[str] = field(default_factory=list)  # kernel globs of the command line that name no kernel

    @property
    def changed(self) -> bool:
        return any(r.changed for r in self.reports)

    @property
    def verified(self) -> bool:
        return not self.failures

    @property
    def problems(self) -> list[str]:
        """The failures as one line each, `path:line: message` (the text report's and the benchmarks' form)."""
        return [
            f"{d.location.path}{f':{d.location.line}' if d.location.line else ''}: {d.message}" for d in self.failures
        ]

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.verified else EXIT_FOUND

    @property
    def gpu(self) -> str | None:
        return self.checks.gpu

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
            "problems": [d.to_data() for d in self.failures],
            "gpu": self.gpu,
            "checks": self.checks.to_data(),
            "passes": [r.to_data() for r in self.reports],
            "dropped": [d.to_data() for d in self.dropped],
            "inserted": [i.to_data() for i in self.insertions],
            "kernels": [k.to_data() for k in self.kernels],
        }


# ---------------------------------------------------------------- settings


def settings_from_config(table: dict[str, Any], where: str) -> tuple[tuple[str, ...], Settings]:
    """The pipeline and cache-operator settings from `[tool.ptxtool.optimize]` as config.load checked it (keys
    spelled like the flags too: `store-hint` is `store_hint`); `where` names the file when a pass is unknown."""
    table = {key.replace("-", "_"): value for key, value in table.items()}
    passes = tuple(table.get("passes") or DEFAULT_PIPELINE)
    check_passes(passes, where)
    include, exclude = table.get("include", []), table.get("exclude", [])
    defaults = Settings()
    policies = {name: _policy(table.get(name), getattr(defaults, name), include, exclude) for name in POLICIES}
    hint = table.get("store_hint", defaults.store_hint)
    return passes, Settings(**policies, noalias=tuple(table.get("noalias", [])), store_hint=hint)


def _policy(value: Any, default: Policy, include: list[str], exclude: list[str]) -> Policy:
    """A policy from `true`/`false` or `{enabled = true, include = [...], exclude = [...]}`."""
    if isinstance(value, dict):
        globs = value.get("include") or include
        return Policy(value.get("enabled", True), tuple(globs), tuple(value.get("exclude", []) + exclude))
    return Policy(default.enabled if value is None else value, tuple(include), tuple(exclude))


def settings_from(table: dict[str, Any], where: str, flags: dict[str, Any]) -> tuple[tuple[str, ...], Settings]:
    """The pipeline and settings: the flags given over `[tool.ptxtool.optimize]` (read by config.load) over the
    defaults."""
    passes, settings = settings_from_config(table, where)
    if flags["passes"]:
        passes = tuple(p.strip() for p in flags["passes"].split(",") if p.strip())
    given = {name: flags[name] for name in ("readonly", "streaming", "stores", "l2_evict_first")}
    given["unsafe_volatile_nc"] = flags["unsafe_volatile_nc"] or None
    for name, value in given.items():
        policy = getattr(settings, name)
        include = tuple(flags["include"]) or policy.include
        policy = Policy(policy.enabled if value is None else value, include, policy.exclude + tuple(flags["exclude"]))
        settings = replace(settings, **{name: policy})
    settings = replace(settings, noalias=settings.noalias + tuple(flags["noalias"]))
    if flags["store_hint"]:
        settings = replace(settings, store_hint=flags["store_hint"])
    return passes, settings


def roles_from(flags: dict[str, Any]) -> warp_roles.RoleSettings:
    """The warp-roles settings the flags give (`--variant`, `--producer-warps`, `--stages`) over its defaults."""
    given = {name: flags[name] for name in ("variant", "producer_warps", "stages") if flags.get(name) is not None}
    settings = warp_roles.RoleSettings(**given)
    if (why := warp_roles.misused(settings)) is not None:
        raise UsageError(why)
    return settings


def check_passes(names: tuple[str, ...], where: str) -> None:
    for name in names:
        if name not in PASSES:
            raise InputError.at(where, f"unknown pass {name!r} (known: {', '.join(PASSES)})")


# ---------------------------------------------------------------- the service


def execute(options: Options, source: Source) -> OptimizeResult:
    """Run the passes over one already-read source, keep the rewrites the SASS bears out, splice them into the
    source's text. Raises InputError when the input does not parse or ptxas rejects it."""
    module = parse_source(source)
    path = source.display
    arch = target_arch(module.targets, path, options.arch)
    check_passes(options.passes, path)
    if warp_roles.NAME in options.passes:
        return _restructured(options, source, module, arch)
    settings = replace(options.settings, arch=arch)  # qualifiers are checked against the target assembled for
    first = tuple(p for p in options.passes if p != REGISTERS)  # registers runs last, on their verified output
    optimized, reports = run_pipeline(module, first, {CACHE_OPERATORS: settings})
    edits, added = _edits(module, optimized)
    units = _units(edits, reports)
    before = _Build(source.text, compile_ptx(source.text, path, arch), _sass(module, arch, path))  # InputError if bad
    free = {kernel: r.sass_may_change for r in reports for kernel in r.inserted}
    kept, dropped, problems, after = _keep_verified(source, module, units, added, free, before, arch, options.strict)
    keys = {u.key for u in kept}
    kept_reports = [
        replace(r, rewrites=[w for u in units if u.key in keys for w in u.rewrites if w in r.rewrites]) for r in reports
    ]
    result = OptimizeResult(path, arch, after.text, kept_reports, dropped=dropped, failures=problems)
    result.insertions = [_insertion(a) for a in _needed(added, [e for u in kept for e in u.edits])]
    result.kernels = [
        KernelChange(
            k.name,
            before.compiled.functions.get(k.name),
            after.compiled.functions.get(k.name),
            _global_memory(before.sass.get(k.name)),
            _global_memory(after.sass.get(k.name)),
        )
        for k in module.kernels
    ]
    result.checks = _count_checks(kept, after.sass)
    if REGISTERS in options.passes and not problems:
        from ptxtool.services.registers import stage

        result.text, registers, problems, written = stage(result.text, source, arch, options.spec)
        result.failures = [_failure(path, p.removeprefix(f"{path}: "), _REGISTERS_PROOF) for p in problems]
        result.reports.append(registers)
        for k in result.kernels:
            k.after = written.get(k.name, k.after)
    if options.spec and result.changed and not result.failures:
        result.checks.gpu, result.checks.trials, result.failures = _compare_on_gpu(source, result.text, options.spec)
    result.options, result.original = options, source.text
    names = [k.name for k in module.kernels]
    result.unmatched = [
        f"--{option} {glob} matches no kernel of {path} (kernels: {', '.join(names)})"
        for option, glob in options.named
        if names and not any(matches(name, (glob,)) for name in names)
    ]
    target = source.path if options.in_place else options.output
    if result.verified and target and (result.changed or target != source.path):
        write_atomic(target, result.text)
    return result


def role_registers(compiled: Compiled) -> dict[str, int]:
    """ptxas's registers per function, as the warp-role pass plans setmaxnreg from them (functions it counted)."""
    return {name: f.registers for name, f in compiled.functions.items() if f.registers}


def _restructured(options: Options, source: Source, module: ast.Module, arch: str) -> OptimizeResult:
    """warp-roles rewrites whole kernels, so its output is the printed module, verified as a whole: ptxas accepts
    it and each split kernel's SASS holds the ring's mbarrier waits and arrivals; the pass runs alone."""
    path = source.display
    if options.passes != (warp_roles.NAME,) or options.spec:
        raise UsageError(f"{warp_roles.NAME} runs alone and without --verify-gpu (its launch grows: see the report)")
    before = compile_ptx(source.text, path, arch)
    roles = replace(options.roles, registers=role_registers(before))
    optimized, reports = run_pipeline(module, options.passes, {warp_roles.NAME: roles})
    text, after, problems = source.text, before, list[Diagnostic]()
    if reports[0].changed:
        try:
            after = compile_ptx(format_module(optimized), path, arch)
            if spilled := _spilled(before, after, reports[0]):  # ptxas decides: those kernels keep their input
                optimized, reports = run_pipeline(
                    module, options.passes, {warp_roles.NAME: replace(roles, refused=spilled)}
                )
                after = compile_ptx(format_module(optimized), path, arch) if reports[0].changed else before
        except InputError as error:
            problems.append(_failure(path, f"ptxas rejects the split (a bug in ptxtool): {error}", _WARP_ROLES_PROOF))
        else:
            sass = disassemble(after.cubin)
            split = {f.name: f for f in optimized.kernels}
            for r in reports[0].rewrites:
                missing = sass_missing(warp_roles.sass_proof(split[r.kernel], arch), sass.get(r.kernel, ()))
                if missing:
                    said = f"{r.kernel}: the SASS lacks {', '.join(missing)}"
                    problems.append(_failure(path, said, _WARP_ROLES_PROOF, r.line, r.column, kernel=r.kernel))
            text = format_module(optimized) if not problems and reports[0].changed else text
    result = OptimizeResult(path, arch, text, reports, failures=problems)
    result.checks.roles = 0 if problems else len(reports[0].rewrites)
    if reports[0].changed and not problems:
        result.checks.batching = _batching(module, optimized, arch, path, [r.kernel for r in reports[0].rewrites])
    result.kernels = [
        KernelChange(k.name, before.functions.get(k.name), after.functions.get(k.name), {}, {}) for k in module.kernels
    ]
    result.options, result.original = options, source.text
    target = source.path if options.in_place else options.output
    if result.verified and target and (result.changed or target != source.path):
        write_atomic(target, result.text)
    return result


def _spilled(before: Compiled, after: Compiled, report: PassReport) -> dict[str, str]:
    """Why each rewritten kernel that ptxas spills more in than in the input is not kept: the producers' register
    copies of their shares (or the pipeline's ahead copy) did not fit the grown block's registers."""
    out = {}
    for r in report.rewrites:
        old, new = before.functions.get(r.kernel), after.functions.get(r.kernel)
        if old is not None and new is not None and new.spill_bytes > old.spill_bytes:
            out[r.kernel] = (
                f"ptxas spills {new.spill_bytes} bytes of the rewritten kernel at {new.registers} registers per thread "
                f"where the input spilled {old.spill_bytes}: the register copies the rewrite adds (a producer thread's "
                "per consumer thread it stages, the pipeline's ahead copy) do not fit"
            )
    return out


def _batching(module: ast.Module, optimized: ast.Module, arch: str, path: str, kernels: list[str]) -> list[Batching]:
    """Per split kernel, the loads in flight of its consumers' loop before and after: the compute part's loads (the
    consumers' own: the producers replay only the code before the compute part) in the SASS loop whose own body
    holds the most of the compute part's lines, in the input's SASS and in the split's (both tied to input lines)."""
    try:
        before, after = _listings(module, arch, path), _listings(optimized, arch, path)
    except InputError:  # both assembled without -lineinfo already; a report-only check does not fail the run
        return [Batching(name, None, None) for name in kernels]
    functions = {f.name: f for f in module.kernels}
    out = []
    for name in kernels:
        cfg = build_cfg(functions[name])
        found = find_staged_loop(module, functions[name], cfg=cfg)
        if isinstance(found, Refusal):  # the pass split it with its own settings: nothing to map the loop by
            out.append(Batching(name, None, None))
            continue
        lines = frozenset(cfg.linear.ops[i].line for i in found.compute)
        counts = [_consumers_in_flight(listings.get(name, []), lines) for listings in (before, after)]
        out.append(Batching(name, *counts))
    return out


def _consumers_in_flight(listing_lines: list[ListingLine], compute: frozenset[int]) -> int | None:
    """The loads in flight, counting the compute part's loads only, of the loop whose own body holds the most
    compute lines (then the most of its loads); None when no loop holds any."""
    loops = [loop for loop in sass_loops(listing_lines, compute) if loop.lines & compute]
    if not loops:
        return None
    return max(loops, key=lambda loop: (len(loop.lines & compute), loop.loads)).in_flight


@dataclass(frozen=True)
class _Build:
    """A text, its cubin as ptxas made it, and the SASS of its `-lineinfo` build with input lines."""

    text: str
    compiled: Compiled
    sass: dict[str, SassCode]


def _keep_verified(
    source: Source,
    module: ast.Module,
    units: list[_Unit],
    added: list[_Added],
    free: dict[str, frozenset[str]],
    before: _Build,
    arch: str,
    strict: bool,
) -> tuple[list[_Unit], list[Diagnostic], list[Diagnostic], _Build]:
    """Verify the units together, drop those that fail and verify the rest again, until none fails: the units
    kept, those dropped (with why), the problems that fail the file (`strict`), and the build to write."""
    path = source.display
    kept, dropped = list(units), []
    while kept:
        chosen = [e for u in kept for e in u.edits]
        extra = _needed(added, chosen)
        text = _splice(source.text, chosen, extra)
        kept_module = _apply(module, chosen, extra)
        origin = _check_splice(text, kept_module)
        try:
            compiled = compile_ptx(text, path, arch)
        except InputError as error:
            failures = _rejected(error, origin, kept)
            after = _Build(text, before.compiled, before.sass)
        else:
            after = _Build(text, compiled, _sass(kept_module, arch, path))
            failures = _verify(kept, before.sass, after.sass, {k: v for k, v in free.items() if _uses(extra, k)})
            failures |= _unlike(kept, [before, after], failures)
            if not failures:
                return kept, dropped, [], after
        if strict:
            failed = [
                _failure(path, f"{u.kernel}: {failures[u.key]}", _STRICT, *u.place, kernel=u.kernel)
                for u in kept
                if u.key in failures
            ]
            return kept, [], failed, after
        dropped += [dropped_rewrite(path, r, failures[u.key]) for u in kept if u.key in failures for r in u.rewrites]
        kept = [u for u in kept if u.key not in failures]
    return kept, dropped, [], before


def _failure(path: str, message: str, code: str, line: int = 0, column: int = 0, **properties: Any) -> Diagnostic:
    """One reason the file failed, as every diagnostic is: `code` says which check (docs/optimize.md lists them)."""
    return Diagnostic(Location(path, line, column), message, code=code, properties=properties)


def optimize(
    source: Source,
    passes: tuple[str, ...] = DEFAULT_PIPELINE,
    settings: Settings | None = None,
    arch: str | None = None,
    *,
    strict: bool = False,
) -> OptimizeResult:
    """`execute` with its options spelled out (library callers and tests)."""
    return execute(Options(passes, settings or Settings(), arch, strict), source)


# ---------------------------------------------------------------- what the passes changed, by position


@dataclass(frozen=True)
class _Edit:
    """An input instruction a pass replaced."""

    kernel: str
    old: ast.Instruction
    new: ast.Instruction


@dataclass(frozen=True)
class _Added:
    """A statement a pass inserted before `anchor` (an input statement), or at the end of `block` (anchor None)."""

    kernel: str
    statement: ast.Statement
    anchor: ast.Statement | None
    block: ast.Block


@dataclass
class _Unit:
    """What verification keeps or drops as one: every edit of one input line, with the pass's rewrites of it."""

    kernel: str
    line: int
    edits: list[_Edit]
    rewrites: list[Rewrite]

    @property
    def key(self) -> tuple[str, int]:
        return self.kernel, self.line

    @property
    def place(self) -> tuple[int, int]:
        """Its input line and the column of its first rewritten opcode."""
        return self.line, min((e.old.column for e in self.edits), default=0)

    @property
    def promised(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(m for r in self.rewrites for m in r.sass))


def _edits(module: ast.Module, optimized: ast.Module) -> tuple[list[_Edit], list[_Added]]:
    """The instructions the passes replaced and the statements they inserted, found by walking both trees: a pass
    keeps every input statement in place (same node, or one at the same position) and gives new ones line 0."""
    edits: list[_Edit] = []
    added: list[_Added] = []
    if len(module.items) != len(optimized.items):
        raise RuntimeError("a pass added or removed a module-level item: the output cannot be spliced")
    for old, new in zip(module.items, optimized.items, strict=True):
        if old is new:
            continue
        same_header = isinstance(old, ast.Function) and isinstance(new, ast.Function) and old.body and new.body
        if not same_header or replace(old, body=None) != replace(new, body=None):
            raise RuntimeError(f"a pass changed a module-level item at line {old.line}: cannot be spliced")
        _diff_block(old.name, old.body, new.body, edits, added)
    return edits, added


def _diff_block(kernel: str, old: ast.Block, new: ast.Block, edits: list[_Edit], added: list[_Added]) -> None:
    olds = old.statements
    at = 0
    pending: list[ast.Statement] = []
    for s in new.statements:
        o = olds[at] if at < len(olds) else None
        if o is not None and (s is o or (type(s) is type(o) and (s.line, s.column) == (o.line, o.column))):
            at += 1
            added += [_Added(kernel, p, o, old) for p in pending]
            pending = []
            if isinstance(o, ast.Block) and isinstance(s, ast.Block):
                _diff_block(kernel, o, s, edits, added)
            elif isinstance(o, ast.Instruction) and isinstance(s, ast.Instruction) and s != o:
                edits.append(_Edit(kernel, o, s))
            elif s is not o and s != o:
                raise RuntimeError(f"a pass changed the statement at line {o.line}: only instructions can be spliced")
        elif s.line == 0:
            pending.append(s)
        else:
            raise RuntimeError(f"a pass moved or removed the statement at line {s.line}: cannot be spliced")
    if at != len(olds):
        raise RuntimeError(f"a pass removed the statement at line {olds[at].line}: cannot be spliced")
    added += [_Added(kernel, p, None, old) for p in pending]


def _units(edits: list[_Edit], reports: list[PassReport]) -> list[_Unit]:
    """Edits grouped by input line, each with the rewrites its pass reported (the opcode's column filled in)."""
    units: dict[tuple[str, int], _Unit] = {}
    for e in edits:
        units.setdefault((e.kernel, e.old.line), _Unit(e.kernel, e.old.line, [], [])).edits.append(e)
    for report in reports:
        for n, r in enumerate(report.rewrites):
            unit = units.get((r.kernel, r.line))
            if unit is not None:
                report.rewrites[n] = replace(r, column=unit.edits[0].old.column)
                unit.rewrites.append(report.rewrites[n])
    for unit in units.values():
        if not unit.rewrites:  # a pass that did not report an edit: still verified and listed
            unit.rewrites = [
                Rewrite(unit.kernel, unit.line, e.old.mnemonic, e.new.mnemonic, (), (), e.old.column)
                for e in unit.edits
            ]
    return list(units.values())


def _needed(added: list[_Added], chosen: list[_Edit]) -> list[_Added]:
    """A kernel's inserted statements stay while a kept edit of that kernel uses a new operand (the policy)."""
    using = {e.kernel for e in chosen if e.new.operands != e.old.operands}
    return [a for a in added if a.kernel in using]


def _uses(added: list[_Added], kernel: str) -> bool:
    return any(a.kernel == kernel for a in added)


def _apply(module: ast.Module, chosen: list[_Edit], extra: list[_Added]) -> ast.Module:
    """The input tree with only the chosen edits and insertions."""
    new_of = {id(e.old): e.new for e in chosen}
    before: dict[int, list[ast.Statement]] = defaultdict(list)
    for a in extra:
        before[id(a.anchor if a.anchor is not None else a.block)].append(a.statement)

    def block(b: ast.Block) -> ast.Block:
        statements: list[ast.Statement] = []
        for s in b.statements:
            statements += before.get(id(s), [])
            statements.append(block(s) if isinstance(s, ast.Block) else new_of.get(id(s), s))
        return replace(b, statements=(*statements, *before.get(id(b), [])))

    touched = {e.kernel for e in chosen} | {a.kernel for a in extra}
    items = tuple(
        replace(i, body=block(i.body)) if isinstance(i, ast.Function) and i.body and i.name in touched else i
        for i in module.items
    )
    return replace(module, items=items)


def _line_starts(text: str) -> list[int]:
    starts = [0]
    at = text.find("\n")
    while at >= 0:
        starts.append(at + 1)
        at = text.find("\n", at + 1)
    return starts


def _semicolon(text: str, at: int) -> int:
    """The offset of the `;` that ends the statement starting at `at` (comments and strings skipped)."""
    while at < len(text):
        c = text[at]
        if text.startswith("//", at):
            at = text.find("\n", at)
        elif text.startswith("/*", at):
            at = text.find("*/", at) + 1
        elif c == '"':
            at = text.find('"', at + 1)
        elif c == ";":
            return at
        if at < 0:
            break
        at += 1
    raise RuntimeError("an instruction without its `;`: the output cannot be spliced")


def _splice(text: str, chosen: list[_Edit], extra: list[_Added]) -> str:
    """The input text with each chosen edit's opcode (and any operands it appends) replaced in place and each
    insertion put on lines of its own before its anchor; every other byte as it was."""
    starts = _line_starts(text)
    pieces: list[tuple[int, int, str]] = []
    for e in chosen:
        at = starts[e.old.line - 1] + e.old.column - 1
        n = len(e.old.operands)
        if (
            not text.startswith(e.old.mnemonic, at)
            or e.new.guard != e.old.guard
            or e.new.operands[:n] != e.old.operands
        ):
            raise RuntimeError(f"line {e.old.line}: the edit is not an opcode change: the output cannot be spliced")
        pieces.append((at, at + len(e.old.mnemonic), e.new.mnemonic))
        if appended := e.new.operands[n:]:
            stop = _semicolon(text, at)
            while text[stop - 1].isspace():
                stop -= 1
            separator = ", " if n else " "
            pieces.append((stop, stop, separator + ", ".join(map(inline, appended))))
    for a in extra:
        anchor = a.anchor if a.anchor is not None else a.block
        line, column = (anchor.line, anchor.column) if a.anchor is not None else (a.block.end_line, a.block.end_column)
        start = starts[line - 1]
        prefix = text[start : start + column - 1]
        if isinstance(anchor, ast.Instruction) and anchor.guard is not None:  # the statement starts at its guard
            prefix = prefix[: prefix.rfind("@")]
        statement = LINE[type(a.statement)](a.statement)
        if prefix.strip():  # something else before it on its line: insert in the line
            pieces.append((start + len(prefix), start + len(prefix), statement + " "))
        else:  # a line of its own, indented like the anchor, with the file's own line ending
            end = text.find("\n", start)
            newline = "\r\n" if end > 0 and text[end - 1] == "\r" else "\n"
            indent = prefix + ("\t" if a.anchor is None else "")
            pieces.append((start, start, indent + statement + newline))
    out, done = [], 0
    for start, end, replacement in sorted(pieces, key=lambda p: p[0]):
        out += [text[done:start], replacement]
        done = end
    return "".join([*out, text[done:]])


def _shape(module: ast.Module) -> list[str]:
    """Every instruction and declaration as printed, comments and layout aside."""
    return [LINE[type(n)](n) for n in ast.walk(module) if type(n) in (ast.Instruction, ast.Declaration)]


def _check_splice(text: str, module: ast.Module) -> dict[int, int]:
    """The spliced text must be the tree that is verified (a splicing bug is a bug, never a silent difference);
    then each of its instruction lines -> the input line the instruction came from (0: inserted)."""
    try:
        spliced = parse(text)
        same = _shape(spliced) == _shape(module)
    except ParseError:
        same = False
    if not same:
        raise RuntimeError("the spliced output is not the verified module (a splicing bug)")
    return {theirs.line: ours.line for theirs, ours in zip(_instructions(spliced), _instructions(module), strict=True)}


def _instructions(module: ast.Module) -> Iterator[ast.Instruction]:
    return (n for n in ast.walk(module) if type(n) is ast.Instruction)


def _insertion(a: _Added) -> Insertion:
    anchor = a.anchor if a.anchor is not None else a.block
    column = anchor.column if a.anchor is not None else a.block.end_column
    line = anchor.line if a.anchor is not None else a.block.end_line
    return Insertion(a.kernel, line, column, LINE[type(a.statement)](a.statement))


# ---------------------------------------------------------------- verification against the SASS


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


def reprinted(module: ast.Module) -> tuple[str, dict[int, int]]:
    """The module printed without line info (for `-lineinfo` to point at), and each printed instruction's line in
    `module` (0 for an instruction a pass inserted)."""
    text = format_module(_without_line_info(module))
    printed = parse(text)
    line_of: dict[int, int] = {}
    for mine, theirs in zip(module.functions, printed.functions, strict=True):
        if mine.body is not None and theirs.body is not None:
            for a, b in zip(ast.instructions(mine.body), ast.instructions(theirs.body), strict=True):
                line_of[b.line] = a.line
    return text, line_of


def _listings(module: ast.Module, arch: str, path: str) -> dict[str, list[ListingLine]]:
    """Per function, its SASS listing with each instruction's input line (0: an instruction a pass inserted, -1:
    none)."""
    text, line_of = reprinted(module)
    cubin = compile_ptx(text, path, arch, lineinfo=True).cubin
    return {
        name: [replace(e, ptx_line=line_of.get(e.ptx_line, -1)) for e in lines]
        for name, lines in listing(cubin, with_ptx_lines=True).items()
    }


def _sass(module: ast.Module, arch: str, path: str) -> dict[str, SassCode]:
    """Per function, its SASS with each instruction's input line (0: an instruction a pass inserted, -1: none)."""
    return {name: SassCode.of(lines) for name, lines in _listings(module, arch, path).items()}


def _shown(modifier: str, opcode_modifiers: tuple[str, ...]) -> bool:
    return _SAME_PROMISE.get(modifier, modifier) in {_SAME_PROMISE.get(m, m) for m in opcode_modifiers}


def _verify(
    kept: list[_Unit], first: dict[str, SassCode], second: dict[str, SassCode], free: dict[str, frozenset[str]]
) -> Failures:
    """Why each failing unit fails, in words: a broken promise, a crossing, or (for every unit of its function)
    SASS outside the rewritten lines that changed. In a function where a pass inserted statements, what those
    assemble to (line 0) and the mnemonics the pass names (`sass_may_change`) are not counted."""
    failures: Failures = {}
    empty = SassCode.of([])
    for name in sorted(set(first) | set(second)):
        units = [u for u in kept if u.kernel == name]
        lines = {u.line for u in units}
        loose = free.get(name)
        a, b = first.get(name, empty), second.get(name, empty)
        counts = [
            Counter(
                op.counted
                for op in code.ops
                if op.counted
                and op.ptx_line not in lines
                and not (loose is not None and (op.ptx_line == 0 or op.mnemonic in loose))
            )
            for code in (a, b)
        ]
        if not _same_counts(counts[0], counts[1], _if_converted(a, b, lines)):
            reason = f"{name}: SASS of lines not rewritten changed ({_changes(counts[0], counts[1])})"
            for u in units or kept:
                failures.setdefault(u.key, reason)
        for u in units:
            made = [b.ops[i] for i in b.memory_by_line.get(u.line, [])]
            missing = [op.opcode for op in made if not all(_shown(m, op.modifiers) for m in u.promised)]
            if missing:
                failures.setdefault(
                    u.key, f"promised SASS .{'.'.join(u.promised)} but ptxas made {', '.join(sorted(set(missing)))}"
                )
            if made and u.line not in a.memory_by_line:
                opcodes = ", ".join(sorted({op.opcode for op in made}))
                failures.setdefault(u.key, f"ptxas made {opcodes} for it where the input has no access: order unknown")
            if crossed := list(dict.fromkeys(map(str, crossings(a, b, u.line)))):
                more = f" (and {len(crossed) - 1} more)" if len(crossed) > 1 else ""
                failures.setdefault(u.key, crossed[0] + more)
    return failures


def _unlike(kept: list[_Unit], builds: list[_Build], failures: Failures) -> Failures:
    """The checks read `-lineinfo` builds of the printed module; they hold for what is written only if its own
    SASS (and the input's) has the same opcodes in the same order. Where not, the function's units fail."""
    out = {}
    for build in builds:
        for name, instructions in disassemble(build.compiled.cubin).items():
            if [i.opcode for i in instructions] != [op.opcode for op in build.sass.get(name, SassCode.of([])).ops]:
                reason = f"{name}: the SASS checked (built with -lineinfo) is not the SASS of the file itself"
                out |= {u.key: reason for u in kept if u.kernel == name and u.key not in failures}
    return out


def _if_converted(a: SassCode, b: SassCode, lines: set[int]) -> int:
    """How many rewritten lines ptxas turned from a branch-around into a predicated access (positive) or back
    (negative): each may take (or give) one branch and its convergence pair with it."""

    def guarded(code: SassCode, line: int) -> bool:
        return any(code.ops[i].predicate for i in code.memory_by_line.get(line, []))

    return sum(guarded(b, line) - guarded(a, line) for line in lines)


def _same_counts(old: Counter[str], new: Counter[str], converted: int) -> bool:
    """Equal counts, except that each if-converted rewritten line may remove one branch, BSSY and BSYNC (or add
    them, where ptxas went back to a branch)."""
    for key in set(old) | set(new):
        change = new[key] - old[key]
        if key in _IF_CONVERSION and (min(0, -converted) <= change <= max(0, -converted)):
            continue
        if change:
            return False
    return True


def _changes(old: Counter[str], new: Counter[str]) -> str:
    return ", ".join(f"{key} {old[key]} -> {new[key]}" for key in sorted(set(old) | set(new)) if old[key] != new[key])


def _rejected(error: InputError, origin: dict[int, int], kept: list[_Unit]) -> Failures:
    """ptxas rejected the spliced output: the units on the lines it names fail (all of them if it names none)."""
    messages: dict[int, list[str]] = defaultdict(list)
    for d in error.diagnostics:
        messages[origin.get(d.location.line, 0)].append(d.message)
    named = {u.key: "ptxas rejects it: " + "; ".join(messages[u.line]) for u in kept if u.line in messages}
    everything = "ptxas rejects the output: " + "; ".join(m for ms in messages.values() for m in ms)
    return named or {u.key: everything for u in kept}


def _count_checks(kept: list[_Unit], second: dict[str, SassCode]) -> Checks:
    checks = Checks()
    for u in kept:
        code = second.get(u.kernel)
        made = [code.ops[i] for i in code.memory_by_line.get(u.line, [])] if code else []
        checks.removed += not made
        checks.promised += len(u.promised) if made else 0
        checks.present += sum(all(_shown(m, op.modifiers) for op in made) for m in u.promised) if made else 0
    return checks


def _global_memory(code: SassCode | None) -> dict[str, int]:
    counts = Counter(op.opcode for op in code.ops if op.mnemonic in GLOBAL_MEMORY) if code else Counter()
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _compare_on_gpu(source: Source, text: str, spec_path: str) -> tuple[str, int, list[Diagnostic]]:
    """Run the original and the optimized text on the GPU with the spec (from the texts, never re-read from disk);
    the verdict, the trials, and the differences as problems."""
    from ptxtool.report.gpu import run_lines
    from ptxtool.services.launch import load_spec
    from ptxtool.services.run import run

    report = run([source, Source(f"{source.display} (optimized)", text)], load_spec(spec_path))
    lines = run_lines(report)[1:4] if report.exit_code != EXIT_OK else []
    problems = [_failure(source.display, f"on the GPU ({spec_path}): {x.strip()}", _GPU) for x in lines]
    return report.verdict, report.trials, problems
