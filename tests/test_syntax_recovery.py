"""Error recovery: one mistake gives one error at its place, never a cascade over the lines after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxtool.syntax import ParseError, parse

DATA = Path(__file__).parent / "data"


def _issues(text: str) -> list[tuple[int, int]]:
    with pytest.raises(ParseError) as caught:
        parse(text)
    return [(i.line, i.column) for i in caught.value.issues]


def test_each_broken_statement_gives_exactly_one_error() -> None:
    # a broken function header (its body is skipped whole), a broken vector operand (its `}` must not close the
    # body), a missing comma, a missing operand inside a nested scope, an unclosed `[`, a broken global
    assert _issues((DATA / "recovery.ptx").read_text()) == [(5, 42), (16, 15), (17, 14), (19, 21), (21, 19), (24, 18)]


def test_a_missing_semicolon_is_reported_on_the_line_that_lacks_it() -> None:
    text = (
        ".version 9.0\n.target sm_90\n.address_size 64\n.entry k()\n{\n\t.reg .b32 %r<2>;\n"
        "\tmov.u32 %r1, 1\n\tmov.u32 %r1, 2;\n\tret;\n}\n"
    )
    with pytest.raises(ParseError) as caught:
        parse(text)
    (issue,) = caught.value.issues
    assert (issue.line, issue.column) == (7, 16)
    assert issue.message.startswith("missing ';' at the end of the line")


def test_a_closing_brace_after_a_broken_statement_still_closes_its_block() -> None:
    text = ".version 9.0\n.target sm_90\n.address_size 64\n.entry k()\n{\n\tmov.u32 %r1,\n}\n.entry j()\n{\n\tret;\n}\n"
    assert _issues(text) == [(7, 1)]


def test_errors_in_several_functions_are_all_reported() -> None:
    body = "{\n\tmov.u32 %r1 2;\n\tret;\n}\n"
    text = ".version 9.0\n.target sm_90\n.address_size 64\n" + "".join(f".entry k{i}()\n{body}" for i in range(3))
    assert [line for line, _ in _issues(text)] == [6, 11, 16]


def test_each_garbage_line_at_module_level_is_reported() -> None:
    text = ".version 9.0\n.target sm_90\nfoo;\nbar;\n.global .u32 x;\nbaz baz;\n"
    with pytest.raises(ParseError) as caught:
        parse(text)
    assert [(i.line, i.column) for i in caught.value.issues] == [(3, 1), (4, 1), (6, 1)]
    assert "expected a directive, declaration or function" in caught.value.issues[0].message


def test_a_byte_order_mark_is_named() -> None:
    with pytest.raises(ParseError) as caught:
        parse("\ufeff.version 9.0\n.target sm_90\n")
    (issue,) = caught.value.issues
    assert (issue.line, issue.column) == (1, 1) and "byte-order mark" in issue.message
