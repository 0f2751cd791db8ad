"""report.SILENT lets `emit` skip rendering a Result whose text form is empty (a `fmt FILE -o OUT` that succeeds then
never loads the text renderer): it may say "nothing to print" only where the text renderer prints nothing."""

from __future__ import annotations

import io
import itertools

from rich.console import Console

from ptxtool.errors import Diagnostic, Location
from ptxtool.report import SILENT, emit
from ptxtool.report.console import Out
from ptxtool.report.text import TEXT
from ptxtool.services.fmt import FmtResult, Formatted, Options


def _rendered(result: FmtResult) -> str:
    stdout, stderr = io.StringIO(), io.StringIO()
    TEXT["FmtResult"](result, Out(stdout, Console(file=stderr, width=200)), False)
    return stdout.getvalue() + stderr.getvalue()


def _results() -> list[FmtResult]:
    """Every combination of fmt's options with one or two files, changed or not, read or not (checked or not)."""
    same, changed = Formatted("a.ptx", "x\n", "x\n"), Formatted("b.ptx", "y \n", "y\n")
    error = Diagnostic(Location("c.ptx", 1, 1), "bad")
    results = []
    flags = itertools.product((None, "", "out.ptx"), (False, True), (False, True), (False, True), (None, False))
    for output, in_place, check, diff, color in flags:
        options = Options(output, in_place, check, diff, color)
        for files in ([same], [changed], [same, changed], []):
            for errors in ([], [error]):
                results.append(FmtResult(options, list(files), list(errors), len(errors)))
    return results


def test_a_result_said_silent_renders_as_nothing() -> None:
    silent = [r for r in _results() if SILENT["FmtResult"](r)]
    assert silent  # the premise: `fmt FILE -o OUT` is among them
    assert all(r.options.output == "out.ptx" and not r.errors for r in silent)
    assert [_rendered(r) for r in silent if _rendered(r)] == []


def test_every_result_said_not_silent_that_prints_is_rendered_by_emit() -> None:
    """emit renders exactly the results not said silent: what they print is the text renderer's."""
    for result in _results():
        stdout, stderr = io.StringIO(), io.StringIO()
        code = emit(result, "text", Out(stdout, Console(file=stderr, width=200)))
        assert code == result.exit_code
        assert stdout.getvalue() + stderr.getvalue() == _rendered(result)
