"""Inline suppressions: `// ptxtool: ignore[PTX002]` on a statement's line silences those rules there (bare
`ignore` silences every rule on that line); `// ptxtool: ignore-file[PTX007]` anywhere silences them in the file.
A CUDA source holds them in its own `//` comments, on the CUDA line a finding points at."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ptxtool.syntax import ast

_MARKER = "ptxtool:"
_DIRECTIVE = re.compile(_MARKER + r"\s*(ignore-file|ignore)(?:\[([^\]]*)\])?")
ALL = "*"
_POSITIONED = (ast.Instruction, ast.Label, ast.Declaration, ast.Directive, ast.Block, ast.Function, ast.Section)


@dataclass
class Suppressions:
    """Rule ids (or ALL) silenced per line, and in the whole file."""

    lines: dict[int, set[str]] = field(default_factory=dict)
    file: set[str] = field(default_factory=set)

    def silenced(self, rule_id: str, line: int) -> bool:
        here = self.lines.get(line, set())
        return bool({rule_id, ALL} & (self.file | here))


def _ids(text: str) -> list[tuple[str, set[str]]]:
    return [
        (m.group(1), {i.strip() for i in m.group(2).split(",") if i.strip()} if m.group(2) is not None else {ALL})
        for m in _DIRECTIVE.finditer(text)
    ]


def _comments(node: object) -> tuple[str, ...]:
    return tuple(getattr(node, "leading", ())) + tuple(getattr(node, "footer", ()))


def suppressions(module: ast.Module, text: str | None = None) -> Suppressions:
    """Every suppression comment in a module: same-line ones by the line of the statement that owns them. Given
    the module's text, one without the marker is not walked (a comment is a piece of the text)."""
    found = Suppressions()
    if text is not None and _MARKER not in text:
        return found
    for node in ast.walk(module):
        trailing = getattr(node, "trailing", ()) if isinstance(node, _POSITIONED) else ()
        for comment in trailing:
            for kind, ids in _ids(comment):
                if kind == "ignore-file":
                    found.file |= ids
                else:
                    found.lines.setdefault(node.line, set()).update(ids)
        for comment in _comments(node):
            found.file |= {i for kind, ids in _ids(comment) if kind == "ignore-file" for i in ids}
    return found


def cuda_suppressions(text: str) -> Suppressions:
    """The suppression comments of a CUDA source: `ignore[...]` in a `//` comment on a line, `ignore-file[...]`."""
    found = Suppressions()
    for number, line in enumerate(text.splitlines(), 1):
        _, slashes, comment = line.partition("//")
        for kind, ids in _ids(comment) if slashes else ():
            (found.file if kind == "ignore-file" else found.lines.setdefault(number, set())).update(ids)
    return found
