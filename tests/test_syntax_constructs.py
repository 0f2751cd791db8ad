"""Every construct issue 2 lists parses into the node it should, from samples/constructs.ptx (which ptxas accepts)
and small modules for the forms one file cannot hold (targets, unknown opcodes)."""

from __future__ import annotations

from functools import cache

import pytest
from conftest import SAMPLES

from ptxtool.syntax import ParseError, ast, format_module, parse


@cache
def constructs() -> ast.Module:
    return parse((SAMPLES / "constructs.ptx").read_text())


def declaration(name: str) -> ast.Declaration:
    for item in constructs().items:
        if isinstance(item, ast.Declaration) and item.declarators[0].name == name:
            return item
    raise KeyError(name)


def function(name: str) -> ast.Function:
    return next(f for f in constructs().functions if f.name == name)


def instruction(function_name: str, mnemonic: str, index: int = 0) -> ast.Instruction:
    found = [i for i in ast.instructions(function(function_name).body) if i.mnemonic == mnemonic]
    return found[index]


def defining(register: str) -> ast.Instruction:
    """The first instruction of kernel `everything` whose first operand is `register`."""
    body = function("everything").body
    return next(i for i in ast.instructions(body) if i.operands and i.operands[0] == ast.Name(register))


def words(d: ast.Declaration | ast.Param) -> list[str]:
    return [a.word for a in d.attributes]


def test_module_directives() -> None:
    m = constructs()
    assert m.version == "9.0" and m.targets == ("sm_90a", "texmode_independent")
    file1 = m.items[3]
    assert file1.word == ".file"
    assert file1.args == (
        (ast.Immediate("1"), ast.String('"/src/constructs.cu"')),
        (ast.Immediate("1700000000"),),
        (ast.Immediate("4321"),),
    )
    alias = next(i for i in m.items if isinstance(i, ast.Directive) and i.word == ".alias")
    assert alias.args == ((ast.Name("twice_alias"),), (ast.Name("twice"),))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("g_visible", [".visible", ".global", ".align", ".u32"]),
        ("g_weak", [".weak", ".global", ".align", ".u32"]),
        ("g_common", [".common", ".global", ".align", ".u32"]),
        ("g_extern", [".extern", ".global", ".align", ".u32"]),
        ("g_managed", [".global", ".attribute", ".align", ".u64"]),
        ("c_doubles", [".visible", ".const", ".align", ".f64"]),
        ("s_tile", [".shared", ".align", ".b8"]),
        ("s_dynamic", [".extern", ".shared", ".align", ".b8"]),
        ("g_vectors", [".global", ".align", ".v4", ".u32"]),
        ("t_ref", [".global", ".texref"]),
        ("s_ref", [".global", ".samplerref"]),
        ("su_ref", [".global", ".surfref"]),
    ],
)
def test_variables_keep_state_space_linkage_and_type(name: str, expected: list[str]) -> None:
    assert words(declaration(name)) == expected


def test_managed_attribute_and_alignment() -> None:
    managed = declaration("g_managed").attributes
    assert managed[1] == ast.Attribute(".attribute", args=(ast.Name(".managed"),))
    assert managed[2] == ast.Attribute(".align", number=ast.Immediate("8"))


def test_arrays_and_nested_initializers() -> None:
    (matrix,) = declaration("g_matrix").declarators
    assert matrix.dims == (ast.Immediate("2"), ast.Immediate("2"))
    assert isinstance(matrix.init, ast.InitList) and all(isinstance(r, ast.InitList) for r in matrix.init.items)
    (unsized,) = declaration("s_dynamic").declarators
    assert unsized.dims == (None,) and unsized.init is None
    (sized_by_init,) = declaration("g_unsized").declarators
    assert sized_by_init.dims == (None,) and len(sized_by_init.init.items) == 3
    (vectors,) = declaration("g_vectors").declarators
    assert [i.text for i in vectors.init.items[1].items] == ["0x5", "06", "0b111", "8U"]


