"""The one renderer: any service Result as text (rich on a terminal, plain when piped), JSON or SARIF, chosen from
a table by the Result's type the way the printer picks a function per node class (GitHub workflow commands for
lint). Results go to stdout; diagnostics,
warnings and status to stderr. report/ is a leaf: it reads Results by their fields and imports no service."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: its import costs every run 4 ms
if TYPE_CHECKING:  # the Protocol every service's Result follows; report/ reads Results by their fields
    from collections.abc import Callable
    from typing import Any

    from ptxtool.report.console import Out
    from ptxtool.services.result import Result

FORMATS = ("text", "json", "sarif", "github")  # lint offers every one; other commands --json (and --sarif)


def _sarif(result: Result) -> dict:
    from ptxtool import __version__
    from ptxtool.report import sarif

    table: dict[str, Callable[[object, str], dict]] = {"InspectResult": sarif.inspect_log, "LintResult": sarif.lint_log}
    return table[type(result).__name__](result, __version__)


def _fmt_silent(result: Any) -> bool:
    """fmt's text writes nothing: no error, one file written to `-o` (no --check, --diff or --in-place summary)."""
    o = result.options
    return (
        bool(o.output)
        and not (result.errors or result.failed or o.check or o.diff or o.in_place)
        and len(result.files) == 1
    )


# Results whose text form is empty, by type: `emit` renders none of them, so a run that succeeds quietly (`fmt FILE
# -o OUT`) never loads the text renderer and its console (start-up). Each test says "nothing" only where the text
# renderer would write nothing (tests/test_report_silent.py); a Result it is unsure of is rendered.
SILENT: dict[str, Callable[[Any], bool]] = {"FmtResult": _fmt_silent}


def emit(result: Result, form: str = "text", out: Out | None = None) -> int:
    """Write a Result in one format (`text`, `json`, `sarif`, `github`) and return its exit code. With a machine
    format the document alone goes to stdout and the text renderer writes only to stderr."""
    silent = SILENT.get(type(result).__name__)
    if form == "text" and silent is not None and silent(result):
        return result.exit_code
    from ptxtool.report.console import Out  # the renderers load when a command emits, not with the CLI
    from ptxtool.report.text import TEXT

    out = out or Out.standard()
    machine = form != "text"
    if form == "github":
        from ptxtool.report.github import workflow_commands

        out.stdout.writelines(line + "\n" for line in workflow_commands(result))
    elif machine:
        import json

        document = result.to_data() if form == "json" else _sarif(result)
        json.dump(document, out.stdout, indent=1)
        out.stdout.write("\n")
    TEXT[type(result).__name__](result, out, machine)
    return result.exit_code


def emit_and_exit(result: Result, form: str = "text") -> None:
    """`emit`, then leave with the Result's exit code (the last thing every command does)."""
    code = emit(result, form)
    sys.stdout.flush()
    if code:
        sys.exit(code)
