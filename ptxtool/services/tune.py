"""`ptxtool tune`: choose, on the GPU, the variant of one kernel that is really faster, never one that is slower or
wrong. Candidates (tuning/space.py) are checked against the input's outputs and timed interleaved with the input in
worker processes (tuning/worker.py, one per GPU); a candidate wins only when its paired ratio to the input lies below
1 at the stated confidence, corrected for the number of candidates, else the input stays. docs/tune.md has the method.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from ptxtool import __version__
from ptxtool.errors import EXIT_FOUND, EXIT_OK, EnvironmentProblem, InputError, UsageError
from ptxtool.services.launch import check_signature, find_kernel, load_spec
from ptxtool.services.tuning.space import (
    Candidate,
    Context,
    Space,
    check_against_spec,
    make_candidates,
    read_layer,
    read_space_file,
)
from ptxtool.services.tuning.worker import Entry, Job, Measurement, WorkerResult, work
from ptxtool.sources import Source, Unreadable, parse_source, write_atomic
from ptxtool.toolchain.gpu import DeviceInfo, Gpu, KernelFault
from ptxtool.toolchain.timing import Interval, corrected, median_interval, paired_ratios

SCHEMA = "ptxtool.tune/1"
CACHE_SCHEMA = "ptxtool.tune-cache/1"
VERIFIED = ("identical", "within_tolerance")
WRONG = ("differ", "overrun", "fault")  # outputs that disagree with the input's, or a crash
FINAL = (*WRONG, "refused", "rejected")  # verdicts a worker started again for the rest keeps
_NO_GPU = "`tune` times candidates on a GPU; `--dry-run` lists them and what ptxas says of each without one"


@dataclass(frozen=True)
class Options:
    """The command line: the launch spec, where to write the winner, a space file, `[tool.ptxtool.tune]` and the
    flags given (None: not given), and the modes."""

    spec: str
    output: str | None = None
    space: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    config_where: str = "pyproject.toml"
    flags: dict[str, Any] = field(default_factory=dict)
    kernel: str | None = None
    dry_run: bool = False
    fresh: bool = False


@dataclass(frozen=True, slots=True)
class Resources:
    """What ptxas says of a candidate's kernel, and its theoretical occupancy at the candidate's block size."""

    registers: int | None
    spill_bytes: int
    shared: int
    occupancy: float | None
    limited_by: str | None

    def to_data(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CandidateResult:
    """One candidate: what it is, its ptxas numbers, what happened to it, and its timing against the input."""

    candidate: Candidate
    resources: Resources
    status: str = "not run"
    problem: str | None = None
    gpu: int | None = None
    median_us: float | None = None
    ratio: Interval | None = None  # the objective's paired ratio to the input (the decision's number)
    kernel_ratio: Interval | None = None  # the kernel's own time against the input's
    neighbour_slowdown: Interval | None = None  # the neighbour beside it over the neighbour alone
    rounds: int = 0

    @property
    def name(self) -> str:
        return self.candidate.name

    @property
    def verified(self) -> bool | None:
        """Outputs as the input's (True), not (False), or not known: not run, pruned, never reached."""
        if self.status in (*VERIFIED, "input"):
            return True
        return False if self.status in FINAL else None

    def to_data(self) -> dict[str, Any]:
        def interval(i: Interval | None) -> dict[str, Any] | None:
            return None if i is None else i.to_data()

        return self.candidate.to_data() | {
            "resources": self.resources.to_data(),
            "status": self.status,
            "verified": self.verified,
            "problem": self.problem,
            "gpu": self.gpu,
            "median_us": self.median_us,
            "ratio": interval(self.ratio),
            "kernel_ratio": interval(self.kernel_ratio),
            "neighbour_slowdown": interval(self.neighbour_slowdown),
            "rounds": self.rounds,
        }


@dataclass
class TuneResult:
    """The candidates in order (the input first), which one won and how sure that is, and where it was measured."""

    path: str
    kernel: str
    spec: str
    arch: str
    space: Space
    candidates: list[CandidateResult]
    dry_run: bool = False
    winner: str | None = None
    confidence: float | None = None  # per comparison, after the correction for their number
    devices: list[DeviceInfo] = field(default_factory=list)
    cached: bool = False
    written: str | None = None
    notes: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """1 when a candidate that changes only code gave other outputs than the input (a pass made wrong code)."""
        wrong = any(c.status in WRONG and not c.candidate.launch_changed for c in self.candidates)
        return EXIT_FOUND if wrong else EXIT_OK

    def to_data(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "file": self.path,
            "kernel": self.kernel,
            "spec": self.spec,
            "arch": self.arch,
            "objective": self.space.objective,
            "dry_run": self.dry_run,
            "winner": self.winner,
            "confidence": self.confidence,
            "devices": [d.to_data() for d in self.devices],
            "cached": self.cached,
            "written": self.written,
            "space": self.space.to_data(),
            "candidates": [c.to_data() for c in self.candidates],
            "notes": self.notes,
            "stopped": self.stopped,
        }


