"""Running kernels on the GPU: differential testing (`ptxtool run`) and timing (`ptxtool bench`).

A pass is proved safe here, so the comparison is hard to fool: fresh random inputs every trial, outputs poisoned with
a byte pattern so unwritten elements show, a guard zone past every buffer so stray writes show, every buffer (inputs
too) compared as bytes, and the first kernel compared with itself first so a race is not blamed on the second.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ptxtool.errors import EXIT_FOUND, EXIT_OK, InputError
from ptxtool.launch import DTYPES, FLOAT_TYPES, Buffer, LaunchSpec, fill, from_bf16
from ptxtool.sources import parse_source, read_source
from ptxtool.syntax import ast
from ptxtool.toolchain.gpu import DeviceInfo, Gpu, KernelFault

RUN_SCHEMA = "ptxtool.run/1"
BENCH_SCHEMA = "ptxtool.bench/1"
GUARD_BYTES = 4096  # poisoned bytes after every buffer: a write past the end changes them
MAX_COPIES = 512  # input sets for rotation in bench
ROTATION_FACTOR = 3  # all copies together hold at least this many times the L2
BATCH = 16  # timed rounds queued behind a gate at a time (a held stream must not fill the driver's queue)

# PTX parameter types and their sizes, for checking a spec against the kernel's signature.
_PARAM_BYTES = {f".{name}": dtype.itemsize for name, dtype in DTYPES.items()} | {
    ".f16x2": 4,
    ".bf16x2": 4,
    ".b128": 16,
}


# ---------------------------------------------------------------- programs


@dataclass(frozen=True, slots=True)
class Program:
    """One input file, ready for the driver: PTX text to JIT, or a cubin, and the kernel's exact name in it."""

    path: str
    kernel: str
    image: bytes
    ptx: bool


def load_program(path: str, kernel: str | None, spec: LaunchSpec, *, ptxas: bool = False, arch: str = "") -> Program:
    """Read a .ptx (parsed, kernel found, signature checked against the spec) or a .cubin (taken as it is).

    With `ptxas`, the PTX is assembled for `arch` by ptxas instead of the driver's JIT.
    """
    wanted = kernel or spec.kernel
    if path.endswith(".cubin"):
        if not wanted:
            raise InputError.at(path, "a cubin needs --kernel (or `kernel` in the spec): its exact, mangled name")
        data = Path(path).read_bytes() if Path(path).is_file() else None
        if data is None:
            raise InputError.at(path, "no such file")
        return Program(path, wanted, data, ptx=False)
    source = read_source(path)
    module = parse_source(source)
    function = find_kernel(module, wanted, source.display)
    check_signature(function, spec, source.display)
    if ptxas:
        from ptxtool.toolchain.compile import compile_ptx

        suffix = "a" if any(t.endswith("a") for t in module.targets) else ""
        cubin = compile_ptx(source.text, source.display, arch + suffix).cubin
        return Program(source.display, function.name, cubin, ptx=False)
    return Program(source.display, function.name, source.text.encode(), ptx=True)


def find_kernel(module: ast.Module, wanted: str | None, path: str) -> ast.Function:
    """The kernel named `wanted`: its exact name, or a C++ function of that name (`histogram` -> `_Z9histogram...`)."""
    kernels = module.kernels
    names = ", ".join(k.name for k in kernels) or "none"
    if not wanted:
        if len(kernels) == 1:
            return kernels[0]
        raise InputError.at(path, f"give --kernel (or `kernel` in the spec): this file has kernels {names}")
    exact = [k for k in kernels if k.name == wanted]
    mangled = [k for k in kernels if k.name.startswith(f"_Z{len(wanted)}{wanted}")]
    found = exact or mangled
    if len(found) == 1:
        return found[0]
    if found:
        several = ", ".join(k.name for k in found)
        raise InputError.at(path, f"{wanted} names several kernels: {several}; give the full name")
    raise InputError.at(path, f"no kernel named {wanted}; kernels here: {names}")


