"""The lexer's patterns are spelled to compile quickly (`re` compiles in Python at the start of every run): the
grammar's terminals in `\\d` and `\\w` read under re.ASCII, punctuation as one branch per first character, keywords
told apart without a pattern, and decimal-only integers in the whole-line patterns. Each spelling is checked here
against the plain one it replaced, on random text with fixed seeds."""

from __future__ import annotations

import random
import re

import pytest

from ptxtool.syntax import tables
from ptxtool.syntax.lexer import _FLUSH_BODY, _FLUSH_QUICK, _PLAIN_BODY, LexSession, _longest_first, _word_shaped
from ptxtool.syntax.parser import _parser

# the terminals as they were spelled with ranges only (their meaning under any flags)
_RANGES = {
    "WORD": r"(?:[A-Za-z_$][A-Za-z0-9_$]*+|%[A-Za-z0-9_$]++)(?:\.[A-Za-z0-9_$:]++)*+",
    "DOTWORD": r"\.[A-Za-z_$][A-Za-z0-9_$]*+(?:::[A-Za-z0-9_$]++)*+",
    "INT": r"(?:0[xX][0-9a-fA-F]++|0[bB][01]++|[0-9]++)[uU]?(?![0-9a-zA-Z_$.])",
    "FLOAT": r"0[fF][0-9a-fA-F]{8}(?![0-9a-zA-Z_$])|0[dD][0-9a-fA-F]{16}(?![0-9a-zA-Z_$])|[0-9]++\.[0-9]*+"
    r"(?:[eE][+-]?[0-9]++)?|\.[0-9]++(?:[eE][+-]?[0-9]++)?|[0-9]++[eE][+-]?[0-9]++",
    "SECTION_DATA": r"\.b(?:8|16|32|64)[ \t]++[0-9]++(?:[ \t]*+,[ \t]*+[0-9]++)*+(?=[ \t]*+(?:\n|\r|\Z|//|\}))"
    r"(?![ \t]*+(?://[^\n]*+)?\s*+,)",
}
# pieces of text near every terminal's edges, with characters that `\d`, `\w` and `\s` take only without re.ASCII
_PIECES = [
    *("%r1 %rd12 $L__BB0_3 _Z3f a.b %tid.x x::y .reg .b8 .b32 .b64 .debug_x % . : :: $".split()),
    *("0 7 12 0x1F 0X1f 0b101 0B2 12U 12u 1.5 .5 1e5 1E+5 1e- 1. 0f3F800000 0F3f80000x 0d4000000000000000".split()),
    *("0d40 12ab 3$ 00 0x 1e+5x 1,2 ,".split()),
    *(" ", "\t", "\n", "\r", "\f", "\v", "//c", "/*c*/", "\xa0", "\x1c", "\u2003", "\x85", "é", "٣", "ß", "_"),
]


def _random_text(rng: random.Random) -> str:
    return "".join(rng.choice(_PIECES) + rng.choice(["", "", " ", "\n", ","]) for _ in range(rng.randrange(1, 8)))


@pytest.mark.parametrize("name", sorted(_RANGES))
def test_each_terminal_under_the_lexers_reading_takes_what_its_ranges_take(name: str) -> None:
    terminal = {t.name: t.pattern for t in tables.load().terminals}[name]
    ours, plain = re.compile(terminal, re.ASCII), re.compile(_RANGES[name])
    rng = random.Random(31)
    for _ in range(20_000):
        text = _random_text(rng)
        at = rng.randrange(len(text))
        found, expected = ours.match(text, at), plain.match(text, at)
        assert (found and found.span()) == (expected and expected.span()), (name, text[at:])
    for code in range(0x3100):  # every character after a start: the classes agree on each
        for text in ("a", "%", ".", ".a", "1", "0x1", "1.5", ".b8 1", ".b8 1\n"):
            found, expected = ours.match(text + chr(code) + ","), plain.match(text + chr(code) + ",")
            assert (found and found.span()) == (expected and expected.span()), (name, text, hex(code))


