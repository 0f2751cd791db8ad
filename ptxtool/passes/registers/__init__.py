"""The register-pressure pass: per kernel, variants of its launch bounds and caps (`bounds.py`) and of its live
ranges (`remat.py`: cheap values recomputed at their uses), each judged by ptxas's numbers, and by GPU time where a
launch spec allows. ptxas allocates registers itself, so nothing else in the PTX moves its numbers.

The service hands the facts down (`RegisterSettings.measure`: ptxas's registers, spills, occupancy and the SASS's
spill instructions per kernel of a module; `RegisterSettings.time`: GPU times and bit-for-bit checks); the pass never
runs a tool.

    .maxntid 256, 1, 1                       .maxntid 256, 1, 1
    .minnctapersm 8            ->            .minnctapersm 5

(row_reduce32: 32 -> 48 registers, 364 -> 0 bytes spilled, occupancy 100 % -> 62 %; long_live_ranges, the same
change of nvcc's bounds, measured 2.17x on an H200.)
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ptxtool.analysis.remat import readonly_loads
from ptxtool.errors import InputError
from ptxtool.isa.targets import Target, shared_limit
from ptxtool.passes.registers import bounds, remat
from ptxtool.passes.report import PassReport
from ptxtool.syntax import ast

if TYPE_CHECKING:
    from ptxtool.passes import Analyses

NAME = "registers"
NOT_TIMED = "ptxas numbers (not timed)"


@dataclass(frozen=True, slots=True)
class Numbers:
    """One kernel as ptxas built it: registers, spill bytes, stack and shared memory, theoretical occupancy (None:
    unknown target) with the warps it allows and what limits it, and each SASS local-memory instruction as
    (the PTX line it came from, bytes it moves) (an inserted instruction: the line of the one it precedes;
    0: unknown)."""

    registers: int
    spill_stores: int
    spill_loads: int
    stack: int = 0
    shared: int = 0
    occupancy: float | None = None
    warps: int = 0
    limited_by: str = ""
    spills: tuple[tuple[int, int], ...] = ()

    @property
    def spill_bytes(self) -> int:
        return self.spill_stores + self.spill_loads

    def loop_spill_bytes(self, loop_lines: frozenset[int]) -> int:
        """Bytes moved by the local-memory instructions made from lines inside loops (unknown lines count)."""
        return sum(size for line, size in self.spills if line == 0 or line in loop_lines)

    def loop_spills(self, loop_lines: frozenset[int]) -> int:
        """Local-memory instructions made from lines inside loops (unknown lines count): the spills in hot loops."""
        return sum(1 for line, _ in self.spills if line == 0 or line in loop_lines)

    def to_data(self) -> dict[str, Any]:
        return {
            "registers": self.registers,
            "spill_bytes": self.spill_bytes,
            "spill_stores": self.spill_stores,
            "spill_loads": self.spill_loads,
            "stack": self.stack,
            "shared": self.shared,
            "occupancy": self.occupancy,
            "warps": self.warps,
            "limited_by": self.limited_by,
            "local_memory_lines": sorted({line for line, _ in self.spills if line}),
        }


@dataclass(frozen=True, slots=True)
class Speed:
    """A variant's GPU time against the input's, measured side by side: median, speedup (input / variant) with its
    95 % interval, and whether its outputs were bit-identical to the input's (None: not checked)."""

    median_us: float
    speedup: float
    low: float
    high: float
    identical: bool | None = None

    def to_data(self) -> dict[str, Any]:
        return {
            "median_us": self.median_us,
            "speedup": self.speedup,
            "interval": [self.low, self.high],
            "identical": self.identical,
        }


Measure = Callable[[ast.Module], dict[str, Numbers]]  # raises InputError where ptxas rejects the module
Timer = Callable[[str, Sequence[ast.Module]], Sequence[Speed] | None]  # None: the spec does not launch that kernel


