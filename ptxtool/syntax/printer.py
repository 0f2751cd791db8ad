"""AST -> canonical PTX text: the parser's inverse, laid out by rule, never copied from the source.

Layout: module items flush left with a blank line around functions and sections and between runs of directives
and declarations; statements indented one tab per block level, labels one level out; a blank line after the
declarations that open a block; one parameter per line; operands separated by `, `; an initializer of more than
16 elements 16 to a line. Comments are printed where
their owner says: leading ones on their own lines above, trailing ones after the statement on its line (the last one,
with the block comments just before it); earlier trailing ones, which cannot share a line with a `//` comment, above.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from operator import attrgetter

from ptxtool.syntax import ast

# ---------------------------------------------------------------- operands and other inline pieces
# Each inline node becomes a list of pieces: strings and child nodes, which `inline` expands with a stack of its
# own, so that no input nests deep enough to exhaust Python's recursion.

Piece = str | object


def _seq(items) -> list[Piece]:
    pieces: list[Piece] = []
    for item in items:
        pieces += (", ", item) if pieces else (item,)
    return pieces


def _address(a: ast.Address) -> list[Piece]:
    pieces: list[Piece] = ["[", a.base]
    if a.offset is not None:
        pieces += ("+", a.offset) if a.plus else (a.offset,)
    if a.rest:
        pieces += (", ", *_seq(a.rest))
    pieces.append("]")
    return pieces


def _binary(b: ast.Binary) -> list[Piece]:
    """Operators unspaced (`1+2`, `a*b`, `1<<4`), but for `%`, spaced: `7 %3` would read as 7 and register `%3`."""
    pieces: list[Piece] = [b.operands[0]]
    for op, operand in zip(b.ops, b.operands[1:], strict=True):
        pieces += (" % " if op == "%" else op, operand)
    return pieces


WRAP = 16  # initializer elements per line in a list longer than that
_IMMEDIATES = {ast.Immediate}
_TEXT = attrgetter("text")


def _init_list(n: ast.InitList) -> list[Piece]:
    """A brace initializer; past WRAP elements, WRAP a line, one tab in (a megabyte of data is not one line)."""
    items = n.items
    if len(items) <= WRAP:
        return ["{", *_seq(items), "}"]
    if set(map(type, items)) == _IMMEDIATES:  # the common case, and the large one: strings, joined in C loops
        full = len(items) - len(items) % WRAP
        texts = map(_TEXT, items[:full])
        rows = list(map(", ".join, zip(*[texts] * WRAP, strict=True)))  # WRAP at a time from one iterator
        if full < len(items):
            rows.append(", ".join(map(_TEXT, items[full:])))
        return ["{\n\t" + ",\n\t".join(rows) + "\n}"]
    pieces: list[Piece] = ["{\n\t"]
    for k, item in enumerate(items):
        if k:
            pieces.append(",\n\t" if k % WRAP == 0 else ", ")
        pieces.append(item)
    pieces.append("\n}")
    return pieces


# all but the last row of WRAP values, without the comma that ends it (unrolled: a repeat costs more per value)
_ROW = "([^,]*+," + "[^,]*+," * (WRAP - 2) + "[^,]*+),"


def _literals(n: ast.Literals) -> list[Piece]:
    """A Literals prints as the InitList of its items does, from its one string: rows of WRAP values found by one
    pattern and joined with `;` (in no literal), which becomes each row's comma once every other comma has its
    blank; in bytes, where `replace` is quicker (a million values: a few C passes, no string per value)."""
    text = n.text
    if text.count(",") < WRAP:
        return ["{" + text.replace(",", ", ") + "}"]
    if not text.isascii() or ";" in text:  # (only a node made by hand could hold such a literal)
        rows = re.findall(_ROW, text)
        rows.append(text[sum(map(len, rows)) + len(rows) :])
        return ["{\n\t" + ",\n\t".join(row.replace(",", ", ") for row in rows) + "\n}"]
    data = text.encode("ascii")
    rows = re.findall(_ROW.encode("ascii"), data)
    rows.append(data[sum(map(len, rows)) + len(rows) :])  # the last row, after the comma of the last full one
    return ["{\n\t" + b";\n\t".join(rows).replace(b",", b", ").replace(b";", b",").decode("ascii") + "\n}"]


def _attribute(a: ast.Attribute) -> list[Piece]:
    if a.number is not None:
        return [f"{a.word} {a.number.text}"]
    if a.args is not None:
        return [a.word, "(", *_seq(a.args), ")"]
    return [a.word]


def _attributes(attributes: tuple[ast.Attribute, ...]) -> str:
    """Attributes separated by blanks, except where they were written glued together (`.reg.b16`); a plain word
    (most of them) is its own text."""
    return "".join(
        ("" if a.glued or not i else " ") + (a.word if a.number is None and a.args is None else inline(a))
        for i, a in enumerate(attributes)
    )


def _declarator(d: ast.Declarator) -> list[Piece]:
    pieces: list[Piece] = [d.name]
    if d.count is not None:
        pieces.append(f"<{d.count.text}>")
    pieces += _dims(d.dims)
    if d.init is not None:
        pieces += (" = ", d.init)
    return pieces


def _dims(dims: tuple[ast.Operand | None, ...]) -> list[Piece]:
    pieces: list[Piece] = []
    for d in dims:
        pieces += ("[]",) if d is None else ("[", d, "]")
    return pieces


def _param(p: ast.Param) -> str:
    return _attributes(p.attributes) + " " + p.name + inline_all(_dims(p.dims))


def _perf(d: ast.PerfDirective) -> str:
    return d.word + (" " + ", ".join(v.text for v in d.values) if d.values else "")


PIECES: dict[type, Callable[[object], list[Piece]]] = {
    ast.String: lambda n: [n.text],
    ast.Not: lambda n: ["!", n.name],
    ast.PredPair: lambda n: [n.first, "|", n.second],
    ast.SymbolOffset: lambda n: [n.symbol, "+", n.offset],
    ast.Difference: lambda n: [n.left, "-", n.right],
    ast.Address: _address,
    ast.Unary: lambda n: [n.op, n.operand],
    ast.Binary: _binary,
    ast.Paren: lambda n: ["(", n.inner, ")"],
    ast.Conditional: lambda n: [n.condition, "?", n.if_true, ":", n.if_false],
    ast.Vector: lambda n: ["{", *_seq(n.items), "}"],
    ast.ParenList: lambda n: ["(", *_seq(n.items), ")"],
    ast.Generic: lambda n: ["generic(", n.symbol, ")", *(("+", n.offset) if n.offset is not None else ())],
    ast.Mask: lambda n: [n.mask, "(", n.address, ")"],
    ast.FieldInit: lambda n: [f"{n.name} = ", n.value],
    ast.InitList: _init_list,
    ast.Literals: _literals,
    ast.Attribute: _attribute,
    ast.Declarator: _declarator,
    ast.Param: lambda n: [_param(n)],
    ast.Guard: lambda n: ["@!" if n.negated else "@", n.predicate],
}


def inline_all(pieces: list[Piece]) -> str:
    """The text of a list of pieces, nodes expanded depth first in order, with an explicit stack."""
    out: list[str] = []
    todo = list(reversed(pieces))
    while todo:
        item = todo.pop()
        kind = type(item)
        if kind is str:
            out.append(item)
        elif kind is ast.Name or kind is ast.Immediate:
            out.append(item.text)
        else:
            todo.extend(reversed(PIECES[kind](item)))
    return "".join(out)


def inline(node) -> str:
    """The text of a node that prints inside one line: operands, initializers, attributes, parameters."""
    kind = type(node)
    if kind is ast.Name or kind is ast.Immediate:
        return node.text
    return inline_all([node])


def _params(params: tuple[ast.Param, ...] | None, one_per_line: bool) -> str:
    if params is None:
        return ""
    if not params or not one_per_line:
        return "(" + ", ".join(map(_param, params)) + ")"
    return "(\n\t" + ",\n\t".join(map(_param, params)) + "\n)"


# ---------------------------------------------------------------- statements, by class


_PLAIN = frozenset((ast.Name, ast.Immediate))


def _operand(node) -> str:
    """`inline` with the operands of most instructions written directly: a name, a number, `[base]`, `[base+4]`."""
    kind = type(node)
    if kind is ast.Name or kind is ast.Immediate:
        return node.text
    if kind is ast.Address and not node.rest and type(node.base) in _PLAIN:
        offset = node.offset
        if offset is None:
            return "[" + node.base.text + "]"
        if type(offset) is ast.Immediate:
            return "[" + node.base.text + ("+" if node.plus else "") + offset.text + "]"
    return inline_all([node])


def _instruction(i: ast.Instruction) -> str:
    text = ".".join((i.opcode, *i.modifiers)) if i.modifiers else i.opcode
    if i.operands:
        text += " " + ", ".join(map(_operand, i.operands))
    guard = i.guard
    if guard is not None:
        predicate = guard.predicate
        head = ("@!" if guard.negated else "@") + predicate.text if type(predicate) is ast.Name else inline(guard)
        text = head + " " + text
    return text + ";"


def _directive(d: ast.Directive) -> str:
    """`word a, b c, d`: comma-separated groups of blank-separated words (a debug section's lines: one word each)."""
    text = d.word
    if d.args:
        words = []
        for group in d.args:
            if len(group) == 1:
                node = group[0]
                words.append(node.text if type(node) in _PLAIN else inline(node))
            else:
                words.append(" ".join(map(inline, group)))
        text += " " + ", ".join(words)
    return text + ";" if d.semicolon else text


def _declarator_text(d: ast.Declarator) -> str:
    """`inline` with the declarators of most declarations written directly: `%r<10>`, `p`."""
    if d.dims or d.init is not None:
        return inline(d)
    return d.name if d.count is None else f"{d.name}<{d.count.text}>"


def _declaration(d: ast.Declaration) -> str:
    return _attributes(d.attributes) + " " + ", ".join(map(_declarator_text, d.declarators)) + ";"


def _call_prototype(c: ast.CallPrototype) -> str:
    parts = [".callprototype"]
    if c.returns is not None:
        parts.append(_params(c.returns, False))
    parts.append(c.name + _params(c.params, False))
    parts.extend(map(_perf, c.directives))
    return " ".join(parts) + ";"


def _label(label: ast.Label) -> str:
    return label.name + ":"


LINE: dict[type, Callable[[object], str]] = {
    ast.Instruction: _instruction,
    ast.Directive: _directive,
    ast.Declaration: _declaration,
    ast.CallPrototype: _call_prototype,
    ast.Label: _label,
    ast.PerfDirective: _perf,
}


class _Writer:
    """Collects output lines; owns the comment placement rules."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def comments(self, comments: tuple[str, ...], indent: str) -> None:
        self.lines.extend(indent + c for c in comments)

    def statement(self, text: str, node, indent: str) -> None:
        if indent and "\n" in text:  # a wrapped initializer: its lines are the statement's, indented with it
            text = text.replace("\n", "\n" + indent)
        if node.leading:
            self.comments(node.leading, indent)
        if node.trailing:
            # the line keeps the last comment and the block comments just before it (a `//` comment ends a line);
            # earlier ones go above, where a re-parse gives them to this statement again
            keep = len(node.trailing) - 1
            while keep and not node.trailing[keep - 1].startswith("//"):
                keep -= 1
            self.comments(node.trailing[:keep], indent)
            self.lines.append(indent + text + " " + " ".join(node.trailing[keep:]))
        else:
            self.lines.append(indent + text)

    def block(self, root: ast.Block, depth: int) -> None:
        """A block and the blocks nested in it, with a stack of its own (scopes nest as deep as ptxas allows)."""
        append = self.lines.append
        self._open(root, depth)
        stack: list[tuple[ast.Block, int, int, type | None]] = [(root, depth, 0, None)]
        while stack:
            block, depth, index, previous = stack.pop()
            outer = "\t" * depth
            inner = outer + "\t"
            statements = block.statements
            while index < len(statements):
                s = statements[index]
                index += 1
                kind = type(s)
                if previous is ast.Declaration and kind is not ast.Declaration:
                    append("")
                previous = kind
                if kind is ast.Instruction and not s.leading and not s.trailing:  # most lines: no comment
                    append(inner + _instruction(s))
                elif kind is ast.Label and not s.leading and not s.trailing:
                    append(outer + s.name + ":")
                elif kind is ast.Data:
                    self.data(s, outer, inner)
                elif kind is ast.Block:
                    stack.append((block, depth, index, previous))
                    stack.append((s, depth + 1, 0, None))
                    self._open(s, depth + 1)
                    break
                else:
                    self.statement(LINE[kind](s), s, outer if kind is ast.Label else inner)
            else:
                if block.footer:
                    self.comments(block.footer, inner)
                self.statement("}", _Trailing(block.trailing), outer)

    def data(self, d: ast.Data, outer: str, inner: str) -> None:
        """A Data's canonical lines in one piece: data lines one level in, labels one out, as statements print."""
        text = d.text  # data lines start with `.`, labels with a name: data lines go one level in
        text = (inner + text if text.startswith(".") else text).replace("\n.", "\n" + inner + ".")
        if outer:
            text = outer + text.replace("\n", "\n" + outer)
        if d.leading:
            self.comments(d.leading, inner)
        if d.trailing:
            head, _, last = text.rpartition("\n")
            if head:
                self.lines.append(head)
            self.statement(last.lstrip("\t"), _Trailing(d.trailing), last[: len(last) - len(last.lstrip("\t"))])
        else:
            self.lines.append(text)

    def _open(self, block: ast.Block, depth: int) -> None:
        if block.leading:
            self.comments(block.leading, "\t" * depth)
        self.lines.append("\t" * depth + "{")

    def function(self, f: ast.Function) -> None:
        if f.leading:
            self.comments(f.leading, "")
        head = [_attributes(f.attributes), f.kind, _attributes(f.kind_attributes)]
        head = [h for h in head if h]
        if f.returns is not None:
            head.append(_params(f.returns, False))
        head = " ".join(head) + " " + f.name + _params(f.params, True)
        end = ";" if f.body is None else ""  # a declaration ends after its last header line
        if not f.directives:
            self.statement(head + end, _Trailing(f.trailing), "")
        else:
            self.lines.append(head)
            for d in f.directives[:-1]:
                self.statement(_perf(d), d, "")
            self.statement(_perf(f.directives[-1]) + end, f.directives[-1], "")
            self.comments(f.trailing, "")
        if f.body is not None:
            self.block(f.body, 0)

    def section(self, s: ast.Section) -> None:
        if s.leading:
            self.comments(s.leading, "")
        self.lines.append(".section " + s.name)
        self.comments(s.trailing, "")
        self.block(s.body, 0)


class _Trailing:
    """Stands in for a node when only its trailing comments are to be printed (closing braces, prototypes)."""

    __slots__ = ("trailing",)
    leading = ()

    def __init__(self, trailing: tuple[str, ...]) -> None:
        self.trailing = trailing


def _group(item) -> object:
    """Module items of the same group print without a blank line between them."""
    if isinstance(item, ast.Function | ast.Section):
        return item  # a group of its own
    return type(item)


def format_module(module: ast.Module) -> str:
    """The canonical text of a module, ending with one newline."""
    w = _Writer()
    previous = None
    for item in module.items:
        group = _group(item)
        if previous is not None and group is not previous:
            w.lines.append("")
        if isinstance(item, ast.Function):
            w.function(item)
        elif isinstance(item, ast.Section):
            w.section(item)
        else:
            w.statement(LINE[type(item)](item), item, "")
        previous = group
    if module.footer:
        if w.lines:
            w.lines.append("")
        w.comments(module.footer, "")
    return "\n".join(w.lines) + "\n"
