"""CUDA sources for lint: PTX from nvcc with line info, and the map from a line of that PTX back to the line of the
user's `.cu`/`.cuh` file (its `.loc` directives), so that findings and suppressions point into the user's own code."""

from __future__ import annotations

import re
import tempfile
from bisect import bisect_right
from dataclasses import dataclass, replace
from pathlib import Path

from ptxtool.errors import InputError, Location
from ptxtool.syntax import ast


def annotated_ptx(path: str, arch: str | None) -> str:
    """PTX with `.loc` line info for a .cu file, or a .cuh header through a unit that includes it."""
    from ptxtool.toolchain.compile import cuda_to_ptx as compile_cuda

    if not path.endswith(".cuh"):
        return compile_cuda(path, arch, lineinfo=True)
    with tempfile.TemporaryDirectory(prefix="ptxtool-") as tmp:
        unit = Path(tmp) / (Path(path).stem + ".cu")
        unit.write_text(f'#include "{Path(path).resolve()}"\n')
        try:
            return compile_cuda(str(unit), arch, lineinfo=True)
        except InputError as error:  # nvcc names the header's lines; say they are the header's
            lines = Path(path).read_text(errors="replace").splitlines()
            raise InputError(
                [
                    replace(d, location=Location(path, d.location.line, 0, _line(lines, d.location.line)))
                    for d in error.diagnostics
                ]
            ) from None


def _line(lines: list[str], number: int) -> str:
    return lines[number - 1] if 0 < number <= len(lines) else ""


@dataclass(frozen=True)
class LineMap:
    """Per function with a body: its PTX line span and its `.loc` marks (PTX line, CUDA line, column), sorted."""

    spans: tuple[tuple[int, int, tuple[tuple[int, int, int], ...]], ...]

    def find(self, ptx_line: int) -> tuple[int, int]:
        """The CUDA (line, column) of a PTX line: the last mark at or before it in its function, else the function's
        first mark; (0, 0) when the line has none (outside functions, or code from other files only)."""
        for start, end, marks in self.spans:
            if start <= ptx_line <= end and marks:
                at = bisect_right([m[0] for m in marks], ptx_line) - 1
                _, line, column = marks[max(at, 0)]
                return line, column
        return 0, 0


_AT_LINE = re.compile(r"\bat line (\d+)")


def cuda_lines(message: str, lines: LineMap) -> str:
    """A rule's message with the PTX lines it names (`branch ... at line 38`) told as the CUDA lines they came from
    (`at line 5 (PTX line 38)`), where the PTX has a mark for them."""

    def at(match: re.Match[str]) -> str:
        line = lines.find(int(match.group(1)))[0]
        return f"at line {line} (PTX line {match.group(1)})" if line else f"at PTX line {match.group(1)}"

    return _AT_LINE.sub(at, message)


def line_map(module: ast.Module, path: str) -> LineMap:
    """The map from the PTX nvcc made of `path` back to `path` itself (marks of included files are left out)."""
    from ptxtool.syntax.lineinfo import LineInfo

    info = LineInfo.of(module)
    target = Path(path).resolve()
    mine = {number for number, file in info.files.items() if Path(file).resolve() == target}
    return LineMap(
        tuple(
            (start, end, tuple((at, line, column) for at, number, line, column in marks if number in mine))
            for start, end, marks in info.spans
        )
    )