def check_signature(function: ast.Function, spec: LaunchSpec, path: str) -> None:
    """The spec's parameters match the kernel's in number and size (a buffer is an 8-byte address)."""
    params = function.params or ()
    if len(params) != len(spec.params):
        raise InputError.at(
            spec.path,
            f"kernel {function.name} in {path} takes {len(params)} parameters; the spec gives {len(spec.params)}",
        )
    for i, (param, given) in enumerate(zip(params, spec.params, strict=True)):
        size = param_bytes(param)
        if size is not None and size != given.size:
            kind = "a buffer (an 8-byte address)" if isinstance(given, Buffer) else f"{given.type} ({given.size} bytes)"
            raise InputError.at(
                spec.path,
                f"param {i} ({given.name}): kernel {function.name} declares {_spelling(param)} ({size} bytes) "
                f"there; the spec gives {kind}",
            )


def param_bytes(param: ast.Param) -> int | None:
    """Bytes of a `.param` from its type and array dimensions; None when a dimension is open (`[]`)."""
    size = next((_PARAM_BYTES[a.word] for a in param.attributes if a.word in _PARAM_BYTES), None)
    if size is None or any(d is None for d in param.dims):
        return None
    return size * math.prod(int(d.text, 0) for d in param.dims)


def _spelling(param: ast.Param) -> str:
    words = " ".join(a.word for a in param.attributes if a.word != ".param")
    return words + "".join(f"[{d.text}]" for d in param.dims if d is not None)


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
class Difference:
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

    def line(self, left: str, right: str) -> str:
        error = f"; largest |difference| {self.max_abs_error:.3g}" if self.max_abs_error is not None else ""
        return (
            f"{self.buffer}[{self.index}] ({self.type}, trial {self.trial}, seed {self.seed}): "
            f"{left} {self.left} vs {right} {self.right}; {self.differing} of {self.elements} elements differ{error}"
        )


@dataclass
class Overrun:
    """A write past the end of a buffer: the first changed guard byte."""

    file: str
    buffer: str
    trial: int
    offset: int

    def line(self) -> str:
        return (
            f"{self.file} wrote past the end of {self.buffer} (trial {self.trial}): byte {self.offset} past it changed"
        )


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

    def line(self) -> str:
        parts = [f"{self.buffer} ({self.type} x {self.elements})"]
        if self.unwritten is not None:
            parts.append(f"{self.unwritten} unwritten")
        if self.nan:
            parts.append(f"{self.nan} NaN")
        if self.low is not None:
            parts.append(f"range [{self.low:.6g}, {self.high:.6g}]")
        parts.append(f"sha256 {self.sha256}")
        return ", ".join(parts)


VERDICTS = {
    "ran": "ran, and gave the same bits twice on every trial",
    "identical": "outputs identical",
    "within_tolerance": "outputs agree within the spec's tolerance",
    "differ": "outputs differ",
    "nondeterministic": "the first kernel differs from itself on identical inputs",
    "overrun": "a kernel wrote past the end of a buffer",
    "fault": "a kernel failed on the GPU",
}
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
    differences: list[Difference] = field(default_factory=list)
    self_differences: list[Difference] = field(default_factory=list)
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

    def lines(self) -> list[str]:
        names = " vs ".join(self.files)
        head = (
            f"{self.kernel}: {names} on {self.device.name} ({self.device.arch}), {self.trials} trials, seed {self.seed}"
        )
        out = [head, f"{self.verdict}: {VERDICTS[self.verdict]}"]
        if self.fault:
            out.append(f"  {self.fault}")
        out += [f"  {o.line()}" for o in self.overruns]
        first = self.files[0]
        out += [f"  {d.line(f'{first} (run 1)', '(run 2)')}" for d in self.self_differences]
        if len(self.files) > 1:
            out += [f"  {d.line(self.files[0], self.files[1])}" for d in self.differences]
        out += [f"  {o.line()}" for o in self.outputs]
        return out


# ---------------------------------------------------------------- device buffers


