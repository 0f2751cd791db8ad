"""tune's GPU half without a GPU: the worker and the service run against a stand-in for `toolchain.gpu.Gpu` that
keeps memory in NumPy, runs each kernel as a Python function and advances a clock per stream by the kernel's cost
(with seeded noise). The decisions, the pairing of rounds, early stops, a fault and the worker started again, the
cache and several GPUs are exercised here; tests/test_worker.py does the same on a real one."""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from test_tune import STAGED_PARAMS

from ptxtool.errors import InputError
from ptxtool.report.gpu import tune_lines
from ptxtool.services import tune as tune_service
from ptxtool.services.tuning import worker
from ptxtool.services.tuning.space import GENERATORS, Candidate, Context, Generator
from ptxtool.sources import read_source
from ptxtool.toolchain.gpu import DeviceInfo, KernelFault, LaunchRefused, LoadedModule

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
COMM = SAMPLES / "comm.sm90.ptx"
PRESSURE = Path(__file__).resolve().parent / "corpus" / "ptx" / "pressure.sm90.ptx"
STAGED = Path(__file__).resolve().parent / "data" / "warp_roles" / "staged.ptx"
DEVICE = DeviceInfo("Fake H200", "sm_90", 132, 1 << 20, 8 << 30, "13.0")


@dataclass
class Behaviour:
    """What a kernel does to memory (given the memory, grid and the parameters' bytes) and what a launch costs."""

    run: Callable
    cost_us: float
    fault: bool = False


def copy(memory: FakeGpu, grid, block, args) -> None:
    """plain_copy: n float4 from src to dst (a grid-stride loop: any grid copies everything)."""
    src, dst = (int.from_bytes(a, "little") for a in args[:2])
    n = int.from_bytes(args[2], "little", signed=True)
    memory.write(dst, memory.read(src, n * 16))


def copy_first_half(memory: FakeGpu, grid, block, args) -> None:
    src, dst = (int.from_bytes(a, "little") for a in args[:2])
    n = int.from_bytes(args[2], "little", signed=True)
    memory.write(dst, memory.read(src, n * 8))


def nothing(memory: FakeGpu, grid, block, args) -> None:
    pass


