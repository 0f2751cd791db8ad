"""Comment placement: an own-line comment belongs to the statement below it, a same-line comment stays on its
statement's line (suppressions rely on it), blocks and the module keep their footers, `/* */` spans lines."""

from __future__ import annotations

from conftest import SAMPLES

from ptxtool.syntax import ast, format_module, parse

HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"


def kernel(body: str) -> str:
    return HEADER + ".visible .entry k()\n{\n\t.reg .b32 %r<4>;\n" + body + "\tret;\n}\n"


def statements(module: ast.Module) -> list:
    (function,) = module.functions
    return list(function.body.statements)


def by_mnemonic(module: ast.Module, mnemonic: str) -> ast.Instruction:
    (function,) = module.functions
    return next(i for i in ast.instructions(function.body) if i.mnemonic == mnemonic)


def test_own_line_comment_leads_the_statement_below() -> None:
    module = parse(kernel("\t// why\n\t// and why not\n\tmov.u32 %r1, 1;\n"))
    mov = by_mnemonic(module, "mov.u32")
    assert mov.leading == ("// why", "// and why not") and mov.trailing == ()
    assert "\t// why\n\t// and why not\n\tmov.u32 %r1, 1;\n" in format_module(module)


def test_same_line_comment_trails_its_statement() -> None:
    module = parse(kernel("\tmov.u32 %r1, 1; // one\n\tmov.u32 %r2, 2;\n"))
    assert by_mnemonic(module, "mov.u32").trailing == ("// one",)
    assert "\tmov.u32 %r1, 1; // one\n\tmov.u32 %r2, 2;\n" in format_module(module)


def test_suppression_stays_on_its_instruction_line() -> None:
    source = kernel("\tadd.s32 %r1,\n\t\t%r2, 1;   // ptxtool: ignore[DEAD-STORE]\n\tmov.u32 %r2, 2;\n")
    out = format_module(parse(source))
    assert "\tadd.s32 %r1, %r2, 1; // ptxtool: ignore[DEAD-STORE]\n" in out
    assert parse(out) == parse(source)


def test_several_comments_on_one_line_stay_there() -> None:
    source = kernel("\tmov.u32 %r1, /* why */ 1; // ptxtool: ignore[X]\n\tmov.u32 %r2, 2;\n")
    out = format_module(parse(source))
    assert "\tmov.u32 %r1, 1; /* why */ // ptxtool: ignore[X]\n" in out
    assert parse(out) == parse(source)


def test_block_footer_and_nested_scope_comments() -> None:
    body = (
        "\t{\n\t\t.reg .b32 %x;\n\t\tmov.u32 %x, 1;\n\t\t// inner footer\n\t} // after inner brace\n\t// outer footer\n"
    )
    source = HEADER + ".visible .entry k()\n{\n" + body + "}\n"
    module = parse(source)
    (scope,) = statements(module)
    assert scope.footer == ("// inner footer",) and scope.trailing == ("// after inner brace",)
    assert module.functions[0].body.footer == ("// outer footer",)
    out = format_module(module)
    assert "\t\t// inner footer\n\t} // after inner brace\n\t// outer footer\n}\n" in out


def test_module_header_and_footer() -> None:
    module = parse("// header\n" + HEADER + "\n// footer one\n/* footer\n   two */\n")
    assert module.items[0].leading == ("// header",)
    assert module.footer == ("// footer one", "/* footer\n   two */")
    assert format_module(module).endswith(".address_size 64\n\n// footer one\n/* footer\n   two */\n")


def test_multi_line_block_comment_is_kept_verbatim() -> None:
    comment = "/* first line\n     second line, indented\n   */"
    module = parse(kernel(f"\t{comment}\n\tmov.u32 %r1, 1;\n"))
    assert by_mnemonic(module, "mov.u32").leading == (comment,)
    assert f"\t{comment}\n\tmov.u32 %r1, 1;\n" in format_module(module)


