"""PTX text -> AST: LALR over grammar/ptx.lark (tables compiled by Lark), nodes built during parsing (no tree).

`parse(text)` returns a `Module` or raises `ParseError` listing every error found: the parser skips a bad token
and goes on, so one file reports all its broken lines at once.
"""

from __future__ import annotations

import gc
import re
from _thread import allocate_lock
from collections.abc import Callable
from functools import cache

from ptxtool.records import finish, record, replace
from ptxtool.syntax import ast, tables
from ptxtool.syntax.comments import attach_comments
from ptxtool.syntax.lalr import END, LINE, PARAM_LINE, Driver, Unexpected
from ptxtool.syntax.lexer import SECTION_ITEM, LexError, LexSession, PtxLexer, Token
from ptxtool.syntax.printer import inline
from ptxtool.syntax.words import ATTRIBUTE_WORDS, DECLARATION_ONLY_WORDS

# ---------------------------------------------------------------- errors


class SyntaxIssue(metaclass=record):
    """One error: where, what, and the source line it is on (for the caret display)."""

    line: int
    column: int
    message: str


finish((SyntaxIssue,))


class ParseError(Exception):
    """The text is not PTX; `issues` holds every error found, in source order."""

    def __init__(self, issues: list[SyntaxIssue], text: str) -> None:
        self.issues = sorted(issues, key=lambda i: (i.line, i.column))
        self.text = text
        super().__init__(self.issues[0].message if self.issues else "syntax error")

    def source_line(self, line: int) -> str:
        return _line_text(self.text, line) if line > 0 else ""


_DESCRIBE = {
    "WORD": "a name",
    "DOTWORD": "a directive",
    "INT": "an integer",
    "FLOAT": "a floating-point number",
    "STRING": "a string",
    "SECTION_DATA": "debug-section data",
    "DATA_LIST": "a list of numbers",
    "SECTION_BODY": "a section body",
    "$END": "the end of the file",
}


def _describe(terminal: str, spellings: dict[str, str]) -> str:
    if terminal in spellings:
        return f"'{spellings[terminal]}'"
    return _DESCRIBE.get(terminal, terminal.lower())


def _line_text(text: str, line: int) -> str:
    start = 0
    for _ in range(line - 1):
        start = text.find("\n", start) + 1
    end = text.find("\n", start)
    return text[start : end if end >= 0 else len(text)]


def _unexpected(error: Unexpected, spellings: dict[str, str], text: str, prev_line: int) -> SyntaxIssue:
    token = error.token
    expected_terminals = error.expected
    if token.type == END:
        found = "end of file"
        line = text.count("\n", 0, len(text.rstrip())) + 1
        column = len(text.rstrip().rsplit("\n", 1)[-1]) + 1
    else:
        value = token.value if len(token.value) <= 40 else token.value[:40] + "…"
        kind = _DESCRIBE.get(token.type, "token").removeprefix("a ").removeprefix("an ")
        found = f"'{value}'" if token.type in spellings else f"{kind} '{value}'"
        line, column = token.line, token.column
    if error.message:
        return SyntaxIssue(line, column, error.message)
    if "SEMICOLON" in expected_terminals and token.type != END and token.line > prev_line:
        end = len(_line_text(text, prev_line).split("//")[0].rstrip()) + 1
        return SyntaxIssue(prev_line, end, f"missing ';' at the end of the line (the next line starts with {found})")
    expected = sorted({_describe(t, spellings) for t in expected_terminals})
    if len(expected) > 8:
        if "LSQB" in expected_terminals:
            hint = "expected an operand"
        elif "WORD" in expected_terminals:
            hint = "expected a statement or directive here"
        else:  # module level: instructions belong inside a function's braces
            hint = "expected a directive, declaration or function here"
    elif len(expected) > 1:
        hint = "expected " + ", ".join(expected[:-1]) + " or " + expected[-1]
    else:
        hint = "expected " + (expected[0] if expected else "nothing more")
    return SyntaxIssue(line, column, f"unexpected {found}: {hint}")


# ---------------------------------------------------------------- building nodes


class _GiveUp(Exception):
    """Raised by a node builder when the input is beyond what ptxtool handles; parsing stops with this issue."""

    def __init__(self, issue: SyntaxIssue) -> None:
        super().__init__(issue.message)
        self.issue = issue