@dataclass(frozen=True)
class RegisterSettings:
    """What the service hands down: the target, the kernel a launch spec launches with its block and dynamic shared
    memory (None: no spec), and the oracles; `remat` turns rematerialization candidates on, `limit` caps the
    variants compiled per kernel."""

    arch: str = ""
    launched: str | None = None
    block: tuple[int, int, int] | None = None
    dynamic_shared: int = 0
    measure: Measure | None = None
    time: Timer | None = None
    remat: bool = True
    limit: int = 8


@dataclass(frozen=True, slots=True)
class Tried:
    """A variant compiled for a kernel: what it changes, ptxas's numbers (None: rejected), its GPU speed if timed,
    and what became of it (`chosen`, `kept for timing`, or why it was dropped)."""

    change: str
    numbers: Numbers | None
    verdict: str
    speed: Speed | None = None

    def to_data(self) -> dict[str, Any]:
        return {
            "change": self.change,
            "numbers": self.numbers.to_data() if self.numbers else None,
            "verdict": self.verdict,
            "speed": self.speed.to_data() if self.speed else None,
        }


@dataclass
class KernelRegisters:
    """One kernel before -> after: ptxas's numbers, the bounds as written and as chosen, the changes (LOUD when the
    author's bounds changed), values rematerialized, how the choice was made, the speedup when timed, and every
    variant tried. `note` says why a kernel was left alone."""

    name: str
    before: Numbers | None
    after: Numbers | None
    bounds_before: str = ""
    bounds_after: str = ""
    changes: tuple[str, ...] = ()
    remats: tuple[Any, ...] = ()
    chosen_by: str = ""
    speed: Speed | None = None
    note: str = ""
    tried: list[Tried] = field(default_factory=list)
    loop_lines: frozenset[int] = frozenset()  # the input's PTX lines inside loops

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    @property
    def author_bounds_changed(self) -> bool:
        return self.bounds_before != self.bounds_after

    def to_data(self) -> dict[str, Any]:
        return {
            "kernel": self.name,
            "before": self.before.to_data() if self.before else None,
            "after": self.after.to_data() if self.after else None,
            "bounds_before": self.bounds_before,
            "bounds_after": self.bounds_after,
            "author_bounds_changed": self.author_bounds_changed,
            "changes": list(self.changes),
            "rematerialized": [_remat_data(r) for r in self.remats],
            "chosen_by": self.chosen_by,
            "speed": self.speed.to_data() if self.speed else None,
            "note": self.note,
            "tried": [t.to_data() for t in self.tried],
            "loop_spills": {
                when: {"instructions": n.loop_spills(self.loop_lines), "bytes": n.loop_spill_bytes(self.loop_lines)}
                for when, n in (("before", self.before), ("after", self.after))
                if n is not None
            },
        }


def _remat_data(remat: Any) -> dict[str, Any]:
    """A Remat record (a frozen dataclass) as JSON data: numbers and names as they are, anything else as text."""
    return {name: _plain(getattr(remat, name)) for name in getattr(remat, "__dataclass_fields__", {})}


def _plain(value: Any) -> Any:
    if isinstance(value, int | str | None):
        return value
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return str(value)


@dataclass
class RegistersReport(PassReport):
    """The pass's report: per kernel, before -> after and why."""

    kernels: list[KernelRegisters] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(k.changed for k in self.kernels)

    def to_data(self) -> dict[str, Any]:
        return super().to_data() | {"kernels": [k.to_data() for k in self.kernels]}


# ---------------------------------------------------------------- the rules


