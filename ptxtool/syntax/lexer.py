"""The PTX lexer: one master regex compiled from the grammar's own terminals, feeding the LALR driver.

Lark's stock lexers try terminals one by one; a single `re.finditer` over an alternation is several times faster.
Comments are not tokens: they are collected, with their positions, for the parser to hand to the statements that
own them. Characters that start no token are reported as errors and skipped, so parsing can go on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from ptxtool.records import finish, record
from ptxtool.syntax.tables import Terminal


class Token(str):
    """A token: its text, with its terminal `type` and where it starts (the fields Lark's Token has)."""

    type: str
    value: str
    start_pos: int
    line: int
    column: int

    def __new__(cls, type: str, value: str, start_pos: int = 0, line: int = 1, column: int = 1) -> Token:
        token = str.__new__(cls, value)
        token.type, token.value, token.start_pos, token.line, token.column = type, value, start_pos, line, column
        return token


# The lexer's own patterns, like the grammar's terminals, are read under re.ASCII (`(?a)`): PTX is ASCII, and there
# `\d` is [0-9] and `\w` [A-Za-z0-9_], which compile several times quicker than ranges (`re` compiles in Python,
# per element of a pattern: start-up time of every run).
# FLOAT's forms that compilers write (`0f3F800000`, `0d3FF0000000000000`): the grammar's FLOAT begins with them
_HEX_FLOAT = r"0[fF][\da-fA-F]{8}(?![\w$])|0[dD][\da-fA-F]{16}(?![\w$])"


def _word_shaped(text: str) -> bool:
    """Whether a literal terminal is spelled like a name or a directive (`.entry`, `ret`): a keyword."""
    name = text[1:] if text[:1] == "." else text
    return name.isascii() and name[:1] not in "0123456789" and name.replace("_", "a").replace("$", "a").isalnum()


# a value in a debug section as compilers write it: `12`, `-1`, `$L__tmp3`, `.debug_abbrev`, `.debug_loc+136`,
# `$L__tmp5-$L__func_begin0` (the grammar's section_value forms; blanks around `+` and `-` as the grammar allows)
_SECTION_INT = r"(?:-[ \t]*+)?[0-9]++(?![.xXbBeEuU])"
_SECTION_NAME = r"[A-Za-z_$][A-Za-z0-9_$]*+"
_SECTION_VALUE = (
    rf"(?:{_SECTION_INT}|{_SECTION_NAME}(?:[ \t]*+\+[ \t]*+{_SECTION_INT}|[ \t]*+-[ \t]*+{_SECTION_NAME})?"
    rf"|\.debug_[A-Za-z0-9_]++(?:[ \t]*+\+[ \t]*+{_SECTION_INT})?)"
)
# The patterns below that only some files need are strings, compiled on first use (`re` keeps them compiled): every
# pattern compiled at import is start-up time of every command.
# One statement of a plain debug section: `.b8 1, 2`, `.b32 .debug_abbrev`, `.b64 $L__func_begin0` (groups: word,
# values), or a label (group 3).
SECTION_LINE = (
    rf"(?:(\.b(?:8|16|32|64))[ \t]++({_SECTION_VALUE}(?:[ \t]*+,[ \t]*+{_SECTION_VALUE})*+)"
    r"|([A-Za-z_$][A-Za-z0-9_$]*+)[ \t]*+:)"
)
# The same without groups, for `findall` to list whole statements in one call.
SECTION_ITEM = (
    rf"\.b(?:8|16|32|64)[ \t]++{_SECTION_VALUE}(?:[ \t]*+,[ \t]*+{_SECTION_VALUE})*+|[A-Za-z_$][A-Za-z0-9_$]*+[ \t]*+:"
)
_ITEM_SPLIT = f"({SECTION_ITEM})"  # split: blanks, item, blanks, item, ..., blanks
_OPEN_BRACE = re.compile(r"[ \t\f\r\n]*+\{")


# The layout compilers write (one item a line, no blanks but the one after the word, `\n` line ends), checked by a
# pattern of character runs that is several times quicker than SECTION_ITEM's general one; `[0-9,]++` takes the
# common all-integer line (its commas are checked apart, over the whole body). nvcc writes every item flush left,
# which the first pattern takes; the second takes indented items.
_NAME = r"(?!\d)[\w$]++"
_PLAIN_VALUE = rf"-?\d++|{_NAME}(?:\+-?\d++|-{_NAME})?|\.debug_\w++(?:\+-?\d++)?"
# (the values apart by commas, none after the last: each value once in the pattern; `[0-9,]`, which runs over much
# data, tests a character quicker than `[\d,]`)
_PLAIN_LINE = rf"\.b(?:8|16|32|64) (?:[0-9,]++|(?:(?:{_PLAIN_VALUE})(?:,(?!\n)|(?=\n)))++)|{_NAME}:"
# (an empty body, `{ }`, and blank lines before the `}`, as nvcc ends `.debug_macinfo`, are plain too)
_FLUSH_BODY = rf"(?a)[ \t]*+(?:\n(?:(?:{_PLAIN_LINE})\n)*+[ \t\n]*+)?"
# the same layout with the common line, `.b8` and integers, tried first, a run of them at a time (a third quicker)
_FLUSH_QUICK = rf"(?a)[ \t]*+(?:\n(?:(?:\.b8 [0-9,]++\n)++|(?:{_PLAIN_LINE})\n)*+[ \t\n]*+)?"
# For the commas of a flush body in one C pass: blanks, line ends and commas become `,` (any two of them side by
# side are then `,,`), name characters and `:` a letter, digits `0`: in a body of such lines a comma with no value
# before or after it (`,,`, ` ,`, `,` at a line's end) is the only `,,` left.
_COMMA_CLASSES = bytes.maketrans(
    bytes(range(256)), bytes(44 if b in b" \t\n," else 48 if 48 <= b <= 57 else 97 for b in range(256))
)
_PLAIN_BODY = rf"(?a)[ \t]*+(?:\n(?:[ \t]*+(?:{_PLAIN_LINE})\n)*+[ \t\n]*+)?"
_INDENT = r"(?m)^[ \t]++"


def section_span(text: str, at: int) -> tuple[int, tuple[str, bool]] | None:
    """A section body at `at` (blanks, then `{`) of nothing but data lines and labels, each apart from the next:
    where it ends (after its `}`) and its items, one a line, found in one scan, with whether they are in the plain
    layout (no blanks but the one after each word: only `, ` is missing from their canonical form); None for any
    other body."""
    brace = _OPEN_BRACE.match(text, at)
    if brace is None:
        return None
    start = brace.end()
    # the first `{`, `}` or `/` after the brace must be its `}` (no comment, no nested brace): found by str.find,
    # a C scan that stops at the next `{`, so many unclosed bodies are not scanned to a far `}` again and again
    following = text.find("{", start)
    close = text.find("}", start, following if following >= 0 else len(text))
    if close < 0 or text.find("/", start, close) >= 0:
        return None  # the ordinary path
    body = text[start:close]
    if body.isascii():  # (a constant-time test; a flush body is ASCII)
        core = body.strip(" \t\n")
        if b",," not in (core + "\n").encode("ascii").translate(_COMMA_CLASSES) and re.fullmatch(_FLUSH_QUICK, body):
            return close + 1, (core, True)
    if ",," not in body and " ," not in body and ",\n" not in body:
        if re.fullmatch(_FLUSH_BODY, body):
            return close + 1, (body.strip(" \t\n"), True)
        if re.fullmatch(_PLAIN_BODY, body):
            return close + 1, (re.sub(_INDENT, "", body.strip(" \t\n")), True)
    parts = re.split(_ITEM_SPLIT, body)
    blanks = parts[0::2]
    if "".join(blanks).strip(" \t\f\r\n") or not all(blanks[1:-1]):
        return None  # something that is no data line, or two items glued together
    return close + 1, ("\n".join(parts[1::2]), False)


_BLANK_BYTES = b" \t\f\r\n"
# digits become `9`, blanks and commas `,`, any other character `x` (no decimal list holds one)
_DIGIT_RUNS = bytes.maketrans(
    bytes(range(256)), bytes(57 if 48 <= b <= 57 else 44 if b in b", \t\f\r\n" else 120 for b in range(256))
)


def decimal_list(text: str, at: int) -> tuple[int, str] | None:
    """A brace list of decimal integers at `at` (blanks, then `{`), the usual data table: where it ends (after its
    `}`) and its values without blanks (`1,2,3`), checked with bytes operations (C loops, no regex steps); None for
    anything else."""
    brace = _OPEN_BRACE.match(text, at)
    if brace is None:
        return None
    start = brace.end()
    # its `}`, looked for up to the next `{` only (memchr scans): `= {= {= {...` is not scanned to a far `}` again
    # and again
    following = text.find("{", start)
    close = text.find("}", start, following if following >= 0 else len(text))
    if close < 0 or not text.isascii() and not text[start:close].isascii():
        return None
    raw = text[start:close].encode("ascii")
    runs = raw.translate(_DIGIT_RUNS)
    if b"x" in runs:  # a character that is no digit, comma or blank before the `}`
        return None
    packed = raw.translate(None, _BLANK_BYTES)
    if not packed or packed[0] == 44 or packed[-1] == 44 or b",," in packed:  # 44: a comma
        return None
    # as many runs of digits as values: no two numbers with only blanks between them (`1 2`, glued by dropping blanks)
    if runs.count(b",9") + (runs[0] == 57) != packed.count(b",") + 1:
        return None
    return close + 1, packed.decode("ascii")


_BLANKS = {"\v": "a vertical tab", "\xa0": "a no-break space"}
_LATE_STARTS = frozenset('"0123456789')  # where the master pattern's catch-all leaves the rest to `late`


def _bad(kind: str, value: str, start: int) -> str:
    """Why a piece of text is no token: said the way ptxas would object to it."""
    if kind == "OPEN_STRING":
        return "unterminated string: expected '\"' before the end of the line"
    if kind == "STRING":
        return "non-ASCII character in a string: ptxas takes those only in comments"
    if value == "\ufeff" and start == 0:
        return (
            "byte-order mark at the start of the file: PTX is plain ASCII (ptxas rejects it too); save the file "
            "without one"
        )
    if value == "\0":
        return "NUL byte: PTX is text (ptxas stops reading here)"
    if len(value) > 1:
        return f"malformed number '{value[:40]}'"
    if value in _BLANKS:
        return f"{_BLANKS[value]} is not a blank in PTX (ptxas rejects it): use a space or a tab"
    if "\udc80" <= value <= "\udcff":  # a byte that is not UTF-8, kept by the reader as a lone surrogate
        return f"byte 0x{ord(value) - 0xDC00:02X} is not ASCII: ptxas takes such bytes only in comments"
    if not value.isascii():
        return f"non-ASCII character {value!r} (U+{ord(value):04X}): ptxas takes those only in comments"
    return f"unexpected character {value!r}"


class Comment(metaclass=record):
    """A comment as found, at its line and column (placed on statements later, by position)."""

    line: int
    column: int
    text: str


class LexError(metaclass=record):
    line: int
    column: int
    message: str


finish((Comment, LexError))  # records, not dataclasses: start-up of every command imports the lexer


class LexSession:
    """What one lexing run leaves behind for the parser: comments, errors, and where the last tokens ended."""

    __slots__ = ("comments", "errors", "text", "payloads", "prev_line", "last_line", "resume_at")

    def __init__(self) -> None:
        self.comments: list[Comment] = []
        self.errors: list[LexError] = []
        self.text = ""  # the text being lexed: node builders look at the blanks around some operators
        # what the lexer worked out for a SECTION_BODY (its items, one a line, whether in the plain layout, and its
        # token's line ends) or a DATA_LIST (its values, no blanks), by the token's start
        self.payloads: dict[int, str | tuple[str, bool, int]] = {}
        self.prev_line = 1  # line of the token before the lookahead: the end of whatever the parser reduces now
        self.last_line = 1
        self.resume_at = 0  # set by the parser when it took the rest of a line in one piece: lexing goes on there


class PtxLexer:
    """Built once from the grammar's terminal definitions, then run per text."""

    def __init__(self, terminals: tuple[Terminal, ...], ignored: frozenset[str]) -> None:
        self.keywords: dict[str, str] = {}
        self.punctuation: dict[str, str] = {}
        patterns: list[tuple[int, int, str, str]] = []
        for order, term in enumerate(terminals):
            if term.literal:
                target = self.keywords if _word_shaped(term.pattern) else self.punctuation
                target[term.pattern] = term.name
            elif term.name in ignored and term.name != "COMMENT":
                continue  # whitespace: finditer steps over it
            else:
                patterns.append((-term.priority, order, term.name, term.pattern))
        patterns.sort()
        by_name = {name: regexp for _, _, name, regexp in patterns}
        # a brace list of literals right after `=`: one DATA_LIST token, however long (possessive: one pass); the
        # usual table of decimal integers is checked by bytes operations, quicker still (decimal_list)
        literal, blanks = f"-?(?:{by_name['FLOAT']}|{by_name['INT']})", r"[ \t\f\r\n]*+"
        # (compiled on first use, as the patterns only some files need are: compiling is start-up time)
        full = rf"(?a){blanks}\{{{blanks}(?:{literal}{blanks},{blanks})*+{literal}{blanks}\}}"

        def data_list(text: str, at: int) -> tuple[int, str | None] | None:
            found = decimal_list(text, at)
            brace = _OPEN_BRACE.match(text, at) if found is None else None
            if brace is None or text[brace.end() : brace.end() + 1].lstrip(" \t\f\r\n-.0123456789"):
                return found  # (a literal starts with a digit, `.` or `-`: no other list is tried the long way)
            return (m.end(), None) if (m := re.compile(full).match(text, at)) else None

        self.data_list = data_list
        # a section body of nothing but data lines and labels is one SECTION_BODY token (section_span); anything
        # else in it (a comment, an expression) takes the ordinary path. Comments before the brace (`.section
        # /* c */ .debug_str // c`) are lexed as usual, then the body is tried at the brace.
        self.commented_brace = rf"(?:[ \t\f\r\n]++|{by_name['COMMENT']})*+\{{"  # compiled on first use
        alternatives = {name: f"(?P<{name}>{regexp})" for _, _, name, regexp in patterns}
        alternatives["OPEN_COMMENT"] = r"(?P<OPEN_COMMENT>/\*)"  # a block comment that never ends
        alternatives["PUNCT"] = f"(?P<PUNCT>{_longest_first(self.punctuation)})"
        alternatives["BAD"] = r"(?P<BAD>[^ \t\f\r\n])"  # anything else: one character (see `late` below)
        # Tokens only broken files have are left out of the master pattern and matched where the catch-all took their
        # first character, by a pattern compiled on first use (compiling is start-up time of every run): a string
        # that never ends (to its line's end) or a number glued to letters (`12ab`: one bad token, so that no scan
        # over its digits is repeated per digit), in the master pattern's order. (SECTION_DATA so would cost a
        # second match and a new scan per token: 4 µs a line in a section body with comments, as LLVM writes them.)
        self.late = r"""(?as)(?P<OPEN_STRING>"(?:[^"\\\n]++|\\.)*+)|(?P<BAD>\d[\w$]*+|[^ \t\f\r\n])"""
        self.late_match: Callable[[str, int], re.Match | None] | None = None
        # Alternatives are tried in order, so the most frequent go first where no earlier one can match the same
        # text: nothing else starts like a WORD (a letter, `_`, `$`, `%` and a name character) but `%` in PUNCT and
        # the catch-all, which stay after it; comments precede PUNCT for `/`; no PUNCT character starts a number,
        # a directive or a string. The blanks before a token are part of its match (each blank tried as the start of
        # every alternative would cost more than the token), and `\Z` ends the text after the last blanks.
        first = ("WORD", "COMMENT", "OPEN_COMMENT", "PUNCT")
        order = [*first, *(name for name in alternatives if name not in first)]
        body = "|".join(alternatives[name] for name in order)
        self.master = re.compile(rf"[ \t\f\r\n]*+(?:{body}|\Z)", re.S | re.A)
        # A one-line instruction whose operands are names, integers, hexadecimal floats (as compilers write them; a
        # decimal one goes token by token), `[base+offset]` addresses or vectors of names, or
        # a label, in the terminals' own patterns, so that it is the same tokens the master pattern finds (groups:
        # `!`, guard, opcode, operands; label). Blanks are spaces and tabs only; anything else (a comment, an
        # expression, a modifier apart from the opcode) is no match and goes token by token. None if a keyword is
        # shaped like a name (it would be another token) or FLOAT no longer begins with the hexadecimal forms.
        # Where compilers write only decimal integers (an address's base and offset, a count, a size, `.loc`'s
        # numbers), the patterns take only those (INT's decimal form: `12`, not `12U` or `0xC`): another spelling
        # goes token by token. Each pattern is read under re.ASCII, as the terminals are.
        word, number, decimal = by_name["WORD"], by_name["INT"], r"\d++(?![\w$.])"
        operand = (
            rf"{word}|-?(?:{_HEX_FLOAT}|{number})"
            rf"|\[[ \t]*+(?:{word}|{decimal})(?:[ \t]*+\+[ \t]*+-?{decimal})?[ \t]*+\]"
            rf"|\{{(?:[ \t]*+{word}[ \t]*+(?:,(?![ \t]*+\}})|(?=\}})))++\}}"  # a vector: names apart by commas
        )
        line_patterns = all(k.startswith(".") for k in self.keywords) and by_name["FLOAT"].startswith(_HEX_FLOAT + "|")
        instruction = (
            rf"(?:@(!?)({word})[ \t]++)?({word})"
            rf"(?:[ \t]++((?:(?:{operand})(?:[ \t]*+,[ \t]*+(?!;)|(?=[ \t]*+;)))++))?[ \t]*+;"
            rf"|({word})[ \t]*+:"
        )
        # A one-line declaration of the forms compilers write in a body (`.reg .b32 %r<9>;`, `.param .b64 p;`,
        # `.local .align 4 .b8 d[256];`): words apart (only `.align` takes a number), then names with an optional
        # `<count>` and integer dimensions; no initializer (groups: words, declarators). The parser checks that no
        # word is a keyword.
        declarator = rf"{word}(?:[ \t]*+<[ \t]*+{decimal}[ \t]*+>)?(?:[ \t]*+\[[ \t]*+(?:{decimal})?[ \t]*+\])*+"
        declaration = (
            rf"((?:(?:\.align[ \t]++{decimal}|{by_name['DOTWORD']})[ \t]++)++)"
            rf"((?:{declarator}(?:[ \t]*+,[ \t]*+(?!;)|(?=[ \t]*+;)))++)[ \t]*+;"
        )
        # One parameter of a function's list (`.param .b64 p`, `.param .align 8 .b8 p[16]`) on one line, up to the
        # `,` or `)` after it, there or after blank lines (groups: words, name, dimensions): words apart as in
        # declaration_line, in the plain spellings compilers write (words and a name of name characters, each a
        # DOTWORD or WORD token whole; dimensions without blanks), which compile quicker than the terminals.
        self.param_line = (
            rf"(?a)((?:(?:\.align[ \t]++\d++|\.{_NAME})[ \t]++)++)({_NAME})((?:\[\d*+\])*+)(?=[ \t\f\r\n]*+[,)])"
            if line_patterns
            else None
        )
        # `.loc FILE LINE COLUMN` alone on its line (group: the numbers), where the next token (after blanks and
        # line comments) surely starts a statement or closes the block: the directive ends there, as token by token.
        loc = (
            rf"\.loc((?:[ \t]++{decimal}){{3}})[ \t]*+(?=[\n/])"
            r"(?=(?:[ \t\r\n]++|//[^\n]*+)*+"
            r"(?:(?!\d)[\w$@{}]|%[\w$]|\.(?!(?:section|entry|func)(?![\w$:])|\d)[\w$]))"
        )
        self.instruction_line = f"(?a){instruction}" if line_patterns else None
        self.declaration_line = f"(?a){declaration}" if line_patterns else None
        self.loc_line = f"(?a){loc}" if line_patterns else None
        # The three as the parser compiles them, as one pattern: a statement at its first token, or the next one
        # with the line ends before it, in one match (groups: those line ends, the blanks that begin the statement's
        # line, then the three's groups). The three alternatives start differently (`.loc`, another directive, a
        # name or `@`): at most one takes a line.
        self.statement_line = (
            rf"(?a)((?:[ \t]*+\n)*+)([ \t]*+)(?:{loc}|{declaration}|{instruction})" if line_patterns else None
        )

    def _late(self, text: str, at: int) -> tuple[str, str]:
        """What the master pattern's catch-all took the first character of: a string that never ends, or a bad token."""
        if self.late_match is None:
            self.late_match = re.compile(self.late).match
        found = self.late_match(text, at)
        return found.lastgroup, found[found.lastgroup]

    def tokens(self, text: str, session: LexSession) -> Iterator[Token]:
        """The tokens of `text`; comments and lexical errors go to `session`, with where the last tokens were."""
        session.text = text
        keywords, punctuation = self.keywords, self.punctuation
        comments, errors = session.comments, session.errors
        count = text.count
        rfind = text.rfind
        line = 1
        line_start = 0
        last_end = 0
        new_str = str.__new__
        data_list = self.data_list
        commented_brace = self.commented_brace
        payloads = session.payloads
        body_after_comments = False
        previous = ""
        position = 0
        while position is not None:
            matches, position = self.master.finditer(text, position), None
            for m in matches:
                kind = m.lastgroup
                if kind is None:  # the end of the text, after blanks
                    break
                value = m[kind]
                start = m.end() - len(value)
                if last_end != start:
                    newlines = count("\n", last_end, start)
                    if newlines:
                        line += newlines
                        line_start = rfind("\n", last_end, start) + 1
                last_end = start + len(value)
                if kind == "WORD" or kind == "DOTWORD":
                    kind = keywords.get(value, kind)
                elif kind == "PUNCT":
                    kind = punctuation[value]
                    if kind == "EQUAL" and (span := data_list(text, last_end)):
                        position = last_end  # the initializer is data: one token, then lexing goes on after it
                        fast = "DATA_LIST"
                elif kind == "COMMENT":
                    # blanks and CR at a line comment's end are layout, not words: the formatter owns them
                    text_ = value.rstrip() if value[1] == "/" else value.replace("\r\n", "\n")
                    comments.append(Comment(line, start - line_start + 1, text_))
                    newlines = value.count("\n")
                    if newlines:
                        line += newlines
                        line_start = rfind("\n", start, last_end) + 1
                    continue
                elif kind == "OPEN_COMMENT":  # the rest of the file is inside the comment: nothing more to lex
                    errors.append(LexError(line, start - line_start + 1, "unterminated block comment"))
                    break
                elif kind == "BAD":
                    if value in _LATE_STARTS:  # maybe a longer token: an unterminated string, a bad number
                        kind, value = self._late(text, start)
                        last_end = start + len(value)
                    errors.append(LexError(line, start - line_start + 1, _bad(kind, value, start)))
                    if len(value) > 1:
                        newlines = value.count("\n")  # (a `\` at a line's end continues the string: counted)
                        if newlines:
                            line += newlines
                            line_start = rfind("\n", start, last_end) + 1
                        position = last_end
                        break
                    continue
                elif kind == "STRING" and not value.isascii():
                    errors.append(LexError(line, start - line_start + 1, _bad(kind, value, start)))
                session.prev_line = session.last_line
                session.last_line = line
                if body_after_comments and kind == "LBRACE" and (span := section_span(text, start)):
                    body_after_comments = False  # the brace after a section name and comments
                    position, fast, last_end = start, "SECTION_BODY", start
                else:
                    body_after_comments = False
                    token = new_str(Token, value)  # Token(...) costs 4x more through its keyword handling
                    token.type = kind
                    token.value = value
                    token.start_pos = start
                    token.line = line
                    token.column = start - line_start + 1
                    if kind == "STRING" and "\n" in value:  # `\` at a line's end continues a string (as ptxas reads it)
                        line += value.count("\n")
                        line_start = rfind("\n", start, last_end) + 1
                    if previous == "SECTION":
                        if span := section_span(text, last_end):
                            position, fast = last_end, "SECTION_BODY"
                        else:
                            body_after_comments = re.compile(commented_brace).match(text, last_end) is not None
                    previous = kind
                    yield token
                    if session.resume_at:  # the parser took the rest of the line (an INSTRUCTION_LINE) itself,
                        position = session.resume_at  # and maybe the lines after it
                        newlines = count("\n", last_end, position)
                        if newlines:
                            line += newlines
                            line_start = rfind("\n", last_end, position) + 1
                        last_end = position
                        session.resume_at, previous = 0, "SEMICOLON"
                        break
                if position is not None:
                    brace = text.index("{", last_end)
                    newlines = count("\n", last_end, brace)
                    if newlines:
                        line += newlines
                        line_start = rfind("\n", last_end, brace) + 1
                    last_end = span[0]
                    value = text[brace:last_end]
                    newlines = value.count("\n")
                    if fast == "SECTION_BODY":  # (the parser needs its line count too: counted once)
                        payloads[brace] = (*span[1], newlines)
                    elif span[1] is not None:
                        payloads[brace] = span[1]
                    session.prev_line = session.last_line
                    session.last_line = line
                    token = Token(fast, value, brace, line, brace - line_start + 1)
                    if newlines:
                        line += newlines
                        line_start = rfind("\n", brace, last_end) + 1
                    position = last_end
                    yield token
                    break
        session.prev_line = session.last_line


def _longest_first(words: Iterable[str]) -> str:
    """An alternation that takes the longest of `words` (literals) that a text starts with: one branch per first
    character (the characters that are words alone and begin no longer one in a class), not one per word, which
    would compile several times slower."""
    rests: dict[str, list[str]] = {}
    for word in words:
        rests.setdefault(word[0], []).append(word[1:])
    branches, alone = [], []
    for first, after in rests.items():
        longer = [rest for rest in after if rest]
        if not longer:
            alone.append(re.escape(first))
            continue
        inner = _longest_first(longer)
        if any(len(rest) > 1 for rest in longer):  # (else a class or one character: `?` applies to all of it)
            inner = f"(?:{inner})"
        branches.append(re.escape(first) + inner + ("?" if "" in after else ""))
    if alone:
        branches.append(alone[0] if len(alone) == 1 else f"[{''.join(alone)}]")
    return "|".join(branches)
