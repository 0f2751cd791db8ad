"""Triton 3.6's Hopper bf16 GEMM (benchmarks/warp_roles_hopper.py: TMA into an mbarrier ring, wgmma, 4 stages) and
its automatically warp-specialized twin (a producer warpgroup, two consumer warpgroups, setmaxnreg, each role
dispatched to its own `barrier.sync 1`), as Triton wrote them on an H200: real PTX nobody here wrote. The lint must
not call the specialized kernel wrong, and the warp-role pass must leave the GEMM alone with a one-line reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ptxtool.cli import main
from ptxtool.lint import load_settings
from ptxtool.services.lint import lint_file
from ptxtool.sources import read_source

DATA = Path(__file__).parent / "data" / "warp_roles"
GEMM = DATA / "triton_gemm_tma.sm90a.ptx"
SPECIALIZED = DATA / "triton_gemm_tma_ws.sm90a.ptx"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path / "cache"))


def test_the_specialized_kernel_is_not_called_wrong() -> None:
    """Its roles reach `barrier.sync 1` (not .aligned) from different instructions, legal in the ISA (PTX002 was 7
    errors); its default partition takes 256 registers to set up and gives them back (.dec 40) before the workers
    take 232 (PTX003 counted the set-up's 256)."""
    text = SPECIALIZED.read_text()
    assert "barrier.sync \t1;" in text and "setmaxnreg.inc.sync.aligned.u32 \t256;" in text
    settings = load_settings({}, "test", select=("PTX002", "PTX003"))
    result = lint_file(read_source(str(SPECIALIZED)), settings)
    assert not result.errors and result.findings == []


@pytest.mark.parametrize("variant", ["split", "pipeline"])
def test_the_warp_role_pass_leaves_the_tma_gemm_alone(variant: str, tmp_path: Path) -> None:
    out = tmp_path / "out.ptx"
    run = CliRunner().invoke(
        main, ["optimize", "--passes", "warp-roles", "--variant", variant, str(GEMM), "-o", str(out)]
    )
    assert run.exit_code == 0, run.output
    reason = next(line for line in run.output.splitlines() if "skipped warp-roles: " in line)
    assert reason.startswith(f"{GEMM}:") and reason.split("skipped warp-roles: ")[1].strip()
    assert out.read_text() == GEMM.read_text()
