"""AST -> canonical PTX text: the parser's inverse, laid out by rule, never copied from the source.

Layout: module items flush left with a blank line around functions and sections and between runs of directives
and declarations; statements indented one tab per block level, labels one level out; a blank line after the
declarations that open a block; one parameter per line; operands separated by `, `. Comments are printed where
their owner says: leading ones on their own lines above, trailing ones after the statement on its line (the last one,
with the block comments just before it); earlier trailing ones, which cannot share a line with a `//` comment, above.
"""

from __future__ import annotations

from collections.abc import Callable

from ptxtool.syntax import ast

# ---------------------------------------------------------------- operands and other inline pieces


def _seq(items) -> str:
    return ", ".join(map(inline, items))


def _joined(left: str, right: str) -> str:
    """`left + right`, with a blank where the two would merge into other words: two minus signs (`- -3`, not
    `--3`), or `%` before a name character (`7 % 3`: `%3` is a register)."""
    if (left.endswith("-") and right.startswith("-")) or (left.endswith("%") and right[:1].isalnum()):
        return left + " " + right
    return left + right


def _address(a: ast.Address) -> str:
    text = inline(a.base)
    if a.offset is not None:
        text += ("+" if a.plus else "") + a.offset.text
    if a.rest:
        text += ", " + _seq(a.rest)
    return "[" + text + "]"


def _attribute(a: ast.Attribute) -> str:
    if a.number is not None:
        return f"{a.word} {a.number.text}"
    if a.args is not None:
        return f"{a.word}({_seq(a.args)})"
    return a.word


def _attributes(attributes: tuple[ast.Attribute, ...]) -> str:
    """Attributes separated by blanks, except where they were written glued together (`.reg.b16`)."""
    return "".join(("" if a.glued or not i else " ") + _attribute(a) for i, a in enumerate(attributes))


def _declarator(d: ast.Declarator) -> str:
    text = d.name
    if d.count is not None:
        text += f"<{d.count.text}>"
    text += _dims(d.dims)
    if d.init is not None:
        text += " = " + inline(d.init)
    return text


def _dims(dims: tuple[ast.Operand | None, ...]) -> str:
    return "".join("[]" if d is None else f"[{inline(d)}]" for d in dims)


def _param(p: ast.Param) -> str:
    return _attributes(p.attributes) + " " + p.name + _dims(p.dims)


def _perf(d: ast.PerfDirective) -> str:
    return d.word + (" " + ", ".join(v.text for v in d.values) if d.values else "")


INLINE: dict[type, Callable[[object], str]] = {
    ast.Name: lambda n: n.text,
    ast.Immediate: lambda n: n.text,
    ast.String: lambda n: n.text,
    ast.Not: lambda n: "!" + n.name.text,
    ast.PredPair: lambda n: f"{inline(n.first)}|{n.second.text}",
    ast.SymbolOffset: lambda n: f"{n.symbol.text}+{n.offset.text}",
    ast.Difference: lambda n: n.left.text + " " * n.blank_before + "-" + " " * n.blank_after + n.right.text,
    ast.Address: _address,
    ast.Unary: lambda n: _joined(n.op + " " * n.blank_after, inline(n.operand)),
    ast.Binary: lambda n: _joined(inline(n.left) + " " * n.blank_before + n.op + " " * n.blank_after, inline(n.right)),
    ast.Paren: lambda n: "(" + inline(n.inner) + ")",
    ast.Conditional: lambda n: (
        inline(n.condition)
        + " " * n.blank_before
        + "?"
        + " " * n.blank_after
        + inline(n.if_true)
        + ":"
        + inline(n.if_false)
    ),
    ast.Vector: lambda n: "{" + _seq(n.items) + "}",
    ast.ParenList: lambda n: "(" + _seq(n.items) + ")",
    ast.Generic: lambda n: f"generic({n.symbol.text})" + (f"+{n.offset.text}" if n.offset else ""),
    ast.Mask: lambda n: f"{n.mask.text}({inline(n.address)})",
    ast.FieldInit: lambda n: f"{n.name} = {n.value.text}",
    ast.InitList: lambda n: "{" + _seq(n.items) + "}",
    ast.Attribute: _attribute,
    ast.Declarator: _declarator,
    ast.Param: _param,
    ast.Guard: lambda n: ("@!" if n.negated else "@") + n.predicate.text,
}


def inline(node) -> str:
    """The text of a node that prints inside one line: operands, initializers, attributes, parameters."""
    kind = type(node)
    if kind is ast.Name or kind is ast.Immediate:
        return node.text
    return INLINE[kind](node)


def _params(params: tuple[ast.Param, ...] | None, one_per_line: bool) -> str:
    if params is None:
        return ""
    if not params or not one_per_line:
        return "(" + ", ".join(map(_param, params)) + ")"
    return "(\n\t" + ",\n\t".join(map(_param, params)) + "\n)"


# ---------------------------------------------------------------- statements, by class


def _instruction(i: ast.Instruction) -> str:
    text = i.opcode
    for m in i.modifiers:
        text += "." + m
    if i.operands:
        text += " " + _seq(i.operands)
    if i.guard is not None:
        text = inline(i.guard) + " " + text
    return text + ";"


def _directive(d: ast.Directive) -> str:
    text = d.word
    if d.args:
        text += " " + ", ".join(" ".join(map(inline, group)) for group in d.args)
    return text + ";" if d.semicolon else text


def _declaration(d: ast.Declaration) -> str:
    return _attributes(d.attributes) + " " + ", ".join(map(_declarator, d.declarators)) + ";"


def _call_prototype(c: ast.CallPrototype) -> str:
    parts = [".callprototype"]
    if c.returns is not None:
        parts.append(_params(c.returns, False))
    parts.append(c.name + _params(c.params, False))
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

    def block(self, block: ast.Block, depth: int) -> None:
        outer = "\t" * depth
        inner = outer + "\t"
        if block.leading:
            self.comments(block.leading, outer)
        self.lines.append(outer + "{")
        previous = None
        append = self.lines.append
        for s in block.statements:
            kind = type(s)
            if previous is ast.Declaration and kind is not ast.Declaration:
                append("")
            if kind is ast.Instruction and not s.leading and not s.trailing:
                append(inner + _instruction(s))
            elif kind is ast.Block:
                self.block(s, depth + 1)
            else:
                self.statement(LINE[kind](s), s, outer if kind is ast.Label else inner)
            previous = kind
        if block.footer:
            self.comments(block.footer, inner)
        self.statement("}", _Trailing(block.trailing), outer)

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
