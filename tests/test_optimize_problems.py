"""Why `optimize` failed a file is a diagnostic like every other (`errors.Diagnostic`), in its JSON too
(`ptxtool.optimize/2`): a rewrite that `--strict` lets fail the file names its line, column, kernel and check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_sass_order import _careless

from ptxtool.cli import main
from ptxtool.passes import PASSES, Pass
from ptxtool.services.optimize import SCHEMA

DATA = Path(__file__).parent / "data" / "optimize"
pytestmark = pytest.mark.usefixtures("ptxas")


@pytest.fixture
def careless(monkeypatch: pytest.MonkeyPatch) -> str:
    """A pass that adds `.nc` to every `ld.global` without analysis: ptxas hoists the load above a `bar.sync`."""
    monkeypatch.setitem(
        PASSES, "careless", Pass("careless", lambda module, settings, _: _careless(module, settings), object)
    )
    return "careless"


def test_strict_failure_is_a_diagnostic_in_the_json(careless: str, tmp_path: Path) -> None:
    out = tmp_path / "out.ptx"
    path = str(DATA / "symbol_alias.sm90.ptx")
    cli = CliRunner().invoke(main, ["optimize", path, "--passes", careless, "--strict", "--json", "-o", str(out)])
    assert cli.exit_code == 1, cli.output
    document = json.loads(cli.stdout)
    assert document["schema"] == SCHEMA == "ptxtool.optimize/2" and document["verified"] is False
    (problem,) = document["problems"]
    assert (problem["path"], problem["line"], problem["column"]) == (path, 39, 2)  # the `ld` of line 39
    assert problem["severity"] == "error" and problem["code"] == "optimize/strict"
    assert problem["kernel"] == "_Z12symbol_aliasPKf" and problem["notes"] == []
    assert problem["message"].startswith("_Z12symbol_aliasPKf: ptxas moved LDG.E.CONSTANT above BAR.SYNC")
    assert not out.exists()  # a failed file is not written


def test_strict_failure_reads_as_one_line_in_the_text_report(careless: str) -> None:
    """The text report keeps its line: `verification failed: path:line: kernel: why`."""
    path = str(DATA / "symbol_alias.sm90.ptx")
    cli = CliRunner().invoke(main, ["optimize", path, "--passes", careless, "--strict"])
    assert cli.exit_code == 1 and cli.stdout == ""
    assert f"verification failed: {path}:39: _Z12symbol_aliasPKf: ptxas moved LDG.E.CONSTANT above" in cli.stderr
