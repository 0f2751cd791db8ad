"""`fmt` changes layout only: same tokens and comments, idempotent, independent of the input's whitespace, the same
AST when parsed again, and the same cubin from ptxas. Run over samples/ and the shared corpus."""

from __future__ import annotations

import random
import re
from functools import cache
from pathlib import Path

import pytest
from conftest import CORPUS, SAMPLES, ptx_files

from ptxtool.syntax import ast, format_module, parse

FILES = [pytest.param(p, id=f"samples/{p.name}") for p in ptx_files(SAMPLES)] + [
    pytest.param(p, id=f"corpus/{p.relative_to(CORPUS)}") for p in ptx_files(CORPUS)
]

# Strings and comments first (they may hold anything); words glue dots and `::`.
_LEX = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/|(?:[A-Za-z0-9_$%.]|::)+|\S', re.S)
_SPACED = set(",[]{}+")  # the formatter owns the spacing around these


def lex(text: str) -> tuple[list[str], list[str]]:
    """The tokens of PTX text and its comments (blanks at the end of a `//` comment are layout), in source order."""
    tokens, comments = [], []
    for tok in _LEX.findall(text.replace("\r\n", "\n")):
        if tok.startswith("//"):
            comments.append(tok.rstrip())
        elif tok.startswith("/*"):
            comments.append(tok)
        else:
            tokens.append(tok)
    return tokens, comments


def shuffle_whitespace(text: str, seed: int) -> str:
    """The same tokens with new whitespace: other blanks (also at line ends, after `//` comments), extra blank
    lines, CRLF, spaces added or dropped around `, [ ] { } +`. Line breaks stay line breaks."""
    rng = random.Random(seed)
    out: list[str] = []
    end = 0
    previous = ""
    for m in _LEX.finditer(text):
        gap, tok = text[end : m.start()], m.group()
        if "\n" in gap:
            gap = rng.choice(["\n", "\n\n", "\n\t", " \n  \n ", "\t\n\t\t", "\r\n"])
        elif gap or previous in _SPACED or tok in _SPACED:
            choices = [" ", "\t", "  ", " \t "]
            if previous in _SPACED or tok in _SPACED:
                choices.append("")
            gap = rng.choice(choices)
        out.append(gap + tok)
        previous, end = tok, m.end()
    return "".join(out) + "\n"


@cache
def formatted(path: Path) -> tuple[str, str]:
    text = path.read_text(encoding="utf-8")
    return text, format_module(parse(text))


@pytest.mark.parametrize("path", FILES)
def test_same_tokens_and_comments(path: Path) -> None:
    text, out = formatted(path)
    before, after = lex(text), lex(out)
    assert after[0] == before[0], "fmt changed the tokens"
    assert after[1] == before[1], "fmt lost, changed or reordered a comment"


@pytest.mark.parametrize("path", FILES)
def test_idempotent(path: Path) -> None:
    _, out = formatted(path)
    assert format_module(parse(out)) == out


@pytest.mark.parametrize("path", FILES)
def test_output_is_tidy(path: Path) -> None:
    """No blank at a line's end, at most one blank line in a row, LF only, one newline at the end."""
    _, out = formatted(path)
    assert "\r" not in out and "\n\n\n" not in out
    assert out.endswith("\n") and not out.endswith("\n\n") and not out.startswith("\n")
    assert [line for line in out.split("\n") if line != line.rstrip()] == []


@pytest.mark.parametrize("path", FILES)
def test_reparse_gives_the_same_tree(path: Path) -> None:
    text, out = formatted(path)
    assert parse(out) == parse(text)


@pytest.mark.parametrize("path", FILES)
def test_layout_does_not_depend_on_input_whitespace(path: Path) -> None:
    text, out = formatted(path)
    for seed in (1, 2):
        shuffled = shuffle_whitespace(text, seed)
        assert shuffled != text
        assert lex(shuffled) == lex(text)
        assert parse(shuffled) == parse(text), "positions or whitespace leaked into AST equality"
        assert format_module(parse(shuffled)) == out


# ---------------------------------------------------------------- same program from ptxas


def elf_sections(blob: bytes) -> dict[str, bytes]:
    """Section name -> contents of a little-endian ELF64 file (NOBITS sections are empty)."""
    u = lambda at, n: int.from_bytes(blob[at : at + n], "little")  # noqa: E731
    shoff, shentsize, shnum, shstrndx = u(0x28, 8), u(0x3A, 2), u(0x3C, 2), u(0x3E, 2)
    heads = [shoff + i * shentsize for i in range(shnum)]
    names_at = u(heads[shstrndx] + 0x18, 8)
    sections = {}
    for h in heads:
        start = names_at + u(h, 4)
        name = blob[start : blob.index(b"\0", start)].decode()
        offset, size = u(h + 0x18, 8), u(h + 0x20, 8)
        sections[name] = b"" if u(h + 4, 4) == 8 else blob[offset : offset + size]
    return sections


_LINE_NUMBERED = re.compile(rb"^(\$__\w+?__)\d+$")  # ptxas names function-scoped globals after their PTX line