class _Located(metaclass=record):
    node: object
    line: int
    column: int
    start: int = -1  # offsets in the text, to see attributes written with no blank between them
    end: int = -1
    parts: tuple = ()  # for a run of attributes: each one located


finish((_Located,))


class _Several(tuple):
    """Statements one grammar rule matched (unknown directives a declaration began with, then the declaration), or
    a run of lines taken whole: spliced into the block or module that holds them."""


class _Params(tuple):
    """A parenthesised parameter list, told apart from other tuples among a function's children."""


def _flat(items: tuple) -> tuple:
    """Statements with each _Several spliced in."""
    if not any(i.__class__ is _Several for i in items):
        return items
    return tuple(s for i in items for s in (i if i.__class__ is _Several else (i,)))


def _attribute_name(a: ast.Attribute) -> ast.Name:
    """An attribute as an operand of an unknown directive, spelled as written."""
    return ast.Name(inline(a))


_FIRST_ITEM = re.compile(r"[^ \t\f\r\n]")
# canonical blanks in data lines: `, ` between values, one blank after the word, none before a label's colon
_COMMA = r"[ \t]*+,[ \t]*+"  # these patterns are compiled on first use: rarely needed
_WORD_BLANKS = r"(?m)^(\.b[0-9]+)[ \t]++"
_LABEL_BLANKS = r"(?m)[ \t]++:$"
_BLANKS = r"\s++"
# blanks around the `+` of an offset, the `-` of a difference, after a unary minus (not after a `.b8` word)
_SIGN_BLANKS = r"(?<!\.b8)(?<!\.b16)(?<!\.b32)(?<!\.b64)(?<=[A-Za-z0-9_$])[ \t]++(?=[+-])|(?<=[+-])[ \t]++"


def _canonical_items(items: str) -> str:
    """Section items, one a line as written, in canonical form: `, ` between values, one blank after the word, none
    around the `+` of an offset, the `-` of a difference, after a unary minus, or before a label's colon."""
    if "," in items:
        if "\t" in items or "  " in items:  # unusual blanks: the general rule (a slower scan)
            items = re.sub(_COMMA, ",", items)
        else:
            items = items.replace(", ", ",").replace(" ,", ",")
        items = items.replace(",", ", ")
    if " +" in items or "+ " in items or " -" in items or "- " in items or "\t" in items:
        items = re.sub(_SIGN_BLANKS, "", items)
    if "\t" in items or "  " in items or " :" in items:
        items = re.sub(_LABEL_BLANKS, ":", re.sub(_WORD_BLANKS, r"\1 ", items))
    return items


LINE_AFTER = 64  # statements a text holds (or, across texts, were offered) before the whole-line patterns compile
_INDENT, _OPCODE = 2, 8  # groups of the lexer's statement_line: the blanks that begin the line, an opcode
_OPERANDS = r"[ \t]*+(?:\{[^}]*+\}|[^,{]++)"  # operands a pattern has checked, vectors whole
_DIGITS = frozenset("0123456789")
_NUMBER_STARTS = frozenset("-.0123456789")


def _tokens(values) -> list[Token]:
    return [v for v in values if v.__class__ is Token]


