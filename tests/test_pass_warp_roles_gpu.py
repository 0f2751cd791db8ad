"""warp-roles with fewer producer warps than consumers (P = 1 and 2), with setmaxnreg (4 producer warps,
sm_90a), with cp.async producers (split-async, S = 2, 3), with one cp.async.bulk producer warp (split-bulk, S = 2, 3;
also with every input array 4 bytes off 16-byte alignment, which makes every trip take the cp.async fallback), and
its pipeline variant (S = 2, 3, 4), on the GPU:
each benchmark kernel (benchmarks/warp_roles) so transformed, its outputs compared bit for bit with the input
kernel's over 100 launches with the watchdog of ptxtool.toolchain.gpu. Skipped where no CUDA driver is found, or
where the wheel's nvcc cannot compile the benchmark sources."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ptxtool.errors import EnvironmentProblem
from ptxtool.toolchain.gpu import Gpu, probe

REASON = probe()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU: {REASON}")]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import warp_roles as bench  # noqa: E402

PRODUCERS = (1, 2)
STAGES = (2, 4)


def _made_or_spills(entry: dict, name: str) -> None:
    """Split `name` (S = 2 fits every benchmark) is made, or refused because ptxas spills it where the input did not
    (optimize keeps the input then: sgemm_unrolled's producers with P = 1 and its split-bulk)."""
    info = entry["splits"][name]
    assert "block" in info or info.get("refused", "").startswith("ptxas spills"), entry["splits"]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("warp_roles_producers")
    try:
        return folder, bench.prepare(folder, stages=STAGES, producers=PRODUCERS, setmaxnreg=(4,), bulk=())
    except EnvironmentProblem as problem:
        pytest.skip(f"cannot compile the benchmark sources: {problem}")


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize(("producers", "setmaxnreg"), [(1, False), (2, False), (4, True)])
@pytest.mark.parametrize("name", sorted(bench.BENCHES))
def test_fewer_producers_bit_identical(
    name: str, producers: int, setmaxnreg: bool, prepared: tuple[Path, dict]
) -> None:
    folder, manifest = prepared
    entry = manifest[name]
    wanted = {bench.variant_name(s, producers, setmaxnreg) for s in STAGES}
    made = {v for v in wanted if "block" in entry["splits"][v]}
    _made_or_spills(entry, bench.variant_name(2, producers, setmaxnreg))
    for v in made:
        assert entry["splits"][v]["block"] == entry["block"] + 32 * producers
    entry = {**entry, "splits": {v: entry["splits"][v] for v in made}}
    with Gpu() as gpu:
        functions = bench.load_variants(gpu, folder, name, entry)
        for case in bench.cases(gpu, name, small=True):
            differ = bench.identical(gpu, functions, case, launches=100)
            assert differ == dict.fromkeys(functions, 0), (case.label, differ)


@pytest.fixture(scope="module")
def pipelines(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("warp_roles_pipelines")
    try:
        return folder, bench.prepare(folder, stages=(), producers=(), setmaxnreg=(), pipelines=bench.STAGES, bulk=())
    except EnvironmentProblem as problem:
        pytest.skip(f"cannot compile the benchmark sources: {problem}")


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize("name", sorted(bench.BENCHES))
def test_pipeline_bit_identical(name: str, pipelines: tuple[Path, dict]) -> None:
    """Each pipeline ptxtool makes (S = 2, 3, 4, the block unchanged) gives the input kernel's bits over 100 launches
    with the watchdog; every input (straight-line staging or a thread-strided fill loop) is pipelined at S = 2."""
    folder, manifest = pipelines
    entry = manifest[name]
    made = {v for v, info in entry["splits"].items() if "block" in info}
    assert bench.pipeline_name(2) in made, entry["splits"]
    assert all(entry["splits"][v]["block"] == entry["block"] for v in made)
    entry = {**entry, "splits": {v: entry["splits"][v] for v in made}}
    with Gpu() as gpu:
        functions = bench.load_variants(gpu, folder, name, entry)
        for case in bench.cases(gpu, name, small=True):
            differ = bench.identical(gpu, functions, case, launches=100)
            assert differ == dict.fromkeys(functions, 0), (case.label, differ)


COPYING = (None, 1)  # producer warps of the split-async variants: one producer thread per consumer, one warp


@pytest.fixture(scope="module")
def copying(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("warp_roles_copying")
    try:
        return folder, bench.prepare(
            folder, stages=(2, 3), producers=(), setmaxnreg=(), pipelines=(), copying=COPYING, bulk=()
        )
    except EnvironmentProblem as problem:
        pytest.skip(f"cannot compile the benchmark sources: {problem}")


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize("name", sorted(bench.BENCHES))
def test_copying_producers_bit_identical(name: str, copying: tuple[Path, dict]) -> None:
    """Each split with cp.async producers ptxtool makes (S = 2, 3; P = N/32 and 1, the block grown by 32P) gives
    the input kernel's bits over 100 launches with the watchdog; every input (straight-line staging or a
    thread-strided fill loop) is split so at S = 2 for both P."""
    folder, manifest = copying
    entry = manifest[name]
    made = {v for v, info in entry["splits"].items() if "block" in info}
    for p in COPYING:
        _made_or_spills(entry, bench.async_name(2, p))
    for stages in (2, 3):
        for p in COPYING:
            if bench.async_name(stages, p) in made:
                grown = entry["splits"][bench.async_name(stages, p)]["block"]
                assert grown == entry["block"] + (32 * p if p else entry["block"])
    entry = {**entry, "splits": {v: entry["splits"][v] for v in made}}
    with Gpu() as gpu:
        functions = bench.load_variants(gpu, folder, name, entry)
        for case in bench.cases(gpu, name, small=True):
            differ = bench.identical(gpu, functions, case, launches=100)
            assert differ == dict.fromkeys(functions, 0), (case.label, differ)


BULK_ACCEPTED = ("attention", "attention_unrolled", "sgemm", "sgemm_unrolled", "stencil")


@pytest.fixture(scope="module")
def bulk(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("warp_roles_bulk")
    try:
        return folder, bench.prepare(
            folder, stages=(), producers=(), setmaxnreg=(), pipelines=(), copying=(), bulk=bench.BULK_STAGES
        )
    except EnvironmentProblem as problem:
        pytest.skip(f"cannot compile the benchmark sources: {problem}")


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize("shift", [0, 4])
@pytest.mark.parametrize("name", sorted(bench.BENCHES))
def test_bulk_producers_bit_identical(name: str, shift: int, bulk: tuple[Path, dict]) -> None:
    """Each split with one cp.async.bulk producer warp ptxtool makes (S = 2, 3, the block grown by 32) gives the
    input kernel's bits over 100 launches with the watchdog: with the inputs as cudaMalloc aligns them (runs copied
    in bulk where their trip's check holds), and with every input array 4 bytes past its allocation's start (no
    run's source is 16-byte aligned: every trip takes the cp.async fallback)."""
    folder, manifest = bulk
    entry = manifest[name]
    made = {v for v, info in entry["splits"].items() if "block" in info}
    if name not in BULK_ACCEPTED:
        assert not made, entry["splits"]
        return
    _made_or_spills(entry, bench.bulk_name(2))
    assert all(entry["splits"][v]["block"] == entry["block"] + 32 for v in made)
    entry = {**entry, "splits": {v: entry["splits"][v] for v in made}}
    with Gpu() as gpu:
        functions = bench.load_variants(gpu, folder, name, entry)
        for case in bench.cases(gpu, name, small=True, shift=shift):
            differ = bench.identical(gpu, functions, case, launches=100)
            assert differ == dict.fromkeys(functions, 0), (case.label, differ)
