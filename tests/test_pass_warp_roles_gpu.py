"""warp-roles with fewer producer warps than consumers (P = 1 and 2), and with setmaxnreg (4 producer warps,
sm_90a), on the GPU: each benchmark kernel (benchmarks/warp_roles) split so, its outputs compared bit for bit with
the input kernel's over 100 launches with the watchdog of ptxtool.toolchain.gpu. Skipped where no CUDA driver is
found, or where the wheel's nvcc cannot compile the benchmark sources."""

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


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("warp_roles_producers")
    try:
        return folder, bench.prepare(folder, stages=STAGES, producers=PRODUCERS, setmaxnreg=(4,))
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
    assert bench.variant_name(2, producers, setmaxnreg) in made, entry["splits"]  # S = 2 fits every benchmark
    for v in made:
        assert entry["splits"][v]["block"] == entry["block"] + 32 * producers
    entry = {**entry, "splits": {v: entry["splits"][v] for v in made}}
    with Gpu() as gpu:
        functions = bench.load_variants(gpu, folder, name, entry)
        for case in bench.cases(gpu, name, small=True):
            differ = bench.identical(gpu, functions, case, launches=100)
            assert differ == dict.fromkeys(functions, 0), (case.label, differ)
