"""`report` parses a file once, builds each CFG once and runs ptxas once (a `-lineinfo` build) for lint, inspect's
pressure curves and the pictures. What it gathers that way must be what each service gives on its own: lint's
findings, `inspect --json`'s numbers (from a plain build), the pressure curves of `inspect --pressure`."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CORPUS

from ptxtool.lint.settings import LintSettings
from ptxtool.report.json_report import inspect_document
from ptxtool.report.pictures import pressure_svg
from ptxtool.services.inspect import Options as InspectOptions
from ptxtool.services.inspect import inspect_file
from ptxtool.services.lint import lint_file
from ptxtool.services.report import Options, view_file
from ptxtool.sources import read_source

# module-level .shared, -G debug sections with .file/.loc, nvcc -lineinfo, Triton, .nc loads, -O0, a callee
FILES = [
    pytest.param(CORPUS / name, id=name)
    for name in (
        "ptx/reduce.sm80.ptx",
        "ptx/control.sm80.debug.ptx",
        "ptx/comm.sm90.lineinfo.ptx",
        "ptx/pressure.sm80.ptx",
        "ptx/gemm_smem.sm86.O0.ptx",
        "triton/matmul.sm80.ptx",
        "fresh/nvcc.k11_restrict.sm75.ptx",
        "fresh/nvcc.k04_inline_asm.sm86.G.ptx",
        "fresh/triton.asm_print.sm90.ptx",
        "triton36/flash_fwd.sm90a.ptx",
        "triton36/atomic_cas_lock.sm90a.ptx",
    )
]


def _documented(path: Path, pressure: bool) -> tuple[list[dict], list]:
    report = inspect_file(read_source(str(path)), InspectOptions(pressure=pressure))
    return inspect_document([report], [], {})["files"][0]["kernels"], report.kernels


@pytest.mark.parametrize("path", FILES)
def test_report_gathers_what_lint_and_inspect_give_alone(path: Path):
    view = view_file(read_source(str(path)), Options())

    alone = lint_file(read_source(str(path)), LintSettings())
    expected: dict[int, list[dict]] = {}
    for d in alone.findings:
        if d.location.line:
            found = {"line": d.location.line, "rule": d.code, "severity": d.severity, "message": d.message}
            expected.setdefault(d.location.line, []).append(found)
    assert view.findings == expected

    plain, _ = _documented(path, pressure=False)  # a build without line info: inspect's own numbers
    lined, kernels = _documented(path, pressure=True)
    assert [k.data for k in view.kernels.values()] == plain == lined
    for k in kernels:
        assert k.pressure is not None and k.pressure.curve.points
        drawn = pressure_svg(k.pressure.curve, k.pressure.real, "ptxas live (SASS)")
        assert view.kernels[k.name].pressure_svg == drawn
