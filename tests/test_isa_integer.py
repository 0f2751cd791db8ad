"""isa.integer: the exact integer meanings the warp-role proofs evaluate threads' addresses with, and everything
they must not guess (the carry flag, activemask, modes that change the result, unexpected operand counts)."""

from __future__ import annotations

import random

import pytest

from ptxtool import isa
from ptxtool.isa.integer import INTEGER_OPS, integer_form, wrapped
from ptxtool.syntax import ast, parse


def _instruction(line: str) -> ast.Instruction:
    text = (
        ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n"
        "\t.reg .b32 %r<9>;\n\t.reg .b64 %rd<9>;\n\t.reg .pred %p<3>;\n"
        f"\t{line};\n\tret;\n}}\n"
    )
    return next(ast.instructions(parse(text).kernels[0].body))


def _result(line: str, *args: int) -> int | None:
    form = integer_form(_instruction(line))
    assert form is not None, line
    return form.result(list(args))


@pytest.mark.parametrize(
    ("line", "args", "expected"),
    [
        ("not.b32 %r1, %r2", (5,), 0xFFFFFFFA),  # ~5, not -5 (0xFFFFFFFB)
        ("neg.s32 %r1, %r2", (5,), 0xFFFFFFFB),
        ("abs.s32 %r1, %r2", (0x80000000,), 0x80000000),  # abs(INT_MIN) wraps to itself
        ("add.s32 %r1, %r2, %r3", (0xFFFFF000, 0x1000), 0),  # wraps modulo 2^32
        ("add.u64 %rd1, %rd2, %rd3", (0xFFFFF000, 0x1000), 0x100000000),
        ("sub.s32 %r1, %r2, %r3", (0, 1), 0xFFFFFFFF),
        ("mul.lo.s32 %r1, %r2, %r3", (0x10000, 0x10000), 0),
        ("mad.lo.s32 %r1, %r2, %r3, %r4", (3, 4, 0xFFFFFFFF), 11),
        ("shl.b32 %r1, %r2, %r3", (1, 40), 0),  # shift amounts clamp to the width
        ("shr.s32 %r1, %r2, %r3", (0x80000000, 40), 0xFFFFFFFF),  # arithmetic on a signed type
        ("shr.u32 %r1, %r2, %r3", (0x80000000, 31), 1),
        ("shr.b32 %r1, %r2, %r3", (0x80000000, 31), 1),  # logical on .b
        ("shl.b64 %rd1, %rd2, %r3", (1, 0xFFFFFFFF), 0),  # the amount is an unsigned 32-bit value
        ("div.s32 %r1, %r2, %r3", (0xFFFFFFF9, 2), 0xFFFFFFFD),  # -7 / 2 = -3 (truncating)
        ("rem.s32 %r1, %r2, %r3", (0xFFFFFFF9, 2), 0xFFFFFFFF),  # -7 % 2 = -1
        ("div.u32 %r1, %r2, %r3", (0xFFFFFFF9, 2), 0x7FFFFFFC),
        ("div.s32 %r1, %r2, %r3", (7, 0), None),  # undefined
        ("div.s32 %r1, %r2, %r3", (0x80000000, 0xFFFFFFFF), None),  # INT_MIN / -1 overflows
        ("min.s32 %r1, %r2, %r3", (0xFFFFFFFF, 1), 0xFFFFFFFF),
        ("min.u32 %r1, %r2, %r3", (0xFFFFFFFF, 1), 1),
        ("xor.b32 %r1, %r2, %r3", (0xF0, 0xFF), 0x0F),
    ],
)
def test_exact_results(line: str, args: tuple[int, ...], expected: int | None) -> None:
    assert _result(line, *args) == expected


@pytest.mark.parametrize(
    "line",
    [
        "add.cc.u32 %r1, %r2, %r3",  # writes the carry flag
        "addc.u32 %r1, %r2, %r3",  # reads it
        "addc.cc.u32 %r1, %r2, %r3",
        "sub.cc.u32 %r1, %r2, %r3",
        "subc.u32 %r1, %r2, %r3",
        "madc.lo.u32 %r1, %r2, %r3, %r4",
        "mad.lo.cc.u32 %r1, %r2, %r3, %r4",
        "activemask.b32 %r1",
        "add.sat.s32 %r1, %r2, %r3",
        "mul.hi.s32 %r1, %r2, %r3",
        "mul.wide.s32 %rd1, %r2, %r3",
        "mad.hi.s32 %r1, %r2, %r3, %r4",
        "mul24.lo.s32 %r1, %r2, %r3",
        "popc.b32 %r1, %r2",
        "cvt.u64.u32 %rd1, %r2",
        "add.f32 %r1, %r2, %r3",
        "and.pred %p1, %p2, %p0",
    ],
)
def test_not_known_exactly(line: str) -> None:
    assert integer_form(_instruction(line)) is None


def test_operand_counts_not_expected() -> None:
    """An instruction with more or fewer operands than its row reads is not evaluated (never an IndexError)."""
    add = _instruction("add.s32 %r1, %r2, %r3")
    assert integer_form(ast.Instruction("add", add.modifiers, add.operands[:2])) is None
    assert integer_form(ast.Instruction("not", ("b32",), (*add.operands, add.operands[0]))) is None
    assert integer_form(ast.Instruction("neg", ("s32",), ())) is None


def test_rows_are_isa_families() -> None:
    """Every row is an ISA family that defines its first operand and reads the rest (opcodes.py's roles)."""
    for opcode in INTEGER_OPS:
        info = isa.find(_instruction(f"{opcode}.s32 %r1, %r2, %r3"))
        assert info is not None, opcode


def test_wrapping_matches_twos_complement() -> None:
    """Fixed-seed random operands: add/sub/mul/shl/and/or/xor/not at 32 and 64 bits against Python's integers
    reduced modulo 2^w, operands given in any representative (negative or past the width)."""
    rng = random.Random(16)
    reference = {
        "add": lambda a, b: a + b,
        "sub": lambda a, b: a - b,
        "mul": lambda a, b: a * b,
        "and": lambda a, b: a & b,
        "or": lambda a, b: a | b,
        "xor": lambda a, b: a ^ b,
    }
    for bits, reg in ((32, "%r"), (64, "%rd")):
        for opcode, f in reference.items():
            mode = ".lo" if opcode == "mul" else ""
            line = f"{opcode}{mode}.s{bits} {reg}1, {reg}2, {reg}3"
            for _ in range(200):
                a, b = rng.randrange(-(1 << 70), 1 << 70), rng.randrange(-(1 << 70), 1 << 70)
                assert _result(line, a, b) == f(a, b) % (1 << bits), (line, a, b)
        for _ in range(50):
            a = rng.randrange(-(1 << 70), 1 << 70)
            assert _result(f"not.b{bits} {reg}1, {reg}2", a) == ~a % (1 << bits)


def test_wrapped_offsets() -> None:
    """tile - 4096 held modulo 2^32, then +4096: tile again; bytes straddling 2^w have no order; a symbol's own
    offset is kept as written."""
    assert wrapped((1 << 32) - 4096 + 4096, 32, 4) == 0
    assert wrapped((1 << 32) - 4, 32, 4) == (1 << 32) - 4
    assert wrapped((1 << 32) - 2, 32, 4) is None
    assert wrapped(-8, None, 4) == -8
