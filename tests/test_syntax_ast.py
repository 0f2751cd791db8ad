"""The AST: edits print their new text (nothing is echoed from the source), every node class has a printer,
literals keep their spelling and know their value, and positions take no part in equality."""

from __future__ import annotations

import dataclasses
import inspect
import math
from dataclasses import replace

import pytest
from conftest import SAMPLES

from ptxtool.syntax import ast, format_module, parse, printer


def _module(name: str) -> ast.Module:
    return parse((SAMPLES / name).read_text())


def _function(module: ast.Module, name: str) -> ast.Function:
    return next(f for f in module.functions if f.name == name)


def _edit_instructions(block: ast.Block, edit) -> ast.Block:
    """A copy of a block with `edit` applied to each instruction (None drops it), nested scopes included."""
    statements = []
    for s in block.statements:
        if isinstance(s, ast.Instruction):
            s = edit(s)
        elif isinstance(s, ast.Block):
            s = _edit_instructions(s, edit)
        if s is not None:
            statements.append(s)
    return replace(block, statements=tuple(statements))


def _edit_function(module: ast.Module, name: str, edit) -> ast.Module:
    items = tuple(
        replace(i, body=_edit_instructions(i.body, edit)) if isinstance(i, ast.Function) and i.name == name else i
        for i in module.items
    )
    return replace(module, items=items)


def test_edited_opcode_and_operands_print_their_new_text() -> None:
    module = _module("rare_syntax.ptx")

    def edit(i: ast.Instruction) -> ast.Instruction:
        if i.mnemonic == "shl.b32":
            return replace(i, opcode="mul", modifiers=("lo", "s32"), operands=(*i.operands[:2], ast.Immediate("2")))
        return i

    text = format_module(_edit_function(module, "weak_twice", edit))
    assert "\tmul.lo.s32 %r2, %r1, 2;\n" in text
    assert "shl.b32" not in text
    assert parse(text) != module


def test_dropping_every_instruction_prints_none() -> None:
    """A printer that echoed source lines would still print the instructions."""
    module = _edit_function(_module("rare_syntax.ptx"), "switcher", lambda i: None)
    text = format_module(module)
    body = text[text.index(".entry switcher") : text.index(".entry indirect")]
    assert ".reg .b32 %r<16>;" in body
    for gone in ("brx.idx", "mov.u32 %r4, 0xFFFFFFFF;", "call.uni", "ret;"):
        assert gone not in body
    assert parse(text) == module


def test_edited_guard_declaration_and_directive() -> None:
    module = _module("rare_syntax.ptx")
    flipped = _edit_function(
        module, "switcher", lambda i: replace(i, guard=replace(i.guard, negated=not i.guard.negated)) if i.guard else i
    )
    text = format_module(flipped)
    assert "@%p1 mov.u32 %r4, 5;" in text and "@!%p2 mov.u32 %r4, 6;" in text
    items = tuple(
        replace(i, args=((ast.Immediate("8.5"),),)) if isinstance(i, ast.Directive) and i.word == ".version" else i
        for i in module.items
    )
    assert format_module(replace(module, items=items)).count(".version 8.5\n") == 1


def test_node_made_by_a_pass_prints_without_positions() -> None:
    """Nodes built from scratch (positions 0, no comments) print like parsed ones."""
    instruction = ast.Instruction(
        "ld",
        ("global", "nc", "v2", "f32"),
        (ast.Vector((ast.Name("%f1"), ast.Name("_"))), ast.Address(ast.Name("%rd1"), ast.Immediate("-8"))),
        ast.Guard(ast.Name("%p1"), negated=True),
    )
    body = ast.Block(
        (ast.Declaration((ast.Attribute(".reg"), ast.Attribute(".f32")), (ast.Declarator("%f1"),)), instruction)
    )
    kernel = ast.Function(".entry", "made", (ast.Attribute(".visible"),), None, (), (), body)
    header = parse(".version 9.0\n.target sm_90\n.address_size 64\n").items
    text = format_module(ast.Module((*header, kernel)))
    assert "\t@!%p1 ld.global.nc.v2.f32 {%f1, _}, [%rd1+-8];\n" in text
    assert parse(text) == ast.Module((*header, kernel))


