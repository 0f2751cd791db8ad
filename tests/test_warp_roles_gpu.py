"""warp-roles on the GPU: each benchmark kernel (benchmarks/warp_roles) through the pass, its outputs compared bit
for bit with the input kernel's over 100 launches, with the watchdog of ptxtool.toolchain.gpu (a launch that does
not finish in time fails the test instead of hanging it). Skipped where no CUDA driver is found, or where nvcc
(the wheel) cannot compile the benchmark sources."""

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


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("warp_roles")
    try:
        return folder, bench.prepare(folder)
    except EnvironmentProblem as problem:
        pytest.skip(f"cannot compile the benchmark sources: {problem}")


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize("name", sorted(bench.BENCHES))
def test_split_outputs_bit_identical(name: str, prepared: tuple[Path, dict]) -> None:
    folder, manifest = prepared
    entry = manifest[name]
    assert any("block" in s for s in entry["splits"].values()), entry["splits"]  # the pass split it at least once
    with Gpu() as gpu:
        functions = bench.load_variants(gpu, folder, name, entry)
        for case in bench.cases(gpu, name, small=True):
            differ = bench.identical(gpu, functions, case, launches=100)
            assert differ == dict.fromkeys(functions, 0), (case.label, differ)