def pruned(before: Numbers, variant: Numbers, loop_lines: frozenset[int], room: int | None = None) -> str | None:
    """Why ptxas's numbers rule a variant out before any timing (None: worth keeping): it adds local-memory traffic
    inside loops, lowers occupancy for nothing, needs more shared memory than a block may have (`room`: the target's
    per-block limit less the launch's dynamic shared memory; spills moved to shared memory count), or comes out
    the same."""
    hot_before, hot = before.loop_spill_bytes(loop_lines), variant.loop_spill_bytes(loop_lines)
    if hot > hot_before:
        return f"adds spills inside loops ({hot_before} -> {hot} bytes of local-memory instructions)"
    occupancy_before, occupancy_after = before.occupancy or 0, variant.occupancy or 0
    if occupancy_after < occupancy_before and variant.spill_bytes >= before.spill_bytes:
        return f"lowers occupancy ({occupancy_before:.0%} -> {occupancy_after:.0%}) for nothing"
    if variant.shared > bounds.MAX_STATIC_SHARED:
        return f"needs {variant.shared} bytes of static shared memory (more than {bounds.MAX_STATIC_SHARED})"
    if room is not None and variant.shared > max(room, before.shared):
        return f"needs {variant.shared} bytes of static shared memory, and the block has room for {room}"
    if (variant.registers, variant.spill_bytes, variant.occupancy) == (
        before.registers,
        before.spill_bytes,
        before.occupancy,
    ):
        return "ptxas makes the same registers, spills and occupancy"
    return None


def preferred(before: Numbers, variant: Numbers, loop_lines: frozenset[int], remat_only: bool = False) -> bool:
    """The rule used without a GPU: fewer spill bytes inside loops (then in all) at equal or better occupancy; or
    spills cut at least fourfold, inside loops and in all, while keeping at least half the occupancy (a
    local-memory round trip per spilled value costs more than the warps given up: long_live_ranges, 2.17x).
    Rematerialization with the author's bounds: fewer spill bytes inside loops or better occupancy, neither worse
    (32 pointers reloaded in the loop: 80 -> 32 registers, 1.17-1.23x on an H200); fewer registers or spills
    outside loops alone predict nothing (Triton's fp8 matmul, 255 -> 202 registers and 12 -> 0 spill bytes after
    its loop at the same occupancy: 0.99x), so such a variant is left for timing (`tune`, --verify-gpu)."""
    hot_before, hot = before.loop_spill_bytes(loop_lines), variant.loop_spill_bytes(loop_lines)
    if remat_only:
        occupancy_before, occupancy_after = before.occupancy or 0, variant.occupancy or 0
        gains = hot < hot_before or occupancy_after > occupancy_before
        return gains and hot <= hot_before and occupancy_after >= occupancy_before
    if (hot, variant.spill_bytes) >= (hot_before, before.spill_bytes):
        return False
    occupancy_before, occupancy_after = before.occupancy or 0, variant.occupancy or 0
    if occupancy_after >= occupancy_before:
        return True
    fourfold = 4 * variant.spill_bytes <= before.spill_bytes and 4 * hot <= hot_before
    return fourfold and 2 * occupancy_after >= occupancy_before


def _rank(numbers: Numbers, loop_lines: frozenset[int]) -> tuple[int, int, float, int]:
    return (numbers.loop_spill_bytes(loop_lines), numbers.spill_bytes, -(numbers.occupancy or 0), numbers.registers)


# ---------------------------------------------------------------- the pass


@dataclass(frozen=True)
class _Variant:
    change: str
    function: ast.Function
    bounds: bounds.Bounds
    remats: tuple[Any, ...] = ()


def _loop_lines(function: ast.Function, analyses: Analyses) -> frozenset[int]:
    cfg, loops = analyses.get("cfg", function), analyses.get("loops", function)
    blocks = {b for loop in loops for b in loop.blocks}
    return frozenset(op.line for b in blocks for op in cfg.ops(cfg.blocks[b]))