# ---------------------------------------------------------------- the service


def execute(
    options: Options, sources: Sequence[Source | Unreadable], say: Callable[[str], None] | None = None
) -> TuneResult:
    """Make the candidates, and unless a dry run, verify and time them (or take the cache's measurements) and
    decide; `say` is told each phase (a spinner on a terminal)."""
    say = say or (lambda _: None)
    started = time.monotonic()
    source = _one(sources)
    spec = load_spec(options.spec)
    module = parse_source(source)
    function = find_kernel(module, options.kernel or spec.kernel, source.display)
    check_signature(function, spec, source.display)
    space = _space(options, spec)
    from ptxtool.toolchain.compile import target_arch

    arch = target_arch(module.targets, source.display)
    if options.output and Path(options.output).is_dir():
        raise UsageError(f"-o {options.output} is a directory: give the file to write the winner's PTX to")
    devices = [] if options.dry_run else _devices(space.gpus)  # before the candidates: no GPU, no waiting
    context = Context(source, module, function.name, arch, spec, space)
    say("making candidates (optimize's verification, ptxas)")
    candidates = make_candidates(context, options.space or options.spec)
    results = [CandidateResult(c, _resources(c, context)) for c in candidates]
    result = TuneResult(source.display, function.name, spec.path, arch, space, results, notes=context.notes)
    results[0].status = "input"
    _prune(results, space)
    if options.dry_run:
        result.dry_run = True
        return result
    key = _cache_key(source, spec.path, space, candidates, devices)
    cached = None if options.fresh else _cache_read(key)
    if cached is not None:
        measurements, result.stopped = cached
        result.cached = True
    else:
        say(f"checking and timing {len(candidates)} candidates on {len(devices)} GPU{'s' * (len(devices) > 1)}")
        deadline = time.time() + (space.budget_s - (time.monotonic() - started) if space.budget_s else 1e9)
        measurements, result.stopped = _measure(source, function.name, spec, space, results, devices, deadline)
        _cache_write(key, measurements, result.stopped)
    result.devices = devices
    result.confidence = _assess(results, measurements, space)
    result.winner = decide(results, space)
    if options.output:
        result.written = _write(options.output, source, next(c for c in results if c.name == result.winner))
    return result


def _one(sources: Sequence[Source | Unreadable]) -> Source:
    if len(sources) != 1:
        raise UsageError("give one PTX file to tune")
    (source,) = sources
    if isinstance(source, Unreadable):
        raise InputError(list(source.diagnostics))
    if source.data:
        raise InputError.at(source.path, "tune needs PTX text (it makes variants of it), not a cubin")
    return source


def _space(options: Options, spec: Any) -> Space:
    """The settings, each layer over the one before: defaults, `[tool.ptxtool.tune]`, the spec's `[tune]`,
    `--space`, the flags."""
    from ptxtool.config import read_toml

    layers = [(options.config, options.config_where), (read_toml(Path(spec.path)).get("tune", {}), spec.path)]
    if options.space:
        layers.append((read_space_file(options.space), options.space))
    layers.append(({k: v for k, v in options.flags.items() if v is not None}, "the command line"))
    space = Space()
    for table, where in layers:
        space = read_layer(space, table, where)
        if "args" in table:
            check_against_spec(space, spec, where)
    if space.objective == "neighbour" and not space.neighbour_mib:
        raise UsageError("--objective neighbour needs a neighbour: --neighbour-mib 1 or more")
    return space


def _resources(candidate: Candidate, context: Context) -> Resources:
    """ptxas's registers and spills for the candidate's kernel, and the occupancy at its block size."""
    from ptxtool.toolchain.compile import compile_ptx
    from ptxtool.toolchain.occupancy import occupancy

    compiled = compile_ptx(candidate.text, context.source.display, context.arch)
    found = compiled.functions.get(context.kernel)
    if found is None:
        return Resources(None, 0, 0, None, None)
    shared = found.shared + context.spec.shared_bytes
    threads = math.prod(candidate.launch.block)
    occ = occupancy(context.arch, found.registers or 0, shared, threads)
    spills = found.spill_stores + found.spill_loads
    return Resources(found.registers, spills, shared, occ.occupancy if occ else None, occ.limited_by if occ else None)


