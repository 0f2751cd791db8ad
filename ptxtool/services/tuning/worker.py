"""The GPU half of `ptxtool tune`, one worker process per GPU (a fault ends a CUDA context for good, so a worker
that meets one reports it and the parent starts a fresh one for what is left): check every candidate's outputs
against the input's, then time the survivors interleaved with the input, round by round, on rotated inputs.

Each candidate's times are kept paired with the input's from the same rounds, so ratios are never taken across
rounds or GPUs. Objective `neighbour` times the kernel beside an L2-resident sum on a second stream, both released
by one gate, and the sum's window against the same sum alone in that round.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field, replace
from typing import Any

from ptxtool.errors import InputError, PtxtoolError
from ptxtool.services.bench import BATCH, rotation_copies
from ptxtool.services.launch import GUARD_BYTES, Buffer, LaunchSpec, Workspace, fill
from ptxtool.services.run import compare, first_change
from ptxtool.services.tuning.space import Launch
from ptxtool.toolchain.gpu import DeviceInfo, Gpu, KernelFault, LaunchRefused
from ptxtool.toolchain.timing import median_interval, paired_ratios

NEIGHBOUR_KERNEL = "ptxtool_neighbour_sum"
NEIGHBOUR_LAUNCHES = 20  # sums per window (the setting OPTIMIZATIONS.md measured)
NEIGHBOUR_BLOCK = 256
NEIGHBOUR_ROUNDS = 10  # objective alone: rounds beside the neighbour, to report its slowdown too
NEIGHBOUR_CHECK = 8  # objective neighbour: rounds between early-stop checks
COVER = 1.25  # the kernel's launches beside the neighbour last this much longer than its window
GATED_LAUNCHES = 32  # launches queued behind one gate at most (a held stream must not fill the driver's queue)
MAX_COVER_LAUNCHES = GATED_LAUNCHES
CALIBRATION = 5  # launches (or windows) whose median sizes the neighbour rounds

# the neighbour: each warp sums its grid-stride share of a float4 array, lane 0 stores the warp's sum
NEIGHBOUR_PTX = """.version 7.0
.target sm_75
.address_size 64

