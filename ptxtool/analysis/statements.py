"""The one statement walker: every statement in source order, nested scopes included, operands never visited."""

from __future__ import annotations

from collections.abc import Iterator

from ptxtool.syntax import ast


def statements(node: ast.Module | ast.Function | ast.Block) -> Iterator[object]:
    """`node`'s statements depth first in source order: a module's items, a function's body, a block and everything
    in it (each nested block before its contents)."""
    stack: list[object] = [node] if not isinstance(node, ast.Module) else list(reversed(node.items))
    while stack:
        current = stack.pop()
        if current is not node:
            yield current
        if isinstance(current, ast.Function) and current.body is not None:
            stack.append(current.body)
        elif isinstance(current, ast.Block):
            stack.extend(reversed(current.statements))