def _prune(results: list[CandidateResult], space: Space) -> None:
    """With `prune`, a candidate that changes only code and has new spills or a lower occupancy is not timed:
    ptxas's numbers already say it costs more, and the budget is better spent on the others. A generator that
    trades these numbers on purpose (register caps, the warp-role split) has ruled on them itself (`judged`)."""
    base = results[0].resources
    for c in results[1:]:
        r = c.resources
        if not space.prune or c.candidate.launch_changed or c.candidate.judged:
            continue
        if r.spill_bytes > base.spill_bytes:
            c.status, c.problem = "pruned", f"spills {r.spill_bytes} bytes (the input {base.spill_bytes})"
        elif r.occupancy is not None and base.occupancy is not None and r.occupancy < base.occupancy:
            c.status, c.problem = "pruned", f"occupancy {r.occupancy:.0%} (the input {base.occupancy:.0%})"


def _devices(gpus: str) -> list[DeviceInfo]:
    """The GPUs to use (`all` or the first N): asking the driver is where a machine without one stops."""
    try:
        with Gpu() as gpu:
            found = gpu.devices()
    except EnvironmentProblem as problem:
        raise EnvironmentProblem(f"{problem}; {_NO_GPU}") from None
    wanted = len(found) if gpus == "all" else int(gpus)
    if wanted > len(found):
        raise EnvironmentProblem(f"--gpus {gpus}: the driver sees {len(found)} GPU{'s' * (len(found) != 1)}")
    return found[:wanted]


# ---------------------------------------------------------------- measuring


def _measure(
    source: Source,
    kernel: str,
    spec: Any,
    space: Space,
    results: list[CandidateResult],
    devices: list[DeviceInfo],
    deadline: float,
) -> tuple[list[Measurement], list[str]]:
    """Verify and time the candidates, spread round-robin over the GPUs (each with the input beside its share);
    a worker whose candidate faulted is started again, without it, for the rest."""
    entries = [
        Entry(c.name, c.candidate.text, c.candidate.launch, not c.candidate.launch_changed)
        for c in results[1:]
        if c.status != "pruned"
    ]
    first = Entry("input", source.text, results[0].candidate.launch, True)
    per_comparison = corrected(space.confidence, len(entries))
    shares = {i: entries[i :: len(devices)] for i in range(len(devices)) if entries[i :: len(devices)]} or {0: []}
    done: dict[str, Measurement] = {}
    stopped: list[str] = []
    while shares:
        jobs = [
            Job(
                ordinal=ordinal,
                path=source.display,
                kernel=kernel,
                spec=spec,
                input=first,
                entries=tuple(share),
                objective=space.objective,
                launches=space.launches,
                min_rounds=min(space.min_rounds, space.launches),
                warmup=space.warmup,
                confidence=per_comparison,
                neighbour_bytes=space.neighbour_mib << 20,
                deadline=deadline,
            )
            for ordinal, share in shares.items()
        ]
        answers = run_jobs(jobs)
        shares = {}
        for job, answer in zip(jobs, answers, strict=True):
            _raise(answer)
            if answer.faulted is None:
                done.setdefault("input", answer.measurements[0])
                done.update((m.name, m) for m in answer.measurements[1:])
                stopped.append(f"GPU {job.ordinal}: {answer.stopped or 'nothing to time'}")
                continue
            final = [m for m in answer.measurements[1:] if m.verdict in FINAL]
            done.update((m.name, m) for m in final)
            names = {m.name for m in final}
            shares[job.ordinal] = [e for e in job.entries if e.name not in names]
    return list(done.values()), stopped


def run_jobs(jobs: list[Job]) -> list[WorkerResult]:
    """Each job in a fresh process of its own, all at once (spawned: a CUDA context must never be forked, and one
    that saw a fault is useless to whatever runs in that process next)."""
    with ProcessPoolExecutor(len(jobs), mp_context=get_context("spawn"), max_tasks_per_child=1) as pool:
        return list(pool.map(work, jobs))


def _raise(answer: WorkerResult) -> None:
    """A worker's error, raised here as the error it was (it crossed the process boundary as data)."""
    if answer.error is None:
        return
    kind, payload = answer.error
    if kind == "input":
        raise InputError(list(payload))
    if kind == "EnvironmentProblem":
        raise EnvironmentProblem(payload)
    if kind == "KernelFault":
        raise KernelFault(payload)
    raise UsageError(payload)