.visible .entry ptxtool_neighbour_sum(
    .param .u64 ptxtool_neighbour_sum_src,
    .param .u64 ptxtool_neighbour_sum_dst,
    .param .u32 ptxtool_neighbour_sum_n4
)
{
    .reg .pred     %p<4>;
    .reg .b32     %r<12>;
    .reg .f32     %f<16>;
    .reg .b64     %rd<8>;

    ld.param.u64     %rd1, [ptxtool_neighbour_sum_src];
    ld.param.u64     %rd2, [ptxtool_neighbour_sum_dst];
    ld.param.u32     %r1, [ptxtool_neighbour_sum_n4];
    cvta.to.global.u64     %rd1, %rd1;
    cvta.to.global.u64     %rd2, %rd2;
    mov.u32     %r2, %ctaid.x;
    mov.u32     %r3, %ntid.x;
    mov.u32     %r4, %tid.x;
    mad.lo.s32     %r5, %r2, %r3, %r4;
    mov.u32     %r6, %nctaid.x;
    mul.lo.s32     %r7, %r6, %r3;
    mov.u32     %r11, %r5;
    mov.f32     %f1, 0f00000000;
    mov.f32     %f2, 0f00000000;
    setp.ge.u32     %p1, %r5, %r1;
    @%p1 bra     $L_done;
$L_loop:
    mul.wide.u32     %rd3, %r5, 16;
    add.s64     %rd4, %rd1, %rd3;
    ld.global.v4.f32     {%f3, %f4, %f5, %f6}, [%rd4];
    add.f32     %f1, %f1, %f3;
    add.f32     %f2, %f2, %f4;
    add.f32     %f1, %f1, %f5;
    add.f32     %f2, %f2, %f6;
    add.s32     %r5, %r5, %r7;
    setp.lt.u32     %p2, %r5, %r1;
    @%p2 bra     $L_loop;
$L_done:
    add.f32     %f7, %f1, %f2;
    shfl.sync.bfly.b32     %f8, %f7, 16, 31, -1;
    add.f32     %f7, %f7, %f8;
    shfl.sync.bfly.b32     %f8, %f7, 8, 31, -1;
    add.f32     %f7, %f7, %f8;
    shfl.sync.bfly.b32     %f8, %f7, 4, 31, -1;
    add.f32     %f7, %f7, %f8;
    shfl.sync.bfly.b32     %f8, %f7, 2, 31, -1;
    add.f32     %f7, %f7, %f8;
    shfl.sync.bfly.b32     %f8, %f7, 1, 31, -1;
    add.f32     %f7, %f7, %f8;
    and.b32     %r8, %r4, 31;
    setp.ne.s32     %p3, %r8, 0;
    @%p3 bra     $L_end;
    shr.u32     %r9, %r11, 5;
    mul.wide.u32     %rd5, %r9, 4;
    add.s64     %rd6, %rd2, %rd5;
    st.global.f32     [%rd6], %f7;
$L_end:
    ret;
}
"""


@dataclass(frozen=True)
class Entry:
    """A candidate as a worker gets it: its name, PTX text, launch and whether only its code changed."""

    name: str
    text: str
    launch: Launch
    code_only: bool


@dataclass(frozen=True)
class Job:
    """What one worker does on one GPU: verify and time `entries` against the input (always timed with them)."""

    ordinal: int
    path: str
    kernel: str
    spec: LaunchSpec
    input: Entry
    entries: tuple[Entry, ...]
    objective: str
    launches: int
    min_rounds: int
    warmup: int
    confidence: float  # per comparison (already corrected for how many there are)
    neighbour_bytes: int
    deadline: float  # time.time() after which no more rounds start
    timeout: float = 10.0


@dataclass
class Measurement:
    """One candidate on one GPU: the verdict of its outputs, and its times paired round by round with the input's.
    `times_us` are the kernel's own (alone, or beside the neighbour for that objective); `neighbour_us` the
    neighbour's windows beside it, `neighbour_alone_us` the same windows with nothing beside them."""

    name: str
    gpu: int
    verdict: str = "untimed"
    problem: str | None = None
    times_us: list[float] = field(default_factory=list)
    reference_us: list[float] = field(default_factory=list)
    neighbour_us: list[float] = field(default_factory=list)
    neighbour_reference_us: list[float] = field(default_factory=list)
    neighbour_alone_us: list[float] = field(default_factory=list)

    def to_data(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class WorkerResult:
    """What came back from one worker: the GPU, a measurement per entry (the input's first), the entry that
    faulted (its context is gone: the parent retries the rest), or the error that stopped everything."""

    ordinal: int
    device: DeviceInfo | None = None
    measurements: list[Measurement] = field(default_factory=list)
    faulted: str | None = None
    error: tuple[str, Any] | None = None
    rounds: int = 0
    stopped: str = ""


def work(job: Job) -> WorkerResult:
    """The worker process's entry point: never raises (errors travel back as data, pickled)."""
    result = WorkerResult(job.ordinal)
    try:
        with Gpu(job.ordinal) as gpu:
            result.device = gpu.info
            _Worker(gpu, job, result).run()
    except InputError as error:
        result.error = ("input", error.diagnostics)
    except PtxtoolError as error:
        result.error = (type(error).__name__, str(error))
    return result


def _args(spec: LaunchSpec, pointers: list[int]) -> list[bytes]:
    addresses = iter(pointers)
    return [next(addresses).to_bytes(8, "little") if isinstance(p, Buffer) else p.encode() for p in spec.params]


class _Worker:
    """Verify, then time, on one GPU."""

    def __init__(self, gpu: Gpu, job: Job, result: WorkerResult) -> None:
        self.gpu, self.job, self.result = gpu, job, result
        self.specs = [e.launch.spec(job.spec) for e in (job.input, *job.entries)]
        self.measurements = [Measurement(e.name, job.ordinal) for e in (job.input, *job.entries)]
        result.measurements = self.measurements
        self.functions: list[Any] = []

    # -------------------------------------------------------------- verification

    def run(self) -> None:
        job, gpu = self.job, self.gpu
        first = gpu.function(gpu.load(job.input.text.encode(), job.path, ptx=True), job.kernel)
        self.functions = [first]
        for entry, m in zip(job.entries, self.measurements[1:], strict=True):
            if entry.text == job.input.text:
                self.functions.append(first)
                continue
            try:
                self.functions.append(gpu.function(gpu.load(entry.text.encode(), entry.name, ptx=True), job.kernel))
            except InputError as error:
                self.functions.append(None)
                m.verdict, m.problem = "rejected", f"the driver's JIT refused it: {error}"
        self.measurements[0].verdict = "input"
        if not self._verify():
            return
        timed = [i for i, m in enumerate(self.measurements) if i == 0 or m.verdict in ("identical", "within_tolerance")]
        if len(timed) > 1 and time.time() >= job.deadline:
            self.result.stopped = "budget spent before the first round"
        elif len(timed) > 1:
            self._time(timed)

    def _launch_and_read(self, workspace: Workspace, index: int, contents: list) -> list:
        spec = self.specs[index]
        workspace.prepare(contents)
        args = _args(spec, workspace.pointers)
        self.gpu.launch(self.functions[index], spec.grid, spec.block, args, spec.shared_bytes, spec.cooperative)
        return workspace.read(self.job.timeout)

    def _verify(self) -> bool:
        """Every entry against the input on the spec's trials; False when an entry faulted (stop: context lost)."""
        job = self.job
        spec = job.spec
        workspace = Workspace(self.gpu, spec)
        open_ = [i for i in range(1, len(self.measurements)) if self.functions[i] is not None]
        for trial in range(spec.trials):
            contents = [fill(b, spec.seed, trial, i) for i, b in enumerate(spec.buffers)]
            try:
                reference = self._launch_and_read(workspace, 0, contents)
                again = self._launch_and_read(workspace, 0, contents)
            except KernelFault as fault:
                raise KernelFault(f"{job.path}: the input kernel failed on the GPU: {fault}") from None
            problem = self._problem(spec.buffers, reference, again, trial)
            if problem is not None:
                hint = "" if problem.startswith("wrote past") else "; give outputs that may vary a tolerance"
                raise InputError.at(spec.path, f"the input {job.kernel}, run twice on the same inputs: {problem}{hint}")
            exact = tuple(replace(b, rtol=0.0, atol=0.0) for b in spec.buffers)
            deterministic = self._problem(exact, reference, again, trial) is None
            for i in list(open_):
                m, entry = self.measurements[i], job.entries[i - 1]
                try:
                    out = self._launch_and_read(workspace, i, contents)
                except LaunchRefused as refused:
                    m.verdict, m.problem = "refused", str(refused)
                except KernelFault as fault:
                    m.verdict, m.problem = "fault", str(fault)
                    self.result.faulted = m.name
                    return False
                else:
                    buffers = exact if entry.code_only and deterministic else spec.buffers
                    m.problem = self._problem(buffers, reference, out, trial)
                    if m.problem is None:
                        m.verdict = "identical" if buffers is exact or not spec.nondeterministic else "within_tolerance"
                        continue
                    m.verdict = "overrun" if m.problem.startswith("wrote past") else "differ"
                open_.remove(i)
        return True

    def _problem(self, buffers: tuple[Buffer, ...], left: list, right: list, trial: int) -> str | None:
        """Why two runs disagree (a write past a buffer, or the first differing element), or None."""
        from ptxtool.report.gpu import mismatch_line

        for buffer, raw in zip(buffers, right, strict=True):
            offset = first_change(raw[buffer.nbytes :], self.job.spec.poison)
            if offset is not None:
                return f"wrote past the end of {buffer.name} (trial {trial}): byte {offset} past it changed"
        for buffer, a, b in zip(buffers, left, right, strict=True):
            found = compare(buffer, a[: buffer.nbytes], b[: buffer.nbytes], trial, self.job.spec.seed)
            if found is not None:
                return mismatch_line(found, "input", "candidate")
        return None

    # -------------------------------------------------------------- timing

    def _time(self, timed: list[int]) -> None:
        job, gpu = self.job, self.gpu
        spec = job.spec
        set_bytes = spec.buffer_bytes + GUARD_BYTES * len(spec.buffers)
        copies = rotation_copies(set_bytes, gpu.info)
        workspace = Workspace(gpu, spec)
        sets = [workspace.pointers] + [
            [gpu.alloc(b.nbytes + GUARD_BYTES) for b in spec.buffers] for _ in range(copies - 1)
        ]
        contents = [fill(b, spec.seed, 0, i) for i, b in enumerate(spec.buffers)]
        for pointers in sets:
            workspace.prepare(contents, pointers)
        self.args = {i: [_args(self.specs[i], s) for s in sets] for i in timed}
        self.turn = 0
        self.gate = gpu.gate()
        for _ in range(job.warmup):
            for i in timed:
                self._launch(i)
        gpu.synchronize(job.timeout)
        if job.objective == "neighbour":
            self._neighbour_rounds(timed, job.launches, stop_early=True)
            return
        self._alone_rounds(timed)
        if job.neighbour_bytes and time.time() < job.deadline:
            self._neighbour_rounds(timed, NEIGHBOUR_ROUNDS, stop_early=False)

    def _launch(self, i: int, stream: Any = None) -> None:
        spec = self.specs[i]
        args = self.args[i][self.turn % len(self.args[i])]
        self.gpu.launch(self.functions[i], spec.grid, spec.block, args, spec.shared_bytes, spec.cooperative, stream)
        self.turn += 1

    def _alone_rounds(self, timed: list[int]) -> None:
        """Rounds of one launch of each timed entry, order rotated each round, queued behind a gate in chunks so
        that the GPU runs them back to back and the events time the kernels, not Python submitting them."""
        job, gpu = self.job, self.gpu
        pool = [(gpu.event(), gpu.event()) for _ in range(GATED_LAUNCHES)]
        alive, rounds = list(timed), 0
        while rounds < job.launches:
            batch = min(BATCH, job.launches - rounds)
            plan = [(r, i) for r in range(batch) for i in _order(alive, rounds + r)]
            times: dict[tuple[int, int], float] = {}
            for first in range(0, len(plan), GATED_LAUNCHES):
                chunk = list(zip(plan[first : first + GATED_LAUNCHES], pool, strict=False))
                gpu.hold(self.gate)
                for (_, i), (start, end) in chunk:
                    gpu.record(start)
                    self._launch(i)
                    gpu.record(end)
                gpu.release(self.gate)
                gpu.synchronize(job.timeout)
                times |= {key: gpu.elapsed_ms(start, end) * 1e3 for key, (start, end) in chunk}
            for r, i in plan:
                m = self.measurements[i]
                m.times_us.append(times[(r, i)])
                m.reference_us.append(times[(r, 0)])
            rounds += batch
            self.result.rounds = rounds
            stop = self._settled(alive, rounds, "times_us", "reference_us")
            if stop:
                self.result.stopped = stop
                return
        self.result.stopped = f"all {job.launches} rounds"

    def _settled(self, alive: list[int], rounds: int, metric: str, reference: str) -> str:
        """Drop from the rounds the entries slower beyond noise; why to stop now ("" to go on)."""
        job = self.job
        if time.time() >= job.deadline:
            return f"budget spent after {rounds} rounds"
        if rounds < job.min_rounds:
            return ""
        intervals = {}
        for i in alive[1:]:
            m = self.measurements[i]
            interval = median_interval(paired_ratios(getattr(m, metric), getattr(m, reference)), job.confidence)
            if interval.above:
                alive.remove(i)
            else:
                intervals[i] = interval
        if not intervals:
            return f"every candidate slower beyond noise after {rounds} rounds"
        leader, *others = sorted(intervals.values(), key=lambda iv: iv.median)
        if leader.below and all(other.low is not None and leader.high < other.low for other in others):
            return f"the leader was clear after {rounds} rounds"
        return ""

    # -------------------------------------------------------------- beside a neighbour

    def _neighbour_rounds(self, timed: list[int], rounds: int, stop_early: bool) -> None:
        """Each round: the neighbour's window alone, then beside each entry (kernel launched back to back long
        enough to cover the window), both streams released together by one gate."""
        job, gpu = self.job, self.gpu
        side = gpu.stream()
        count = max(1, job.neighbour_bytes // 16)
        source = gpu.alloc(count * 16)
        gpu.fill_bytes(source, 0, count * 16)
        gpu.synchronize(job.timeout)  # the neighbour's stream does not wait for ours
        module = gpu.load(NEIGHBOUR_PTX.encode(), "<tune neighbour>", ptx=True)
        neighbour = gpu.function(module, NEIGHBOUR_KERNEL)
        blocks = 4 * gpu.info.sm_count
        sums = gpu.alloc(blocks * NEIGHBOUR_BLOCK // 32 * 4)
        arguments = [source.to_bytes(8, "little"), sums.to_bytes(8, "little"), count.to_bytes(4, "little")]
        begin, end = gpu.event(), gpu.event()

        def window() -> None:
            gpu.record(begin, side)
            for _ in range(NEIGHBOUR_LAUNCHES):
                gpu.launch(neighbour, (blocks, 1, 1), (NEIGHBOUR_BLOCK, 1, 1), arguments, stream=side)
            gpu.record(end, side)

        def alone() -> float:
            gpu.hold(self.gate, side)  # queued first, run back to back: the same as beside the kernel
            window()
            gpu.release(self.gate)
            gpu.synchronize(job.timeout, side)
            return gpu.elapsed_ms(begin, end) * 1e3

        alone()  # the array into the L2
        lone = statistics.median(alone() for _ in range(CALIBRATION))
        cover = {}
        pairs = [(gpu.event(), gpu.event()) for _ in range(CALIBRATION)]
        for i in timed:
            gpu.hold(self.gate)
            for start, stop in pairs:
                gpu.record(start)
                self._launch(i)
                gpu.record(stop)
            gpu.release(self.gate)
            gpu.synchronize(job.timeout)
            kernel = statistics.median(gpu.elapsed_ms(s, e) * 1e3 for s, e in pairs)
            cover[i] = min(MAX_COVER_LAUNCHES, max(1, math.ceil(COVER * lone / max(kernel, 1e-3))))
        pool = [(gpu.event(), gpu.event()) for _ in range(max(cover.values()))]
        alive = list(timed)
        for round_ in range(rounds):
            solo = alone()
            kernel_us, beside_us = {}, {}
            for i in _order(alive, round_):
                gpu.hold(self.gate)
                gpu.hold(self.gate, side)
                for start, stop in pool[: cover[i]]:
                    gpu.record(start)
                    self._launch(i)
                    gpu.record(stop)
                window()
                gpu.release(self.gate)
                gpu.synchronize(job.timeout)
                gpu.synchronize(job.timeout, side)
                kernel_us[i] = statistics.median(gpu.elapsed_ms(s, e) * 1e3 for s, e in pool[: cover[i]])
                beside_us[i] = gpu.elapsed_ms(begin, end) * 1e3
            for i in kernel_us:
                m = self.measurements[i]
                if stop_early:
                    m.times_us.append(kernel_us[i])
                    m.reference_us.append(kernel_us[0])
                m.neighbour_us.append(beside_us[i])
                m.neighbour_reference_us.append(beside_us[0])
                m.neighbour_alone_us.append(solo)
            if stop_early:
                self.result.rounds = round_ + 1
                if (round_ + 1) % NEIGHBOUR_CHECK == 0 or time.time() >= job.deadline:
                    stop = self._settled(alive, round_ + 1, "neighbour_us", "neighbour_reference_us")
                    if stop:
                        self.result.stopped = stop
                        return
            elif time.time() >= job.deadline:
                return
        if stop_early:
            self.result.stopped = f"all {rounds} rounds"


def _order(alive: list[int], round_: int) -> list[int]:
    """The entries in a different order each round: rotated, and reversed every other round."""
    shift = round_ % len(alive)
    order = alive[shift:] + alive[:shift]
    return order if round_ % 2 == 0 else order[::-1]
