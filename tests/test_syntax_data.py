"""The compact Data node: a debug section's plain data body parsed as one string, not a node per line."""

from __future__ import annotations

import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from ptxtool.analysis.legality import _constructs
from ptxtool.syntax import ParseError, ast, format_module, parse

HEAD = ".version 9.0\n.target sm_80\n.address_size 64\n"
# odd but valid layout: tabs, blanks around commas and before a colon, two statements on one line, blank lines
ODD = (
    HEAD + ".section .debug_str\n{\n$L__str0 :\n.b8\t116 ,104,  101\n\n\t.b8 0 .b32 .debug_abbrev\n"
    ".b64 $L__str0\n.b16 7,\t8\n}\n"
)
CANONICAL_BODY = "{\n$L__str0:\n\t.b8 116, 104, 101\n\t.b8 0\n\t.b32 .debug_abbrev\n\t.b64 $L__str0\n\t.b16 7, 8\n}\n"


def _section(module: ast.Module) -> ast.Section:
    (section,) = [i for i in module.items if isinstance(i, ast.Section)]
    return section


def _slow(text: str) -> str:
    """The same text with a comment before the closing brace: the body takes the parser's ordinary path."""
    return text.replace("\n}\n", " /* slow */\n}\n")


def _rows(statements) -> list[tuple]:
    return [(type(s).__name__, s.line, s.column, getattr(s, "word", ""), getattr(s, "args", ())) for s in statements]


def test_a_plain_data_body_is_one_data_node_standing_for_the_same_statements() -> None:
    fast = _section(parse(ODD)).body
    slow = _section(parse(_slow(ODD))).body
    assert [type(s) for s in fast.statements] == [ast.Data]
    assert ast.Data not in {type(s) for s in slow.statements}
    # the same nodes, values and positions as the ordinary path builds (the comment sits after the last line)
    expanded = tuple(ast.expanded(fast.statements))
    assert _rows(expanded) == _rows(slow.statements)
    assert expanded == tuple(replace(s, trailing=()) for s in slow.statements)
    assert [n.text for n in ast.walk(fast) if isinstance(n, ast.Name)] == [".debug_abbrev", "$L__str0"]


def test_fmt_of_a_data_body_is_canonical_idempotent_and_the_ordinary_paths() -> None:
    out = format_module(parse(ODD))
    assert out.endswith(".section .debug_str\n" + CANONICAL_BODY)
    assert format_module(parse(out)) == out
    assert parse(out) == parse(ODD)
    assert format_module(parse(_slow(ODD))) == out.replace("\t.b16 7, 8\n", "\t.b16 7, 8 /* slow */\n")


def test_a_data_node_made_by_a_pass_prints_and_expands() -> None:
    data = ast.Data("$a:\n.b8 1, 2\n.b32 $a")
    section = ast.Section(".debug_x", ast.Block((data,)))
    out = format_module(ast.Module((*parse(HEAD).items, section)))
    assert out.endswith(".section .debug_x\n{\n$a:\n\t.b8 1, 2\n\t.b32 $a\n}\n")
    assert [type(s).__name__ for s in data.statements] == ["Label", "Directive", "Directive"]
    assert parse(out) == ast.Module((*parse(HEAD).items, section))


def test_comments_around_a_data_body_keep_their_places(ptxas: str, tmp_path: Path) -> None:
    text = HEAD + ".section /* a */ .debug_str // b\n{\n.b8 1\n$L__x:\n.b8 2 } // c\n"
    module = parse(text)
    section = _section(module)
    assert [type(s) for s in section.body.statements] == [ast.Data]
    out = format_module(module)
    assert "/* a */" in out and "// b" in out and "// c" in out
    assert format_module(parse(out)) == out
    path = tmp_path / "t.ptx"
    path.write_text(out)
    assert subprocess.run([ptxas, "-arch=sm_80", str(path), "-o", str(tmp_path / "t.cubin")]).returncode == 0


def test_labels_in_a_data_body_reach_the_version_check() -> None:
    found = [c for c in _constructs(parse(ODD)) if c[0] == "section_label"]
    assert found == [("section_label", 6, 1)]


def test_a_large_debug_section_parses_into_constant_nodes_in_linear_time() -> None:
    def text(lines: int) -> str:
        rows = [f"$L__s{k}:\n.b8 {k % 256}, {k % 7}" if k % 50 == 0 else f".b8 {k % 256}" for k in range(lines)]
        return HEAD + ".section .debug_str\n{\n" + "\n".join(rows) + "\n}\n"

    def seconds(source: str) -> float:
        start = time.perf_counter()
        format_module(parse(source))
        return time.perf_counter() - start

    small, large = text(20_000), text(200_000)
    seconds(small)  # the tables load once
    assert [type(s) for s in _section(parse(large)).body.statements] == [ast.Data]
    assert seconds(large) < 10 * max(seconds(small), 0.01) + 1.0  # ten times the lines: about ten times the time
    out = format_module(parse(large))
    assert out.count("\n\t.b8 ") == 200_000 and format_module(parse(out)) == out


def test_single_blanks_around_commas_print_canonically() -> None:
    text = HEAD + ".section .debug_x\n{\n.b8 1 , 2,3 ,4\n.b16 5, 6\n}\n"
    out = format_module(parse(text))
    assert out.endswith("{\n\t.b8 1, 2, 3, 4\n\t.b16 5, 6\n}\n")
    assert format_module(parse(out)) == out