class _Build:
    """One method per grammar rule (or alias), called with the rule's children, each returning a node; names and
    literals are interned so that a million-line file shares its `%r1`s."""

    def __init__(self) -> None:
        self.session: LexSession = LexSession()
        self.names: dict[str, ast.Name] = {}
        self.immediates: dict[str, ast.Immediate] = {}
        self.opcodes: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.line_pattern = ""  # the lexer's statement_line, compiled on first use
        self.line_match: Callable[[str, int], re.Match | None] | None = None
        self.param_pattern = ""  # the lexer's param_line, compiled on first use
        self.param_match: Callable[[str, int], re.Match | None] | None = None
        self.keywords: dict[str, str] = {}  # the lexer's: a word that is one is no attribute
        self.offers = 0
        self.semicolons: int | None = None  # the text's `;`s, counted when first needed
        # what the driver offers a statement's (or a parameter's) first token to, by its terminal: the terminal the
        # parser must accept there for the whole node, and its builder
        statement = ((LINE, self.statement_line),)
        self.whole_lines = {
            "WORD": statement,
            "AT": statement,
            "DOTWORD": (*statement, (PARAM_LINE, self.param_line)),
            "LOC": statement,
        }

    def reset(self, session: LexSession) -> None:
        self.session = session
        self.semicolons = None
        self.names, self.immediates = {}, {}
        self.singles: dict[str, tuple[ast.Immediate]] = {}  # the one-value groups of section data, shared
        self.depths: dict[int, int] = {}  # id(expression node) -> operators deep, while the parse holds the nodes

    def _name(self, tok: Token | str) -> ast.Name:
        text = tok.value if tok.__class__ is Token else tok  # a plain str key: Token's __eq__ is Python code
        node = self.names.get(text)
        if node is None:
            node = self.names[text] = ast.Name(text)
        return node

    def _imm(self, tok: Token | str) -> ast.Immediate:
        text = tok.value if tok.__class__ is Token else tok
        node = self.immediates.get(text)
        if node is None:
            node = self.immediates[text] = ast.Immediate(text)
        return node

    def _signed(self, tokens) -> ast.Immediate:
        """A literal written with an optional minus before it: (MINUS, INT) or (INT,)."""
        return self._imm("".join(t.value for t in tokens))

    def _value(self, tok: Token) -> ast.Operand:
        if tok.type in ("INT", "FLOAT"):
            return self._imm(tok)
        if tok.type == "STRING":
            return ast.String(str(tok))
        return self._name(tok)

    # -- module
    def start(self, *items):
        return ast.Module(_flat(items))

    def _directive(self, kw: Token, args, semicolon: bool = False) -> ast.Directive:
        return ast.Directive(
            str(kw), tuple(args), semicolon, line=kw.line, column=kw.column, end_line=self.session.prev_line
        )

    def d_version(self, kw, number):
        return self._directive(kw, [(self._imm(number),)])

    def d_target(self, kw, *words):
        return self._directive(kw, [(self._name(w),) for w in words])

    def d_address_size(self, kw, number):
        return self._directive(kw, [(self._imm(number),)])

    def d_file(self, kw, index, path, *numbers):
        return self._directive(kw, [(self._imm(index), ast.String(str(path))), *((self._imm(n),) for n in numbers)])

    def d_loc(self, kw, file, line, column, *attrs):
        return self._directive(kw, [(self._imm(file), self._imm(line), self._imm(column)), *attrs])

    def loc_function_name(self, word, symbol, *offset):
        target = ast.SymbolOffset(self._name(symbol), self._signed(offset[1:])) if offset else self._name(symbol)
        return (self._name(word), target)

    def loc_inlined_at(self, word, file, line, column):
        return (self._name(word), self._imm(file), self._imm(line), self._imm(column))

    def d_pragma(self, kw, *strings):
        return self._directive(kw, [(ast.String(str(s)),) for s in strings], semicolon=True)

    def d_alias(self, kw, alias, aliasee):
        return self._directive(kw, [(self._name(alias),), (self._name(aliasee),)], semicolon=True)

    def branch_targets(self, kw, *labels):
        return self._directive(kw, [(self._name(w),) for w in labels], semicolon=True)

    call_targets = branch_targets

    # -- sections
    def section(self, kw, name, body):
        return ast.Section(str(name), body, line=kw.line, column=kw.column, end_line=body.end_line)

    def section_data(self, word, *values):
        return self._directive(word, [(v,) for v in values])

    def section_body(self, token):
        """A SECTION_BODY token (`{` through `}`): a Block holding one Data, its lines in canonical form, made by
        regular expressions over the whole body rather than a node per line."""
        text = token.value
        found = self.session.payloads.pop(token.start_pos, None)
        items, plain, newlines = found or (None, False, text.count("\n"))
        first = _FIRST_ITEM.search(text, 1)
        end = len(text) - 1
        end_line = token.line + newlines
        end_column = end - (text.rfind("\n", 0, end) + 1) + 1 + (token.column - 1 if end_line == token.line else 0)
        statements: tuple = ()
        if first.start() < end:
            start = first.start()
            source = text[start:end].rstrip()
            line = token.line + text.count("\n", 0, start)
            column = start - (text.rfind("\n", 0, start) + 1) + 1 + (token.column - 1 if line == token.line else 0)
            if plain:  # the lexer saw no blank but the one after each word: only the blank after each comma is new
                canonical = items.encode("ascii").replace(b",", b", ").decode("ascii")  # (in bytes: a third quicker)
            else:
                canonical = _canonical_items("\n".join(re.findall(SECTION_ITEM, source)) if items is None else items)
            last_line = end_line - text.count("\n", start + len(source), end)
            statements = (ast.Data(canonical, source, line=line, column=column, end_line=last_line),)
        return ast.Block(statements, line=token.line, column=token.column, end_line=end_line, end_column=end_column)

    def section_data_line(self, token):
        """A SECTION_DATA token (`.b8 1, 2, 3`): the node section_data builds from the same words."""
        word, values = token.value.split(None, 1)
        singles = self.singles
        args = []
        for text in values.split(","):
            text = text.strip()
            single = singles.get(text)
            if single is None:
                single = singles[text] = (self._imm(text),)
            args.append(single)
        return ast.Directive(word, tuple(args), line=token.line, column=token.column, end_line=token.line)

    def v_plain(self, *tokens):
        return self._signed(tokens) if len(tokens) > 1 else self._value(tokens[0])

    def v_offset(self, symbol, plus, *offset):
        return ast.SymbolOffset(self._name(symbol), self._signed(offset))

    def v_difference(self, left, minus, right):
        return ast.Difference(self._name(left), self._name(right))

    def label(self, word):
        return ast.Label(str(word), line=word.line, column=word.column, end_line=self.session.prev_line)

    # -- declarations
    def attr_word(self, word):
        end = word.start_pos + len(word.value)
        return _Located(ast.Attribute(word.value), word.line, word.column, word.start_pos, end)

    def attr_number(self, word, number):
        node = ast.Attribute(word.value, number=self._imm(number))
        return _Located(node, word.line, word.column, word.start_pos, number.start_pos + len(number.value))

    def attr_call(self, word, args):
        return _Located(ast.Attribute(str(word), args=args), word.line, word.column)

    def attribute_args(self, *args):
        return tuple(a.node if isinstance(a, _Located) else self._value(a) for a in args)

    def attributes(self, *located):
        nodes = [located[0].node]
        for before, a in zip(located, located[1:], strict=False):
            glued = a.start >= 0 and a.start == before.end
            nodes.append(replace(a.node, glued=True) if glued else a.node)
        return _Located(tuple(nodes), located[0].line, located[0].column, parts=located)

    def _unknown_directives(self, attrs: _Located) -> tuple[list[ast.Directive], _Located]:
        """Directives the grammar took for attributes: a line of words that starts with one no declaration or
        function has (`.bogus 7`) is a statement of its own, not the head of the declaration on the next line."""
        parts, nodes = attrs.parts, attrs.node
        directives: list[ast.Directive] = []
        start = 0
        for i in range(1, len(parts)):
            if parts[i].line > parts[i - 1].line and nodes[start].word not in ATTRIBUTE_WORDS:
                first, rest = nodes[start], nodes[start + 1 : i]
                group = (*((first.number,) if first.number is not None else ()), *map(_attribute_name, rest))
                line, column = parts[start].line, parts[start].column
                args = (group,) if group else ()
                directives.append(ast.Directive(first.word, args, line=line, column=column, end_line=parts[i - 1].line))
                start = i
        if not start:
            return directives, attrs
        rest = parts[start:]
        return directives, _Located(nodes[start:], rest[0].line, rest[0].column, parts=rest)

    def declaration(self, attrs, *declarators):
        directives, attrs = self._unknown_directives(attrs)
        node = ast.Declaration(
            attrs.node, declarators, line=attrs.line, column=attrs.column, end_line=self.session.prev_line
        )
        return _Several((*directives, node)) if directives else node

    def declarator(self, word, *rest):
        count = rest[0] if rest and isinstance(rest[0], ast.Immediate) else None
        rest = rest[1:] if count is not None else rest
        dims, init = rest[0], (rest[1] if len(rest) > 1 else None)
        return ast.Declarator(str(word), count, dims, init)

    def param_count(self, number):
        return self._imm(number)

    def dims(self, *dims):
        return dims

    def dim(self, size=None):
        return size

    def i_number(self, tok):
        return self._imm(tok)

    def i_symbol(self, word):
        return self._name(word)

    def i_symbol_offset(self, word, plus, offset):
        return ast.SymbolOffset(self._name(word), self._operand(offset))

    def i_generic(self, word, symbol, *offset):
        if word.value != "generic":
            message = f"unknown initializer function '{word}': expected 'generic'"
            self.session.errors.append(LexError(word.line, word.column, message))
        return ast.Generic(self._name(symbol), self._operand(offset[1]) if offset else None)

    def i_mask(self, mask, address):
        return ast.Mask(self._imm(mask), address)

    def field_init(self, word, value):
        return ast.FieldInit(str(word), self._value(value))

    def i_data(self, token):
        """A DATA_LIST token (`{1, 2, -3, 0f3F800000}`): one Literals node, equal to the InitList i_list builds
        from the same literals, its values kept as one string (the lexer has it when they are all decimal)."""
        inner = self.session.payloads.pop(token.start_pos, None)
        if inner is None:
            inner = token.value[1:-1].replace(" ", "").replace("\n", "")  # no literal holds a blank: plain C loops
            if not inner.isprintable():  # another blank (a tab, a CR): every one of them is unprintable
                inner = re.sub(_BLANKS, "", inner)
        node = ast.Literals(inner)
        self.depths[id(node)] = 1
        return node

    def i_list(self, *items):
        return self._nested(ast.InitList(items), items, items)

    # -- functions
    def function(self, *children):
        directives: list[ast.Directive] = []
        if isinstance(children[0], _Located):
            directives, head = self._unknown_directives(children[0])
            children = (head, *children[1:])
        node = self._function(children)
        return _Several((*directives, node)) if directives else node

    def _function(self, children):
        attrs: tuple = ()
        kind_attrs: tuple = ()
        line = column = 0
        kind = name = None
        returns = params = None
        directives, body = [], None
        for child in children:
            if isinstance(child, _Located):
                if kind is None:
                    attrs, line, column = child.node, child.line, child.column
                else:
                    kind_attrs = child.node
            elif isinstance(child, Token) and child.type in ("ENTRY", "FUNC"):
                kind = str(child)
                if not line:
                    line, column = child.line, child.column
            elif isinstance(child, _Params):
                if name is None:
                    returns = tuple(child)
                else:
                    params = tuple(child)
            elif isinstance(child, Token):
                name = str(child)
            elif isinstance(child, ast.PerfDirective):
                directives.append(child)
            else:
                body = child
        end_line = body.end_line if body is not None else self.session.prev_line
        return ast.Function(
            kind,
            name,
            attrs,
            returns,
            params,
            tuple(directives),
            body,
            kind_attrs,
            line=line,
            column=column,
            end_line=end_line,
        )

    def param_list(self, *params):
        return _Params(params)

    def param(self, attrs, word, dims):
        return ast.Param(attrs.node, str(word), dims)

    def perf_directive(self, word, *numbers):
        return ast.PerfDirective(
            word.value,
            tuple(self._imm(n) for n in numbers),
            line=word.line,
            column=word.column,
            end_line=self.session.prev_line,
        )

    def block(self, lbrace, *rest):
        rbrace = rest[-1]
        return ast.Block(
            _flat(rest[:-1]), line=lbrace.line, column=lbrace.column, end_line=rbrace.line, end_column=rbrace.column
        )

    def call_prototype(self, kw, *children):
        returns = params = None
        name = None
        directives = tuple(c for c in children if isinstance(c, ast.PerfDirective))
        for child in children:
            if isinstance(child, ast.PerfDirective):
                continue
            if isinstance(child, _Params):
                if name is None:
                    returns = tuple(child)
                else:
                    params = tuple(child)
            else:
                name = str(child)
        return ast.CallPrototype(
            returns, name, params, directives, line=kw.line, column=kw.column, end_line=self.session.prev_line
        )

    # -- instructions
    def instruction(self, *children):
        guard = None
        if isinstance(children[0], ast.Guard):
            guard, children = children[0], children[1:]
        op = children[0]
        spelled = op.value
        operands = children[1:]
        if operands and operands[0].__class__ is Token:  # modifiers written apart from the opcode: `ld.global .f32`
            words = 0
            while words < len(operands) and operands[words].__class__ is Token:
                words += 1
            for before, word in zip((op, *operands), operands[:words], strict=False):
                if word.value in DECLARATION_ONLY_WORDS:
                    self._missing_semicolon(before, word)
            spelled += "".join(t.value for t in operands[:words])
            operands = operands[words:]
        opcode, modifiers = self._opcode(spelled)
        return ast.Instruction(
            opcode, modifiers, operands, guard, line=op.line, column=op.column, end_line=self.session.prev_line
        )

    def _opcode(self, spelled: str) -> tuple[str, tuple[str, ...]]:
        """`ld.global.f32` as ("ld", ("global", "f32")), split once per spelling in a file."""
        split = self.opcodes.get(spelled)
        if split is None:
            opcode, *modifiers = spelled.split(".")
            split = self.opcodes[spelled] = (opcode, tuple(modifiers))
        return split

    def _missing_semicolon(self, before: Token, word: Token) -> None:
        """A declaration word after an opcode's words: the `;` of the line before is missing (or it is misplaced)."""
        if word.line > before.line:
            line, column = before.line, before.column + len(before.value)
            message = f"missing ';' at the end of the line (the next line starts with directive '{word.value}')"
        else:
            line, column = word.line, word.column
            message = f"unexpected directive '{word.value}' after an opcode: a declaration word, not a modifier"
        self.session.errors.append(LexError(line, column, message))

    def _warm(self) -> bool:
        """Whether the whole-line pattern is worth compiling (some milliseconds, which a small file would not pay
        back): for a text of LINE_AFTER statements or more, counted by their `;`s in one C scan, from its first
        statement on; else once that many statements were offered, over all texts parsed so far."""
        self.offers += 1
        if self.offers < LINE_AFTER:
            if self.semicolons is None:
                self.semicolons = self.session.text.count(";")
            if self.semicolons < LINE_AFTER:
                return False
        return True

    def statement_line(self, token: Token) -> object | None:
        """The statement that `token` (a name, `@`, a declaration's first word or `.loc`) begins, if the whole of it
        is on this line in the plain forms the lexer's `statement_line` pattern takes: built from the same words by
        the same methods as the token-by-token path; the lexer goes on after it (`_run`). None for any other."""
        if self.line_match is None:
            if not self._warm():
                return None
            self.line_match = re.compile(self.line_pattern).match
        return self._run(token.start_pos, token.line, token.column)

    def param_line(self, token: Token) -> object | None:
        """The parameter that `token` (a word such as `.param`) begins in a function's list, if the whole of it up to
        the `,` or `)` after it (maybe on a later line) is on this line in the forms the lexer's `param_line` pattern
        takes: the node `param` builds from the same words. The lexer goes on after the name and its dimensions."""
        if self.param_match is None:
            if not self._warm():
                return None
            self.param_match = re.compile(self.param_pattern).match
        session = self.session
        found = self.param_match(session.text, token.start_pos)
        if found is None:
            return None
        words, name, sizes = found.groups()
        attributes = self._attribute_words(words)
        if attributes is None:
            return None
        dims = tuple(self._imm(size) if (size := s[:-1]) else None for s in sizes.split("[")[1:])  # `16]`, `]`
        session.prev_line = session.last_line = token.line
        session.resume_at = found.end()
        return ast.Param(attributes, name, dims)

    def _run(self, start: int, line: int, column: int) -> object | None:
        """The statement at `start` built whole, with the statements on the lines after it that the pattern takes
        too (blank lines between them, nothing else), each matched with the line ends before it: one node, or a run
        the block splices in. The lexer goes on after the last."""
        text, match = self.session.text, self.line_match
        found = match(text, start)
        node = None if found is None else self._statement(found, line, column)
        if node is None:
            return None
        nodes: list | None = None
        end = found.end()
        while (found := match(text, end)) is not None:
            ends, blanks = found.group(1, _INDENT)
            if not ends:  # a second statement on the line goes token by token
                break
            following = self._statement(found, line + ends.count("\n"), len(blanks) + 1)
            if following is None:
                break
            if nodes is None:
                nodes = [node]
            nodes.append(following)
            end, line = found.end(), following.line
        self.session.prev_line = self.session.last_line = line  # the line of the last statement's end
        self.session.resume_at = end
        return node if nodes is None else _Several(nodes)

    def _statement(self, found: re.Match, line: int, column: int) -> object | None:
        """The node of the statement `found` took, at `line` and `column`, by the alternative that matched."""
        _, _, numbers, words, declarators, negated, guard, opcode, operands, label = found.groups()
        if numbers is not None:
            return self._loc(numbers, line, column)
        if words is not None:
            return self._declaration(words, declarators, line, column)
        if label is not None:
            return ast.Label(label, line=line, column=column, end_line=line)
        if guard is not None:  # the instruction starts at its opcode, as token by token
            guard = ast.Guard(self._name(guard), True) if negated else ast.Guard(self._name(guard))
            column += found.start(_OPCODE) - found.end(_INDENT)
        return self._instruction(guard, opcode, operands, line, column)

    def _instruction(
        self, guard: ast.Guard | None, opcode: str, operands: str | None, line: int, column: int
    ) -> ast.Instruction:
        """The node `instruction` builds from the same tokens, made here directly: no Token per opcode and no pass
        over the children to tell tokens from operands (a run of plain lines is most of a kernel)."""
        children: list = []
        if operands is not None:  # checked by the pattern: split at the commas outside a vector's braces
            if " " in operands or "\t" in operands:  # blanks stand only between tokens: none is part of an operand
                operands = operands.replace(" ", "").replace("\t", "")
            names, immediates = self.names, self.immediates
            for item in operands.split(",") if "{" not in operands else re.findall(_OPERANDS, operands):
                first = item[0]
                if first == "[":
                    base, plus, offset = item[1:-1].partition("+")
                    value = self._imm(base) if base[0] in _DIGITS else self._name(base)
                    children.append(ast.Address(value, self._imm(offset) if plus else None, True, ()))
                elif first == "{":
                    children.append(self.o_vector(*map(self._name, item[1:-1].split(","))))
                elif first in _NUMBER_STARTS:  # a minus glued to it: the literal unary minus folds (e_unary)
                    children.append(immediates.get(item) or self._imm(item))
                else:
                    children.append(names.get(item) or self._name(item))
        name, modifiers = self._opcode(opcode)
        return ast.Instruction(name, modifiers, tuple(children), guard, line=line, column=column, end_line=line)

    def _attribute_words(self, words: str) -> tuple[ast.Attribute, ...] | None:
        """The attributes a whole-line pattern's words spell (`.align 8 .b8`: only `.align` takes a number); None
        where a word is another token (`.entry`), which the token-by-token path must read."""
        attributes: list[ast.Attribute] = []
        for word in words.split():
            if word[0] != ".":  # the number of the `.align` before it
                attributes[-1] = ast.Attribute(".align", number=self._imm(word))
            elif word in self.keywords:
                return None
            else:
                attributes.append(ast.Attribute(word))
        return tuple(attributes)

    def _declaration(self, words: str, declarators: str, line: int, column: int) -> ast.Declaration | None:
        """The node `declaration` builds from the same words; None where a word is another token (`.entry`)."""
        attributes = self._attribute_words(words)
        if attributes is None:
            return None
        nodes = []
        for text in declarators.split(","):  # checked by the pattern: `name<count>[size]...`
            head, *sizes = text.split("[")
            name, _, count = head.partition("<")
            dims = tuple(self._imm(size) if (size := s.rstrip(" \t]").lstrip(" \t")) else None for s in sizes)
            nodes.append(ast.Declarator(name.strip(" \t"), self._imm(count.strip(" \t>")) if count else None, dims))
        return ast.Declaration(attributes, tuple(nodes), line=line, column=column, end_line=line)

    def _loc(self, numbers: str, line: int, column: int) -> ast.Directive:
        """The node d_loc builds from the same numbers, with no Token for `.loc`."""
        return ast.Directive(
            ".loc", (tuple(map(self._imm, numbers.split())),), False, line=line, column=column, end_line=line
        )

    def guard(self, word):
        return ast.Guard(self._name(word))

    def guard_negated(self, word):
        return ast.Guard(self._name(word), True)

    def o_name(self, word):
        return self._name(word)

    def o_immediate(self, tok):
        return self._imm(tok)

    def o_not(self, word):
        return ast.Not(self._name(word))

    def o_pair(self, first, second):
        return ast.PredPair(self._name(first), self._name(second))

    def o_vector_pair(self, *children):
        return ast.PredPair(self._nested(ast.Vector(children[:-1]), children, children[:-1]), self._name(children[-1]))

    def o_symbol_offset(self, word, plus, offset):
        return ast.SymbolOffset(self._name(word), self._operand(offset))

    def o_address(self, address):
        return address

    def o_vector(self, *items):
        return self._nested(ast.Vector(items), items, items)

    def o_list(self, *items):
        return ast.ParenList(items)

    def address(self, base, *rest):
        offset = None
        if rest and rest[0].__class__ is Token and rest[0].type == "PLUS":
            offset, rest = self._operand(rest[1]), rest[2:]
        return ast.Address(self._value(base), offset, True, rest)

    # -- constant expressions and nested operands (their depth is bounded: analyses may recurse over them, and
    # node equality does; a flat chain `1+1+...+1` is one node, not deep)
    def _nested(self, node, tokens, parts):
        """Record how deep `node` nests; `tokens` holds the first token of the construct, for the message."""
        depths = self.depths
        depth = 1 + max((depths.get(id(p), 0) for p in parts), default=0)
        if depth > MAX_NESTING:
            first = next((t for t in _tokens(tokens)), None)
            line, column = (first.line, first.column) if first is not None else (self.session.last_line, 1)
            message = f"expression or operand nested more than {MAX_NESTING} levels deep (ptxtool's limit)"
            raise _GiveUp(SyntaxIssue(line, column, message))
        depths[id(node)] = depth
        return node

    def _operand(self, node):
        """A constant-expression child: a bare literal token becomes its interned node."""
        return self._imm(node) if node.__class__ is Token else node

    def e_chain(self, first, *rest):
        operands = (first, *rest[1::2])
        node = ast.Binary(operands, tuple(op.value for op in rest[0::2]))
        return self._nested(node, rest[0:1], operands)

    logical_or = logical_and = bit_or = bit_xor = bit_and = equality = relational = shift = additive = e_chain
    multiplicative = e_chain

    def e_unary(self, op, operand):
        if op.type == "MINUS" and type(operand) is ast.Immediate and not operand.text.startswith("-"):
            return self._imm("-" + operand.text)
        return self._nested(ast.Unary(op.value, operand), (op,), (operand,))

    def e_paren(self, inner):
        return self._nested(ast.Paren(inner), (), (inner,))

    def e_conditional(self, condition, qmark, if_true, if_false):
        return self._nested(ast.Conditional(condition, if_true, if_false), (qmark,), (condition, if_true, if_false))


