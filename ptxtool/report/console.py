"""Human-facing output on stderr: diagnostics with a caret under the offending column, and status lines."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape

from ptxtool.errors import Diagnostic

_WIDTH = 160  # source lines longer than this are cut around the error column

_STYLE = {"error": "bold red", "warning": "bold yellow", "note": "bold cyan"}


def stderr_console() -> Console:
    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


def _excerpt(source: str, column: int) -> tuple[str, int]:
    """The source line cut to a readable width around `column`, and the column within the cut."""
    source = source.replace("\t", " ")
    if len(source) <= _WIDTH:
        return source, column
    start = max(0, min(column - _WIDTH // 2, len(source) - _WIDTH))
    cut = source[start : start + _WIDTH]
    return ("…" if start else "") + cut + ("…" if start + _WIDTH < len(source) else ""), column - start + (
        1 if start else 0
    )


def print_diagnostic(console: Console, d: Diagnostic) -> None:
    loc = d.location
    where = loc.path + (f":{loc.line}" if loc.line else "") + (f":{loc.column}" if loc.line and loc.column else "")
    style = _STYLE.get(d.severity, "bold")
    console.print(f"[bold]{escape(where)}:[/bold] [{style}]{d.severity}:[/{style}] {escape(d.message)}")
    if loc.source and loc.line:
        text, column = _excerpt(loc.source, loc.column)
        console.print("    " + escape(text))
        if column:
            console.print("    " + " " * (column - 1) + f"[{style}]^[/{style}]")
    for note in d.notes:
        console.print(f"    [cyan]note:[/cyan] {escape(note)}")