def _all_node_classes() -> set[type]:
    members = inspect.getmembers(ast, inspect.isclass)
    bases = {ast.Owner}  # the comments-and-position fields every statement shares; not a node itself
    return {c for _, c in members if dataclasses.is_dataclass(c) and c.__module__ == ast.__name__} - bases


def test_every_node_class_is_registered_and_has_a_printer() -> None:
    classes = _all_node_classes()
    assert classes == set(ast.NODE_TYPES), "ast.NODE_TYPES must list every node class"
    printed_by_writer = {ast.Block, ast.Data, ast.Function, ast.Section, ast.Module}
    printed_by_writer |= {ast.Name, ast.Immediate}  # inline_all prints their text directly
    missing = classes - set(printer.PIECES) - set(printer.LINE) - printed_by_writer
    assert not missing, f"no printer entry for {sorted(c.__name__ for c in missing)}"


def test_samples_exercise_every_node_class() -> None:
    """The hand-written samples hold every node class, so the round-trip tests print each of them."""
    names = ("constructs.ptx", "comments.ptx", "debug_sections.ptx")
    seen = {type(n) for name in names for n in ast.walk(_module(name))}
    assert _all_node_classes() - seen == set()


LITERALS = [
    ("0", 0),
    ("42", 42),
    ("-7", -7),
    ("0x1F", 31),
    ("0XFF", 255),
    ("0xffffffff", 0xFFFFFFFF),
    ("-0x10", -16),
    ("017", 15),
    ("00", 0),
    ("0b101", 5),
    ("0B11", 3),
    ("1U", 1),
    ("0x1fU", 31),
    ("017U", 15),
    ("0b101U", 5),
    ("0f3F800000", 1.0),
    ("0F40000000", 2.0),
    ("0fBF000000", -0.5),
    ("0d3FF0000000000000", 1.0),
    ("0D4000000000000000", 2.0),
    ("1.5", 1.5),
    ("-2.5", -2.5),
    ("2.5e-1", 0.25),
    ("1e3", 1000.0),
    ("5.", 5.0),
]


@pytest.mark.parametrize(("text", "value"), LITERALS, ids=[t for t, _ in LITERALS])
def test_literal_value(text: str, value: float) -> None:
    got = ast.Immediate(text).value
    assert got == value and type(got) is type(value)


def test_literal_nan_and_infinity_bit_patterns() -> None:
    assert math.isnan(ast.Immediate("0f7FC00000").value)
    assert ast.Immediate("0fFF800000").value == -math.inf


@pytest.mark.parametrize(("text", "value"), LITERALS, ids=[t for t, _ in LITERALS])
def test_literals_keep_their_spelling_through_parse_and_print(text: str, value: float) -> None:
    source = f".version 9.0\n.target sm_90\n.address_size 64\n.global .f64 x = {text};\n"
    module = parse(source)
    (declaration,) = module.items[3:]
    assert declaration.declarators[0].init == ast.Immediate(text)
    assert declaration.declarators[0].init.value == value
    assert f"= {text};" in format_module(module)


def test_positions_are_kept_but_not_compared() -> None:
    text = (SAMPLES / "rare_syntax.ptx").read_text()
    module = parse(text)
    switcher = _function(module, "switcher")
    assert (switcher.line, switcher.column) == (text[: text.index(".visible .entry switcher")].count("\n") + 1, 1)
    first = next(ast.instructions(switcher.body))
    assert first.mnemonic == "ld.param.u64" and first.line == switcher.line + 10 and first.column == 2
    assert parse("\n\n" + text.replace("\t", "    ")) == module


def _rebuilt(value: object) -> object:
    """A deep copy made the way a pass makes nodes: every node rebuilt through `dataclasses.replace`."""
    if dataclasses.is_dataclass(value):
        changes = {f.name: _rebuilt(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
        return replace(value, **changes)
    if isinstance(value, tuple):
        return tuple(_rebuilt(v) for v in value)
    return value


@pytest.mark.parametrize("name", ["rare_syntax.ptx", "constructs.ptx", "comments.ptx", "debug_sections.ptx"])
def test_identity_pass_prints_the_same_text(name: str) -> None:
    module = _module(name)
    copy = _rebuilt(module)
    assert copy == module and copy is not module
    assert next(ast.instructions(copy.functions[-1].body)) is not next(ast.instructions(module.functions[-1].body))
    assert format_module(copy) == format_module(module)