# ---------------------------------------------------------------- deciding


def _assess(results: list[CandidateResult], measurements: list[Measurement], space: Space) -> float:
    """Each candidate's status and intervals from its measurement (a candidate measured on several GPUs has one
    measurement per GPU; each compares it with the input on that GPU). Returns the per-comparison confidence."""
    by_name = {m.name: m for m in measurements}
    timed = [m for m in measurements if m.name != "input" and m.times_us]
    confidence = corrected(space.confidence, len(timed))
    metric = (
        ("neighbour_us", "neighbour_reference_us") if space.objective == "neighbour" else ("times_us", "reference_us")
    )
    for c in results:
        m = by_name.get(c.name)
        if m is None:
            continue
        if c.name != "input":
            c.status, c.problem = m.verdict, m.problem
        c.gpu = m.gpu
        c.rounds = len(m.times_us)
        if m.times_us:
            c.median_us = median_interval(m.times_us, confidence).median
        if c.name == "input":
            c.neighbour_slowdown = _slowdown(m, confidence)
            continue
        if m.times_us:
            c.kernel_ratio = median_interval(paired_ratios(m.times_us, m.reference_us), confidence)
            c.ratio = median_interval(paired_ratios(getattr(m, metric[0]), getattr(m, metric[1])), confidence)
        c.neighbour_slowdown = _slowdown(m, confidence)
    return confidence


def _slowdown(m: Measurement, confidence: float) -> Interval | None:
    return median_interval(paired_ratios(m.neighbour_us, m.neighbour_alone_us), confidence) if m.neighbour_us else None


def decide(results: Sequence[CandidateResult], space: Space) -> str:
    """The verified candidate whose ratio to the input lies below 1 - min_gain by the most, else the input. For
    `neighbour`, the kernel itself must also not be slower beyond noise than the input by more than the slack."""
    eligible = []
    for c in results[1:]:
        if c.status not in VERIFIED or c.ratio is None or c.ratio.high is None:
            continue
        if c.ratio.high >= 1.0 - space.min_gain:
            continue
        if space.objective == "neighbour":
            k = c.kernel_ratio
            if k is None or k.low is None or k.low > 1.0 + space.kernel_slack:
                continue
        eligible.append(c)
    return min(eligible, key=lambda c: c.ratio.median).name if eligible else "input"


# ---------------------------------------------------------------- cache and output


def _cache_key(source: Source, spec_path: str, space: Space, candidates: list[Candidate], devices: list) -> str:
    """What a measurement depends on: the PTX, the spec, the space (a budget too: a run cut short is not the answer
    to a longer one), every candidate's text and launch, the GPUs and their driver, and this ptxtool."""
    settings = space.to_data()
    parts = {
        "ptx": hashlib.sha256(source.text.encode()).hexdigest(),
        "spec": hashlib.sha256(Path(spec_path).read_bytes()).hexdigest(),
        "space": settings,
        "candidates": [c.digest for c in candidates],
        "devices": [(d.name, d.driver) for d in devices],
        "ptxtool": __version__,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=list).encode()).hexdigest()


def _cache_file(key: str) -> Path | None:
    from ptxtool.toolchain.compile import cache_dir

    directory = cache_dir()
    return None if directory is None else directory / "tune" / f"{key}.json"


def _cache_read(key: str) -> tuple[list[Measurement], list[str]] | None:
    path = _cache_file(key)
    try:
        data = json.loads(path.read_text()) if path is not None and path.is_file() else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != CACHE_SCHEMA:
        return None
    return [Measurement(**m) for m in data["measurements"]], data["stopped"] + ["from the cache"]


def _cache_write(key: str, measurements: list[Measurement], stopped: list[str]) -> None:
    path = _cache_file(key)
    if path is None:
        return
    document = {"schema": CACHE_SCHEMA, "measurements": [m.to_data() for m in measurements], "stopped": stopped}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(str(path), json.dumps(document))
    except (OSError, InputError):
        pass  # the cache is an optimization: a failure to keep a result only costs the next run its time


def _write(output: str, source: Source, winner: CandidateResult) -> str | None:
    """The winner's PTX, atomically; the input file itself only when -o names it and the winner changes it."""
    text = winner.candidate.text
    if Path(output).resolve() == Path(source.path).resolve() and text == source.text:
        return None
    write_atomic(output, text)
    return output
