"""Human-facing output on stderr: diagnostics with a caret under the offending column, and status lines.

rich is imported when something is first printed to stderr: a run that prints nothing there (`fmt FILE -o OUT`,
`parse FILE`) never loads it (start-up counts against a ptxas run of a tenth of a second)."""

from __future__ import annotations

import os
import sys

from ptxtool.errors import Diagnostic, InputError, Location, PtxtoolError
from ptxtool.records import finish, record

TYPE_CHECKING = False  # not typing's: its import costs every run 4 ms
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager
    from typing import TextIO

    from rich.console import Console

_WIDTH = 160  # source lines longer than this are cut around the error column

_STYLE = {"error": "bold red", "warning": "bold yellow", "note": "bold cyan"}
_ANSI = {"error": "1;31", "warning": "1;33", "note": "1;36"}  # the same colours as ANSI codes (lint's stdout)


def stderr_console() -> Console:
    from rich.console import Console

    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


class _LazyConsole:
    """The stderr Console, made on first use."""

    __slots__ = ("_console",)

    def __init__(self) -> None:
        self._console: Console | None = None

    def __getattr__(self, name: str):
        if self._console is None:
            self._console = stderr_console()
        return getattr(self._console, name)


class Out(metaclass=record):
    """Where a Result goes: results to `stdout` (rich only on a terminal), everything else to `stderr`."""

    stdout: TextIO
    stderr: Console

    @classmethod
    def standard(cls) -> Out:
        return cls(sys.stdout, _LazyConsole())  # type: ignore[arg-type]

    @property
    def terminal(self) -> bool:
        return self.stdout.isatty()

    @property
    def colour(self) -> bool:
        """ANSI colour on stdout: on a terminal only, never piped, and not when NO_COLOR is set (no-color.org)."""
        return self.terminal and not os.environ.get("NO_COLOR")

    def line(self, text: str = "") -> None:
        self.stdout.write(text + "\n")

    def status(self, text: str) -> None:
        """A status or report line on stderr, printed as it is."""
        self.stderr.print(text, markup=False, highlight=False)

    def diagnostic(self, d: Diagnostic) -> None:
        print_diagnostic(self.stderr, d)


finish((Out,))


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


def print_error(console: Console, error: PtxtoolError) -> None:
    """An error a user can act on: each diagnostic of bad input, or one line."""
    from rich.markup import escape

    if isinstance(error, InputError):
        for d in error.diagnostics:
            print_diagnostic(console, d)
    else:
        console.print(f"[bold red]error:[/bold red] {escape(str(error))}", markup=True)


def where(location: Location) -> str:
    """`path:line:column`, leaving out a line of 0 (the whole file) and a column of 0 (unknown)."""
    line, column = location.line, location.column
    return location.path + (f":{line}" if line else "") + (f":{column}" if line and column else "")


def diagnostic_line(d: Diagnostic, colour: bool = False) -> str:
    """`path:line:column: CODE severity: message`, the severity in ANSI colour when asked (lint's stdout lines)."""
    severity = f"\x1b[{_ANSI[d.severity]}m{d.severity}\x1b[0m" if colour and d.severity in _ANSI else d.severity
    return f"{where(d.location)}:{' ' + d.code if d.code else ''} {severity}: {d.message}"


def print_diagnostic(console: Console, d: Diagnostic) -> None:
    """The same line as `diagnostic_line` (rich colours), then the source line with a caret, then the notes."""
    from rich.markup import escape

    loc = d.location
    style = _STYLE.get(d.severity, "bold")
    code = f" {escape(d.code)}" if d.code else ""
    console.print(f"[bold]{escape(where(loc))}:[/bold]{code} [{style}]{d.severity}:[/{style}] {escape(d.message)}")
    if loc.source and loc.line:
        text, column = _excerpt(loc.source, loc.column)
        console.print("    " + escape(text))
        if column:
            console.print("    " + " " * (column - 1) + f"[{style}]^[/{style}]")
    for note in d.notes:
        console.print(f"    [cyan]note:[/cyan] {escape(note)}")


def progress(total: int, what: str) -> AbstractContextManager[Callable[[], None] | None]:
    """A progress bar on stderr for several inputs on a terminal; yields the callback that advances it (or None)."""
    from contextlib import contextmanager  # here: the commands that show no progress never import contextlib

    return contextmanager(_progress)(total, what)


def _progress(total: int, what: str) -> Iterator[Callable[[], None] | None]:
    console = stderr_console()
    if total < 2 or not console.is_terminal:
        yield None
        return
    from rich.progress import Progress

    with Progress(console=console, transient=True) as bar:
        task = bar.add_task(what, total=total)
        yield lambda: bar.advance(task)


def phases(what: str) -> AbstractContextManager[Callable[[str], None] | None]:
    """A spinner on stderr naming the phase a long command is in, on a terminal only; yields the callback that
    names the next phase (or None)."""
    from contextlib import contextmanager

    return contextmanager(_phases)(what)


def _phases(what: str) -> Iterator[Callable[[str], None] | None]:
    console = stderr_console()
    if not console.is_terminal:
        yield None
        return
    with console.status(what) as status:
        yield lambda text: status.update(f"{what}: {text}")