def test_address_initializers() -> None:
    pointers = declaration("g_pointers").declarators[0].init.items
    assert pointers == (
        ast.Generic(ast.Name("g_matrix")),
        ast.SymbolOffset(ast.Name("g_unsized"), ast.Immediate("4")),
        ast.Name("g_visible"),
    )
    masks = declaration("g_masks").declarators[0].init.items
    assert [type(x) for x in masks] == [ast.Mask, ast.Mask] and masks[1].mask == ast.Immediate("0xFF00")
    offsets = declaration("g_offsets").declarators[0].init.items
    assert isinstance(offsets[0], ast.Generic) and offsets[0].offset == ast.Immediate("8")
    sampler = declaration("s_init").declarators[0].init.items
    assert [(f.name, f.value) for f in sampler][:2] == [
        ("addr_mode_0", ast.Name("wrap")),
        ("filter_mode", ast.Name("linear")),
    ]


def test_constant_expressions_in_initializers_and_operands() -> None:
    sized = declaration("g_sized").declarators[0].init.items
    assert sized[0] == ast.Binary((ast.Immediate("1"), ast.Immediate("4")), ("<<",))
    assert isinstance(sized[2], ast.Unary) and sized[2].op == "-"
    product = defining("%r34").operands[1]
    one_plus_two = ast.Paren(ast.Binary((ast.Immediate("1"), ast.Immediate("2")), ("+",)))
    assert product == ast.Binary((one_plus_two, ast.Immediate("4")), ("*",))
    assert product.value == 12
    assert isinstance(defining("%r36").operands[1], ast.Conditional)


def test_parameters_and_every_performance_directive() -> None:
    everything = function("everything")
    assert everything.is_kernel and everything.returns is None
    out, sel = everything.params
    assert words(out) == [".param", ".u64", ".ptr", ".global", ".align"] and out.name == "out"
    assert words(sel) == [".param", ".u32"]
    seen = {d.word: tuple(v.text for v in d.values) for f in constructs().functions for d in f.directives}
    assert seen == {
        ".maxntid": ("256", "1", "1"),
        ".minnctapersm": ("2",),
        ".maxnreg": ("128",),
        ".reqntid": ("128",),
        ".reqnctapercluster": ("2",),
        ".explicitcluster": (),
        ".maxclusterrank": ("4",),
        ".blocksareclusters": (),
        ".abi_preserve": ("8",),
        ".abi_preserve_control": ("4",),
        ".noreturn": (),
    }
    by_value = function("by_value")
    assert by_value.returns[0].dims == (ast.Immediate("16"),) and by_value.params[0].name == "s"
    declared = function("twice_alias")
    assert declared.body is None and not declared.is_kernel
    extern = function("ext_helper")
    assert [a.word for a in extern.attributes] == [".extern"] and extern.body is None
    assert function("never_returns").params == ()


def test_register_declarations() -> None:
    regs = [s for s in function("everything").body.statements if isinstance(s, ast.Declaration)]
    b32 = next(d for d in regs if words(d) == [".reg", ".b32"])
    assert [(d.name, d.count) for d in b32.declarators] == [("%r", ast.Immediate("40")), ("%t", None)]
    assert any(words(d) == [".reg", ".v4", ".f32"] for d in regs)
    assert any(words(d) == [".local", ".align", ".b8"] for d in regs)


def test_nested_scopes_with_own_declarations_and_labels() -> None:
    body = function("everything").body
    outer = next(
        s for s in body.statements if isinstance(s, ast.Block) and any(isinstance(x, ast.Label) for x in s.statements)
    )
    assert isinstance(outer.statements[0], ast.Declaration)
    assert [s.name for s in outer.statements if isinstance(s, ast.Label)] == ["$L_inner"]
    inner = next(s for s in outer.statements if isinstance(s, ast.Block))
    assert inner.statements[0].declarators[0].name == "%deeper"


def test_branch_targets_call_targets_and_prototypes() -> None:
    statements = list(ast.walk(function("everything").body))
    targets = {s.word: [g[0].text for g in s.args] for s in statements if isinstance(s, ast.Directive)}
    assert targets[".branchtargets"] == ["L0", "L1", "L2", "L3"]
    assert targets[".calltargets"] == ["twice", "weak_twice"]
    (proto,) = [s for s in statements if isinstance(s, ast.CallPrototype)]
    assert proto.name == "_" and [p.name for p in proto.returns] == ["_"] and len(proto.params) == 1
    indirect = instruction("everything", "call", 0)
    assert indirect.operands == (
        ast.ParenList((ast.Name("r1"),)),
        ast.Name("%rd5"),
        ast.ParenList((ast.Name("a1"),)),
        ast.Name("proto"),
    )
    direct = instruction("everything", "call.uni")
    assert direct.operands[1] == ast.Name("twice_alias")


