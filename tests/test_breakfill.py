"""Adversarial kernels for the warp-role pass's thread-strided fill loops (fills.py, copies.py; issue 16): each is
tests/data/warp_roles/strided_fill.ptx with one rule's breaking kernel planted, valid PTX that ptxas takes. A break
(xfail, strict) is a kernel a variant accepts whose output gives other bits than the input's on the CPU simulators
(tests/ptx_sim.py, tests/ptx_sim_roles.py: a group's copies land in a seeded random order); a correct pass refuses
it in one line or writes what gives the input's bits. A probe (passing) is a kernel the pass rightly refuses, or
transforms into the input's bits: each guards a rule."""

from __future__ import annotations

import functools
import random
import struct
from pathlib import Path

import pytest
from ptx_sim import Cta, _bits, _Thread, _type
from ptx_sim_roles import RolesCta, block_threads

from ptxtool.passes.warp_roles import RoleSettings, warp_roles
from ptxtool.syntax import ast, format_module, parse
from ptxtool.toolchain.compile import compile_ptx

FILL = (Path(__file__).parent / "data" / "warp_roles" / "strided_fill.ptx").read_text()
TILE = 320  # floats per trip
VARIANTS = ("pipeline", "split-async", "split")
STORE = "\tst.shared.f32 \t[%r17], %f2;\n"
COMPUTED = "\tbar.sync \t0;\n\tadd.s32"  # the second barrier: compute-part reads go before it
SEEDS = range(4)


class _More:
    """The test simulators plus `not.bN`, `abs.sN`, the carry flag (`add.cc`, `addc`; one per thread), integer
    `cvt` and vector `ld`/`st` (`{%f2, %f6}`: consecutive elements of the type)."""

    def step(self, t: _Thread, params: dict[str, int], memory: bytearray) -> str | None:
        i = self.linear.ops[t.pc].instruction  # type: ignore[attr-defined]
        kind = _type(i)
        carry = i.opcode == "addc" or (i.opcode == "add" and "cc" in i.modifiers)
        vector = i.opcode in ("ld", "st") and any(isinstance(x, ast.Vector) for x in i.operands)
        if not ((i.opcode == "not" and kind != "pred") or i.opcode in ("abs", "cvt") or carry or vector):
            return super().step(t, params, memory)  # type: ignore[misc]
        t.pc += 1
        if i.guard is not None and bool(t.regs.get(i.guard.predicate.text, False)) == i.guard.negated:
            return None
        if vector:
            self.vector(t, i, params, memory)
            return None
        if i.opcode == "cvt":
            bits = _bits(i.modifiers[-1]) or 32
            value = int(self.value(t, i.operands[1], bits, params))  # type: ignore[attr-defined]
            if i.modifiers[-1][0] == "s":
                value = value - (1 << bits) if value >> (bits - 1) else value
            t.regs[i.operands[0].text] = value & ((1 << (_bits(i.modifiers[-2]) or 32)) - 1)  # type: ignore[union-attr]
            return None
        bits = _bits(kind) or 32
        mask = (1 << bits) - 1
        args = [int(self.value(t, x, bits, params)) & mask for x in i.operands[1:]]  # type: ignore[attr-defined]
        if i.opcode == "not":
            out = ~args[0]
        elif i.opcode == "abs":
            out = abs(args[0] - (1 << bits) if args[0] >> (bits - 1) else args[0])
        else:
            out = args[0] + args[1] + (int(t.regs.get("%__carry", 0)) if i.opcode == "addc" else 0)
            if "cc" in i.modifiers:
                t.regs["%__carry"] = out >> bits & 1
        t.regs[i.operands[0].text] = out & mask  # type: ignore[union-attr]
        return None

    def vector(self, t: _Thread, i: ast.Instruction, params: dict[str, int], memory: bytearray) -> None:
        size = (_bits(_type(i)) or 32) // 8
        load = i.opcode == "ld"
        address, registers = (i.operands[1], i.operands[0]) if load else (i.operands[0], i.operands[1])
        assert isinstance(address, ast.Address) and isinstance(registers, ast.Vector)
        where = self.address(t, address, params)  # type: ignore[attr-defined]
        space = self.shared if "shared" in i.modifiers else memory  # type: ignore[attr-defined]
        for k, x in enumerate(registers.items):
            at = where + k * size
            assert 0 <= at and at + size <= len(space), "a vector access out of bounds"
            if load:
                t.regs[x.text] = int.from_bytes(space[at : at + size], "little")  # type: ignore[union-attr]
            else:
                value = int(self.value(t, x, size * 8, params)) & ((1 << (size * 8)) - 1)  # type: ignore[attr-defined]
                space[at : at + size] = value.to_bytes(size, "little")