def _variants(
    module: ast.Module, function: ast.Function, numbers: Numbers, settings: RegisterSettings, analyses: Analyses
) -> list[_Variant]:
    current = bounds.read(function)
    launched = function.name == settings.launched
    shared = numbers.shared + (settings.dynamic_shared if launched else 0)
    proposals = bounds.candidates(
        current,
        arch=settings.arch,
        spills=numbers.spill_bytes > 0,
        limited_by=numbers.limited_by,
        registers=numbers.registers,
        shared=shared,
        block=settings.block if launched else None,
        # spilling to shared memory adds to the block's share: only where all of it is known (a spec, or no .extern);
        # ptxas refuses it in a kernel that touches dynamic shared memory, whatever the launch gives
        smem_spilling=bounds.smem_spilling_allowed(module, settings.arch)
        and not bounds.uses_dynamic_shared(module, function)
        and (launched or not bounds.dynamic_shared(module)),
    )
    found = [_Variant(c.change, bounds.apply(function, c.bounds), c.bounds) for c in proposals]
    if settings.remat:
        remats = _remat_variants(module, function, current, analyses)
        found = (
            remats
            + found
            + [
                _Variant(f"{v.change}, {r.change}", bounds.apply(r.function, v.bounds), v.bounds, r.remats)
                for r in remats[:1]
                for v in found
            ]
        )
    return found[: settings.limit]


def _remat_variants(
    module: ast.Module, function: ast.Function, current: bounds.Bounds, analyses: Analyses
) -> list[_Variant]:
    """The function with loop-carried values recomputed at their reads (remat.py): the form ptxas keeps (values
    that reload read-only global memory), then also pure arithmetic, which ptxas may hoist back; distinct ones only."""
    cfg, loops = analyses.get("cfg", function), analyses.get("loops", function)
    readonly = readonly_loads(module, function, cfg)
    found: list[_Variant] = []
    for pure in (False, True):
        sunk, done = remat.rematerialize(function, cfg, loops, readonly=readonly, pure=pure)
        if done and function.body is not None and sunk.body is not None:
            sunk = replace(sunk, body=_as_inserted(function.body, sunk.body))
        if done and all(v.function != sunk for v in found):
            what = f"{len(done)} value{'s' * (len(done) != 1)} rematerialized" + (" (with pure arithmetic)" * pure)
            found.append(_Variant(what, sunk, current, tuple(done)))
    return found


def _as_inserted(old: ast.Block, new: ast.Block) -> ast.Block:
    """`new` with every statement that does not stand where an input statement stood marked as inserted (line 0):
    a recomputed copy of a definition keeps its original's position, which is neither where it now is nor the line
    its SASS should be charged to (inside the loop)."""
    statements: list[ast.Statement] = []
    at = 0
    for s in new.statements:
        o = old.statements[at] if at < len(old.statements) else None
        if o is not None and (s is o or (type(s) is type(o) and (s.line, s.column) == (o.line, o.column))):
            at += 1
            if isinstance(s, ast.Block) and isinstance(o, ast.Block) and s is not o:
                s = _as_inserted(o, s)
        elif s.line:
            s = replace(s, line=0, column=0, end_line=0)
        statements.append(s)
    return replace(new, statements=tuple(statements))


@dataclass(frozen=True, slots=True)
class Survivor:
    """A variant ptxas's numbers let through for a kernel, before any choice: what it changes, its numbers, the
    module with it, and where it stands in the kernel's `tried` list."""

    change: str
    numbers: Numbers
    module: ast.Module
    at: int
    variant: _Variant
    remat_only: bool  # values rematerialized under the author's bounds


def variants(
    module: ast.Module, settings: RegisterSettings, analyses: Analyses
) -> list[tuple[KernelRegisters, list[Survivor]]]:
    """Per kernel: its entry (numbers before, every variant tried and why any was dropped) and the variants that
    survive ptxas's numbers, unchosen: what `run` chooses from, and what `tune` times."""
    if settings.measure is None:
        return []
    before = settings.measure(module)
    kernels = [f for f in module.functions if f.is_kernel and f.body is not None and f.name in before]
    proposed: dict[str, list[_Variant]] = {}
    entries: list[KernelRegisters] = []
    for f in kernels:
        n = before[f.name]
        entry = KernelRegisters(f.name, n, n, bounds.read(f).describe(), bounds.read(f).describe())
        entry.loop_lines = _loop_lines(f, analyses)
        entries.append(entry)
        if n.spill_bytes == 0 and n.limited_by != "registers":
            entry.note = f"no spills, occupancy limited by {n.limited_by or 'nothing known'}: left alone"
            continue
        proposed[f.name] = _variants(module, f, n, settings, analyses)
        if not proposed[f.name]:
            entry.note = "no bounds or values to change: left alone"
    measured = _measure(module, proposed, settings.measure)
    out = []
    for entry in entries:
        function = next(f for f in kernels if f.name == entry.name)
        mine = proposed.get(entry.name, [])
        kept = _judge(function, entry, mine, measured, settings) if mine else []
        written = bounds.read(function)
        survivors = [
            Survivor(
                v.change, n, _with(module, {entry.name: v.function}), at, v, bool(v.remats) and v.bounds == written
            )
            for v, n, at in kept
        ]
        _say_smem(entry, module, function)
        out.append((entry, survivors))
    return out