# ---------------------------------------------------------------- the parser


@cache
def _parser() -> tuple[Driver, PtxLexer, _Build, dict[str, str]]:
    """The driver, lexer and node builder over the grammar's tables (loaded once per process)."""
    build = _Build()
    grammar = tables.load()
    spellings = {t.name: t.pattern for t in grammar.terminals if t.literal}
    lexer = PtxLexer(grammar.terminals, grammar.ignore)
    build.line_pattern = lexer.statement_line or ""
    build.param_pattern = lexer.param_line or ""
    build.keywords = lexer.keywords
    return Driver(grammar, build), lexer, build, spellings


_lock = allocate_lock()  # the node builder holds per-parse state


MAX_NESTING = 256  # parentheses, operators and braces inside one operand or initializer; compilers write a few
MAX_LINE = 16 << 20  # characters; compilers' longest lines (data initializers) stay far below


def _overlong_line(text: str) -> SyntaxIssue | None:
    if len(text) <= MAX_LINE:
        return None
    for number, line in enumerate(text.split("\n"), 1):
        if len(line) > MAX_LINE:
            return SyntaxIssue(
                number,
                1,
                f"line is {len(line):,} characters long; ptxtool reads lines up to {MAX_LINE:,} (is this PTX?)",
            )
    return None


