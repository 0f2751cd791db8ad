"""`ptxtool parse`: does each source parse, and with `check`, what its own `.version`/`.target` does not allow."""

from __future__ import annotations

from dataclasses import dataclass, field

from ptxtool.errors import EXIT_FOUND, EXIT_INPUT, EXIT_OK, Diagnostic, InputError
from ptxtool.sources import Source, Unreadable, parse_source
from ptxtool.syntax import ast


@dataclass(frozen=True, slots=True)
class Options:
    check: bool = False


@dataclass(frozen=True)
class Parsed:
    """One input: its module (None when it did not parse), legality problems, and errors (bad input)."""

    path: str
    module: ast.Module | None
    problems: tuple[Diagnostic, ...] = ()
    errors: tuple[Diagnostic, ...] = ()


@dataclass(frozen=True)
class ParseResult:
    files: list[Parsed] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if any(f.errors for f in self.files):
            return EXIT_INPUT
        return EXIT_FOUND if any(f.problems for f in self.files) else EXIT_OK

    def to_data(self) -> dict:
        from ptxtool.syntax.serialize import SCHEMA, to_data

        return {
            "schema": SCHEMA,
            "files": [{"path": f.path, "module": to_data(f.module)} for f in self.files if f.module is not None],
            "errors": [d.to_data() for f in self.files for d in f.errors],
            "problems": [d.to_data() for f in self.files for d in f.problems],  # --check
        }


def execute(options: Options, sources: list[Source | Unreadable]) -> ParseResult:
    files = []
    for source in sources:
        if isinstance(source, Unreadable):
            files.append(Parsed(source.display, None, errors=source.diagnostics))
            continue
        try:
            module = parse_source(source)
        except InputError as error:
            files.append(Parsed(source.display, None, errors=tuple(error.diagnostics)))
            continue
        problems: list[Diagnostic] = []
        if options.check:
            from ptxtool.analysis.legality import check_source

            problems = check_source(source, module)
        files.append(Parsed(source.display, module, tuple(problems)))
    return ParseResult(files)