class Workspace:
    """The spec's buffers on the device, each followed by a poisoned guard zone, and the parameter bytes."""

    def __init__(self, gpu: Gpu, spec: LaunchSpec) -> None:
        self.gpu, self.spec = gpu, spec
        self.pointers = [gpu.alloc(b.nbytes + GUARD_BYTES) for b in spec.buffers]

    def args(self, pointers: Sequence[int] | None = None) -> list[bytes]:
        addresses = iter(pointers or self.pointers)
        return [
            next(addresses).to_bytes(8, "little") if isinstance(p, Buffer) else p.encode() for p in self.spec.params
        ]

    def prepare(self, contents: Sequence[np.ndarray], pointers: Sequence[int] | None = None) -> None:
        """Starting contents in, outputs and guard zones poisoned."""
        poison = self.spec.poison
        for buffer, ptr, data in zip(self.spec.buffers, pointers or self.pointers, contents, strict=True):
            if buffer.poisoned:
                self.gpu.fill_bytes(ptr, poison, buffer.nbytes + GUARD_BYTES)
            else:
                self.gpu.upload(ptr, data)
                self.gpu.fill_bytes(ptr + buffer.nbytes, poison, GUARD_BYTES)

    def read(self, timeout: float) -> list[np.ndarray]:
        """Every buffer's bytes and its guard zone, after the queued work."""
        return [
            self.gpu.download(p, b.nbytes + GUARD_BYTES, timeout)
            for b, p in zip(self.spec.buffers, self.pointers, strict=True)
        ]


# ---------------------------------------------------------------- run


@contextmanager
def _kernels(paths: Sequence[str], kernel: str | None, spec: LaunchSpec, ptxas: bool) -> Iterator[tuple]:
    """The GPU with each file's kernel loaded. PTX is checked against the spec before the GPU is touched; with
    `ptxas` it is assembled for the GPU's architecture, which is known only once the GPU is open."""
    programs = None if ptxas else [load_program(p, kernel, spec) for p in paths]
    with Gpu() as gpu:
        if ptxas:
            programs = [load_program(p, kernel, spec, ptxas=True, arch=gpu.info.arch.rstrip("a")) for p in paths]
        functions = [gpu.function(gpu.load(p.image, p.path, ptx=p.ptx), p.kernel) for p in programs]
        yield gpu, programs, functions