def run(module: ast.Module, settings: RegisterSettings, analyses: Analyses) -> tuple[ast.Module, RegistersReport]:
    """Per kernel: compile the variants, drop those ptxas's numbers rule out, keep the fastest verified one on the
    GPU (`settings.time`) or, without one, the one the conservative rule prefers; the input is always a candidate."""
    report = RegistersReport(NAME)
    if settings.measure is None:
        report.warnings.append("registers: no ptxas numbers were handed to the pass: nothing changed")
        return module, report
    chosen: dict[str, ast.Function] = {}
    for entry, survivors in variants(module, settings, analyses):
        report.kernels.append(entry)
        pick = _pick(module, entry, survivors, settings) if survivors else None
        if pick is not None:
            chosen[entry.name] = pick.function
        _say_smem(entry, module, next(f for f in module.functions if f.name == entry.name))
    return _with(module, chosen), report


SMEM_REFUSED = " (ptxas refuses enable_smem_spilling in a kernel that uses dynamic shared memory)"


def _say_smem(entry: KernelRegisters, module: ast.Module, function: ast.Function) -> None:
    """A spilling kernel left alone that touches dynamic shared memory: say why no smem-spilling variant was tried."""
    spills = entry.before is not None and entry.before.spill_bytes > 0
    if entry.note and spills and SMEM_REFUSED not in entry.note and bounds.uses_dynamic_shared(module, function):
        entry.note += SMEM_REFUSED


def _with(module: ast.Module, functions: dict[str, ast.Function]) -> ast.Module:
    if not functions:
        return module
    items = tuple(functions.get(i.name, i) if isinstance(i, ast.Function) else i for i in module.items)
    return replace(module, items=items)


def _measure(
    module: ast.Module, variants: dict[str, list[_Variant]], measure: Measure
) -> dict[tuple[str, int], Numbers | str]:
    """ptxas's numbers for every variant (or why ptxas rejected it): the i-th variants of all kernels are compiled
    together (kernels are assembled independently), and apart only where ptxas rejects the module."""
    out: dict[tuple[str, int], Numbers | str] = {}
    rounds = max((len(v) for v in variants.values()), default=0)
    for i in range(rounds):
        together = {name: v[i].function for name, v in variants.items() if i < len(v)}
        try:
            numbers = measure(_with(module, together))
        except InputError:  # find which kernel's variant ptxas rejects
            numbers = {}
            for name, function in together.items():
                try:
                    numbers[name] = measure(_with(module, {name: function}))[name]
                except InputError as error:
                    out[(name, i)] = f"ptxas rejects it: {error}"
        out |= {(name, i): numbers[name] for name in together if name in numbers}
    return out


