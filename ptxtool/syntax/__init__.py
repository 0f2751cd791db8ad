"""Text <-> AST: the lossless syntax layer (parser, tree, comment placement, printer).

The parser and the printer load on first use (PEP 562), so that a module that needs only `syntax.ast` or
`syntax.names` (the ISA tables, `ptxtool --help`) does not pay for the lexer, the parse tables and the grammar."""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: its import costs every run 4 ms
if TYPE_CHECKING:
    from ptxtool.syntax.parser import ParseError, SyntaxIssue, parse
    from ptxtool.syntax.printer import format_module

__all__ = ["ParseError", "SyntaxIssue", "format_module", "parse"]


def __getattr__(name: str) -> object:
    if name in ("ParseError", "SyntaxIssue", "parse"):
        from ptxtool.syntax import parser as home
    elif name == "format_module":
        from ptxtool.syntax import printer as home
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(home, name)
    return value