class _Cta(_More, Cta):
    pass


class _RolesCta(_More, RolesCta):
    pass


def _planted(*edits: tuple[str, str]) -> str:
    text = FILL
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def _pass(text: str, variant: str, stages: int = 3) -> tuple[str | None, str]:
    out, report = warp_roles(parse(text), RoleSettings(variant=variant, stages=stages))
    return (format_module(out) if report.rewrites else None), (report.skipped[0].reason if report.skipped else "")


@functools.cache
def _simulated(text: str, seed: int = 0, trips: int = 3, blocks: int = 1, cut: int = 150) -> bytes:
    """out[] after a simulated launch of `blocks` CTAs over `trips` tiles of random floats (elements from `cut`
    before the end zero-filled); split kernels run with their grown block and mbarriers."""
    rng = random.Random(1)
    total = blocks * max(trips, 1) * TILE
    data = b"".join(struct.pack("<f", rng.uniform(-1, 1)) for _ in range(total))
    memory = bytearray(data) + bytearray(blocks * 128 * 4)
    names = [p.name for p in parse(text).kernels[0].params]
    given = dict(zip(names, [0, len(data), trips, total - cut], strict=True))
    roles = "__wr_full" in text
    for ctaid in range(blocks):
        if roles:
            cta: Cta = _RolesCta(text, block_threads(text), ctaid, seed + ctaid)
        else:
            cta = _Cta(text, 128, ctaid, seed + ctaid)
        cta.run(given, memory, 10**6)
    return bytes(memory[len(data) :])


def _holds(text: str, variant: str, stages: int = 3) -> None:
    """What a correct pass does with a valid kernel: refuse it in one line, or write what ptxas takes and what gives
    the input's bits on the simulator whatever order a group's copies land in."""
    compile_ptx(text, "input.ptx", "sm_90")
    out, why = _pass(text, variant, stages)
    if out is None:
        assert why and "\n" not in why
        return
    compile_ptx(out, f"{variant}.ptx", "sm_90")
    expected = _simulated(text)
    assert all(_simulated(out, seed) == expected for seed in SEEDS), f"{variant} changed the output's bits"


def _refused(text: str, variant: str, reason: str) -> None:
    compile_ptx(text, "input.ptx", "sm_90")
    out, why = _pass(text, variant)
    assert out is None, f"{variant} accepted it"
    assert reason in why and "\n" not in why, why


def _break(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=reason)


# --- `not` evaluated as `neg` -------------------------------------------------------------------------------------
# thread_values.integer_word accepts any opcode with one s/u/b type and no other modifier ("sub" holds b too, and
# `_MODELLED.get(op, {"?"})` admits an empty set of others), and arith's last branch computes every opcode it does
# not name as `neg`: `not.b32 x` (LLVM's `~x`) is taken for -x, one more than it is. Here the fill loop's second
# store writes tile[~~i] (`not` then `xor -1`, as LLVM prints `~` twice): tile[i] really, the first store's word,
# tile[i - 1] to fills.py, so the per-thread overlap check sees disjoint words. The input keeps a[0] (program
# order); the cp.async forms issue two copies to one word, landing in either order. Correct: refuse the cp.async
# forms (or evaluate `not` exactly and find the overlap); the ld+st split keeps the order and holds.
NOT_AS_NEG = _planted(
    (
        STORE,
        STORE + "\tnot.b32 \t%r19, %r14;\n\txor.b32 \t%r21, %r19, -1;\n\tshl.b32 \t%r22, %r21, 2;\n"
        "\tadd.s32 \t%r23, %r6, %r22;\n\tld.global.nc.f32 \t%f6, [%rd3];\n\tst.shared.f32 \t[%r23], %f6;\n",
    ),
)


@_break("fills.py evaluates not.b32 as neg: two copies to one word pass the per-thread overlap check")
@pytest.mark.parametrize("variant", ["pipeline", "split-async"])
def test_not_evaluated_as_neg(variant: str) -> None:
    _holds(NOT_AS_NEG, variant)


def test_not_evaluated_as_neg_ordered_split() -> None:
    """Probe: the ld+st split stores in program order, so the same word twice is no break there."""
    _holds(NOT_AS_NEG, "split")


