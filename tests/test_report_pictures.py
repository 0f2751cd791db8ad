"""`ptxtool cfg` and the pressure pictures, on corpus kernels."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import CORPUS

from ptxtool.analysis.cfg import build_cfg
from ptxtool.analysis.pressure import pressure
from ptxtool.cli import main
from ptxtool.report.pictures import pressure_svg, pressure_text
from ptxtool.syntax import parse

PRESSURE = str(CORPUS / "ptx/pressure.sm80.ptx")


def test_cfg_dot_marks_nested_loops_and_back_edges():
    result = CliRunner().invoke(main, ["cfg", PRESSURE, "--kernel", "nbody_tile"])
    assert result.exit_code == 0
    dot = result.stdout
    assert dot.startswith('digraph "nbody_tile"')
    assert 'label="loop 0 (depth 1): %r38+=128"' in dot and 'label="loop 1 (depth 2): %r39+=128"' in dot
    assert dot.index("cluster_loop0") < dot.index("cluster_loop1") < dot.index("b3 [")  # loop 1 inside loop 0
    assert len(re.findall(r"-> b\d+ \[style=dashed", dot)) == 2  # b3 -> b3 and b4 -> b2
    assert "peripheries=2" in dot  # the block ending in ret


def test_cfg_needs_a_kernel_when_there_are_several(tmp_path):
    several = CliRunner().invoke(main, ["cfg", PRESSURE])
    assert several.exit_code == 2 and "stencil_25pt, nbody_tile, long_live_ranges" in several.stderr
    missing = CliRunner().invoke(main, ["cfg", PRESSURE, "-k", "nope"])
    assert missing.exit_code == 2 and "no function named 'nope'" in missing.stderr


def test_cfg_writes_dot_file(tmp_path):
    out = tmp_path / "cfg.dot"
    result = CliRunner().invoke(main, ["cfg", PRESSURE, "-k", "stencil_25pt", "-o", str(out)])
    assert result.exit_code == 0 and result.stdout == ""
    assert out.read_text().startswith('digraph "stencil_25pt"')


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz is not installed")
def test_cfg_svg_through_graphviz(tmp_path):
    out = tmp_path / "cfg.svg"
    result = CliRunner().invoke(main, ["cfg", PRESSURE, "-k", "nbody_tile", "-o", str(out)])
    assert result.exit_code == 0
    assert "<svg" in out.read_text() and "loop 1 (depth 2)" in out.read_text()


def test_cfg_svg_without_graphviz_is_an_environment_problem(tmp_path):
    out = tmp_path / "cfg.svg"
    result = CliRunner(env={"PATH": str(tmp_path)}).invoke(main, ["cfg", PRESSURE, "-k", "nbody_tile", "-o", str(out)])
    assert result.exit_code == 3 and "graphviz" in result.stderr and not out.exists()


def long_live_ranges_curve():
    module = parse(Path(PRESSURE).read_text())
    return pressure(build_cfg(next(f for f in module.kernels if f.name == "long_live_ranges")))


def test_pressure_text_marks_the_peak_row():
    text = pressure_text(long_live_ranges_curve(), width=40, rows=30)
    lines = text.splitlines()
    assert "peak 60 at line 870" in lines[0]
    peak_rows = [row for row in lines[1:] if row.endswith("<- peak")]
    assert len(peak_rows) == 1 and "#" * 40 in peak_rows[0]
    first, _, last = peak_rows[0].split()[0].partition("-")
    assert int(first) <= 870 <= int(last or first)
    assert len(lines) <= 31


def test_pressure_svg_with_a_second_series():
    svg = pressure_svg(long_live_ranges_curve(), {820: 30, 870: 32}, "ptxas live")
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "peak 60 @ line 870" in svg and svg.count("<polyline") == 2 and "ptxas live" in svg
