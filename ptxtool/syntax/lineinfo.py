"""Debug line info of a module: its `.file` table and, per function, the `.loc` marks that tie PTX lines to the
source lines (CUDA, Triton, …) they were compiled from, as `nvdisasm -g` and Compiler Explorer read them."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from functools import cached_property

from ptxtool.syntax import ast


def _column(args: tuple) -> int:
    return int(args[2].value) if len(args) > 2 and isinstance(args[2], ast.Immediate) else 0


@dataclass(frozen=True, slots=True)
class SourceLine:
    """A line of a source file named by `.file`: the file as written there, and the line (1-based)."""

    file: str
    line: int


@dataclass(frozen=True)
class LineInfo:
    """`.file` numbers to paths, and per function its PTX line span and `.loc` marks (PTX line, file, line,
    column), sorted."""

    files: dict[int, str]
    spans: tuple[tuple[int, int, tuple[tuple[int, int, int, int], ...]], ...]

    @classmethod
    def of(cls, module: ast.Module) -> LineInfo:
        files = {
            int(d.args[0][0].value): d.args[0][1].text[1:-1]
            for d in module.items
            if isinstance(d, ast.Directive) and d.word == ".file" and d.args and len(d.args[0]) > 1
            if isinstance(d.args[0][0], ast.Immediate) and isinstance(d.args[0][1], ast.String)
        }
        spans = []
        for function in module.functions:
            if function.body is None:
                continue
            marks = sorted(
                (d.line, *(int(a.value) for a in d.args[0][:2]), _column(d.args[0]))
                for d in ast.walk(function.body)
                if isinstance(d, ast.Directive) and d.word == ".loc" and d.args and len(d.args[0]) > 1
                if all(isinstance(a, ast.Immediate) for a in d.args[0][:2])
            )
            spans.append((function.line, function.body.end_line, tuple(marks)))
        return cls(files, tuple(spans))

    def find(self, ptx_line: int) -> SourceLine | None:
        """The source line of a PTX line: the last `.loc` at or before it in its function (an inlined call's
        `.loc` names the callee's line, the innermost); None before the first mark, for line 0 (code the compiler
        made up) and for a file number `.file` does not define."""
        index = bisect_right(self._starts, ptx_line) - 1
        if index < 0 or ptx_line > self.spans[index][1]:
            return None
        marks = self.spans[index][2]
        at = bisect_right(marks, (ptx_line, float("inf"))) - 1
        if at < 0:
            return None
        _, number, line, _ = marks[at]
        return SourceLine(self.files[number], line) if line and number in self.files else None

    @cached_property
    def _starts(self) -> list[int]:
        return [start for start, _, _ in self.spans]