# --- the carry flag: `addc` read as a value fixed for the thread --------------------------------------------------
# addc.u32 reads CC.CF, which no operand names; integer_word takes it (one u32 type) and arith computes it as neg
# of its first operand, so fills.py calls its result fixed for the thread. Here the fill loop's second store writes
# tile[320 + i] on trip 0 and tile[640 + i] (words the compute part never reads) on every later trip: the carry
# of `add.cc k, -1` is k >= 1. The input's compute reads a[0] from tile[320 + tid] on every trip; in a ring of S
# slots that word is written in slot 0 only, so the trips of the other slots read what the slot held before (zero
# on the simulator). Correct: refuse (a store address computed from the carry flag is not fixed for the thread);
# the ld+st split's ring breaks the same way (stale_slot judges the fill by the same trace).
CARRY = _planted(
    ("tile[1280]", "tile[3840]"),
    ("%r<24>", "%r<48>"),
    (
        STORE,
        STORE + "\tadd.cc.u32 \t%r40, %r12, -1;\n\taddc.u32 \t%r41, 0, 0;\n\tmad.lo.s32 \t%r42, %r41, 1280, %r17;\n"
        "\tld.global.nc.f32 \t%f6, [%rd3];\n\tst.shared.f32 \t[%r42+1280], %f6;\n",
    ),
    (COMPUTED, "\tld.shared.f32 \t%f7, [%r8+1280];\n\tadd.f32 \t%f1, %f1, %f7;\n" + COMPUTED),
)


@_break("fills.py reads addc (the carry flag) as a value fixed for the thread: the store's word changes by trip")
@pytest.mark.parametrize("variant", VARIANTS)
def test_addc_carry_flag_address(variant: str) -> None:
    _holds(CARRY, variant)


def test_addc_control_holds() -> None:
    """Probe: the same kernel with the carry replaced by 0 (the second store always at tile[320 + i]) is
    transformed by every variant into the input's bits, so the break above is the carry's alone."""
    text = CARRY.replace("\taddc.u32 \t%r41, 0, 0;\n", "\tmov.u32 \t%r41, 0;\n")
    for variant in VARIANTS:
        out, why = _pass(text, variant)
        assert out is not None, why
        _holds(text, variant)


# --- an opcode with no operand to read: activemask ----------------------------------------------------------------
# fills.py evaluates every op of the staging part for every thread; `activemask.b32 %r19` passes integer_word (one
# b32 type) and arith's fallback reads its first operand, which it has none of: IndexError, `ptxtool optimize`
# exits 4 ("internal error"). Correct: the value is unknown (not a function of the thread's fixed values), and
# the kernel is transformed or refused in one line.
ACTIVEMASK = _planted((STORE, "\tactivemask.b32 \t%r19;\n" + STORE))


@_break("fills.py raises IndexError on activemask.b32 (arith reads an operand it has not)")
@pytest.mark.parametrize("variant", VARIANTS)
def test_activemask_in_a_fill_loop(variant: str) -> None:
    _holds(ACTIVEMASK, variant)


@_break("`ptxtool optimize --passes warp-roles` exits 4 on activemask.b32 in a fill loop")
def test_activemask_in_a_fill_loop_cli(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ptxtool.cli import main

    source = tmp_path / "activemask.ptx"
    source.write_text(ACTIVEMASK)
    done = CliRunner().invoke(
        main, ["optimize", str(source), "--passes", "warp-roles", "--variant", "pipeline", "-o", str(tmp_path / "o")]
    )
    assert done.exit_code in (0, 1), done.output


# --- a buffer's address minus a constant, read back with a positive offset ---------------------------------------
# thread_values.arith masks the integer it carries with a buffer's symbol to the register's width, so tile + 4i -
# 4096 is held as tile + (2^32 - 4096 + 4i); fills.FillTrace.store then adds the address's `+4096` unmasked: the
# second store's word is tile + 2^32 + 4i to the overlap check, tile + 4i (the first store's word) on the GPU.
# (`pad` puts tile above 4096 bytes on the simulator, so no address wraps there.) As with `not`, the cp.async
# forms copy into one word twice, the input keeps a[0]. Correct: compare offsets modulo the address width (or
# refuse an address computed below its buffer).
BELOW_THE_BUFFER = _planted(
    ("\t.shared .align 4 .b8 tile[1280];\n", "\t.shared .align 4 .b8 pad[4096];\n\t.shared .align 4 .b8 tile[1280];\n"),
    (
        STORE,
        STORE + "\tadd.s32 \t%r19, %r17, -4096;\n\tld.global.nc.f32 \t%f6, [%rd3];\n"
        "\tst.shared.f32 \t[%r19+4096], %f6;\n",
    ),
)


@_break("fills.py holds tile - 4096 as tile + 2^32 - 4096 and adds +4096 unmasked: one word seen as two")
@pytest.mark.parametrize("variant", ["pipeline", "split-async"])
def test_address_below_the_buffer(variant: str) -> None:
    _holds(BELOW_THE_BUFFER, variant)
