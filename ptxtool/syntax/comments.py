"""Give each comment to the statement that owns it, after parsing, by position.

A comment on a line of its own belongs to the statement below it (`leading`); a comment after a statement's last
token on the same line stays with that statement (`trailing`), and so does one inside a statement spread over
several lines. A function or section owns the comments in its header; a block owns those before its closing
brace (`footer`); the module owns those after its last item.
"""

from __future__ import annotations

from operator import is_

from ptxtool.records import replace
from ptxtool.syntax import ast
from ptxtool.syntax.lexer import Comment

_PAST_END = 1 << 62  # the line of the comment after the last one


def _ending_from(statements: tuple, line: int, low: int) -> int:
    """The first of `statements` from `low` on that ends on `line` or after, found by halving (statements are in
    source order, so their end lines never go down; `bisect` would be an extension module to load every run)."""
    high = len(statements)
    while low < high:
        middle = (low + high) // 2
        if statements[middle].end_line < line:
            low = middle + 1
        else:
            high = middle
    return low


class _Cursor:
    """Walks the comments in source order, handing out runs of them; `line` is the next one's (past the end: none)."""

    def __init__(self, comments: list[Comment]) -> None:
        self.comments = comments
        self.i = 0
        self.line = comments[0].line if comments else _PAST_END

    @property
    def done(self) -> bool:
        return self.i >= len(self.comments)

    def _moved(self, start: int) -> tuple[str, ...]:
        comments = self.comments
        self.line = comments[self.i].line if self.i < len(comments) else _PAST_END
        return tuple(c.text for c in comments[start : self.i])

    def before(self, line: int, column: int) -> tuple[str, ...]:
        start = self.i
        comments = self.comments
        while self.i < len(comments) and (comments[self.i].line, comments[self.i].column) < (line, column):
            self.i += 1
        return self._moved(start) if self.i > start else ()

    def through_line(self, line: int) -> tuple[str, ...]:
        start = self.i
        comments = self.comments
        while self.i < len(comments) and comments[self.i].line <= line:
            self.i += 1
        return self._moved(start) if self.i > start else ()

    def rest(self) -> tuple[str, ...]:
        return self.before(_PAST_END, 0)


def attach_comments(module: ast.Module, comments: list[Comment]) -> ast.Module:
    if not comments:
        return module
    cursor = _Cursor(comments)
    items = tuple(_attach(item, cursor) for item in module.items)
    return replace(module, items=items, footer=cursor.rest())


def _attach(node, cursor: _Cursor):
    if cursor.done:
        return node
    if isinstance(node, ast.Block):
        return _block(node, cursor, cursor.before(node.line, node.column))
    leading = cursor.before(node.line, node.column)
    if isinstance(node, ast.Function) and node.directives:
        directives = tuple(_attach(d, cursor) for d in node.directives)
        if not all(map(is_, directives, node.directives)):  # _attach keeps unchanged nodes
            node = replace(node, directives=directives)
    if isinstance(node, ast.Function | ast.Section) and node.body is not None:
        header = cursor.before(node.body.line, node.body.column)
        body = _block(node.body, cursor, ())
        if not (leading or header or body is not node.body):
            return node
        return replace(node, body=body, leading=leading, trailing=header)
    trailing = cursor.through_line(node.end_line)
    if not (leading or trailing):
        return node
    return replace(node, leading=leading, trailing=trailing)


def _block(root: ast.Block, cursor: _Cursor, leading: tuple[str, ...]) -> ast.Block:
    """A block's comments and those of the blocks nested in it, with a stack of its own (no recursion)."""
    frames: list[tuple[ast.Block, tuple[str, ...], list]] = [(root, leading, [])]
    positions = [0]
    while True:
        block, block_leading, done = frames[-1]
        statements = block.statements
        index = positions[-1]
        if index < len(statements):
            s = statements[index]
            if s.end_line < cursor.line:  # it and the statements (or blocks) after it that end before the next
                untouched = _ending_from(statements, cursor.line, index + 1)  # comment take none
                done.extend(statements[index:untouched])
                positions[-1] = untouched
                continue
            positions[-1] = index + 1
            if type(s) is ast.Block:
                frames.append((s, cursor.before(s.line, s.column), []))
                positions.append(0)
            else:
                done.append(_attach(s, cursor))
            continue
        frames.pop()
        positions.pop()
        footer = cursor.before(block.end_line, block.end_column)
        trailing = cursor.through_line(block.end_line)
        if not (block_leading or footer or trailing) and all(map(is_, done, statements)):
            result = block
        else:
            result = replace(block, statements=tuple(done), footer=footer, leading=block_leading, trailing=trailing)
        if not frames:
            return result
        frames[-1][2].append(result)
