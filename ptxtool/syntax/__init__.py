"""Text <-> AST: the lossless syntax layer (parser, tree, comment placement, printer)."""

from ptxtool.syntax.parser import ParseError, SyntaxIssue, parse
from ptxtool.syntax.printer import format_module

__all__ = ["ParseError", "SyntaxIssue", "format_module", "parse"]
