"""Budget files as users write them: one unit for occupancy (a fraction), impossible values refused with the file and
key named (exit 2), and a table that matches no kernel reported instead of passing silently."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import SAMPLES

from ptxtool.cli import main

PRESSURE = str(SAMPLES / "pressure.sm80.ptx")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path / "cache"))


def inspect(budget_text: str, tmp_path, *files: str):
    budget = tmp_path / "budget.toml"
    budget.write_text(budget_text)
    return budget, CliRunner().invoke(main, ["inspect", "--budget", str(budget), *(files or [PRESSURE])])


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            "min_occupancy = 50",
            "min_occupancy = 50 is impossible: occupancy is a fraction of the SM's warps from 0 to 1",
        ),
        ("min_occupancy = -0.1", "min_occupancy = -0.1 is impossible"),
        ("max_registers = -1", "max_registers = -1 is impossible: a thread has at most 255 registers"),
        ("max_registers = 256", "max_registers = 256 is impossible"),
        ("max_spill_bytes = -8", "max_spill_bytes = -8 is impossible: a byte count is 0 or more"),
    ],
)
def test_impossible_limits_are_exit_2_naming_file_and_key(table, message, tmp_path):
    budget, result = inspect(f'[kernels."nbody_*"]\n{table}\n', tmp_path)
    assert result.exit_code == 2, result.output
    assert f'{budget}: error: [kernels."nbody_*"]: {message}' in result.stderr


def test_occupancy_is_a_fraction_shown_as_a_percentage(tmp_path):
    _, result = inspect('[kernels."stencil_25pt"]\nmin_occupancy = 0.75\n', tmp_path)
    assert result.exit_code == 1
    assert "kernel stencil_25pt: 50.0% occupancy < min_occupancy = 75.0%" in result.stderr


def test_a_table_that_matches_no_kernel_is_a_warning(tmp_path):
    budget, result = inspect('[kernels."*"]\nmax_registers = 255\n[kernels."nbdy_*"]\nmax_registers = 40\n', tmp_path)
    assert result.exit_code == 0, result.output
    warning = f'warning: budget {budget}: [kernels."nbdy_*"] matches no kernel of the 1 file inspected'
    assert warning in result.stderr and result.stderr.count("matches no kernel") == 1  # "*" is never reported


def test_matching_tables_say_nothing(tmp_path):
    _, result = inspect(
        '[kernels."nbody_*"]\nmax_registers = 255\n[kernels.stencil_25pt]\nmax_registers = 255\n', tmp_path
    )
    assert result.exit_code == 0 and "matches no kernel" not in result.stderr  # (ptxas warnings are on stderr too)