class FakeGpu:
    """The calls tune's worker makes of `Gpu`, on the host. Kernels are chosen by their PTX text (BEHAVIOURS)."""

    BEHAVIOURS: dict[str, Behaviour] = {}
    GRID_COST: Callable[[tuple], float] = staticmethod(lambda grid: 1.0)
    NOISE = 0.02
    SPEC = ""  # the launch spec the tests tune with (the fixture writes it)

    def __init__(self, ordinal: int = 0) -> None:
        self.info = DEVICE
        self._bases: list[int] = []
        self._arrays: dict[int, np.ndarray] = {}
        self._next = 1 << 20
        self._clock: dict[object, float] = {"main": 0.0}
        self._events: dict[int, float] = {}
        self._faulted = False
        self._rng = random.Random(ordinal)

    def __enter__(self) -> FakeGpu:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    # memory
    def alloc(self, nbytes: int) -> int:
        ptr = self._next
        self._next += (max(nbytes, 1) + 4095) // 4096 * 4096
        bisect.insort(self._bases, ptr)
        self._arrays[ptr] = np.zeros(max(nbytes, 1), np.uint8)
        return ptr

    def _at(self, ptr: int) -> tuple[np.ndarray, int]:
        base = self._bases[bisect.bisect_right(self._bases, ptr) - 1]
        return self._arrays[base], ptr - base

    def read(self, ptr: int, nbytes: int) -> np.ndarray:
        array, offset = self._at(ptr)
        return array[offset : offset + nbytes].copy()

    def write(self, ptr: int, data: np.ndarray) -> None:
        array, offset = self._at(ptr)
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        array[offset : offset + raw.size] = raw

    def upload(self, ptr: int, data: np.ndarray) -> None:
        self.write(ptr, data)

    def download(self, ptr: int, nbytes: int, timeout: float = 60.0) -> np.ndarray:
        self.synchronize(timeout)
        return self.read(ptr, nbytes)

    def fill_bytes(self, ptr: int, byte: int, nbytes: int) -> None:
        self.write(ptr, np.full(nbytes, byte, np.uint8))

    # modules
    def load(self, image: bytes, name: str, *, ptx: bool) -> LoadedModule:
        return LoadedModule(image.decode(), name, "")

    def function(self, module: LoadedModule, kernel: str) -> Behaviour:
        if kernel == worker.NEIGHBOUR_KERNEL:
            return Behaviour(nothing, 3.0)
        return self.BEHAVIOURS[module.handle]

    # launches and time
    def stream(self) -> str:
        self._clock["side"] = 0.0
        return "side"

    def launch(self, function, grid, block, args, shared_bytes=0, cooperative=False, stream=None) -> None:
        if np.prod(block) > 1024:
            raise LaunchRefused("the driver refused to launch: too many threads")
        if function.fault:
            self._faulted = True
            return
        function.run(self, grid, block, args)
        key = stream or "main"
        noise = 1 + self.NOISE * (self._rng.random() - 0.5)
        self._clock[key] += function.cost_us * self.GRID_COST(grid) * noise

    def gate(self) -> int:
        return self.alloc(4)

    def hold(self, gate: int, stream=None) -> None:
        # a held stream starts when the gate opens: both clocks meet there
        start = max(self._clock.values())
        for key in self._clock:
            self._clock[key] = start

    def release(self, gate: int) -> None:
        pass

    def event(self) -> int:
        self._events[len(self._events)] = 0.0
        return len(self._events) - 1

    def record(self, event: int, stream=None) -> None:
        self._events[event] = self._clock[stream or "main"]

    def elapsed_ms(self, start: int, end: int) -> float:
        return (self._events[end] - self._events[start]) / 1e3

    def synchronize(self, timeout: float = 60.0, stream=None) -> None:
        if self._faulted:
            raise KernelFault("a kernel failed on the GPU: CUDA_ERROR_ILLEGAL_ADDRESS")

    def devices(self) -> list[DeviceInfo]:
        return [DEVICE]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The worker in this process on FakeGpu, `count` fake devices; returns the behaviours table to fill."""
    monkeypatch.setattr(worker, "Gpu", FakeGpu)
    monkeypatch.setattr(tune_service, "run_jobs", lambda jobs: [worker.work(job) for job in jobs])
    monkeypatch.setattr(tune_service, "_devices", lambda gpus: [DEVICE] * (2 if gpus == "all" else int(gpus)))
    monkeypatch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(FakeGpu, "BEHAVIOURS", {COMM.read_text(): Behaviour(copy, 10.0)})
    monkeypatch.setattr(FakeGpu, "GRID_COST", staticmethod(lambda grid: 1.0))
    spec = tmp_path / "copy.toml"  # plain_copy on 64 KiB: the kernels run as NumPy copies here
    spec.write_text(SMALL_COPY)
    monkeypatch.setattr(FakeGpu, "SPEC", str(spec), raising=False)
    return FakeGpu.BEHAVIOURS


def plant(monkeypatch: pytest.MonkeyPatch, behaviours: dict, name: str, behaviour: Behaviour | None = None) -> str:
    """A code candidate: the input with a comment naming it, behaving as told."""
    text = COMM.read_text() + f"\n// {name}\n"
    if behaviour is not None:
        behaviours[text] = behaviour

    def generate(c: Context):
        yield Candidate(name, "planted", text, c.input.launch, code_changed=True)

    monkeypatch.setitem(GENERATORS, name, Generator(name, "code", generate))
    return name


SMALL_COPY = """kernel = "plain_copy"
grid = 1056
block = 256
[[param]]
name = "src"
type = "f32"
count = 16384
[[param]]
name = "dst"
type = "f32"
count = 16384
output = true
[[param]]
name = "n"
type = "s32"
value = 4096
"""


def tune(fresh: bool = True, **config) -> tune_service.TuneResult:
    config = {"cache_operators": [], "registers": False, "warp_roles": False} | config
    options = tune_service.Options(FakeGpu.SPEC, config=config, fresh=fresh)
    return tune_service.execute(options, [read_source(str(COMM))])


def tune_file(ptx: Path, spec: Path, dry_run: bool = False, **config) -> tune_service.TuneResult:
    options = tune_service.Options(str(spec), config=config, dry_run=dry_run, fresh=True)
    return tune_service.execute(options, [read_source(str(ptx))])


def by_name(result) -> dict:
    return {c.name: c for c in result.candidates}


def test_same_speed_keeps_the_input(fake, monkeypatch: pytest.MonkeyPatch) -> None:
    plant(monkeypatch, fake, "same", Behaviour(copy, 10.0))
    result = tune(generators=["same"], launches=200, confidence=0.99)
    same = by_name(result)["same"]
    assert same.status == "identical" and same.rounds == 200 and same.ratio.low <= 1 <= same.ratio.high
    assert result.winner == "input" and result.stopped == ["GPU 0: all 200 rounds"]
    assert by_name(result)["input"].median_us == pytest.approx(10.0, rel=0.02)


def test_faster_wins_and_the_leader_stops_the_rounds_early(fake, monkeypatch: pytest.MonkeyPatch) -> None:
    plant(monkeypatch, fake, "fast", Behaviour(copy, 9.0))
    plant(monkeypatch, fake, "faster", Behaviour(copy, 8.0))
    plant(monkeypatch, fake, "slow", Behaviour(copy, 12.0))
    result = tune(generators=["fast", "faster", "slow"], launches=400)
    c = by_name(result)
    assert result.winner == "faster" and c["faster"].ratio.high < 0.82 and c["fast"].ratio.below
    assert c["slow"].ratio.above and c["faster"].rounds == 32 and "the leader was clear" in result.stopped[0]
    assert c["faster"].neighbour_slowdown is not None  # the alone objective reports the neighbour's number too
    assert result.confidence == pytest.approx(1 - 0.05 / 3)


def test_planted_wrong_and_refused_and_rejected_are_never_chosen(fake, monkeypatch: pytest.MonkeyPatch) -> None:
    plant(monkeypatch, fake, "half", Behaviour(copy_first_half, 1.0))
    plant(monkeypatch, fake, "jit")
    fake[COMM.read_text() + "\n// jit\n"] = Behaviour(copy, 1.0)
    monkeypatch.setattr(FakeGpu, "load", _rejecting(FakeGpu.load, "// jit"))
    result = tune(generators=["half", "jit", "launch"], block=[2048 // 2, 256], grid=[1056])
    c = by_name(result)
    assert c["half"].status == "differ" and "dst[" in c["half"].problem and c["half"].ratio is None
    assert c["jit"].status == "rejected" and "JIT" in c["jit"].problem
    assert c["block=1024"].status == "identical"  # a launch that is allowed, and copies the same
    assert result.winner == "input" and result.exit_code == 1  # a code-only candidate gave other outputs


def _rejecting(load, marker: str):
    def rejecting(self, image: bytes, name: str, *, ptx: bool):
        if marker.encode() in image:
            raise InputError.at(name, "the driver's JIT rejected this PTX")
        return load(self, image, name, ptx=ptx)

    return rejecting


def test_a_launch_that_changes_outputs_is_no_finding(fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FakeGpu, "launch", _refusing(FakeGpu.launch))
    result = tune(block=[512], args={"n": [1024]})
    c = by_name(result)
    assert c["n=1024"].status == "differ" and c["block=512"].status == "refused"
    assert result.exit_code == 0 and result.winner == "input"


def _refusing(launch):
    def refusing(self, function, grid, block, args, shared_bytes=0, cooperative=False, stream=None):
        if block[0] == 512:
            raise LaunchRefused("the driver refused to launch: too many resources requested")
        return launch(self, function, grid, block, args, shared_bytes, cooperative, stream)

    return refusing


def test_a_fault_ends_the_worker_and_the_rest_is_measured_by_a_new_one(fake, monkeypatch: pytest.MonkeyPatch) -> None:
    plant(monkeypatch, fake, "crash", Behaviour(copy, 1.0, fault=True))
    plant(monkeypatch, fake, "fast", Behaviour(copy, 8.0))
    started = []
    monkeypatch.setattr(
        tune_service, "run_jobs", lambda jobs: started.append(len(jobs)) or [worker.work(j) for j in jobs]
    )
    result = tune(generators=["crash", "fast"])
    c = by_name(result)
    assert c["crash"].status == "fault" and "ILLEGAL_ADDRESS" in c["crash"].problem
    assert c["fast"].status == "identical" and result.winner == "fast" and len(started) == 2


def test_the_cache_answers_the_second_run(fake, monkeypatch: pytest.MonkeyPatch) -> None:
    plant(monkeypatch, fake, "fast", Behaviour(copy, 8.0))
    first = tune(fresh=False, generators=["fast"])
    monkeypatch.setattr(tune_service, "run_jobs", lambda jobs: pytest.fail("measured again"))
    second = tune(fresh=False, generators=["fast"])
    assert second.cached and not first.cached and second.winner == first.winner == "fast"
    assert [c.to_data() for c in second.candidates] == [c.to_data() for c in first.candidates]
    with pytest.raises(pytest.fail.Exception, match="measured again"):
        tune(fresh=True, generators=["fast"])


def test_neighbour_objective_times_the_kernel_beside_the_neighbour(fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FakeGpu, "GRID_COST", staticmethod(lambda grid: 1056 / grid[0]))
    result = tune(objective="neighbour", grid=[20], launches=24)
    c = by_name(result)
    assert c["grid=20"].status == "identical" and c["grid=20"].kernel_ratio.median == pytest.approx(52.8, rel=0.05)
    assert all(x.neighbour_slowdown is not None for x in result.candidates)
    assert result.winner == "input"  # the fake neighbour never slows down: nothing is faster


def test_several_gpus_share_the_candidates(fake, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("a", "b", "c"):
        plant(monkeypatch, fake, name, Behaviour(copy, 10.0))
    result = tune(generators=["a", "b", "c"], gpus="all", launches=40)
    assert len(result.devices) == 2
    assert [c.gpu for c in result.candidates] == [0, 0, 1, 0]
    assert len(result.stopped) == 2
    rows = {line.split()[0]: line.split() for line in tune_lines(result) if line.startswith("  ")}
    assert rows["candidate"][2] == "gpu" and [rows[n][2] for n in ("input", "a", "b", "c")] == ["0", "0", "1", "0"]


def test_a_budget_spent_times_nothing(fake, monkeypatch: pytest.MonkeyPatch) -> None:
    plant(monkeypatch, fake, "fast", Behaviour(copy, 5.0))
    result = tune(generators=["fast"], budget_s=0.001)
    fast = by_name(result)["fast"]
    assert fast.status == "identical" and fast.ratio is None and result.winner == "input"
    assert result.stopped == ["GPU 0: budget spent before the first round"]


def test_an_input_that_differs_from_itself_is_bad_input(fake, monkeypatch: pytest.MonkeyPatch) -> None:
    state = {"runs": 0}

    def racy(memory: FakeGpu, grid, block, args) -> None:
        copy(memory, grid, block, args)
        state["runs"] += 1
        dst = int.from_bytes(args[1], "little")
        memory.write(dst, np.array([state["runs"]], np.uint32))

    fake[COMM.read_text()] = Behaviour(racy, 10.0)
    plant(monkeypatch, fake, "same", Behaviour(copy, 10.0))
    with pytest.raises(InputError, match="the input plain_copy, run twice on the same inputs: dst\\[0\\]"):
        tune(generators=["same"])


# ---------------------------------------------------------------- the register and warp-role generators

SMALL_LONG_LIVE_RANGES = """kernel = "long_live_ranges"
grid = 264
block = 1024
[[param]]
name = "x"
type = "f64"
count = 24576
[[param]]
name = "y"
type = "f64"
count = 24576
output = true
[[param]]
name = "n"
type = "s32"
value = 1024
"""


def copy_doubles(memory: FakeGpu, grid, block, args) -> None:
    """long_live_ranges as far as the outputs go here: y from x, 24 doubles per element."""
    x, y = (int.from_bytes(a, "little") for a in args[:2])
    memory.write(y, memory.read(x, 24 * 8 * int.from_bytes(args[2], "little", signed=True)))


def test_register_variants_are_verified_and_timed_and_the_faster_wins(
    fake, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The relaxed bound lowers occupancy (tune's own pruning would drop it): the pass judged it, so it is timed."""
    spec = tmp_path / "llr.toml"
    spec.write_text(SMALL_LONG_LIVE_RANGES)
    dry = tune_file(PRESSURE, spec, dry_run=True, generators=["registers"])
    c = by_name(dry)
    relaxed = c["registers:.minnctapersm 2 -> 1"]
    assert relaxed.resources.occupancy < c["input"].resources.occupancy and relaxed.status == "not run"
    assert relaxed.resources.spill_bytes < c["input"].resources.spill_bytes
    fake[PRESSURE.read_text()] = Behaviour(copy_doubles, 10.0)
    for x in dry.candidates[1:]:
        fake[x.candidate.text] = Behaviour(copy_doubles, 5.0 if x is relaxed else 11.0)
    result = tune_file(PRESSURE, spec, generators=["registers"], launches=64)
    c = by_name(result)
    assert all(x.status == "identical" for x in result.candidates[1:]), [(x.name, x.status) for x in result.candidates]
    assert result.winner == "registers:.minnctapersm 2 -> 1" and c[result.winner].ratio.high < 0.6


