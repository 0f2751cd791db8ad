"""`ptxtool bench`: a kernel timed with CUDA events, the median of many launches, and the ratio B/A measured in
the same run with launches interleaved, each on the next of several copies of the inputs (together larger than L2).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ptxtool.errors import EXIT_OK
from ptxtool.services.launch import GUARD_BYTES, LaunchSpec, Workspace, fill, load_spec, loaded, programs_of
from ptxtool.sources import Source, Unreadable
from ptxtool.toolchain.gpu import DeviceInfo

BENCH_SCHEMA = "ptxtool.bench/1"
MAX_COPIES = 512  # input sets for rotation in bench
ROTATION_FACTOR = 3  # all copies together hold at least this many times the L2
BATCH = 16  # timed rounds queued behind a gate at a time (a held stream must not fill the driver's queue)


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

    exit_code = EXIT_OK

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


@dataclass(frozen=True, slots=True)
class Options:
    spec: str
    kernel: str | None = None
    launches: int = 200
    warmup: int = 20
    seed: int | None = None
    ptxas: bool = False


def execute(options: Options, sources: list[Source | Unreadable]) -> BenchReport:
    o = options
    inputs = programs_of(sources)
    spec = load_spec(o.spec)
    return bench(inputs, spec, o.kernel, launches=o.launches, warmup=o.warmup, seed=o.seed, ptxas=o.ptxas)


def bench(
    sources: Sequence[Source],
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
    with loaded(sources, kernel, spec, ptxas) as (gpu, programs, functions):
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
