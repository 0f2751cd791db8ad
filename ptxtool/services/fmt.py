"""`ptxtool fmt`: each source in canonical layout; written in place or to one output when asked."""

from __future__ import annotations

from ptxtool.errors import EXIT_FOUND, EXIT_INPUT, EXIT_OK, Diagnostic, InputError, UsageError
from ptxtool.records import field, finish, record
from ptxtool.sources import STDIN, Source, Unreadable, parse_source, write_atomic

TYPE_CHECKING = False  # not typing's: its import costs every run 4 ms
if TYPE_CHECKING:
    from collections.abc import Sequence


class Options(metaclass=record):
    output: str | None = None
    in_place: bool = False
    check: bool = False
    diff: bool = False
    color: bool | None = None  # colour the diff; None: when stdout is a terminal

    def checked(self, paths: Sequence[str]) -> Options:
        """These options for these inputs, or the usage error they make: called before any input is read (stdin
        would wait for a terminal first)."""
        if self.output and (self.in_place or len(paths) != 1):
            raise UsageError("-o/--output takes exactly one input file and no --in-place")
        if self.in_place and STDIN in paths:
            raise UsageError("--in-place cannot rewrite stdin")
        if self.check and (self.in_place or self.output):
            raise UsageError("--check writes nothing: drop --in-place/-o, or --check to write")
        if len(paths) > 1 and not (self.in_place or self.check or self.diff):
            raise UsageError("several files: say where results go with --in-place, or use --check or --diff")
        return self


class Formatted(metaclass=record):
    path: str
    before: str
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


class FmtResult(metaclass=record):
    options: Options
    files: list[Formatted] = field(default_factory=list)
    errors: list[Diagnostic] = field(default_factory=list)
    failed: int = 0

    @property
    def exit_code(self) -> int:
        if self.failed:
            return EXIT_INPUT
        return EXIT_FOUND if self.options.check and any(f.changed for f in self.files) else EXIT_OK

    def to_data(self) -> dict:
        return {
            "files": [{"path": f.path, "changed": f.changed} for f in self.files],
            "errors": [d.to_data() for d in self.errors],
        }


finish((Options, Formatted, FmtResult))  # frozen slotted dataclasses, their methods compiled once: start-up


def execute(options: Options, sources: list[Source | Unreadable]) -> FmtResult:
    from ptxtool.syntax import format_module

    options.checked([s.path for s in sources])
    files, errors = [], []
    for source in sources:
        try:
            if isinstance(source, Unreadable):
                raise InputError(list(source.diagnostics))
            formatted = Formatted(source.display, source.text, format_module(parse_source(source)))
        except InputError as error:
            errors.extend(error.diagnostics)
            continue
        files.append(formatted)
        if options.in_place and formatted.changed:
            write_atomic(source.path, formatted.after)
        elif options.output and not options.check:
            write_atomic(options.output, formatted.after)
    return FmtResult(options, files, errors, len(sources) - len(files))