def test_comment_inside_a_statement_stays_with_it() -> None:
    module = parse(kernel("\tadd.s32 %r1, /* a */ %r2,\n\t\t1; // b\n\tmov.u32 %r2, 2;\n"))
    assert by_mnemonic(module, "add.s32").trailing == ("/* a */", "// b")
    assert by_mnemonic(module, "mov.u32").leading == ()


def test_comments_sample_places_each_comment() -> None:
    module = parse((SAMPLES / "comments.ptx").read_text())
    version, target = module.items[:2]
    assert version.leading[0].startswith("// Hand-written")
    assert target.trailing == ("// trailing comment on a directive",)
    (function,) = module.functions
    assert function.leading == ("// Leading comment of a kernel.",)
    (maxntid,) = [d for d in function.directives if d.word == ".maxntid"]
    assert maxntid.trailing == ("// after a performance directive",)  # it stays on the directive's line
    assert function.body.footer == ("// footer comment of the body", "/* and a block one */")
    assert function.body.trailing == ("// after the closing brace",)
    label = next(s for s in function.body.statements if isinstance(s, ast.Label))
    assert label.trailing == ("// after a label",)
    bra = by_mnemonic(module, "bra")
    assert bra.leading == ("/* block comment\n\t   spanning lines */",)
    assert module.footer == ("// Footer comment of the module.", "/* And a block footer. */")
    suppressed = [i for i in ast.instructions(function.body) if any("ptxtool: ignore" in c for c in i.trailing)]
    assert [i.mnemonic for i in suppressed] == ["ld.param.u32", "mov.u32"]
    out = format_module(module)
    assert "\tld.param.u32 %r1, [n]; // ptxtool: ignore[UNUSED]\n" in out
    assert "\t\tmov.u32 %inner, 1; // ptxtool: ignore[DEAD-STORE]\n" in out


def test_line_comment_trailing_blanks_are_not_layout() -> None:
    plain = kernel("\tmov.u32 %r1, 1; // c\n")
    assert format_module(parse(plain.replace("// c", "// c  \t"))) == format_module(parse(plain))
    assert format_module(parse(plain.replace("\n", "\r\n"))) == format_module(parse(plain))


def test_comments_among_long_runs_of_plain_lines_go_to_their_statements() -> None:
    """Statements that end before the next comment are passed over in one step: each comment still reaches its own
    statement, in the outer block and in a nested one, and the untouched statements stay the parsed nodes."""
    plain = "".join(f"\tadd.u32 %r{i % 3 + 1}, %r1, {i};\n" for i in range(100))
    body = plain + "\t// lead\n\tmov.u32 %r1, 7; // trail\n" + plain + "\t{\n" + plain + "\tmov.u32 %r2, 8; // inner\n"
    body += plain + "\t}\n" + plain + "\t/* end */\n"
    module = parse(kernel(body))
    (function,) = module.functions
    seven = next(
        i for i in ast.instructions(function.body) if i.opcode == "mov" and i.operands[-1] == ast.Immediate("7")
    )
    eight = next(
        i for i in ast.instructions(function.body) if i.opcode == "mov" and i.operands[-1] == ast.Immediate("8")
    )
    assert seven.leading == ("// lead",) and seven.trailing == ("// trail",)
    assert eight.leading == () and eight.trailing == ("// inner",)
    ret = function.body.statements[-1]
    assert ret.leading == ("/* end */",)
    commented = [s for s in ast.walk(module) if getattr(s, "leading", ()) or getattr(s, "trailing", ())]
    assert commented == [seven, eight, ret]
    bare = parse(kernel(body.replace("// lead", "").replace("// trail", "").replace("// inner", "")))

    def shape(body: ast.Block) -> list:
        return [(i.line, i.column, i.mnemonic, i.operands) for i in ast.instructions(body)]

    assert shape(function.body) == shape(bare.functions[0].body)