def _judge(
    function: ast.Function,
    entry: KernelRegisters,
    proposed: list[_Variant],
    measured: dict[tuple[str, int], Numbers | str],
    settings: RegisterSettings,
) -> list[tuple[_Variant, Numbers, int]]:
    """The variants ptxas's numbers let through for one kernel (variant, its numbers, its index in entry.tried),
    every one recorded in `entry.tried` with its verdict."""
    assert entry.before is not None
    loops = entry.loop_lines
    written = bounds.read(function)
    target = Target.parse(settings.arch)
    limit = shared_limit(target) if target else None
    dynamic = settings.dynamic_shared if entry.name == settings.launched else 0
    room = None if limit is None else limit - dynamic
    survivors: list[tuple[_Variant, Numbers, int]] = []
    for i, v in enumerate(proposed):
        numbers = measured.get((entry.name, i), "not compiled")
        if isinstance(numbers, str):
            entry.tried.append(Tried(v.change, None, numbers))
            continue
        why = pruned(entry.before, numbers, loops, room)
        if why is None and v.remats:
            plain = next((j for j, w in enumerate(proposed) if not w.remats and w.bounds == v.bounds), -1)
            base = entry.before if v.bounds == written else measured.get((entry.name, plain))
            if not isinstance(base, Numbers):  # the same bounds without it were not compiled: nothing to compare
                why = "no numbers for the same bounds without rematerialization"
            elif (numbers.registers, numbers.spill_bytes) >= (base.registers, base.spill_bytes):
                why = "rematerialization does not lower ptxas's registers or spills"
        entry.tried.append(Tried(v.change, numbers, f"dropped: {why}" if why else "kept"))
        if why is None:
            survivors.append((v, numbers, len(entry.tried) - 1))
    if not survivors:
        entry.note = "no variant survived ptxas's numbers: left alone"
    return survivors


def _pick(
    module: ast.Module, entry: KernelRegisters, survivors: list[Survivor], settings: RegisterSettings
) -> _Variant | None:
    """The surviving variant to keep for one kernel (None: the input): the fastest verified one when timed, else
    the one the conservative rule prefers; the entry is filled in."""
    assert entry.before is not None
    loops = entry.loop_lines
    timed = settings.time(entry.name, [module] + [s.module for s in survivors]) if settings.time else None
    if timed is None:
        good = [s for s in survivors if preferred(entry.before, s.numbers, loops, s.remat_only)]
        for s in survivors:
            if all(s is not g for g in good):
                entry.tried[s.at] = replace(entry.tried[s.at], verdict="not preferred without timing")
        if not good:
            entry.note = "no variant is better by ptxas's numbers alone (time them with --verify-gpu SPEC)"
            return None
        pick = min(good, key=lambda s: (_rank(s.numbers, loops), s.change.count(",")))
        entry.chosen_by = NOT_TIMED
    else:
        speeds = list(timed)[1:]
        for s, speed in zip(survivors, speeds, strict=True):
            entry.tried[s.at] = replace(entry.tried[s.at], speed=speed)
        faster = [(s, speed) for s, speed in zip(survivors, speeds, strict=True) if speed.identical and speed.low > 1]
        if not faster:
            entry.note = "no variant was faster than the input beyond noise with identical outputs: left alone"
            return None
        pick, entry.speed = max(faster, key=lambda f: f[1].speedup)
        entry.chosen_by = "GPU time"
    entry.tried = [replace(t, verdict="not chosen") if t.verdict == "kept" else t for t in entry.tried]
    entry.tried[pick.at] = replace(entry.tried[pick.at], verdict="chosen")
    entry.after, entry.changes, entry.remats = pick.numbers, tuple(pick.change.split(", ")), pick.variant.remats
    entry.bounds_after = pick.variant.bounds.describe()
    return pick.variant


def speed_of(input_samples: Sequence[float], variant_samples: Sequence[float], identical: bool | None) -> Speed:
    """A variant's speed from launches interleaved with the input's: the median of the per-pair ratios and its
    distribution-free 95 % interval (order statistics of the pairs)."""
    ratios = sorted(a / b for a, b in zip(input_samples, variant_samples, strict=False) if b > 0)
    n = len(ratios)
    if not n:
        return Speed(0.0, 1.0, 1.0, 1.0, identical)
    half = 1.96 * n**0.5 / 2
    low, high = ratios[max(0, int(n / 2 - half))], ratios[min(n - 1, int(n / 2 + half))]
    return Speed(statistics.median(variant_samples), statistics.median(ratios), low, high, identical)
