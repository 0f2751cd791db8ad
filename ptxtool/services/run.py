"""Running kernels on the GPU: differential testing (`ptxtool run`) and timing (`ptxtool bench`).

A pass is proved safe here, so the comparison is hard to fool: fresh random inputs every trial, outputs poisoned with
a byte pattern so unwritten elements show, a guard zone past every buffer so stray writes show, every buffer (inputs
too) compared as bytes, and the first kernel compared with itself first so a race is not blamed on the second.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ptxtool.errors import EXIT_FOUND, EXIT_OK
from ptxtool.services.launch import (
    DTYPES,
    FLOAT_TYPES,
    Buffer,
    LaunchSpec,
    Workspace,
    fill,
    from_bf16,
    load_spec,
    loaded,
    programs_of,
)
from ptxtool.sources import Source, Unreadable
from ptxtool.toolchain.gpu import DeviceInfo, KernelFault

RUN_SCHEMA = "ptxtool.run/1"


# ---------------------------------------------------------------- values


def element_text(data: np.ndarray, kind: str) -> str:
    """One element (its raw bytes) as its type reads it, with the bits: `1.5 (0x3fc00000)`."""
    raw = data.view(DTYPES[kind])[0]
    bits = int.from_bytes(data.tobytes(), "little")
    value = float(from_bf16(np.array([raw]))[0]) if kind == "bf16" else raw.item()
    shown = repr(float(value)) if kind in FLOAT_TYPES else str(int(value))
    return f"{shown} (0x{bits:0{2 * data.size}x})"


# ---------------------------------------------------------------- results


@dataclass
class Mismatch:
    """The first element where two runs disagree, how many do, and both values typed."""

    buffer: str
    type: str
    trial: int
    seed: int
    index: int
    left: str
    right: str
    differing: int
    elements: int
    max_abs_error: float | None = None

    def to_data(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class Overrun:
    """A write past the end of a buffer: the first changed guard byte."""

    file: str
    buffer: str
    trial: int
    offset: int


@dataclass
class OutputSummary:
    """What one output held after a run: unwritten (still poison) elements, NaNs, range, and a digest."""

    buffer: str
    type: str
    elements: int
    unwritten: int | None
    nan: int | None
    low: float | None
    high: float | None
    sha256: str


_FINDINGS = {"differ", "nondeterministic", "overrun", "fault"}


@dataclass
class RunReport:
    """The outcome of `ptxtool run`: a verdict, what decided it, and per-output summaries of the first file."""

    files: list[str]
    kernel: str
    spec: str
    device: DeviceInfo
    trials: int
    seed: int
    verdict: str = "ran"
    differences: list[Mismatch] = field(default_factory=list)
    self_differences: list[Mismatch] = field(default_factory=list)
    overruns: list[Overrun] = field(default_factory=list)
    fault: str | None = None
    outputs: list[OutputSummary] = field(default_factory=list)
    data: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # the first file's outputs, trial 0

    @property
    def exit_code(self) -> int:
        return EXIT_FOUND if self.verdict in _FINDINGS else EXIT_OK

    def to_data(self) -> dict[str, Any]:
        return {
            "schema": RUN_SCHEMA,
            "files": self.files,
            "kernel": self.kernel,
            "spec": self.spec,
            "device": self.device.to_data(),
            "trials": self.trials,
            "seed": self.seed,
            "verdict": self.verdict,
            "differences": [d.to_data() for d in self.differences],
            "self_differences": [d.to_data() for d in self.self_differences],
            "overruns": [o.__dict__ for o in self.overruns],
            "fault": self.fault,
            "outputs": [o.__dict__ for o in self.outputs],
        }


# ---------------------------------------------------------------- run


@dataclass(frozen=True, slots=True)
class Options:
    spec: str
    kernel: str | None = None
    trials: int | None = None
    seed: int | None = None
    timeout: float = 10.0
    ptxas: bool = False


def execute(options: Options, sources: list[Source | Unreadable]) -> RunReport:
    o = options
    inputs = programs_of(sources)
    spec = load_spec(o.spec)
    return run(inputs, spec, o.kernel, trials=o.trials, seed=o.seed, timeout=o.timeout, ptxas=o.ptxas)


def run(
    sources: Sequence[Source],
    spec: LaunchSpec,
    kernel: str | None = None,
    *,
    trials: int | None = None,
    seed: int | None = None,
    timeout: float = 10.0,
    ptxas: bool = False,
) -> RunReport:
    """Run one kernel (and compare it with a second file's) on fresh random inputs for each trial."""
    trials = trials or spec.trials
    seed = spec.seed if seed is None else seed
    with loaded(sources, kernel, spec, ptxas) as (gpu, programs, functions):
        report = RunReport([p.path for p in programs], programs[0].kernel, spec.path, gpu.info, trials, seed)
        workspace = Workspace(gpu, spec)
        current = programs[0].path
        try:
            for trial in range(trials):
                contents = [fill(b, seed, trial, i) for i, b in enumerate(spec.buffers)]
                first = _launch_once(workspace, functions[0], contents, timeout)
                again = _launch_once(workspace, functions[0], contents, timeout)
                if not _settle(report, spec, "self_differences", first, again, trial, programs[0].path):
                    break
                if trial == 0:
                    report.outputs = summarize(spec, first)
                    report.data = {
                        b.name: r[: b.nbytes].view(b.dtype)
                        for b, r in zip(spec.buffers, first, strict=True)
                        if b.output
                    }
                if len(functions) > 1:
                    current = programs[1].path
                    second = _launch_once(workspace, functions[1], contents, timeout)
                    if not _settle(report, spec, "differences", first, second, trial, current):
                        break
                    current = programs[0].path
        except KernelFault as fault:
            report.verdict, report.fault = "fault", f"{current}: {fault}"
        if report.verdict == "ran" and len(functions) > 1:
            report.verdict = "within_tolerance" if spec.nondeterministic else "identical"
        return report


def _launch_once(workspace: Workspace, function: Any, contents: list[np.ndarray], timeout: float) -> list[np.ndarray]:
    spec = workspace.spec
    workspace.prepare(contents)
    workspace.gpu.launch(function, spec.grid, spec.block, workspace.args(), spec.shared_bytes, spec.cooperative)
    return workspace.read(timeout)


def _settle(
    report: RunReport,
    spec: LaunchSpec,
    slot: str,
    left: list[np.ndarray],
    right: list[np.ndarray],
    trial: int,
    right_file: str,
) -> bool:
    """Compare two runs into the report; False (with the verdict set) when they disagree or one overran a buffer."""
    for data, name in ((left, report.files[0]), (right, right_file)):
        for buffer, raw in zip(spec.buffers, data, strict=True):
            offset = first_change(raw[buffer.nbytes :], spec.poison)
            if offset is not None:
                report.overruns.append(Overrun(name, buffer.name, trial, offset))
    if report.overruns:
        report.verdict = "overrun"
        return False
    found = []
    for buffer, a, b in zip(spec.buffers, left, right, strict=True):
        difference = compare(buffer, a[: buffer.nbytes], b[: buffer.nbytes], trial, report.seed)
        if difference is not None:
            found.append(difference)
    getattr(report, slot).extend(found)
    if found:
        report.verdict = "nondeterministic" if slot == "self_differences" else "differ"
        return False
    return True


def first_change(guard: np.ndarray, poison: int) -> int | None:
    changed = np.flatnonzero(guard != poison)
    return int(changed[0]) if changed.size else None


def compare(buffer: Buffer, a: np.ndarray, b: np.ndarray, trial: int, seed: int) -> Mismatch | None:
    """Two runs' bytes of one buffer: None when bit-identical, or within the output's tolerance when it has one."""
    width = buffer.dtype.itemsize
    rows_a, rows_b = a.reshape(-1, width), b.reshape(-1, width)
    differs = (rows_a != rows_b).any(axis=1)
    if not differs.any():
        return None
    error = None
    if not buffer.exact:
        va, vb = _numbers(rows_a, buffer), _numbers(rows_b, buffer)
        same_nan = np.isnan(va) & np.isnan(vb)
        with np.errstate(invalid="ignore", over="ignore"):
            gap = np.abs(va - vb)
            close = same_nan | (va == vb) | (gap <= buffer.atol + buffer.rtol * np.abs(va))
        finite = gap[np.isfinite(gap)]
        error = float(finite.max()) if finite.size else float("nan")
        differs = ~close
        if not differs.any():
            return None
    index = int(np.argmax(differs))
    return Mismatch(
        buffer=buffer.name,
        type=buffer.type,
        trial=trial,
        seed=seed,
        index=index,
        left=element_text(rows_a[index], buffer.type),
        right=element_text(rows_b[index], buffer.type),
        differing=int(differs.sum()),
        elements=buffer.count,
        max_abs_error=error,
    )


def _numbers(rows: np.ndarray, buffer: Buffer) -> np.ndarray:
    values = rows.reshape(-1).view(buffer.dtype)
    return (from_bf16(values) if buffer.type == "bf16" else values).astype(np.float64)


def summarize(spec: LaunchSpec, data: list[np.ndarray]) -> list[OutputSummary]:
    """Per output: elements left holding the poison pattern, NaNs, range of finite values, and a content digest."""
    found = []
    for buffer, raw in zip(spec.buffers, data, strict=True):
        if not buffer.output:
            continue
        rows = raw[: buffer.nbytes].reshape(-1, buffer.dtype.itemsize)
        untouched = (rows == spec.poison).all(axis=1) if buffer.poisoned else np.zeros(len(rows), bool)
        unwritten = int(untouched.sum()) if buffer.poisoned else None
        nan = low = high = None
        if buffer.type in FLOAT_TYPES:
            values = _numbers(rows[~untouched], buffer)
            nan = int(np.isnan(values).sum())
            finite = values[np.isfinite(values)]
            if finite.size:
                low, high = float(finite.min()), float(finite.max())
        digest = hashlib.sha256(raw[: buffer.nbytes].tobytes()).hexdigest()[:16]
        found.append(OutputSummary(buffer.name, buffer.type, buffer.count, unwritten, nan, low, high, digest))
    return found