def same_program(a: bytes, b: bytes) -> bool:
    """Identical cubins, or identical outside debug sections, with symbols compared by (line-free) name."""
    if a == b:
        return True
    sa, sb = elf_sections(a), elf_sections(b)

    def code(s: dict[str, bytes]) -> dict[str, bytes]:
        return {k: v for k, v in s.items() if "debug" not in k and k not in (".symtab", ".strtab")}

    def symbols(s: dict[str, bytes]) -> list[tuple[bytes, bytes]]:
        table, names = s.get(".symtab", b""), s.get(".strtab", b"")
        out = []
        for i in range(0, len(table), 24):
            start = int.from_bytes(table[i : i + 4], "little")
            out.append((_LINE_NUMBERED.sub(rb"\1N", names[start : names.index(b"\0", start)]), table[i + 4 : i + 24]))
        return out

    return code(sa) == code(sb) and symbols(sa) == symbols(sb)


@pytest.mark.parametrize("path", FILES)
def test_same_cubin(path: Path, assemble) -> None:
    text, out = formatted(path)
    original, messages = assemble(text)
    if original is None:
        pytest.skip(f"ptxas rejects the original: {messages.strip().splitlines()[:1]}")
    cubin, messages = assemble(out)
    assert cubin is not None, f"ptxas rejects the formatted file: {messages}"
    assert same_program(original, cubin)


def test_hand_written_samples_assemble(assemble) -> None:
    """The samples written for these tests are real PTX: the wheel's ptxas accepts every one."""
    for name in ("constructs.ptx", "comments.ptx", "debug_sections.ptx"):
        cubin, messages = assemble((SAMPLES / name).read_text())
        assert cubin is not None, f"{name}: {messages}"


def test_same_program_sees_a_changed_instruction(assemble) -> None:
    """The cubin comparison can fail: one changed immediate gives a different program."""
    text = (SAMPLES / "rare_syntax.ptx").read_text()
    a, _ = assemble(text)
    b, _ = assemble(text.replace("shl.b32 %r2, %r1, 1;", "shl.b32 %r2, %r1, 2;"))
    assert a is not None and b is not None and not same_program(a, b)


def test_shuffle_really_moves_whitespace() -> None:
    text = "\tld.global.u32 %r1, [%rd2+4];\n\tst.global.v2.u32 [%rd2], {%r1, %r2};\n"
    variants = {shuffle_whitespace(text, seed) for seed in range(20)}
    assert len(variants) > 10
    assert any("[ %rd2" in v or "%rd2 +" in v for v in variants)  # blanks added inside brackets
    assert any(re.search(r",%r[12]", v) for v in variants)  # and removed after commas
    assert any("\n\n" in v for v in variants)  # blank lines added


# ---------------------------------------------------------------- comments in odd places

_OPEN = set(",;[]{}()")


def insert_comments(text: str, seed: int, rate: float = 0.03) -> str:
    """The text with `/* cN */` and `// cN` comments put between random tokens (where a blank may stand)."""
    rng = random.Random(seed)
    out: list[str] = []
    end, n, previous = 0, 0, ""
    for m in _LEX.finditer(text):
        gap, tok = text[end : m.start()], m.group()
        out.append(gap)
        room = gap or previous in _OPEN or tok in _OPEN
        if room and previous and not tok.startswith(("//", "/*")) and rng.random() < rate:
            out.append(f"/* c{n} */ " if rng.random() < 0.5 else f"// c{n}\n")
            n += 1
        out.append(tok)
        previous, end = tok, m.end()
    return "".join(out) + text[end:]


COMMENTED = [(name, seed) for name in ("rare_syntax.ptx", "constructs.ptx", "debug_sections.ptx") for seed in range(8)]


@pytest.mark.parametrize(("name", "seed"), COMMENTED, ids=[f"{n}-{s}" for n, s in COMMENTED])
def test_comments_anywhere_are_kept_in_order(name: str, seed: int) -> None:
    original = (SAMPLES / name).read_text()
    text = insert_comments(original, seed)
    assert len(lex(text)[1]) > len(lex(original)[1])
    out = format_module(parse(text))
    assert lex(out) == lex(text)


def owners(module: ast.Module) -> list[tuple[str, tuple[str, ...]]]:
    """Every node in source order with the comments it owns, above it or on its line alike (a statement's earlier
    `//` comments cannot share its line with the last one, so fmt prints them above it: the owner stays)."""
    out = [
        (type(n).__name__, n.leading + n.trailing + (n.footer if isinstance(n, ast.Block) else ()))
        if isinstance(n, ast.Owner)
        else ("InitList" if isinstance(n, ast.InitList) else type(n).__name__, ())  # a Literals is an InitList
        for n in ast.walk(module)
    ]
    return [*out, ("footer", module.footer)]


def test_comments_anywhere_keep_their_owner_and_a_fixed_layout() -> None:
    for name, seed in COMMENTED:
        text = insert_comments((SAMPLES / name).read_text(), seed)
        out = format_module(parse(text))
        assert format_module(parse(out)) == out, f"{name} seed {seed}: not idempotent"
        assert owners(parse(out)) == owners(parse(text)), f"{name} seed {seed}: a comment changed owner"


def test_a_statements_last_comment_stays_on_its_line() -> None:
    text = (
        ".version 9.0\n.target sm_90\n.address_size 64\n.entry k()\n{\n\t.reg .b32 %r<4>;\n"
        "\tadd.s32 %r1, // first\n\t\t%r2, 1; // ptxtool: ignore[X]\n\tmov.u32 %r3, 2;\n\tret;\n}\n"
    )
    out = format_module(parse(text))
    assert "\t// first\n\tadd.s32 %r1, %r2, 1; // ptxtool: ignore[X]\n\tmov.u32 %r3, 2;\n" in out