def run(
    paths: Sequence[str],
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
    with _kernels(paths, kernel, spec, ptxas) as (gpu, programs, functions):
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


def compare(buffer: Buffer, a: np.ndarray, b: np.ndarray, trial: int, seed: int) -> Difference | None:
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
    return Difference(
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


# ---------------------------------------------------------------- bench


@dataclass
class Timing:
    """One file's launch times in microseconds."""

    file: str
    samples: list[float]
    bytes_moved: int

    @property
    def median_us(self) -> float:
        return statistics.median(self.samples)

    def to_data(self) -> dict[str, Any]:
        ordered = sorted(self.samples)
        return {
            "file": self.file,
            "median_us": self.median_us,
            "min_us": ordered[0],
            "p10_us": _quantile(ordered, 0.1),
            "p90_us": _quantile(ordered, 0.9),
            "mean_us": statistics.fmean(ordered),
            "launches": len(ordered),
            "gb_per_s": self.bytes_moved / (self.median_us * 1e3),
        }


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class BenchReport:
    """Medians per file, their ratio B/A from interleaved launches, and A against itself as the noise floor."""

    kernel: str
    spec: str
    device: DeviceInfo
    copies: int
    working_set_bytes: int
    warmup: int
    timings: list[Timing]
    noise: float

    @property
    def ratio(self) -> float | None:
        return self.timings[1].median_us / self.timings[0].median_us if len(self.timings) > 1 else None

    def to_data(self) -> dict[str, Any]:
        return {
            "schema": BENCH_SCHEMA,
            "kernel": self.kernel,
            "spec": self.spec,
            "device": self.device.to_data(),
            "copies": self.copies,
            "working_set_bytes": self.working_set_bytes,
            "exceeds_l2": self.working_set_bytes > self.device.l2_bytes,
            "warmup": self.warmup,
            "results": [t.to_data() for t in self.timings],
            "ratio": self.ratio,
            "noise": self.noise,
        }

    def lines(self) -> list[str]:
        l2 = self.device.l2_bytes
        out = [
            f"{self.kernel} on {self.device.name} ({self.device.arch}): {self.copies} input copies, "
            f"{self.working_set_bytes / 2**20:.1f} MiB in rotation (L2 {l2 / 2**20:.0f} MiB)"
            + ("" if self.working_set_bytes > l2 else " -- fits in L2: times are cache times")
        ]
        for t in self.timings:
            d = t.to_data()
            out.append(
                f"  {t.file}: median {d['median_us']:.2f} us (p10 {d['p10_us']:.2f}, p90 {d['p90_us']:.2f}, "
                f"{d['launches']} launches), {d['gb_per_s']:.0f} GB/s by the spec's buffer sizes"
            )
        if self.ratio is not None:
            out.append(f"  ratio B/A {self.ratio:.4f} (A against itself: {self.noise:.4f})")
        else:
            out.append(f"  A against itself (even vs odd launches): {self.noise:.4f}")
        return out


def bench(
    paths: Sequence[str],
    spec: LaunchSpec,
    kernel: str | None = None,
    *,
    launches: int = 200,
    warmup: int = 20,
    seed: int | None = None,
    timeout: float = 60.0,
    ptxas: bool = False,
) -> BenchReport:
    """Time each file's kernel with CUDA events: launches interleaved, each on the next copy of the inputs."""
    seed = spec.seed if seed is None else seed
    with _kernels(paths, kernel, spec, ptxas) as (gpu, programs, functions):
        workspace = Workspace(gpu, spec)
        copies = rotation_copies(spec.buffer_bytes + GUARD_BYTES * len(spec.buffers), gpu.info)
        sets = [workspace.pointers] + [
            [gpu.alloc(b.nbytes + GUARD_BYTES) for b in spec.buffers] for _ in range(copies - 1)
        ]
        contents = [fill(b, seed, 0, i) for i, b in enumerate(spec.buffers)]
        for pointers in sets:
            workspace.prepare(contents, pointers)
        args = [workspace.args(pointers) for pointers in sets]
        order = list(range(len(functions)))
        turn = 0

        def launch(which: int) -> None:
            nonlocal turn
            gpu.launch(
                functions[which], spec.grid, spec.block, args[turn % copies], spec.shared_bytes, spec.cooperative
            )
            turn += 1

        for _ in range(warmup):
            for which in order:
                launch(which)
        gpu.synchronize(timeout)
        events = [[(gpu.event(), gpu.event()) for _ in range(launches)] for _ in functions]
        gate = gpu.gate()
        for first in range(0, launches, BATCH):
            gpu.hold(gate)
            for i in range(first, min(first + BATCH, launches)):
                for which in order if i % 2 == 0 else order[::-1]:  # alternate who goes first
                    start, end = events[which][i]
                    gpu.record(start)
                    launch(which)
                    gpu.record(end)
            gpu.release(gate)
            gpu.synchronize(timeout)
        moved = bytes_moved(spec)
        timings = [
            Timing(p.path, [gpu.elapsed_ms(s, e) * 1e3 for s, e in pairs], moved)
            for p, pairs in zip(programs, events, strict=True)
        ]
        a = timings[0].samples
        noise = statistics.median(a[1::2]) / statistics.median(a[0::2]) if len(a) > 1 else 1.0
        working = copies * (spec.buffer_bytes + GUARD_BYTES * len(spec.buffers))
        return BenchReport(programs[0].kernel, spec.path, gpu.info, copies, working, warmup, timings, noise)


def rotation_copies(set_bytes: int, device: DeviceInfo) -> int:
    """Enough copies of the inputs that together they hold several times the L2, within bounds of memory."""
    wanted = math.ceil(ROTATION_FACTOR * device.l2_bytes / max(set_bytes, 1)) + 1
    room = max(2, device.memory_bytes // 4 // max(set_bytes, 1))
    return max(2, min(wanted, MAX_COPIES, room))


def bytes_moved(spec: LaunchSpec) -> int:
    """Bytes a launch must move by the spec: inputs read once, outputs written once, read-write buffers both."""
    return sum(b.nbytes * (1 + (b.output and not b.poisoned)) for b in spec.buffers)