def _plain_lexer_tokens(text: str) -> tuple[list, list, list] | None:
    """Tokens, errors and comments (lines and columns) as one master pattern made the plain way finds them: every
    terminal in the grammar's priority order with its ranges, a branch per punctuation mark (longest first), the
    unterminated string and the bad number in it too, without re.ASCII. None for an unterminated string that goes on
    past a line end (`"a\\` and a line end), after which the lexer counts lines from the string's end."""
    _, lexer, _, _ = _parser()
    terminals = sorted(
        (-t.priority, n, t.name, _RANGES.get(t.name, t.pattern))
        for n, t in enumerate(tables.load().terminals)
        if not t.literal and t.name != "WS"
    )
    groups = {name: f"(?P<{name}>{pattern})" for _, _, name, pattern in terminals}
    punct = "|".join(re.escape(p) for p in sorted(lexer.punctuation, key=len, reverse=True))
    first = [groups.pop("WORD"), groups.pop("COMMENT"), r"(?P<OPEN_COMMENT>/\*)", f"(?P<PUNCT>{punct})"]
    rest = [*groups.values(), r'(?P<OPEN_STRING>"(?:[^"\\\n]++|\\.)*+)', r"(?P<BAD>[0-9][0-9A-Za-z_$]*+|[^ \t\f\r\n])"]
    master = re.compile(rf"[ \t\f\r\n]*+(?:{'|'.join(first + rest)}|\Z)", re.S)
    tokens, errors, comments = [], [], []
    for m in master.finditer(text):
        kind = m.lastgroup
        if kind is None:
            break
        value, start = m[kind], m.start(kind)
        line, column = text.count("\n", 0, start) + 1, start - text.rfind("\n", 0, start)
        if kind == "OPEN_STRING" and "\n" in value:
            return None
        if kind == "COMMENT":
            comments.append((line, column))
        elif kind in ("OPEN_COMMENT", "OPEN_STRING", "BAD") or kind == "STRING" and not value.isascii():
            errors.append((line, column))
            if kind == "OPEN_COMMENT":
                break
        if kind in ("WORD", "DOTWORD", "PUNCT", "SECTION_DATA", "FLOAT", "INT", "STRING"):
            kind = lexer.keywords.get(value, lexer.punctuation.get(value, kind))
            tokens.append((kind, value, line, column))
    return tokens, errors, comments


def test_the_lexer_finds_the_tokens_one_plain_pattern_finds() -> None:
    """The master pattern in quick-to-compile spellings, with the tokens it leaves to a pattern of their own (an
    unterminated string, a bad number), against one pattern made the plain way."""
    _, lexer, _, _ = _parser()
    rng = random.Random(32)
    pieces = [*_PIECES, *(p for p in lexer.punctuation if p not in "={"), '"s"', '"s', '"s\\"', "/*", "\\"]
    pieces += [".b8 1", ".b8  1,2", ".b16\t3 ,4", ".b32 1\n, 2", ".b64 1 // c\n,2", ".b8 x", ".b8 1}", ".version 9.0"]
    pieces += [".reg .b32 \t%r<4>;", ".b8" + " \t" * 6 + "7", ".b32" + " " * 12]
    for _ in range(10_000):
        text = "".join(rng.choice(pieces) + rng.choice(["", "", " ", "\n"]) for _ in range(rng.randrange(1, 12)))
        expected = _plain_lexer_tokens(text)
        if expected is None:
            continue
        session = LexSession()
        tokens = [(t.type, t.value, t.line, t.column) for t in lexer.tokens(text, session)]
        found = tokens, [(e.line, e.column) for e in session.errors], [(c.line, c.column) for c in session.comments]
        assert found == expected, text


def test_punctuation_as_branches_per_first_character_takes_the_longest_mark() -> None:
    rng = random.Random(33)
    for _ in range(300):
        words = {"".join(rng.choice("ab<=") for _ in range(rng.randrange(1, 4))) for _ in range(rng.randrange(1, 8))}
        ours = re.compile(_longest_first(words))
        for _ in range(30):
            text = "".join(rng.choice("ab<=c") for _ in range(rng.randrange(0, 5)))
            longest = max((w for w in words if text.startswith(w)), key=len, default=None)
            found = ours.match(text)
            assert (found and found[0]) == longest, (words, text)


