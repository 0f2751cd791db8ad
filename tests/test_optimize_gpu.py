"""`ptxtool optimize --verify-gpu`: original and optimized kernels give bit-identical outputs on the GPU.
Skipped where no CUDA driver is found (`pytest -m gpu` on a machine with an NVIDIA GPU runs them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SAMPLES

from ptxtool.cli import main
from ptxtool.toolchain.gpu import probe

REASON = probe()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU: {REASON}")]

CASES = [
    ("comm.sm90.ptx", "plain_copy.toml"),
    ("comm.sm90.ptx", "streaming_scale.toml"),
    ("elementwise.sm90.ptx", "hadd2.toml"),
    ("elementwise.sm90.ptx", "fp8_quantize.toml"),
]


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize(("ptx", "spec"), CASES, ids=[s.removesuffix(".toml") for _, s in CASES])
def test_optimized_outputs_identical(ptx: str, spec: str, tmp_path: Path) -> None:
    out = tmp_path / ptx
    args = ["optimize", str(SAMPLES / ptx), "--noalias", "*", "--l2-evict-first", "-o", str(out)]
    result = CliRunner().invoke(main, [*args, "--verify-gpu", str(SAMPLES / spec)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert "GPU outputs identical" in result.stderr and out.is_file()
