"""Every command as a demanding user meets it: bad paths, bad options and missing tools give an exit code from
docs/cli.md and one clear line on stderr, never an internal error."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import SAMPLES

from ptxtool.cli import main
from ptxtool.errors import EXIT_INPUT

PTX = str(SAMPLES / "reduce.sm80.ptx")


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize(
    "args",
    [
        ["fmt", PTX, "-o", "{missing}/out.ptx"],
        ["fmt", PTX, "-o", "{file}/out.ptx"],
        ["cfg", PTX, "-k", "block_sum", "-o", "{missing}/cfg.dot"],
        ["optimize", PTX, "-o", "{missing}/out.ptx"],
        ["inspect", PTX, "--baseline", "{missing}/base.json", "--update-baseline"],
    ],
    ids=["fmt-missing-dir", "fmt-under-a-file", "cfg", "optimize", "inspect-baseline"],
)
def test_unwritable_output_is_bad_input_not_a_bug(args, tmp_path):
    (tmp_path / "file").write_text("x")
    paths = {"missing": str(tmp_path / "no" / "such"), "file": str(tmp_path / "file")}
    result = run(*(a.format(**paths) for a in args))
    assert result.exit_code == EXIT_INPUT, result.output
    assert "internal error" not in result.stderr
    assert "error: cannot write in " in result.stderr