def test_keywords_are_told_from_punctuation_as_the_name_pattern_tells_them() -> None:
    name = re.compile(r"\.?[A-Za-z_$][A-Za-z0-9_$]*")
    literals = [t.pattern for t in tables.load().terminals if t.literal]
    rng = random.Random(34)
    samples = ["".join(rng.choice(".a_$9%-é") for _ in range(rng.randrange(0, 5))) for _ in range(3000)]
    for text in [*literals, *samples, "", ".", "..a", ".9", "a.b", "ß"]:
        assert _word_shaped(text) == (name.fullmatch(text) is not None), text


# a plain section body's lines as the flush patterns had them: each value spelled in ranges, `,` between values
_NAME = r"[A-Za-z_$][A-Za-z0-9_$]*+"
_VALUE = rf"-?[0-9]++|{_NAME}(?:\+-?[0-9]++|-{_NAME})?|\.debug_[A-Za-z0-9_]++(?:\+-?[0-9]++)?"
_LINE = rf"\.b(?:8|16|32|64) (?:[0-9,]++|(?:{_VALUE})(?:,(?:{_VALUE}))*+)|{_NAME}:"
_PLAIN = {
    "quick": rf"[ \t]*+(?:\n(?:(?:\.b8 [0-9,]++\n)++|(?:{_LINE})\n)*+[ \t\n]*+)?",
    "flush": rf"[ \t]*+(?:\n(?:(?:{_LINE})\n)*+[ \t\n]*+)?",
    "indented": rf"[ \t]*+(?:\n(?:[ \t]*+(?:{_LINE})\n)*+[ \t\n]*+)?",
}


@pytest.mark.parametrize(("ours", "name"), [(_FLUSH_QUICK, "quick"), (_FLUSH_BODY, "flush"), (_PLAIN_BODY, "indented")])
def test_plain_section_bodies_are_the_bodies_the_ranges_take(ours: str, name: str) -> None:
    values = ["0", "12", "-1", "$L__a", "n_1", ".debug_abbrev", ".debug_loc+136", "$L__a+4", "$L__b-$L__a", "1a"]
    values += ["a-", "a+", "é", "٣", "a-1", "1-2", "$L+-4", ".debug_x+-2", ".debugx", "a:b", ""]
    rng = random.Random(35)
    ours_, plain = re.compile(ours), re.compile(_PLAIN[name])
    for _ in range(20_000):
        lines = []
        for _ in range(rng.randrange(0, 6)):
            if rng.random() < 0.15:
                lines.append(rng.choice(["$L__l1", "a", "1a", "é", "%r"]) + rng.choice([":", " :", ""]))
            else:
                separator = rng.choice([",", ",", ",", ", ", " ,", ",,"])
                listed = separator.join(rng.choice(values) for _ in range(rng.randrange(0, 4)))
                lines.append(rng.choice([".b8", ".b16", ".b32", ".b64", ".b7"]) + rng.choice([" ", " ", "\t"]) + listed)
        indent = rng.choice(["", "", "\t", " "])
        body = rng.choice(["", " "]) + rng.choice(["\n", "\n", ""])
        body += "".join(indent + line + rng.choice(["\n", "\n", " \n", ",\n"]) for line in lines) + rng.choice(
            ["", "\t"]
        )
        assert (ours_.fullmatch(body) is None) == (plain.fullmatch(body) is None), body


def test_whole_line_patterns_take_decimal_integers_only_where_compilers_write_them() -> None:
    """Addresses' offsets, counts, sizes and `.loc` numbers in another spelling go token by token (the same tree:
    tests/test_syntax_fastpaths.py); an immediate operand in any spelling is taken whole."""
    _, lexer, _, _ = _parser()
    line, declaration, loc = (re.compile(p) for p in (lexer.instruction_line, lexer.declaration_line, lexer.loc_line))
    assert line.match("ld.global.u32 %r1, [%rd1+16];") and not line.match("ld.global.u32 %r1, [%rd1+0x10];")
    assert line.match("mov.u32 %r1, 0x10;") and line.match("mov.u32 %r1, 12U;")
    assert declaration.match(".reg .b32 %r<9>;") and not declaration.match(".reg .b32 %r<0x9>;")
    assert declaration.match(".local .align 4 .b8 d[256];") and not declaration.match(".local .align 4 .b8 d[0x100];")
    assert loc.match(".loc 1 2 3\n}") and not loc.match(".loc 1 0x2 3\n}")