def parse(text: str) -> ast.Module:
    """Parse PTX source text into a Module, or raise ParseError with every error found."""
    overlong = _overlong_line(text)
    if overlong:
        raise ParseError([overlong], text)
    driver, lexer, build, spellings = _parser()
    issues: list[SyntaxIssue] = []
    error_lines: set[int] = set()
    session = LexSession()

    def recover(error: Unexpected) -> bool:
        issue = _unexpected(error, spellings, text, session.prev_line)
        error_lines.update(e.line for e in session.errors)
        if issue.line not in error_lines:  # one error per line: later ones are usually echoes of the first
            error_lines.add(issue.line)
            issues.append(issue)
        return len(issues) < 100

    collecting = gc.isenabled()
    gc.disable()  # the tree is acyclic: the cycle collector would only rescan its millions of new nodes
    try:
        with _lock:
            build.reset(session)
            whole_lines = build.whole_lines if lexer.statement_line is not None else None
            module = driver.parse(lexer.tokens(text, session), recover, whole_lines)
    except _GiveUp as stop:
        issues.append(stop.issue)
        module = None
    finally:
        if collecting:
            gc.enable()
    issues.extend(SyntaxIssue(e.line, e.column, e.message) for e in session.errors)
    if issues or module is None:
        raise ParseError(issues, text)
    return attach_comments(module, session.comments)