def test_a_numeric_initializer_wraps_every_element_in_order_at_every_length() -> None:
    for n in (1, 15, 16, 17, 31, 32, 33, 48, 49):
        values = [str(k * 7 % 300) for k in range(n)]
        listed = " ,\t".join(values)  # odd blanks: the tab takes the general path
        text = HEAD + f".global .b16 a[{n}] = {{{listed}}};\n"
        out = format_module(parse(text))
        body = out[out.index("{") + 1 : out.index("}")]
        assert body.replace(",", " ").split() == values
        rows = [row for row in body.split("\n") if row]
        assert [len(row.split(",")) for row in rows] == (
            [n] if n <= 16 else [17] * (len(rows) - 1) + [n - 16 * (len(rows) - 1)]
        )
        assert format_module(parse(out)) == out
        declarator = parse(text).items[-1].declarators[0]
        assert [i.text for i in declarator.init.items] == values


def test_offsets_differences_and_negative_numbers_stay_on_the_fast_path() -> None:
    """nvcc -G writes `.b32 .debug_loc+136` in .debug_info and `a-b` between labels: the whole body is still one
    Data, standing for the SymbolOffset, Difference and negative literal nodes the ordinary path builds."""
    text = (
        HEAD + ".section .debug_info\n{\n$L__a:\n.b32 .debug_loc+136\n.b64 $L__a+-4, $L__b-$L__a\n.b8 -1, 2\n"
        "$L__b:\n.b64 $L__a+8\n}\n"
    )
    fast = _section(parse(text)).body
    slow = _section(parse(_slow(text))).body
    assert [type(s) for s in fast.statements] == [ast.Data]
    expanded = tuple(ast.expanded(fast.statements))
    assert _rows(expanded) == _rows(slow.statements)
    assert expanded == tuple(replace(s, trailing=()) for s in slow.statements)
    kinds = {type(n) for n in ast.walk(fast)}
    assert {ast.SymbolOffset, ast.Difference} <= kinds
    out = format_module(parse(text))
    assert "\t.b64 $L__a+-4, $L__b-$L__a\n\t.b8 -1, 2\n" in out and format_module(parse(out)) == out
    # blanks around `+` and `-` (the grammar allows them): the same tree and output
    spaced = text.replace(".debug_loc+136", ".debug_loc + 136").replace("$L__b-$L__a", "$L__b\t- $L__a")
    spaced = spaced.replace("-1, 2", "- 1, 2").replace("$L__a+-4", "$L__a +- 4")
    assert [type(s) for s in _section(parse(spaced)).body.statements] == [ast.Data]
    assert parse(spaced) == parse(text) and format_module(parse(spaced)) == out
    assert tuple(ast.expanded(_section(parse(spaced)).body.statements)) == expanded


def test_random_data_bodies_build_the_tree_the_parser_builds() -> None:
    """Seeded: bodies of valid values with random blanks; the fast path and the ordinary path (forced by a comment)
    stand for the same statements and print the same text."""
    import random

    rng = random.Random(20261201)
    values = ["7", "-1", "- 2", "$L__a", "$L__a+4", "$L__a + -4", "$L__b-$L__a", "$L__b\t- $L__a", ".debug_loc+136"]
    for _ in range(200):
        rows = ["$L__a" + rng.choice([":", " :", "\t:"])]
        for _ in range(rng.randrange(1, 8)):
            picked = [rng.choice(values) for _ in range(rng.randrange(1, 5))]
            word = rng.choice([".b8", ".b16", ".b32", ".b64"])
            rows.append(word + rng.choice([" ", "\t", "  "]) + rng.choice([",", ", ", " ,\t"]).join(picked))
        rows.insert(rng.randrange(1, len(rows) + 1), "$L__b:")
        text = HEAD + ".section .debug_info\n{\n" + rng.choice(["\n", "\n\n", " ", "\n\t"]).join(rows) + "\n}\n"
        fast, slow = _section(parse(text)).body, _section(parse(_slow(text))).body
        assert [type(s) for s in fast.statements] == [ast.Data], text
        assert tuple(ast.expanded(fast.statements)) == tuple(replace(s, trailing=()) for s in slow.statements), text
        out = format_module(parse(text))
        assert format_module(parse(_slow(text))).replace(" /* slow */", "") == out, text
        assert format_module(parse(out)) == out and parse(out) == parse(text), text


def _debug_file(rows: int, bad: dict[int, str]) -> tuple[str, int]:
    """A `-G`-sized debug section (flush left, as nvcc writes it) with some of its rows replaced; and the line of the
    first row."""
    lines = [f"$L__x{k}:" if k % 50 == 0 else f".b8 {k % 256},{k % 7}" for k in range(rows)]
    for k, text in bad.items():
        lines[k] = text
    head = HEAD + "\t.section\t.debug_info\n\t{\n"
    return head + "\n".join(lines) + "\n\t}\n", head.count("\n") + 1


def test_errors_inside_a_large_data_body_are_reported_at_their_line_and_column(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ptxtool.cli import main

    for row, bad, column, found in [
        (1_234, ".b8 7 @", 7, "'@'"),
        (2_500, ".b8 1,,2", 7, "','"),
        (10, "x.b8 1", 6, "integer '1'"),
    ]:
        text, first = _debug_file(3_000, {row: bad})
        path = tmp_path / "debug.ptx"
        path.write_text(text, encoding="utf-8")
        done = CliRunner().invoke(main, ["fmt", str(path), "-o", str(tmp_path / "out.ptx")])
        assert done.exit_code == 2 and "Traceback" not in done.output
        assert f"{path}:{first + row}:{column}: error: unexpected {found}" in done.output, done.output
        assert not (tmp_path / "out.ptx").exists()


def test_an_unclosed_data_body_names_its_brace() -> None:
    text, first = _debug_file(3_000, {})
    text = text.removesuffix("\t}\n")
    issues = pytest.raises(ParseError, parse, text).value.issues
    assert [(i.line, i.message) for i in issues] == [
        (first + 2_999, f"end of file inside the '{{' opened at line {first - 1}: expected '}}'")
    ]
