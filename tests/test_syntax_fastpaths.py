"""The front end's fast paths give what the general paths give: a brace list of literals (one Literals node, checked
with bytes operations when decimal), a section body in compilers' layout (one quick pattern), blanks lexed with the
token after them, and the syntax-tree classes `records` makes (the methods of `@dataclass(frozen=True, slots=True)`).
Random inputs use fixed seeds."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import pickle
import random
import re
import subprocess
import sys

import pytest
from conftest import CORPUS, SAMPLES, ptx_params
from test_frontend_regressions import lex_seconds

from ptxtool.errors import Diagnostic, Location
from ptxtool.services import fmt
from ptxtool.sources import Source, Unreadable
from ptxtool.syntax import ParseError, ast, format_module, parse
from ptxtool.syntax.lexer import _ITEM_SPLIT, LexSession, decimal_list, section_span
from ptxtool.syntax.parser import LINE_AFTER, _parser
from ptxtool.syntax.serialize import to_data

HEAD = ".version 9.0\n.target sm_80\n.address_size 64\n"


def _imm(*texts: str) -> tuple[ast.Immediate, ...]:
    return tuple(ast.Immediate(t) for t in texts)


def _init(text: str) -> ast.InitList:
    (declaration,) = [i for i in parse(HEAD + text).items if isinstance(i, ast.Declaration)]
    return declaration.declarators[0].init


# ---------------------------------------------------------------- Literals


def test_a_list_of_literals_is_one_literals_node_that_is_its_initlist() -> None:
    node = _init(".global .b32 t[4] = {1, -2,\n 0f3F800000, 0x10};")
    plain = ast.InitList(_imm("1", "-2", "0f3F800000", "0x10"))
    assert type(node) is ast.Literals and node.text == "1,-2,0f3F800000,0x10"
    assert isinstance(node, ast.InitList) and node.items == plain.items
    assert node == plain and plain == node and hash(node) == hash(plain) and node != ast.InitList(_imm("1"))
    assert {node: 1}[plain] == 1
    assert dataclasses.fields(node) == dataclasses.fields(plain)
    assert dataclasses.replace(node, items=_imm("7")) == ast.InitList(_imm("7"))
    assert type(dataclasses.replace(node, items=_imm("7"))) is ast.InitList  # new items: a plain InitList
    assert pickle.loads(pickle.dumps(node)) == node and copy.deepcopy(node) == node
    assert json.dumps(to_data(node)) == json.dumps(to_data(plain))  # parse --json does not see the difference
    assert [n.text for n in ast.walk(node) if isinstance(n, ast.Immediate)] == ["1", "-2", "0f3F800000", "0x10"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.text = "2"  # type: ignore[misc]


@pytest.mark.parametrize("count", [1, 2, 15, 16, 17, 31, 32, 33, 100, 1000])
def test_literals_print_as_the_initlist_of_their_items(count: int) -> None:
    values = [str(k * 37 % 256) if k % 3 else f"-{k}" for k in range(count)]
    text = HEAD + f".global .b32 t[{count}] = {{{', '.join(values)}}};\n"
    module = parse(text)
    (declaration,) = [i for i in module.items if isinstance(i, ast.Declaration)]
    (declarator,) = declaration.declarators
    assert type(declarator.init) is ast.Literals
    plain = dataclasses.replace(declarator, init=ast.InitList(declarator.init.items))
    as_initlist = dataclasses.replace(
        module, items=(*module.items[:-1], dataclasses.replace(declaration, declarators=(plain,)))
    )
    assert format_module(module) == format_module(as_initlist)
    assert parse(format_module(module)) == module


def _reference_decimal(text: str) -> bool:
    """The decimal table as a regular expression says it (the path decimal_list replaces)."""
    blank = r"[ \t\f\r\n]*+"
    return re.match(rf"{blank}\{{{blank}(?:[0-9]++{blank},{blank})*+[0-9]++{blank}\}}", text) is not None


@pytest.mark.parametrize(
    "text",
    ["{1}", " {1, 2}", "{ 1 ,\n2\t}", "{1 2}", "{1,,2}", "{,1}", "{1,}", "{}", "{1\v, 2}", "{1, a}", "{1, -2}", "{1,2"],
)
def test_decimal_list_takes_what_the_pattern_takes(text: str) -> None:
    found = decimal_list(text, 0)
    assert (found is not None) == _reference_decimal(text)
    if found is not None:
        assert found == (text.index("}") + 1, re.sub(r"\s", "", text[text.index("{") + 1 : text.index("}")]))


def test_decimal_list_agrees_with_the_pattern_on_random_text() -> None:
    rng = random.Random(12)
    for _ in range(3000):
        inner = "".join(rng.choice("0123456789,, \n\t\v-xa") for _ in range(rng.randrange(0, 12)))
        text = rng.choice(["", " ", "\n"]) + "{" + inner + "}"
        found = decimal_list(text, 0)
        assert (found is not None) == _reference_decimal(text), repr(text)


def test_tables_with_odd_blanks_and_comments_parse_as_the_general_path() -> None:
    fast = HEAD + ".global .b8 t[3] = {1 ,\n\t2,3 };\n"
    slow = fast.replace("2,", "2, /* c */")
    assert _init(fast[len(HEAD) :]) == _init(slow[len(HEAD) :])
    assert "a vertical tab" in str(pytest.raises(ParseError, parse, HEAD + ".global .b8 t[2] = {1,\v2};\n").value)


# ---------------------------------------------------------------- section bodies

_VALUES = ["0", "12", "255", "-1", "$L__a", "name_1", ".debug_abbrev", ".debug_loc+136", "$L__a+4", "$L__b-$L__a"]


def _items(rng: random.Random, count: int) -> list[str]:
    items = []
    for k in range(count):
        if rng.random() < 0.1:
            items.append(f"$L__label{k}:")
        else:
            word = rng.choice([".b8", ".b16", ".b32", ".b64"])
            numbers = rng.random() < 0.6
            pool = _VALUES[:4] if numbers else _VALUES
            items.append(word + " " + ",".join(rng.choice(pool) for _ in range(rng.randrange(1, 6))))
    return items


def _general(body: str) -> str | None:
    """The items of a body as the general pattern finds them (one a line), or None if it is no plain body."""
    parts = re.split(_ITEM_SPLIT, body)
    blanks = parts[0::2]
    if "".join(blanks).strip(" \t\f\r\n") or not all(blanks[1:-1]):
        return None
    return "\n".join(parts[1::2])


def test_bodies_in_compilers_layout_take_the_quick_pattern_and_give_the_general_items() -> None:
    rng = random.Random(7)
    for _ in range(300):
        items = _items(rng, rng.randrange(0, 30))
        indent = rng.choice(["", "\t", "  "])
        body = "\n" + "".join(indent + i + "\n" for i in items) + "\t"
        text = "{" + body + "}"
        found = section_span(text, 0)
        assert found is not None and found == (len(text), (_general(body), True)), text


def test_odd_layouts_and_broken_bodies_agree_with_the_general_pattern() -> None:
    rng = random.Random(8)
    for _ in range(500):
        items = _items(rng, rng.randrange(1, 8))
        body = "\n" + "\n".join(items) + "\n"
        position = rng.randrange(len(body))
        body = (
            body[:position] + rng.choice([" ", ",", "\t", "\n", ", ", " ,", ",,", "x", "-", "+", ":"]) + body[position:]
        )
        found = section_span("{" + body + "}", 0)
        expected = _general(body)
        assert (found[1][0] if found else None) == expected, repr(body)


def test_a_debug_section_in_both_layouts_parses_and_prints_the_same() -> None:
    rng = random.Random(9)
    items = _items(rng, 200)
    plain = HEAD + ".section .debug_x\n{\n" + "\n".join(items) + "\n}\n"
    spaced = plain.replace(",", " , ").replace("\n.b", "\n\t.b")
    assert parse(plain) == parse(spaced)
    assert format_module(parse(plain)) == format_module(parse(spaced))


# ---------------------------------------------------------------- the lexer


def test_trailing_blanks_lex_in_linear_time() -> None:
    _, lexer, _, _ = _parser()
    tokens = list(lexer.tokens(HEAD + " \t\n" * 10, LexSession()))
    assert [t.type for t in tokens] == ["VERSION", "FLOAT", "TARGET", "WORD", "ADDRESS_SIZE", "INT"]
    small, large = lex_seconds(HEAD + " \t\n" * 50_000), lex_seconds(HEAD + " \t\n" * 200_000)
    assert large < 1.0 and large < 8 * small + 0.02


# where a fast path looks ahead for the end of a data list or section body: many starts, one far-away end
FAR_ENDS = {"initializer starts": "= {1, ", "section starts": ".section .a {\n.b8 1\n", "bare": "= {"}


@pytest.mark.parametrize("unit", FAR_ENDS.values(), ids=FAR_ENDS.keys())
def test_fast_paths_do_not_scan_to_a_far_end_again_and_again(unit: str) -> None:
    small, large = lex_seconds(HEAD + unit * 1_500 + "}"), lex_seconds(HEAD + unit * 6_000 + "}")
    assert large < 8 * small + 0.02  # a rescan per start would take 16x


# ---------------------------------------------------------------- records


def test_a_record_without_a_docstring_is_made_without_inspect(monkeypatch: pytest.MonkeyPatch) -> None:
    """dataclass writes a missing docstring from inspect.signature, which for a record (no __init__ yet) tokenizes
    object's signature: compiling tokenize's pattern cost every command 10 ms of start-up."""
    from ptxtool.records import finish, record

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("inspect.signature called")

    monkeypatch.setattr(inspect, "signature", refuse)

    @record
    class Point:
        x: int
        y: int = 0

    finish((Point,))
    assert Point(1) == Point(1, 0) != Point(2)
    monkeypatch.undo()  # the docstring is dataclass's, written when first read
    assert Point.__doc__ == "Point(x: 'int', y: 'int' = 0)"


def _reference(cls: type) -> type:
    """The class `@dataclass(frozen=True, slots=True)` makes from the same fields."""
    specs = []
    for f in dataclasses.fields(cls):
        options = {"compare": f.compare, "repr": f.repr, "kw_only": f.kw_only}
        if f.default is not dataclasses.MISSING:
            options["default"] = f.default
        if f.default_factory is not dataclasses.MISSING:
            options["default_factory"] = f.default_factory
        specs.append((f.name, f.type, dataclasses.field(**options)))
    return dataclasses.make_dataclass(cls.__name__, specs, frozen=True, slots=True)


# the tree's classes, and those every `fmt` run imports (made by records for its start-up: issue 12)
RECORDS = [
    *(c for c in ast.NODE_TYPES if "__dataclass_fields__" in c.__dict__),
    *(Location, Diagnostic, Source, Unreadable, fmt.Options, fmt.Formatted, fmt.FmtResult),
]


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_record_classes_are_the_frozen_slotted_dataclasses(cls: type) -> None:
    reference = _reference(cls)
    assert str(inspect.signature(cls)) == str(inspect.signature(reference))  # a default_factory shows as <factory>
    assert cls.__match_args__ == reference.__match_args__
    rng = random.Random(cls.__name__)
    values = {f.name: rng.choice(["a", 1, (), None]) for f in dataclasses.fields(cls)}
    other = dict(values)
    node, twin = cls(**values), reference(**values)
    assert repr(node).replace(cls.__qualname__, "X", 1) == repr(twin).replace(reference.__qualname__, "X", 1)
    for f in dataclasses.fields(cls):
        other[f.name] = "changed"
        assert (cls(**other) == node) == (reference(**other) == twin)  # compare=False fields take no part
        other[f.name] = values[f.name]
    assert hash(node) == hash(cls(**values)) and node == cls(**values) and node != twin
    assert not hasattr(node, "__dict__")  # slotted
    assert pickle.loads(pickle.dumps(node)) == node and copy.deepcopy(node) == node
    assert dataclasses.replace(node) == node
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(node, dataclasses.fields(cls)[0].name, "x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(node, dataclasses.fields(cls)[0].name)


def test_a_default_factory_makes_a_new_value_for_each_record() -> None:
    first, second = Diagnostic(Location("k.ptx"), "m"), Diagnostic(Location("k.ptx"), "m")
    assert first.properties == {} and first.properties is not second.properties
    assert fmt.FmtResult(fmt.Options()).files == [] and fmt.FmtResult(fmt.Options()).files is not first.properties
    given = {"rule": "x"}
    assert Diagnostic(Location("k.ptx"), "m", properties=given).properties is given


# ---------------------------------------------------------------- whole instruction lines

# statements of every shape a kernel body has: the plain ones the parser takes as one INSTRUCTION_LINE, and lines
# beside them that must go token by token (comments, expressions, decimal floats, modifiers apart, lists, calls)
_STATEMENTS = [
    "mov.u32 %r1, %r2;",
    "add.s64 \t%rd4, %rd3, %rd2;",
    "@%p1 bra $L__BB0_2;",
    "@!%p2 bra.uni $L__BB0_3;",
    "ld.global.nc.v4.f32 {%f1, %f2,%f3 , %f4}, [%rd1+16];",
    "st.global.u32 [%rd2+-4], %r1;",
    "ld.param.u64 %rd1, [k_param_0];",
    "ld.global.u32 %r1, [ %rd1 + 8 ];",
    "ld.const.u32 %r2, [4];",
    "mov.f32 %f1, 0f3F800000;",
    "mov.f64 %fd1, 0dBFF0000000000000;",
    "mov.f32 %f1, 1.5;",
    "mov.s32 %r1, -7;",
    "mov.s32 %r1, - 7;",
    "mov.u32 %r1, 0x10;",
    "mov.u32 %r1, %tid.x;",
    "setp.lt.s32 %p1, %r1, 10;",
    "add.s32 %r1, %r1, 1+2;",
    "ret;",
    "ret ;",
    "bar.sync 0;",
    "$L__BB0_2:",
    "$L__BB0_3 :",
    "ld.global .f32 %f1, [%rd1];",
    "mov.u32 %r1, %r2; // trailing",
    "mov.u32 %r1, /* inside */ %r2;",
    "mov.b64 %rd1, {%r1, %r2};",
    "call.uni (%r1), f, (%r2);",
    "mov.u64 %rd1, s+4;",
    "tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [t, {%f5, %f6}];",
    "{ mov.u32 %r1, %r2; }",
    ".reg .b32 %r<9>;",
    ".loc 1 2 3",
    "mov.u32 %r1,\n\t%r2;",
    # declarations and `.loc` lines: the plain ones are taken whole too (issue 12), the others token by token
    ".reg .pred \t%p<5>;",
    ".reg .b64 %rd1, %rd2 ,%rd3;",
    ".param .b64 param0;",
    ".local .align 4 .b8 __local_depot9[256];",
    ".shared .align 16 .b8 tile[2][ 64 ];",
    ".reg .b32 %r < 0x10 >;",
    ".reg .b8 x[];",
    ".local .align .b8 y[4];",
    ".reg .u32 z = 1;",
    ".reg.b32 glued;",
    ".reg .b32 %r1; // trailing",
    ".reg /* inside */ .b32 %r2;",
    ".reg .v2 .f32 v;",
    ".loc\t2 105 0",
    ".loc 1 4 0 // trailing",
    ".loc 1 0x1F 2",
    ".loc 1 5 3, function_name $L__info_string0, inlined_at 1 2 3",
]
_KERNEL_HEAD = HEAD + ".global .u32 s;\n.func (.param .b32 r) f(.param .b32 a)\n{\n\tret;\n}\n.visible .entry k()\n{\n"


def _everything(node: object) -> list:
    """Every field of every node, positions included (node equality leaves positions out)."""
    out, stack = [], [node]
    while stack:
        item = stack.pop()
        if dataclasses.is_dataclass(item):
            out.append(type(item).__name__)
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
        elif isinstance(item, (tuple, list)):
            out.append(len(item))
            stack.extend(item)
        else:
            out.append(item)
    return out


def _both_ways(text: str, printed: bool = False) -> tuple[object, object]:
    """The tree (or the errors) with whole lines taken in one piece, and token by token; with `printed`, each with
    the text fmt prints from it."""
    driver, _, build, _ = _parser()
    parse_tokens = driver.parse
    results = []
    for whole_lines in (build.whole_lines, None):

        def run(tokens, recover, _=None, whole_lines=whole_lines):
            return parse_tokens(tokens, recover, whole_lines)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(driver, "parse", run)
            try:
                module = parse(text)
                results.append((_everything(module), format_module(module)) if printed else _everything(module))
            except ParseError as error:
                results.append([(i.line, i.column, i.message) for i in error.issues])
    return results[0], results[1]


@pytest.mark.parametrize("path", ptx_params(CORPUS) + ptx_params(SAMPLES))
def test_every_corpus_file_parses_and_prints_the_same_both_ways(path) -> None:
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    fast, slow = _both_ways(text, printed=True)
    assert fast == slow


def _random_operand(rng: random.Random) -> str:
    """An operand in one of the forms the whole-line pattern takes, or near them (blanks, signs, braces)."""
    blank = rng.choice(["", "", " ", "\t", "  "])
    name = rng.choice(["%r1", "%rd12", "%f3", "%p0", "k_param_0", "$L__BB0_3", "%tid.x", "%ctaid.y", "_Z3fooPf", "s"])
    vector = f"{blank},{blank}".join(rng.choice(["%r1", "%r2", "%f1", "_"]) for _ in range(rng.choice([1, 2, 4])))
    integer = rng.choice(["0", "7", "-1", "- 1", "0x1F", "-0x10", "0b101", "12U"])
    forms = [
        name,
        integer,
        rng.choice(["0f3F800000", "-0f3F800000", "0d4000000000000000", "0F3f800000"]),
        f"[{blank}{name}{blank}]",
        f"[{blank}{name}{blank}+{blank}{integer}{blank}]",
        f"[{integer.lstrip('- ')}]",
        "{" + blank + vector + blank + "}",
        f"!{name}",
        f"{name}|{name}",
        f"{name}+4",
        "1.5",
    ]
    return rng.choice(forms)


def test_random_instruction_lines_build_the_tree_token_by_token_builds() -> None:
    """Opcodes with modifiers, guards and operands of every form the pattern takes (and some it leaves to the
    token-by-token path), in random blanks: one tree both ways, positions included, and one printed text."""
    rng = random.Random(12)
    opcodes = ["mov.u32", "ld.global.nc.v4.f32", "st.shared.b64", "add.s64", "bra.uni", "setp.lt.s32", "ret", "tex.2d"]
    lines = []
    for _ in range(1500):
        guard = rng.choice(["", "", "@%p1 ", "@!%p2 ", "@%p1\t"])
        operands = rng.choice([",", ", ", " ,", "\t,\t"]).join(_random_operand(rng) for _ in range(rng.randrange(0, 4)))
        gap = rng.choice([" ", "\t", " \t"]) if operands else ""
        end = rng.choice([";", " ;", ";", ";\n"])
        label = f"$L__r{len(lines)}{rng.choice([':', ' :'])}" if rng.random() < 0.05 else ""
        lines.append(label or f"{guard}{rng.choice(opcodes)}{gap}{operands}{end}")
    text = _KERNEL_HEAD + ".reg .pred %p<3>;\n.reg .b32 %r<3>;\n" + "\n".join("\t" + line for line in lines) + "\n}\n"
    fast, slow = _both_ways(text, printed=True)
    assert fast == slow


def test_whole_instruction_lines_build_the_tree_token_by_token_builds() -> None:
    rng = random.Random(21)
    body = "".join("\t" + rng.choice(_STATEMENTS) + "\n" for _ in range(600))
    text = _KERNEL_HEAD + body + "}\n"
    fast, slow = _both_ways(text)
    assert fast == slow
    assert isinstance(parse(text), ast.Module)  # the premise: valid, so the trees are compared
    _, _, build, _ = _parser()
    assert build.line_match is not None  # and the fast path ran


def test_broken_lines_report_the_errors_token_by_token_reports() -> None:
    rng = random.Random(22)
    edits = [";", ",", "{", "}", "[", "]", "@", "!", "-", "+", ":", " ", "\n", "x", "1", ".f32", "//", "\v"]
    edits += ["\n\n", "\n}\n{\n", ".loc 1 2 3\n", ".entry", "<", "/*"]  # runs of lines taken whole end anywhere
    for _ in range(60):
        lines = ["\t" + rng.choice(_STATEMENTS) for _ in range(120)]
        for _ in range(rng.randrange(1, 4)):
            k = rng.randrange(len(lines))
            at = rng.randrange(len(lines[k]) + 1)
            lines[k] = lines[k][:at] + rng.choice(edits) + lines[k][at + rng.randrange(2) :]
        fast, slow = _both_ways(_KERNEL_HEAD + "\n".join(lines) + "\n}\n")
        assert fast == slow, "\n".join(lines)


def _random_param(rng: random.Random) -> str:
    """A parameter in one of the forms the whole-parameter pattern takes, or near them."""
    blank = rng.choice([" ", " ", "\t", "  "])
    words = rng.choice([".param .b64", ".param .align 8 .b8", ".param .u64 .ptr .global .align 16", ".reg .b32"])
    name = rng.choice(["p", "_$p", "%p"]) + str(rng.randrange(9))
    if rng.random() < 0.02:  # spellings the pattern leaves to the token-by-token path, valid or not
        words = rng.choice([words, ".param .b32::x", ".param .align 0x8 .b8", ".param .align 8U .b8"])
        name = rng.choice([name, "p.x", "p::q", "1p"])
    dims = rng.choice(["", "", "[16]", "[ 4 ]", "[]", "[2][3]", "[0x10]", "[2 ]\t[ 3]"])
    return f"{words.replace(' ', blank)}{blank}{name}{dims}"


def test_random_parameter_lines_build_the_tree_token_by_token_builds() -> None:
    """Function headers of one parameter a line (and some on one line), edited at random: one tree, with positions,
    and one printed text with whole parameters taken in one piece and token by token; broken ones, the same errors."""
    rng = random.Random(31)
    valid = 0
    edits = [",", ")", "(", ";", "{", "}", "[", "]", " ", "\n", "x", "1", ".entry", ".align", "//", "/*", "<", "\v"]
    for round in range(80):
        headers = []
        for k in range(rng.randrange(8, 16)):
            params = [_random_param(rng) for _ in range(rng.randrange(0, 5))]
            gap = rng.choice([",\n\t", ", ", " ,\n", ",\t", "\n\n,", "\n// c\n,"])
            inside = (
                "\n\t" + gap.join(params) + rng.choice(["\n", "", " ", "\n\n", "\n\t\r\n", "/* c */"]) if params else ""
            )
            returns = f"({_random_param(rng)}) " if rng.random() < 0.3 else ""
            headers.append(f".visible .func {returns}f{k}({inside})\n{{\n\tret;\n}}")
        if round % 2:
            k = rng.randrange(len(headers))
            at = rng.randrange(len(headers[k]) + 1)
            headers[k] = headers[k][:at] + rng.choice(edits) + headers[k][at + rng.randrange(2) :]
        text = HEAD + ".entry k()\n{\n" + "\tret;\n" * 70 + "}\n" + "\n".join(headers) + "\n"  # (70: warm)
        fast, slow = _both_ways(text, printed=True)
        assert fast == slow, text
        valid += isinstance(fast, tuple)
    assert valid >= 30  # the premise: most files parse, so their trees are compared
    _, _, build, _ = _parser()
    assert build.param_match is not None  # the premise: the fast path ran


def test_an_instruction_line_is_only_a_statement() -> None:
    """At module level or in a section, a line shaped like an instruction is no statement: the same error as token
    by token, naming a token, not the whole line."""
    plenty = "\tmov.u32 %r1, %r2;\n" * 80
    for text, found in [
        (HEAD + ".visible .entry k()\n{\n" + plenty + "}\nmov.u32 %r1, %r2;\n", "unexpected name 'mov.u32'"),
        (HEAD + ".visible .entry k()\n{\n" + plenty + "}\n.section .debug_x\n{\nmov.u32 %r1, %r2;\n}\n", "'%r1'"),
    ]:
        fast, slow = _both_ways(text)
        assert fast == slow
        assert any(found in message for _, _, message in fast), fast


def test_a_grammar_rule_without_a_node_builder_is_refused_when_the_driver_is_made() -> None:
    """Builders are made at a rule's first reduction, but a missing one must not wait for a file that uses it."""
    from ptxtool.syntax import tables
    from ptxtool.syntax.lalr import Driver

    driver, _, build, _ = _parser()
    assert driver.builders  # the real builder has every rule's method

    class Lacking:
        def __getattr__(self, name: str) -> object:
            if name == "instruction":
                raise AttributeError(name)
            return getattr(build, name)

    with pytest.raises(TypeError, match="no node builder for grammar rule 'instruction'"):
        Driver(tables.load(), Lacking())


_FIRST_LINES = """
import sys
from ptxtool.syntax import parse
from ptxtool.syntax.parser import _parser

_, _, build, _ = _parser()
taken = []
instruction = build._instruction
build._instruction = lambda *fields: taken.append(fields) or instruction(*fields)
head = ".version 9.0\\n.target sm_80\\n.address_size 64\\n.visible .entry k()\\n{\\n.reg .b32 %r<2>;\\n"
for lines in map(int, sys.argv[1:]):
    taken.clear()
    parse(head + "".join("add.s32 %r1, %r1, 1;\\n" for _ in range(lines)) + "}\\n")
    print(lines, len(taken), build.line_match is not None)
"""


def test_a_text_of_many_statements_takes_whole_lines_from_its_first_and_a_small_one_never() -> None:
    """The whole-line patterns cost some milliseconds to compile: a text of fewer than LINE_AFTER statements goes
    token by token (and compiles nothing); a larger one, counted by its `;`s, takes its lines whole from the first."""
    small, large = LINE_AFTER - 3, 2 * LINE_AFTER  # (the small text's `.reg` line is one statement more)
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_LINES, str(small), str(large), str(small)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split("\n")[:3] == [f"{small} 0 False", f"{large} {large} True", f"{small} {small} True"]