def test_operand_forms() -> None:
    assert instruction("everything", "ld.global.u32", 1).operands[1] == ast.Address(
        ast.Name("%rd2"), ast.Immediate("-4")
    )
    assert instruction("everything", "ld.global.u32", 0).operands[1] == ast.Address(
        ast.Name("g_matrix"), ast.Immediate("8")
    )
    setp = instruction("everything", "setp.lt.and.s32")
    assert setp.operands[0] == ast.PredPair(ast.Name("%p1"), ast.Name("%p2"))
    assert setp.operands[3] == ast.Not(ast.Name("%p3"))
    assert defining("%r23").guard == ast.Guard(ast.Name("%p1"), negated=True)
    assert instruction("everything", "mov.b64").operands[0] == ast.Vector((ast.Name("%r25"), ast.Name("_")))
    assert instruction("everything", "mbarrier.arrive.shared.b64").operands[0] == ast.Name("_")
    tex = instruction("everything", "tex.2d.v4.f32.f32")
    assert tex.operands[1].rest == (ast.Name("s_ref"), ast.Vector((ast.Name("%f1"), ast.Name("%f2"))))
    tex_p = instruction("everything", "tex.2d.v4.f32.f32", 1)
    assert isinstance(tex_p.operands[0], ast.PredPair) and tex_p.operands[0].second == ast.Name("%p4")
    cp = instruction("tiled", "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes")
    assert cp.modifiers[4] == "shared::cluster" and len(cp.operands) == 3
    moves = [i for i in ast.instructions(function("everything").body) if i.opcode == "mov"]
    specials = {i.operands[1].text for i in moves if isinstance(i.operands[1], ast.Name)}
    assert {"%tid.x", "%envreg3", "%globaltimer", "%cluster_ctarank", "%lanemask_lt"} <= specials


TARGETS = {
    "sm_100a": (".version 8.7", "sm_100a"),
    "sm_120f": (".version 8.8", "sm_120f"),
    "sm_121f": (".version 9.0", "sm_121f"),
    "sm_75 texmode_unified": (".version 9.0", "sm_75, texmode_unified"),
    "sm_90 texmode_independent": (".version 9.0", "sm_90,texmode_independent"),
}


@pytest.mark.parametrize("key", TARGETS)
def test_target_forms_parse_print_and_assemble(key: str, assemble) -> None:
    version, target = TARGETS[key]
    text = f"{version}\n.target {target}\n.address_size 64\n\n.visible .entry k()\n{{\n\tret;\n}}\n"
    module = parse(text)
    assert module.targets == tuple(t.strip() for t in target.split(","))
    out = format_module(module)
    assert f".target {', '.join(module.targets)}\n" in out
    cubin, messages = assemble(out)
    assert cubin is not None, messages


def test_debug_target_parses() -> None:
    """`.target ..., debug` needs real DWARF for ptxas; the corpus's -G file assembles in the round-trip tests."""
    module = parse(".version 9.0\n.target sm_90, debug\n.address_size 64\n")
    assert module.targets == ("sm_90", "debug")


def test_unknown_opcodes_parse_and_print() -> None:
    """Forward compatibility: the ISA tables, not the grammar, decide what exists."""
    text = (
        ".version 9.9\n.target sm_130\n.address_size 64\n\n.visible .entry k()\n{\n"
        "\tfrobnicate.x.y::z.v8 {%r1, _}, [%rd2+16], 0x7;\n\t@!%p frob2;\n}\n"
    )
    frob, frob2 = (i for i in ast.instructions(parse(text).functions[0].body))
    assert frob.opcode == "frobnicate" and frob.modifiers == ("x", "y::z", "v8")
    assert frob2.opcode == "frob2" and frob2.operands == () and frob2.guard.negated
    assert "\tfrobnicate.x.y::z.v8 {%r1, _}, [%rd2+16], 0x7;\n" in format_module(parse(text))


def test_remainder_in_constant_expression() -> None:
    parse(".version 9.0\n.target sm_90\n.address_size 64\n.global .u32 x = 7 % 3;\n")


