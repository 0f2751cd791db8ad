"""The errors every command shares, each tied to its exit code (the table in docs/cli.md)."""

from __future__ import annotations

from ptxtool.records import field, finish, record

TYPE_CHECKING = False  # not typing's: its import costs every run 4 ms
if TYPE_CHECKING:
    from typing import Any

EXIT_OK = 0
EXIT_FOUND = 1  # the command ran and found something: a file would change, findings, failed verification
EXIT_INPUT = 2  # bad input or usage
EXIT_ENVIRONMENT = 3  # a required tool or driver is missing or broken
EXIT_INTERNAL = 4  # a bug in ptxtool


class PtxtoolError(Exception):
    """An error a user can act on; `exit_code` says which kind."""

    exit_code = EXIT_INPUT


class Location(metaclass=record):
    """A place in an input: 1-based line and column (0 when unknown), with the source line for a caret."""

    path: str
    line: int = 0
    column: int = 0
    source: str = ""


class Diagnostic(metaclass=record):
    """One message about an input, printed as `path:line:col: code severity: message`: the one record for parse
    errors, legality problems, lint findings (`code` the rule id), budget and baseline violations (`budget/<limit>`,
    `baseline/<metric>`), ptxas warnings (`ptxas/<kind>`) and rewrites verification dropped (`optimize/dropped`).
    `properties` are the facts its JSON document promises beside these (a finding's rule name, a violation's kernel:
    SARIF's property bag)."""

    location: Location
    message: str
    severity: str = "error"
    notes: tuple[str, ...] = field(default=(), kw_only=True)
    code: str = field(default="", kw_only=True)
    properties: dict[str, Any] = field(default_factory=dict, kw_only=True)

    def to_data(self) -> dict[str, Any]:
        """The JSON form of every diagnostic in every document (`errors`, `findings`, `violations`, `dropped`)."""
        loc = self.location
        where = {"path": loc.path, "line": loc.line, "column": loc.column}
        return (
            where
            | {"severity": self.severity, "code": self.code, "message": self.message, "notes": list(self.notes)}
            | self.properties
        )


finish((Location, Diagnostic))  # frozen slotted dataclasses, their methods compiled once (every command imports these)


class InputError(PtxtoolError):
    """Bad input: unreadable files, text that is not PTX. Carries every diagnostic found."""

    exit_code = EXIT_INPUT

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        super().__init__(diagnostics[0].message if diagnostics else "bad input")

    @classmethod
    def at(cls, path: str, message: str, line: int = 0, column: int = 0) -> InputError:
        return cls([Diagnostic(Location(path, line, column), message)])


class UsageError(PtxtoolError):
    """Options that do not go together, found by a service: the command line's usage error (exit 2)."""

    exit_code = EXIT_INPUT


class EnvironmentProblem(PtxtoolError):
    """A tool ptxtool needs (ptxas, nvdisasm, a GPU driver) is missing or does not work."""

    exit_code = EXIT_ENVIRONMENT
