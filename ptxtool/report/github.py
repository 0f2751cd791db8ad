"""`--output-format github`: GitHub Actions workflow commands (`::error file=…,line=…::message`), which the runner
turns into annotations on the pull request's lines. Escaping follows the runner's rules (actions/toolkit command.ts):
`%`, CR and LF in the message; those and `:` and `,` in a property."""

from __future__ import annotations

from ptxtool.errors import Diagnostic

_LEVEL = {"error": "error", "warning": "warning", "note": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(d: Diagnostic) -> str:
    """One workflow command; a line of 0 (the whole file) and a column of 0 (unknown) are left out, notes follow
    the message."""
    loc = d.location
    properties = [("file", loc.path)]
    if loc.line:
        properties.append(("line", str(loc.line)))
        if loc.column:
            properties.append(("col", str(loc.column)))
    if d.code:
        properties.append(("title", d.code))
    fields = ",".join(f"{key}={escape_property(value)}" for key, value in properties)
    message = "\n".join((d.message, *d.notes))
    return f"::{_LEVEL.get(d.severity, 'error')} {fields}::{escape_data(message)}"


def workflow_commands(result) -> list[str]:
    """One workflow command per diagnostic of a Result (lint: each file's findings and why it could not be read)."""
    return [annotation(d) for d in result.diagnostics()]