def test_function_attribute_after_func(assemble) -> None:
    text = (
        ".version 9.0\n.target sm_90\n.address_size 64\n\n.func .attribute(.unified(0xAB, 0xCD)) f()\n{\n\tret;\n}\n"
        "\n.visible .entry k()\n{\n\tcall f;\n\tret;\n}\n"
    )
    assert assemble(text)[0] is not None
    out = format_module(parse(text))
    assert ".func .attribute(.unified(0xAB, 0xCD)) f()" in out and assemble(out)[0] is not None


def test_not_ptx_is_rejected() -> None:
    with pytest.raises(ParseError):
        parse(".version 9.0\n.target sm_90\n.visible .entry k(\n{\n\tret;\n}\n")


def test_glued_attributes_stay_glued_and_are_still_separate_attributes(assemble) -> None:
    text = (SAMPLES / "glued_attributes.ptx").read_text()
    module = parse(text)
    f, g = module.functions
    assert [a.word for a in f.returns[0].attributes] == [".reg", ".u64"] and f.returns[0].attributes[1].glued
    inner = [s for s in g.body.statements if isinstance(s, ast.Block)][0]
    assert inner.statements[0].has(".reg") and inner.statements[0].has(".b16")
    out = format_module(module)
    assert "(.reg.u64 r) f(" in out and "\t.param.u64 tmp;" in out and "\t\t.reg.b16 hl, hu;" in out
    assert ".visible .func" in out  # blanks stay where they were
    assert assemble(out)[0] is not None


def test_one_spacing_per_operator_whatever_the_input_blanks() -> None:
    """The layout of an expression does not depend on the blanks written in it: operators unspaced, `%` spaced
    (`7 %3` would read as a register), unary operators glued to their operand (docs/cli.md, fmt layout)."""
    initializers = "7 & ~1, 7&~1, - 3, -3, 1 ? 2 : 3, 4*2, 4 * 2, 9 % 4, 9% 4, 1 + 2, 1 << 4, --1, - -1, 2 - 1, 2-1"
    text = f".version 9.0\n.target sm_90\n.address_size 64\n.global .u32 t[15] = {{{initializers}}};\n"
    out = format_module(parse(text))
    assert "{7&~1, 7&~1, -3, -3, 1?2:3, 4*2, 4*2, 9 % 4, 9 % 4, 1+2, 1<<4, --1, --1, 2-1, 2-1};" in out
    assert format_module(parse(out)) == out


OPCODE_SPELLINGS = {  # as written: the comment fmt keeps after the statement
    "ld.global /* c */ .f32": " /* c */",
    "ld /* c */ .global.f32": " /* c */",
    "ld.global .f32": "",
    "ld.global// c\n.f32": " // c",
}


@pytest.mark.parametrize("spelling", OPCODE_SPELLINGS)
def test_an_opcode_with_blanks_or_comments_between_its_words(spelling: str, assemble) -> None:
    """ptxas takes blanks and comments between an opcode's words; the words join, the comment stays on the line."""
    text = (
        ".version 9.0\n.target sm_80\n.address_size 64\n\n.visible .entry k(\n\t.param .u64 p\n)\n{\n"
        "\t.reg .b64 %rd<2>;\n\t.reg .f32 %f<2>;\n\n\tld.param.u64 %rd1, [p];\n"
        f"\t{spelling} %f1, [%rd1];\n\tst.global.f32 [%rd1], %f1;\n\tret;\n}}\n"
    )
    assert assemble(text)[0] is not None  # the premise: ptxas takes the spelling
    load = next(
        i for i in ast.instructions(parse(text).functions[0].body) if i.opcode == "ld" and i.modifiers[0] != "param"
    )
    assert load.modifiers == ("global", "f32") and load.operands == (ast.Name("%f1"), ast.Address(ast.Name("%rd1")))
    out = format_module(parse(text))
    assert f"\tld.global.f32 %f1, [%rd1];{OPCODE_SPELLINGS[spelling]}\n" in out
    assert format_module(parse(out)) == out and assemble(out)[0] is not None


def test_a_declaration_word_after_an_opcode_is_a_missing_semicolon() -> None:
    """`ret` without its `;` and a `.reg` line after it: not the opcode `ret.reg.b32` (ptxas rejects it too)."""
    text = ".version 9.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n\tret\n\t.reg .b32 %t;\n}\n"
    with pytest.raises(ParseError) as error:
        parse(text)
    assert [(i.line, i.column) for i in error.value.issues] == [(6, 5)]
    assert "missing ';'" in error.value.issues[0].message