SMALL_STAGED = 'kernel = "staged"\ngrid = 4\nblock = 128' + STAGED_PARAMS


def staged(block_made_for: int) -> Callable:
    """The staged kernel's outputs (out from a, one float per consumer thread) when launched with the block its
    code was made for; any other block computes something else (a split's producers would not stage the tiles)."""

    def run(memory: FakeGpu, grid, block, args) -> None:
        a, out = (int.from_bytes(x, "little") for x in args[:2])
        data = memory.read(a, grid[0] * 128 * 4)
        memory.write(out, data if block[0] == block_made_for else data[::-1])

    return run


def test_warp_role_splits_run_with_the_block_the_split_declares(
    fake, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each split is launched with the block its `.reqntid` states (consumer %tid unchanged), each pipeline with the
    spec's, checked bit for bit as a change of code; a split's text at the spec's block gives other outputs, which
    is a finding (exit 1)."""
    from ptxtool.analysis.launch_bounds import block_bounds
    from ptxtool.syntax import parse

    spec = tmp_path / "staged.toml"
    spec.write_text(SMALL_STAGED)
    dry = tune_file(STAGED, spec, dry_run=True, generators=["warp-roles"])
    made = [x.candidate for x in dry.candidates if x.candidate.origin == "warp-roles"]
    splits = [x for x in made if dict(x.settings)["variant"].startswith("split")]
    pipelines = [x for x in made if dict(x.settings)["variant"] == "pipeline"]
    assert splits and pipelines, dry.notes
    for x in splits:
        declared = block_bounds(next(f for f in parse(x.text).kernels if f.name == "staged"))
        assert declared.exact and x.launch.block == (*declared.dims, 1, 1)[:3] and x.launch.block[0] > 128
        assert x.launch.grid == (4, 1, 1) and x.code_changed and not x.launch_changed
        assert f"block={x.launch.block[0]}" in x.name
    for x in pipelines:  # the pipeline keeps the block: the spec's launch
        assert x.launch.block == (128, 1, 1) and x.code_changed and not x.launch_changed
    fake[STAGED.read_text()] = Behaviour(staged(128), 10.0)
    for x in made:
        fake[x.text] = Behaviour(staged(x.launch.block[0]), 8.0)
    first = splits[0]

    def mislaunched(c: Context):
        yield Candidate("mislaunched", "planted", first.text, c.input.launch, code_changed=True)

    monkeypatch.setitem(GENERATORS, "mislaunched", Generator("mislaunched", "code", mislaunched))
    result = tune_file(STAGED, spec, generators=["warp-roles", "mislaunched"], launches=64)
    c = by_name(result)
    assert all(c[x.name].status == "identical" for x in made)
    assert c["mislaunched"].status == "differ" and result.exit_code == 1
    assert c[result.winner].candidate.origin == "warp-roles" and c[result.winner].ratio.high < 0.9
